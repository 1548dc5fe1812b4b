"""The vocabulary every layer shares: knob ids, levels, metrics, and the states of trials and verdicts.

This module is the ground floor: it imports nothing from tunelab except :mod:`tunelab.errors`,
so every other module may use it. Each idea has exactly one type and one text form here:

=====================  ==========================================  ==================================
type                   text form                                   used for
=====================  ==========================================  ==================================
:class:`KnobId`        ``name``, ``name[device]``, ``...@client``  plan columns, journal, store
:func:`level_to_json`  JSON (tuples -> lists)                       store, reports, exports
:class:`Metric`        ``name[:max|:min][:SESOI]``                  designs, screen, refine, validate
:class:`TrialStatus`   ``ok``, ``flagged``, ...                     store, runner, stats
:class:`Phase`         ``screen``, ``refine``, ...                  store, runner, optimize
:class:`Verdict`       ``matters``, ``not comparable``, ...         stats, reports
=====================  ==========================================  ==================================

The states are ``str`` enums: ``TrialStatus.OK == "ok"``, so stored text and JSON stay plain strings.
The kinds (:class:`AnalysisKind`, :class:`DesignType`, :class:`MeasurementKind`, :class:`PartKind`) are
plain enums that never equal a string: they are parsed from text at the edges (``Kind.parse``).
tests/architecture/test_enum_compare.py fails when any enum's value is compared with a string literal.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, Mapping, Self

from tunelab.errors import TunelabError


class ParseError(TunelabError):
    """A compact text form (a knob id, a metric such as ``qps:max:5``) could not be read."""


# ---- knob ids -------------------------------------------------------------------------------------

HOSTS = ("server", "client")


@dataclass(frozen=True, order=True)
class KnobId:
    """Which knob, on which host, on which device: the plan column ``name[device]@host``.

    >>> KnobId.parse("link.mtu[veth0]@client")
    KnobId(name='link.mtu', host='client', device='veth0')
    >>> str(KnobId("net.core.somaxconn"))
    'net.core.somaxconn'
    >>> str(KnobId("link.mtu", "client", "veth0"))
    'link.mtu[veth0]@client'
    """

    name: str
    host: str = "server"
    device: str | None = None

    def __str__(self) -> str:
        text = self.name if self.device is None else f"{self.name}[{self.device}]"
        return text if self.host == "server" else f"{text}@{self.host}"

    @classmethod
    def parse(cls, text: str) -> "KnobId":
        """Read ``name``, ``name[device]``, with an optional ``@host`` suffix (the inverse of ``str``)."""
        if not isinstance(text, str):
            raise ParseError(f"a knob id must be text such as 'net.core.somaxconn', got {text!r}")
        base, host = text, "server"
        if "@" in text and not text.endswith("]"):
            head, _, tail = text.rpartition("@")
            if head and "]" not in tail:
                base, host = head, tail
        device = None
        if base.endswith("]") and "[" in base:
            base, _, rest = base.partition("[")
            device = rest[:-1]
        if not base:
            raise ParseError(f"knob id {text!r} has no knob name; expected e.g. 'net.core.somaxconn' or "
                             "'link.mtu[veth0]@client'")
        return cls(base, host, device)


def knob_id(name: str, host: str = "server", device: str | None = None) -> str:
    """The text form of a knob id (see :class:`KnobId`).

    >>> knob_id("link.mtu", "client", "veth0")
    'link.mtu[veth0]@client'
    """
    return str(KnobId(name, host, device))


# ---- levels ---------------------------------------------------------------------------------------


def level_to_json(value: Any) -> Any:
    """The JSON form of a level or of any structure of levels: tuples -> lists, numpy scalars ->
    Python numbers, NaN -> ``None``, mappings -> dicts with text keys.

    >>> import numpy as np
    >>> level_to_json({"k": (4096, np.int64(87380)), "x": float("nan"), "b": np.bool_(True)})
    {'k': [4096, 87380], 'x': None, 'b': True}
    """
    if isinstance(value, Mapping):
        return {str(k): level_to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [level_to_json(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, (str, bytes)):
        value = value.item()                    # numpy scalar
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def json_value(value: Any) -> Any:
    """Strict JSON of any result value: :func:`level_to_json`, then infinities and missing values
    (NaN, pandas' NA and NaT) -> ``null``, and any other object (a timestamp, a path) -> its text.

    >>> import numpy as np
    >>> json_value({"p": float("inf"), "level": (1, np.int64(2)), "x": float("nan")})
    {'p': None, 'level': [1, 2], 'x': None}
    """
    value = level_to_json(value)
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_value(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return None if _is_missing(value) else str(value)


def _is_missing(value: Any) -> bool:
    """pandas' NA and NaT without importing pandas: NaT is unequal to itself, NA cannot say."""
    try:
        return bool(value != value)
    except TypeError:
        return True


def level_from_json(value: Any) -> Any:
    """A level as Python uses it: JSON lists (multi-value knobs) back to hashable tuples.

    >>> level_from_json([4096, 87380, 6291456])
    (4096, 87380, 6291456)
    """
    if isinstance(value, list):
        return tuple(level_from_json(v) for v in value)
    return value


def level_value(value: Any) -> Any:
    """A level as Python uses it, from any source (a plan, a DataFrame row, JSON): numpy scalars ->
    Python numbers, lists -> tuples; comparable and hashable, so two configurations compare exactly.

    >>> import numpy as np
    >>> level_value([np.int64(4096), 87380]), level_value(np.bool_(False))
    ((4096, 87380), False)
    """
    return level_from_json(level_to_json(value))


# ---- metrics --------------------------------------------------------------------------------------

DirectionName = Literal["maximize", "minimize"]


class Direction(str, Enum):
    """Which way a metric is better."""

    MAXIMIZE = "maximize"
    MINIMIZE = "minimize"

    @classmethod
    def parse(cls, word: str) -> "Direction":
        """``max``/``maximize``/``min``/``minimize`` (any case).

        >>> Direction.parse("MIN").value
        'minimize'
        """
        try:
            return cls(DIRECTION_WORDS[str(word).lower()])
        except KeyError:
            raise ParseError(f"direction {word!r} must be max, min, maximize or minimize") from None


#: the words a metric's better direction may be written with (``qps:max``, ``latency_mean_ms:minimize``)
DIRECTION_WORDS: dict[str, DirectionName] = {
    "max": "maximize", "maximize": "maximize", "min": "minimize", "minimize": "minimize"}
#: smallest effect of interest when none is given, % of the baseline mean
DEFAULT_SESOI_PCT = 5.0
#: how a metric is analysed: ``auto`` is the log scale for positive values without ``sesoi_abs``
METRIC_SCALES = ("auto", "log", "linear")


@dataclass(frozen=True)
class Metric:
    """A response to analyse or optimise: its name, better direction and smallest effect of interest.

    The smallest effect of interest is ``sesoi_pct`` (% of the baseline) unless ``sesoi_abs`` (in
    the metric's own units) is given: then effects are differences, as for counts whose baseline
    is often 0 (``lost``, ``errors``). ``scale`` says how the screen models the metric: ``log``
    (effects are ratios), ``linear``, or ``auto`` (log when every value is positive and no
    ``sesoi_abs`` is given).

    >>> Metric.parse("latency_mean_ms:min:10")
    Metric(name='latency_mean_ms', direction='minimize', sesoi_pct=10.0)
    >>> Metric.parse("qps"), Metric.parse("qps:5:max").sesoi_pct
    (Metric(name='qps', direction='maximize', sesoi_pct=5.0), 5.0)
    >>> Metric("qps").sign, Metric("lat", "minimize").sign
    (-1.0, 1.0)
    """

    name: str
    direction: DirectionName = "maximize"
    sesoi_pct: float = DEFAULT_SESOI_PCT
    sesoi_abs: float | None = None
    scale: str = "auto"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ParseError(f"a metric needs a name, got {self.name!r}")
        direction = self.direction.value if isinstance(self.direction, Direction) else self.direction
        if direction not in (Direction.MAXIMIZE, Direction.MINIMIZE):
            raise ParseError(f"metric {self.name}: direction {self.direction!r} must be maximize or minimize")
        object.__setattr__(self, "direction", direction)
        try:
            sesoi = float(self.sesoi_pct)
        except (TypeError, ValueError):
            raise ParseError(f"metric {self.name}: sesoi_pct must be a number, got {self.sesoi_pct!r}") from None
        if not (math.isfinite(sesoi) and 0 < sesoi < 100):
            raise ParseError(f"metric {self.name}: sesoi_pct must be a percentage between 0 and 100, "
                             f"got {self.sesoi_pct!r}")
        object.__setattr__(self, "sesoi_pct", sesoi)
        if self.sesoi_abs is not None:
            try:
                sesoi_abs = float(self.sesoi_abs)
            except (TypeError, ValueError):
                raise ParseError(f"metric {self.name}: sesoi_abs must be a number, got {self.sesoi_abs!r}") from None
            if not (math.isfinite(sesoi_abs) and sesoi_abs > 0):
                raise ParseError(f"metric {self.name}: sesoi_abs must be a positive number in the metric's units, "
                                 f"got {self.sesoi_abs!r}")
            object.__setattr__(self, "sesoi_abs", sesoi_abs)
        if self.scale not in METRIC_SCALES:
            raise ParseError(f"metric {self.name}: scale {self.scale!r} must be one of {', '.join(METRIC_SCALES)}")
        if self.scale == "log" and self.sesoi_abs is not None:
            raise ParseError(f"metric {self.name}: sesoi_abs is a difference, which the log scale does not have; "
                             "use scale: linear (or auto) with sesoi_abs, or sesoi_pct with scale: log")

    def __repr__(self) -> str:
        extra = (f", sesoi_abs={self.sesoi_abs!r}" if self.sesoi_abs is not None else "") + \
            (f", scale={self.scale!r}" if self.scale != "auto" else "")
        return f"Metric(name={self.name!r}, direction={self.direction!r}, sesoi_pct={self.sesoi_pct!r}{extra})"

    @property
    def sign(self) -> float:
        """Multiply the metric by this to get a value to minimise."""
        return -1.0 if self.direction == Direction.MAXIMIZE else 1.0

    @property
    def maximize(self) -> bool:
        return self.direction == Direction.MAXIMIZE

    @classmethod
    def parse(cls, text: str, default_sesoi_pct: float = DEFAULT_SESOI_PCT,
              default_direction: DirectionName = "maximize") -> "Metric":
        """Read ``NAME[:max|:min][:SESOI][:log|:linear]``, parts in any order; ``SESOI`` is a
        percentage, or ``abs=N`` for an absolute smallest effect in the metric's units.

        >>> Metric.parse("lost:min:abs=10")
        Metric(name='lost', direction='minimize', sesoi_pct=5.0, sesoi_abs=10.0)
        """
        name, *options = str(text).split(":")
        usage = "write NAME[:max|:min][:SESOI|:abs=N][:log|:linear], e.g. qps:max:5 or lost:min:abs=10"
        if not name:
            raise ParseError(f"metric {text!r} has no name; {usage}")
        if len(options) > 3:
            raise ParseError(f"metric {text!r} has too many parts; {usage}")
        direction, sesoi, sesoi_abs, scale = default_direction, None, None, "auto"
        for option in options:
            word = option.lower()
            if word in DIRECTION_WORDS:
                direction = DIRECTION_WORDS[word]
            elif word in METRIC_SCALES:
                scale = word
            else:
                try:
                    if word.startswith("abs="):
                        sesoi_abs = float(word[4:])
                    else:
                        sesoi = float(option)
                except ValueError:
                    raise ParseError(f"metric {text!r}: {option!r} is neither max/min, a SESOI percentage, abs=N nor "
                                     f"log/linear; {usage}") from None
        if sesoi is not None and sesoi_abs is not None:
            raise ParseError(f"metric {text!r}: give a SESOI percentage or abs=N, not both")
        return cls(name, direction, default_sesoi_pct if sesoi is None else sesoi, sesoi_abs, scale)

    @classmethod
    def coerce(cls, value: "Metric | Mapping[str, Any] | str", default_sesoi_pct: float = DEFAULT_SESOI_PCT) -> "Metric":
        """A Metric from a Metric, a mapping ``{name, direction, sesoi_pct}`` or the text form."""
        if isinstance(value, Metric):
            return value
        if isinstance(value, Mapping):
            if value.get("sesoi_abs") is not None and value.get("sesoi_pct") is not None:
                raise ParseError(f"metric {value['name']}: give sesoi_pct (a % of the baseline) or sesoi_abs (a "
                                 "difference in the metric's units), not both")
            return cls(value["name"], value.get("direction", "maximize"),
                       value.get("sesoi_pct") if value.get("sesoi_pct") is not None else default_sesoi_pct,
                       value.get("sesoi_abs"), value.get("scale", "auto"))
        return cls.parse(value, default_sesoi_pct)

    def __str__(self) -> str:
        return f"{self.name}:{'max' if self.maximize else 'min'}:{self.sesoi_pct:g}"

    def to_json(self) -> dict[str, Any]:
        """``{name, direction, sesoi_pct}``; ``sesoi_abs`` instead of ``sesoi_pct`` when it is set, and
        ``scale`` when it is not ``auto``."""
        out: dict[str, Any] = {"name": self.name, "direction": self.direction}
        if self.sesoi_abs is not None:
            out["sesoi_abs"] = self.sesoi_abs
        else:
            out["sesoi_pct"] = self.sesoi_pct
        if self.scale != "auto":
            out["scale"] = self.scale
        return out


# ---- states ---------------------------------------------------------------------------------------


class _ValueEnum(str, Enum):
    """A ``str`` enum whose text is its value (``f"{Phase.SCREEN}"`` is ``'screen'``)."""

    def __str__(self) -> str:
        return self.value


class TrialStatus(_ValueEnum):
    """What became of a trial. ``running`` is transient; the others are final."""

    RUNNING = "running"
    OK = "ok"
    FLAGGED = "flagged"          # usable but suspicious (e.g. far below the requested rate)
    FAILED = "failed"            # no usable measurement; the reason says why
    INTERRUPTED = "interrupted"  # cut short (Ctrl-C, SIGTERM, a crash); run again on resume


#: statuses a trial can end with
FINAL_STATUSES = (TrialStatus.OK, TrialStatus.FLAGGED, TrialStatus.FAILED, TrialStatus.INTERRUPTED)
#: statuses that count as done on resume (interrupted trials are run again)
DONE_STATUSES = (TrialStatus.OK, TrialStatus.FLAGGED, TrialStatus.FAILED)
#: statuses whose measurements the statistics may use
USABLE_STATUSES = (TrialStatus.OK, TrialStatus.FLAGGED)


class Phase(_ValueEnum):
    """Which step of a study a trial belongs to."""

    SCREEN = "screen"
    #: baseline-only A/A trials before a study's own, to measure the noise (``noise.calibration_runs``)
    CALIBRATE = "calibrate"
    REFINE = "refine"
    CONFIRM = "confirm"
    VALIDATE = "validate"


PHASES = tuple(Phase)


class Verdict(_ValueEnum):
    """The screen's answer for one knob and metric."""

    MATTERS = "matters"
    EQUIVALENT = "no effect (equivalent)"
    INCONCLUSIVE = "inconclusive"      # more replicates needed
    UNTESTABLE = "untestable"          # e.g. the load failed at a level; the reason names the failures
    #: a guard metric (answered queries, lost share, retransmits) degraded beyond its SESOI at the
    #: reported level, so a metric conditional on it (latency of the answered queries) is not compared
    NOT_COMPARABLE = "not comparable"


VERDICTS = tuple(Verdict)


class _Kind(Enum):
    """A kind: a plain :class:`~enum.Enum`, equal only to itself (``DesignType.OAT == "oat"`` and
    ``AnalysisKind.OAT == DesignType.OAT`` are False), so code compares members, never text.

    Its text (``str(kind)``, ``kind.value``) is what design files, JSON and the store hold; :meth:`parse`
    reads it back at the edges (a file, a flag, a mapping given to :func:`tunelab.stats.screen`).
    """

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: Any) -> Self:
        """The member whose text is ``value`` (a member passes through); one ParseError line otherwise.

        >>> DesignType.parse("oat") is DesignType.OAT, MeasurementKind.parse(MeasurementKind.DUET).value
        (True, 'duet')
        """
        if isinstance(value, cls):
            return value
        try:
            return cls(value)
        except ValueError:
            words = ", ".join(member.value for member in cls)
            raise ParseError(f"{cls.__name__} {value!r} must be one of {words}") from None


