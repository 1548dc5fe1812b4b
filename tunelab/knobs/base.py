"""The :class:`Knob` type: one kernel setting, its valid values and how to read and write it.

A knob is data (name, family, value type, range or choices, unit, scope, ...) plus behaviour
borrowed from two registries:

* :data:`VALUE_TYPES` -- how a value of the knob's ``type`` is validated, written as kernel text
  and parsed back (``int``, ``bool``, ``enum``, ``triplet``, ``pair``);
* :data:`tunelab.knobs.families.FAMILIES` -- where the value lives and how it is read and written
  on a target (``sysctl``, ``block``, ``link``).

Examples
--------
>>> from tunelab.knobs import get_knob
>>> rmem = get_knob("net.ipv4.tcp_rmem")
>>> rmem.validate("4096 131072 6291456")
(4096, 131072, 6291456)
>>> rmem.to_text((4096, 131072, 6291456))
'4096 131072 6291456'
>>> get_knob("block.queue.scheduler").from_text("[mq-deadline] none\\n")
'mq-deadline'
"""
from __future__ import annotations

import numbers
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Union

import numpy as np

from tunelab.errors import KnobError, TargetError
from tunelab.knobs.families import KnobFamily, get_family
from tunelab.registry import Registry

if TYPE_CHECKING:
    from tunelab.knobs.mechanisms import Mechanism
    from tunelab.targets.base import Target

#: a canonical knob value: int, bool, str (enum) or tuple of ints (triplet, pair)
KnobValue = Union[int, bool, str, tuple[int, ...]]

SCOPES = ("netns", "host")

_TRUE_WORDS = {"1", "true", "yes", "on"}
_FALSE_WORDS = {"0", "false", "no", "off"}
_BRACKETED = re.compile(r"\[([^\]]+)\]")


@dataclass(frozen=True)
class ValueType:
    """How values of one knob type are checked, written and parsed.

    ``validate(knob, value)`` returns the canonical value or raises :class:`KnobError`;
    ``to_text(knob, canonical)`` gives the text the kernel accepts; ``parse(knob, text)`` turns the
    kernel's text into a (not yet range-checked) Python value.
    """

    validate: Callable[["Knob", Any], KnobValue]
    to_text: Callable[["Knob", Any], str]
    parse: Callable[["Knob", str], Any]


VALUE_TYPES: Registry[ValueType] = Registry("knob value type")


def _reject(knob: "Knob", value: Any, rule: str) -> KnobError:
    return KnobError(f"{knob.name}: value {value!r} is invalid: {rule}; valid values: {knob.describe_range()}")


def _as_int(knob: "Knob", value: Any, original: Any) -> int:
    """One integer from an int, an integral float or a decimal string."""
    if isinstance(value, (bool, np.bool_)):
        raise _reject(knob, original, "expected an integer, not a boolean")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        if float(value).is_integer():
            return int(value)
        raise _reject(knob, original, f"{value!r} is not a whole number")
    if isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d+\s*", value):
        return int(value)
    raise _reject(knob, original, f"expected an integer, got {type(value).__name__} {value!r}")


def _check_bounds(knob: "Knob", number: int, original: Any, what: str = "value") -> int:
    if knob.minimum is not None and number < knob.minimum:
        raise _reject(knob, original, f"{what} {number} is below the minimum {knob.minimum}")
    if knob.maximum is not None and number > knob.maximum:
        raise _reject(knob, original, f"{what} {number} is above the maximum {knob.maximum}")
    return number


def _validate_int(knob: "Knob", value: Any) -> int:
    return _check_bounds(knob, _as_int(knob, value, value), value)


def _validate_bool(knob: "Knob", value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral) and int(value) in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE_WORDS:
            return True
        if word in _FALSE_WORDS:
            return False
    raise _reject(knob, value, "expected a boolean (true/false or 1/0)")


def _validate_enum(knob: "Knob", value: Any) -> str:
    if not isinstance(value, str):
        raise _reject(knob, value, f"expected one of the names, got {type(value).__name__}")
    name = value.strip()
    if name not in (knob.choices or ()):
        raise _reject(knob, value, f"{name!r} is not one of the choices")
    return name


