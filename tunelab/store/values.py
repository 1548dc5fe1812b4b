"""What a store may hold: checked names, levels, numbers and times, and the JSON codec of its columns.

Every value read from a store is checked as if it came from a design (a store is untrusted input:
it may be shared, copied or edited by hand), so each check raises :class:`~tunelab.errors.StoreError`
naming where the value was found.
"""
from __future__ import annotations

import datetime as _dt
import functools
import json
import math
import re
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd

from tunelab.designs.schema import MAX_NAME_LENGTH, NAME_PATTERN
from tunelab.errors import KnobError, StoreError, quoted
from tunelab.knobs.families import DEVICE_NAME_PATTERN, SYMBOLIC_DEVICES, check_design_device
from tunelab.model import HOSTS, KnobId, ParseError, level_to_json

#: knob names: catalogue-style dotted lowercase names (``net.core.somaxconn``, ``block.queue.scheduler``)
KNOB_NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*")
KNOB_NAME_MAX = 128
#: devices of block and link knobs (``loop0``, ``veth0``): the names a knob may be written on; a design
#: may also name a symbolic device (``@disk``, ``@link``: :func:`tunelab.knobs.families.check_design_device`)
DEVICE_PATTERN = DEVICE_NAME_PATTERN
DEVICE_MAX = 64
#: metric names (the load metric schema: ``qps``, ``latency_mean_ms``, ...)
METRIC_NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]*")
METRIC_NAME_MAX = 64
#: longest text level a knob may have (enum choices are short words)
LEVEL_TEXT_MAX = 256


def check_study_name(name: Any, where: str = "study name") -> str:
    """Return ``name`` if it is a valid study name, else raise :class:`StoreError`.

    A study name is what a design's ``name:`` may be (:data:`tunelab.designs.schema.NAME_PATTERN`):
    1 to :data:`~tunelab.designs.schema.MAX_NAME_LENGTH` characters of ``[a-z0-9_-]``, starting with
    a letter or digit. It becomes the file name ``data/<name>.sqlite`` and the report directory, so
    it can never hold ``/``, ``..`` or start with ``-``.

    >>> check_study_name("dns-overload_2")
    'dns-overload_2'
    """
    if not isinstance(name, str) or len(name) > MAX_NAME_LENGTH or not NAME_PATTERN.fullmatch(name):
        raise StoreError(f"{where} {quoted(name)} is not a valid study name: use 1 to {MAX_NAME_LENGTH} characters "
                         "a-z, 0-9, '_' or '-', starting with a letter or digit")
    return name


def check_knob_id(text: Any, where: str = "knob id") -> str:
    """Return ``text`` if it is a well-formed knob id (Contract 1), else raise :class:`StoreError`.

    The text is read by :meth:`tunelab.model.KnobId.parse`; the name must be a catalogue-style dotted
    lowercase name (:data:`KNOB_NAME_PATTERN`, at most :data:`KNOB_NAME_MAX` characters), the host
    one of :data:`tunelab.model.HOSTS`, the device one a design may name
    (:func:`tunelab.knobs.families.check_design_device`, the check of every knob write).

    >>> check_knob_id("link.mtu[@link]@client")
    'link.mtu[@link]@client'
    """
    if not isinstance(text, str) or len(text) > KNOB_NAME_MAX + DEVICE_MAX + 10:
        raise StoreError(f"{where} {quoted(text)} is not a knob id; expected e.g. 'net.core.somaxconn'")
    try:
        knob = KnobId.parse(text)
    except ParseError as exc:
        raise StoreError(f"{where}: {exc}") from None
    name, host, device = knob.name, knob.host, knob.device
    problem = None
    if len(name) > KNOB_NAME_MAX or not KNOB_NAME_PATTERN.fullmatch(name):
        problem = f"its name {quoted(name)} is not a dotted lowercase knob name like net.core.somaxconn"
    elif host not in HOSTS:
        problem = f"its host {quoted(host)} is not one of {', '.join(HOSTS)}"
    elif device is not None:
        try:
            check_design_device(name, device)
        except KnobError:
            problem = (f"its device {quoted(device)} is not {', '.join(SYMBOLIC_DEVICES)} or a device name of at most "
                       f"{DEVICE_MAX} characters (letters, digits, '_', '.', ':', '@', '-'; no '/')")
    if problem:
        raise StoreError(f"{where} {quoted(text)} is not a valid knob id: {problem}")
    return text