class AnalysisKind(_Kind):
    """How the screen reads a study's runs (``ScreenResult.design``, the JSON's ``design``)."""

    #: one-at-a-time: every run has at most one knob away from its baseline; each knob is compared on
    #: the baseline runs plus its own runs
    OAT = "oat"
    #: knobs varied together (full or fractional factorial, Plackett–Burman): one model of all runs
    FACTORIAL = "factorial"
    #: a space-filling design (Latin hypercube, Morris): each knob's effect over its range, no levels
    RANGE = "range"


class DesignType(_Kind):
    """The design generators (a design file's ``design.type``; ``Design.design_type``); the generators'
    registry (:data:`tunelab.designs.generators.GENERATORS`) holds each under its text, and ``get`` takes the member."""

    OAT = "oat"
    FULL_FACTORIAL = "full_factorial"
    FRACTIONAL_FACTORIAL = "fractional_factorial"
    PLACKETT_BURMAN = "plackett_burman"
    LATIN_HYPERCUBE = "latin_hypercube"
    MORRIS = "morris"


class MeasurementKind(_Kind):
    """How trials are measured (a design's or change file's ``measurement:``, ``validate --measurement``).

    "Sequential" means only this in tunelab: one trial at a time. Rounds of replicates until the screen
    decides are *rounds* (``RoundsSpec``, ``BlockRule.in_rounds``), and validate's A-B-B-A order is *ABBA*.
    """

    #: one trial at a time on one target (validate orders them in ABBA blocks)
    SEQUENTIAL = "sequential"
    #: each trial beside a concurrent baseline on a second target of the same spec (:mod:`tunelab.duet`)
    DUET = "duet"