def _validate_tuple(knob: "Knob", value: Any) -> tuple[int, ...]:
    length = knob.length or 0
    if isinstance(value, str):
        parts: list[Any] = value.replace(",", " ").split()
    elif isinstance(value, (list, tuple, np.ndarray)):
        parts = list(np.ravel(value)) if isinstance(value, np.ndarray) else list(value)
    else:
        raise _reject(knob, value, f"expected {length} integers as a list or as text like "
                                   f"{' '.join(['N'] * length)!r}, got {type(value).__name__}")
    if len(parts) != length:
        raise _reject(knob, value, f"expected exactly {length} integers, got {len(parts)}")
    numbers_ = [_as_int(knob, part, value) for part in parts]
    labels = knob.element_names or tuple(f"element {i + 1}" for i in range(length))
    for label, number in zip(labels, numbers_):
        _check_bounds(knob, number, value, what=label)
    if knob.ordered:
        for (left_label, left), (right_label, right) in zip(zip(labels, numbers_), zip(labels[1:], numbers_[1:])):
            if left > right:
                raise _reject(knob, value, f"{' <= '.join(labels)} must hold, but {left_label} {left} > "
                                           f"{right_label} {right}")
    return tuple(numbers_)


def _parse_enum(knob: "Knob", text: str) -> str:
    """The selected name: ``"[mq-deadline] none"`` -> ``"mq-deadline"``; plain text is stripped."""
    match = _BRACKETED.search(text)
    if match:
        return match.group(1).strip()
    words = text.split()
    if len(words) != 1:
        raise KnobError(f"{knob.name}: cannot tell the selected value from {text!r}; expected one name or a "
                        "list with the selected one in [brackets]")
    return words[0]


VALUE_TYPES.add("int", ValueType(_validate_int, lambda k, v: str(v), lambda k, t: t.strip()))
VALUE_TYPES.add("bool", ValueType(_validate_bool, lambda k, v: "1" if v else "0", lambda k, t: t.strip()))
VALUE_TYPES.add("enum", ValueType(_validate_enum, lambda k, v: str(v), _parse_enum))
_tuple_type = ValueType(_validate_tuple, lambda k, v: " ".join(str(x) for x in v), lambda k, t: t.strip())
VALUE_TYPES.add("triplet", _tuple_type)
VALUE_TYPES.add("pair", _tuple_type)

#: number of integers in each tuple type
TUPLE_LENGTHS = {"triplet": 3, "pair": 2}