def check_metric_name(name: Any, where: str = "metric name") -> str:
    """Return ``name`` if it is a valid metric name (:data:`METRIC_NAME_PATTERN`), else raise :class:`StoreError`."""
    if not isinstance(name, str) or len(name) > METRIC_NAME_MAX or not METRIC_NAME_PATTERN.fullmatch(name):
        raise StoreError(f"{where} {quoted(name)} is not a valid metric name: use 1 to {METRIC_NAME_MAX} characters "
                         "a-z, 0-9 or '_', starting with a letter (e.g. latency_mean_ms)")
    return name


def check_number(value: Any, where: str) -> float | None:
    """``None`` or a finite int/float (not bool); StoreError otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise StoreError(f"{where} holds {quoted(value)} where a finite number is expected")
    return value


def check_level(value: Any, where: str) -> Any:
    """A knob level as stored: a number, a bool, a short text or a list of numbers (triplets)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        if len(value) > LEVEL_TEXT_MAX or not value.isprintable():
            raise StoreError(f"{where} holds the level {quoted(value)}: text levels are at most {LEVEL_TEXT_MAX} "
                             "printable characters")
        return value
    if isinstance(value, list):
        if len(value) > 16:
            raise StoreError(f"{where} holds a list of {len(value)} values; a level has at most 16")
        for item in value:
            check_number(item, where)
        return value
    return check_number(value, where)


def check_timestamp(text: Any, where: str) -> pd.Timestamp | None:
    """``None`` or the time an ISO 8601 text names; StoreError otherwise."""
    if text is None:
        return None
    try:
        if not isinstance(text, str) or len(text) > 64:
            raise ValueError("not a short text")
        return pd.Timestamp(text)
    except (ValueError, TypeError, OverflowError):
        raise StoreError(f"{where} holds {quoted(text)} where an ISO 8601 time is expected; the store is damaged "
                         "or was edited by hand") from None


def utc_now() -> str:
    """The current time as an ISO 8601 UTC string with microseconds."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


@functools.lru_cache(maxsize=1)
def git_sha() -> str | None:
    """The commit of the tunelab checkout, or ``None`` when not in a git work tree."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def dumps(value: Any) -> str | None:
    """The JSON text of a column value (:func:`tunelab.model.level_to_json`; a DataFrame as column -> list)."""
    if value is None:
        return None
    if isinstance(value, pd.DataFrame):
        value = {str(column): value[column].tolist() for column in value.columns}
    return json.dumps(level_to_json(value), allow_nan=False)


def json_safe(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by ``None`` (JSON has no NaN).

    >>> json_safe({"a": [1.0, float("nan")], "b": (2, 3)})
    {'a': [1.0, None], 'b': (2, 3)}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    if isinstance(value, tuple):
        return tuple(json_safe(v) for v in value)
    return value


def loads(text: str | None, where: str = "a JSON column") -> Any:
    """Decode a stored JSON column; StoreError naming ``where`` when it is not JSON text."""
    if text is None:
        return None
    try:
        if not isinstance(text, str):
            raise TypeError(f"a {type(text).__name__}, not text")
        return json.loads(text)
    except (ValueError, TypeError, RecursionError) as exc:
        raise StoreError(f"{where} does not hold valid JSON ({str(exc)[:100]}); the store is damaged or was edited "
                         "by hand: use the original file (or rerun the study)") from None


def as_mapping(value: Any, where: str) -> dict[str, Any]:
    """``value`` (decoded JSON) as a dict, ``{}`` for None; StoreError when it is not an object."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise StoreError(f"{where} holds {quoted(value)} where a JSON object is expected; the store is damaged or "
                         "was edited by hand: use the original file (or rerun the study)")
    return value