class PartKind(_Kind):
    """What a tested part of the screen is (a part's ``kind``): it picks the part's verdict rule
    (:data:`tunelab.stats.look.VERDICT_RULES`)."""

    #: one knob's levels against its baseline (one-way comparison; a duet's pairs too)
    ONEWAY = "oneway"
    #: a knob's main effect in the model of all runs
    MAIN = "main"
    #: an interaction term of the model (it only qualifies the main effects' verdicts)
    INTERACTION = "interaction"
    #: a knob's effect over its range (Latin hypercube regression)
    RANGE = "range"
    #: a knob's elementary effects (Morris)
    MORRIS = "morris"


class Traffic(Enum):
    """What a load puts through the kernel, and what a knob's mechanism needs to act (:mod:`tunelab.knobs.mechanisms`).

    A plain :class:`~enum.Enum`: ``Traffic.TCP == "tcp"`` is False, so a kind is never compared as a string.
    """

    #: TCP connections to the server's service (accept queue, SYN queue, TCP buffers, segments)
    TCP = "tcp"
    #: UDP datagrams to and from the server's service
    UDP = "udp"
    #: reads from the block device under test
    DISK_READ = "disk read"
    #: writes to the block device under test
    DISK_WRITE = "disk write"
    #: reads through the page cache (not O_DIRECT): read-ahead acts on them
    BUFFERED_READ = "buffered read"
    #: writes through the page cache (not O_DIRECT): dirty memory and writeback act on them
    BUFFERED_WRITE = "buffered write"

    def __str__(self) -> str:
        return self.value