@dataclass(frozen=True)
class Knob:
    """One tunable kernel setting (Contract 3 in docs/ARCHITECTURE.md).

    Parameters
    ----------
    name : str
        Catalogue name, e.g. ``"net.core.somaxconn"``, ``"block.queue.scheduler"``, ``"link.mtu"``.
    family : str
        Backend in :data:`tunelab.knobs.families.FAMILIES`: ``"sysctl"``, ``"block"`` or ``"link"``.
    type : str
        ``"int"``, ``"bool"``, ``"enum"``, ``"triplet"`` (3 ints) or ``"pair"`` (2 ints).
    minimum, maximum : int or None
        Inclusive bounds of an int, or of every element of a triplet/pair.
    choices : tuple of str or None
        Valid names of an enum.
    unit : str
        Unit of the value (``"bytes"``, ``"s"``, ``"packets"``, ... or ``""``).
    description : str
        One sentence on what the knob does.
    scope : str
        ``"netns"`` (per network namespace) or ``"host"`` (host-global: needs ``allow_host_global``).
    requires_restart : bool
        The server must restart for the value to apply (e.g. read at ``listen()``).
    ordered : bool
        Elements of a triplet/pair must be non-decreasing (e.g. min <= default <= max).
    element_names : tuple of str
        Names of the elements of a triplet/pair, used in error messages.
    mechanism : Mechanism or None
        How the knob acts (:mod:`tunelab.knobs.mechanisms`); the pre-flight checks a load can exercise it.
    """

    name: str
    family: str
    type: str
    description: str
    scope: str
    unit: str = ""
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] | None = None
    requires_restart: bool = False
    ordered: bool = False
    element_names: tuple[str, ...] | None = None
    #: how the knob acts (what it limits, when it binds, its counters, the traffic it needs), or None
    mechanism: "Mechanism | None" = None

    def __post_init__(self) -> None:
        if self.type not in VALUE_TYPES:
            raise KnobError(f"{self.name}: type {self.type!r} is unknown; use one of {', '.join(VALUE_TYPES.names())}")
        if self.scope not in SCOPES:
            raise KnobError(f"{self.name}: scope {self.scope!r} is unknown; use 'netns' or 'host'")
        if self.type == "enum" and not self.choices:
            raise KnobError(f"{self.name}: an enum knob needs choices")
        if self.element_names is not None and len(self.element_names) != self.length:
            raise KnobError(f"{self.name}: element_names {self.element_names} must name {self.length} elements")

    # ---- values -------------------------------------------------------------------------------

    @property
    def length(self) -> int | None:
        """Number of integers of a triplet (3) or pair (2); ``None`` for scalar types."""
        return TUPLE_LENGTHS.get(self.type)

    def describe_range(self) -> str:
        """Human text of the valid values, e.g. ``"integer 0..4294967295 (connections)"``."""
        unit = f" ({self.unit})" if self.unit else ""
        if self.type == "enum":
            return "one of " + ", ".join(self.choices or ())
        if self.type == "bool":
            return "true/false (1/0)"
        bounds = f"{'' if self.minimum is None else self.minimum}..{'' if self.maximum is None else self.maximum}"
        if self.length:
            names = " ".join(self.element_names or ("N",) * self.length)
            order = ", non-decreasing" if self.ordered else ""
            return f"{self.length} integers '{names}', each {bounds}{order}{unit}"
        return f"integer {bounds}{unit}"

    def validate(self, value: Any) -> KnobValue:
        """Return ``value`` in canonical form (int, bool, str, tuple of ints) or raise :class:`KnobError`.

        >>> from tunelab.knobs import get_knob
        >>> get_knob("net.ipv4.tcp_abort_on_overflow").validate("true")
        True
        """
        return VALUE_TYPES.get(self.type).validate(self, value)

    def to_text(self, value: Any) -> str:
        """The text written to the kernel for ``value`` (validated first)."""
        return VALUE_TYPES.get(self.type).to_text(self, self.validate(value))

    def from_text(self, text: str) -> KnobValue:
        """Parse the kernel's text (e.g. ``"4096\\t131072\\t6291456\\n"``) into a validated canonical value."""
        parsed = VALUE_TYPES.get(self.type).parse(self, text)
        try:
            return self.validate(parsed)
        except KnobError as exc:
            raise KnobError(f"{exc} (read from the kernel as {text.strip()!r}; if the kernel accepts it, the "
                            "catalogue entry is too narrow)") from None

    # ---- targets --------------------------------------------------------------------------------

    @property
    def needs_device(self) -> bool:
        """Whether a device (block device, network interface) must be named."""
        return self._family().needs_device

    def _family(self) -> KnobFamily:
        return get_family(self.family)

    def path(self, target: "Target", device: str | None = None) -> str:
        """The file that holds the value on ``target`` (``device`` resolved by the target)."""
        return self._family().path(self, target, device)

    def read_text(self, target: "Target", host: str, device: str | None = None) -> str:
        """The raw kernel text of the current value on ``host``."""
        family = self._family()
        try:
            return family.read_text(self, target, host, device)
        except TargetError as exc:
            raise KnobError(f"{self.name}: could not read on {host}: {exc}") from None

    def read(self, target: "Target", host: str, device: str | None = None) -> KnobValue:
        """The current value on ``host`` in canonical form."""
        return self.from_text(self.read_text(target, host, device))

    def write(self, target: "Target", host: str, value: Any, device: str | None = None) -> None:
        """Validate and write ``value`` on ``host``; does not verify (see :meth:`verify`)."""
        text = self.to_text(value)
        try:
            self._family().write_text(self, target, host, text, device)
        except TargetError as exc:
            raise KnobError(f"{self.name}: could not write {text!r} on {host}: {exc}") from None

    def verify(self, target: "Target", host: str, value: Any, device: str | None = None) -> KnobValue:
        """Read back and return the value; :class:`KnobError` if it differs from ``value``.

        The kernel may silently clamp or ignore a write (e.g. a congestion control that is not
        loaded), so every applied value should be verified.
        """
        wanted = self.validate(value)
        got = self.read(target, host, device)
        if got != wanted:
            where = f"{host}" + (f" device {device}" if device else "")
            raise KnobError(f"{self.name}: wrote {self.to_text(wanted)!r} on {where} but read back "
                            f"{self.to_text(got)!r}; the kernel clamped or refused the value")
        return got

    def is_writable(self, target: "Target", host: str, device: str | None = None) -> bool:
        """Whether the value could be written on ``host``, checked without writing."""
        return self._family().is_writable(self, target, host, device)
