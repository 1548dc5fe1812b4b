"""Helpers shared by the load parsers: settings checks, warm-up discard, histogram percentiles."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from tunelab.errors import quoted
from tunelab.loads.base import LoadResult, SettingError, Status
from tunelab.targets.base import CommandResult


@dataclass(frozen=True)
class Setting:
    """One accepted load setting: its type(s), a validity rule in words and as a predicate."""

    types: tuple[type, ...]
    rule: str = ""
    check: Callable[[Any], bool] = lambda value: True
    optional: bool = False  # None is allowed


def positive_int(optional: bool = False, maximum: int = 1_000_000) -> Setting:
    return Setting((int,), f"an integer from 1 to {maximum}",
                   lambda v: not isinstance(v, bool) and 0 < v <= maximum, optional)


def positive_number(optional: bool = False, maximum: float = 1e9) -> Setting:
    return Setting((int, float), f"a number > 0 and <= {maximum:g}",
                   lambda v: not isinstance(v, bool) and 0 < v <= maximum, optional)


def pattern(regex: str, rule: str, optional: bool = False, types: tuple[type, ...] = (str,)) -> Setting:
    """A string (or int, when ``types`` allows it) whose text fully matches ``regex``."""
    compiled = re.compile(regex)
    return Setting(types, rule, lambda v: not isinstance(v, bool) and compiled.fullmatch(str(v)) is not None,
                   optional)


def one_of(*choices: str) -> Setting:
    return Setting((str,), f"one of {', '.join(choices)}", lambda v: v in choices)


def port() -> Setting:
    return Setting((int,), "a port number 1..65535", lambda v: not isinstance(v, bool) and 1 <= v <= 65535)


def check_settings(load: str, settings: Mapping[str, Any], spec: Mapping[str, Setting],
                   internal: Sequence[str] = ()) -> None:
    """Raise :class:`LoadError` for an unknown setting or a value that breaks its rule.

    ``internal`` names keys that :meth:`Load.prepare` adds (they are accepted unchecked).
    """
    for key, value in settings.items():
        if key in internal:
            continue
        if key not in spec:
            raise SettingError(f"{load}: unknown load setting {quoted(key)}; known settings: {', '.join(sorted(spec))}",
                               str(key))
        rule = spec[key]
        if value is None and rule.optional:
            continue
        if not isinstance(value, rule.types) or not rule.check(value):
            raise SettingError(f"{load}: setting {key}={quoted(value)} must be {rule.rule}"
                               f"{' or null' if rule.optional else ''}; fix the design's load.settings", key)


def last_line(*texts: str) -> str:
    """The last non-empty line of the first text that has one ('' if none)."""
    for text in texts:
        lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
        if lines:
            return lines[-1]
    return ""


def failed(reason: str, result: CommandResult) -> LoadResult:
    """A failed measurement: no metrics, the reason, and the raw output kept for the record."""
    return LoadResult("failed", reason, {}, pd.DataFrame(columns=["t_s"]), raw_text(result))


def raw_text(result: CommandResult) -> str:
    return result.stdout + (("\n--- stderr ---\n" + result.stderr) if result.stderr.strip() else "")


def exit_reason(tool: str, result: CommandResult) -> str:
    """Why a run ended abnormally, in words: timeout, exit status and the tool's last message."""
    if result.timed_out:
        how = f"{tool} was killed after the time limit ({result.duration_s:.1f} s)"
    elif result.returncode < 0 or result.returncode > 128:
        signal = -result.returncode if result.returncode < 0 else result.returncode - 128
        how = f"{tool} crashed (signal {signal})"
    else:
        how = f"{tool} exited with status {result.returncode}"
    message = last_line(result.stderr, result.stdout)
    return f"{how}: {message}" if message else how


def after_warmup(series: pd.DataFrame, warmup_s: float, interval_s: float = 1.0) -> pd.DataFrame:
    """Rows of ``series`` whose interval starts at or after ``warmup_s``.

    ``series.t_s`` is the *end* of each interval of length ``interval_s``; a quarter interval of
    slack absorbs the tools' timer jitter.

    >>> s = pd.DataFrame({"t_s": [1.0, 2.0, 3.0, 4.0]})
    >>> after_warmup(s, 2).t_s.tolist()
    [3.0, 4.0]
    """
    if series.empty:
        return series
    start = series["t_s"] - interval_s
    return series[start >= warmup_s - 0.25 * interval_s]


def histogram_percentile(values: Sequence[float], counts: Sequence[float], pct: float) -> float:
    """The smallest value whose cumulative count reaches ``pct`` percent of the total (NaN if empty).

    This is fio's own rule for its clat percentiles (nearest rank over the histogram bins).

    >>> histogram_percentile([1, 2, 3], [50, 40, 10], 50)
    1.0
    >>> histogram_percentile([1, 2, 3], [50, 40, 10], 99)
    3.0
    """
    order = np.argsort(np.asarray(values, dtype=float))
    v = np.asarray(values, dtype=float)[order]
    c = np.asarray(counts, dtype=float)[order]
    total = c.sum()
    if total <= 0:
        return math.nan
    rank = math.ceil(pct / 100.0 * total - 1e-9)
    index = int(np.searchsorted(np.cumsum(c), max(rank, 1), side="left"))
    return float(v[min(index, len(v) - 1)])


def result(status: Status, reason: str | None, metrics: Mapping[str, float], series: pd.DataFrame,
           command: CommandResult) -> LoadResult:
    """Build a :class:`LoadResult`, dropping metrics that are NaN (absent is honest, NaN is a gap)."""
    clean = {k: float(v) for k, v in metrics.items() if v is not None and not math.isnan(float(v))}
    return LoadResult(status, reason, clean, series.reset_index(drop=True), raw_text(command))