class Role(Enum):
    """Which end of the load's traffic a knob acts on: the host that accepts (``LISTENER``: the service's
    server), the host that opens connections (``CONNECTOR``: the load generator), or either."""

    LISTENER = "listener"
    CONNECTOR = "connector"
    EITHER = "either"


#: the tidy frame's kernel counter columns start with this (``counter.TcpExt.ListenOverflows``, per second):
#: they explain verdicts (:mod:`tunelab.stats.mechanisms`), never drive them
COUNTER_PREFIX = "counter."


def is_counter_column(column: Any) -> bool:
    """Whether a tidy column holds a kernel counter (never a knob or a metric).

    >>> is_counter_column("counter.TcpExt.ListenOverflows"), is_counter_column("qps")
    (True, False)
    """
    return isinstance(column, str) and column.startswith(COUNTER_PREFIX)


def counter_columns(frame: Any) -> list[str]:
    """The counter columns of a tidy frame (``counter.*``), in frame order."""
    return [column for column in frame.columns if is_counter_column(column)]

#: design types the screen reads as space-filling (range) designs: regression or elementary effects, not levels
RANGE_DESIGNS = (DesignType.LATIN_HYPERCUBE, DesignType.MORRIS)

__all__ = ["AnalysisKind", "COUNTER_PREFIX", "DEFAULT_SESOI_PCT", "DIRECTION_WORDS", "DONE_STATUSES",
           "DesignType",
           "Direction", "FINAL_STATUSES", "HOSTS", "KnobId", "MeasurementKind", "Metric", "PHASES", "ParseError", "PartKind", "Phase", "Role", "Traffic",
           "RANGE_DESIGNS", "TrialStatus", "USABLE_STATUSES", "VERDICTS", "Verdict", "counter_columns", "is_counter_column", "json_value", "knob_id",
           "level_from_json", "level_to_json", "level_value"]
