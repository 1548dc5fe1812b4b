"""Per-workload improvement over the defaults, and the share of workloads improved (IOPerf's measure).

A tuning paper that reports "productivity increases in 88.2 % of cases" (seed 002, IOPerf) counts the
workloads on which the tuned kernel beat the default one. Here that count has a test behind every
case and a confidence interval around the share:

1. :func:`workload_improvements`: per workload, every configuration is compared with the baseline
   configuration (the defaults) by Dunnett's many-to-one test (:func:`scipy.stats.dunnett`) on the
   log of the metric, so differences are ratios and are reported as % changes. The best configuration
   (largest estimated gain) is reported with its Dunnett-simultaneous 95 % CI; because the CIs cover
   all configurations jointly, picking the best after the fact keeps the coverage, and the chance of
   calling a workload "improved" when no configuration differs stays at most ``alpha``.
2. :func:`share_improved`: k of n workloads improved, with an exact (Clopper-Pearson) CI for the share.

Examples
--------
>>> import numpy as np, pandas as pd
>>> rng = np.random.default_rng(0)
>>> rows = [{"profile": w, "k": k, "iops": 1000 * (1.3 if (w, k) == ("a", "fast") else 1.0) * rng.lognormal(0, .01)}
...         for w in ("a", "b") for k in ("default", "fast", "slow") for _ in range(4)]
>>> table = workload_improvements(pd.DataFrame(rows), ["k"], "iops", "maximize", {"k": "default"})
>>> table[["workload", "best_config", "verdict"]].values.tolist()
[['a', 'k=fast', 'improve'], ['b', 'k=slow', 'no effect']]
>>> share_improved(table)[["k", "n", "share"]].to_dict("records")
[{'k': 1, 'n': 2, 'share': 0.5}]
"""
from __future__ import annotations

import functools
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from tunelab.errors import DataError
from tunelab.model import Direction

#: the verdict words of one workload (the best configuration against the defaults)
IMPROVE, REGRESS, NO_EFFECT, INCONCLUSIVE, UNTESTABLE = "improve", "regress", "no effect", "inconclusive", "untestable"
#: columns of :func:`workload_improvements`
COLUMNS = ("workload", "best_config", "best_levels", "n_configs", "n_baseline", "baseline_mean", "best_mean",
           "pct_change", "ci_low", "ci_high", "p_adj", "verdict", "reason")
#: columns of :func:`share_improved`
SHARE_COLUMNS = ("k", "n", "share", "ci_low", "ci_high", "level")
_SEED = 20240615  # scipy's Dunnett p-values integrate a multivariate t by quasi-Monte Carlo: fix its stream


def workload_improvements(data: pd.DataFrame, knobs: Sequence[str], metric: str, direction: str,
                          baseline: Mapping[str, Any], workload: str = "profile", alpha: float = 0.05,
                          sesoi_pct: float = 5.0) -> pd.DataFrame:
    """Per workload, the best configuration's % change against the defaults, with Dunnett's test.

    Parameters
    ----------
    data : tidy frame, one row per trial: the ``knobs`` columns, ``metric`` and ``workload``
        (rows with a missing or non-positive metric are left out: the test is on the log scale).
    knobs : the knob columns that make a configuration.
    metric, direction : the metric and which way is better (``maximize``/``minimize``, or max/min).
    baseline : knob -> level of the defaults; that configuration is Dunnett's control group.
    workload : the column naming the workload (the load profile by default).
    alpha : family-wise error rate per workload (the CIs are ``1 - alpha`` simultaneous).
    sesoi_pct : smallest effect of interest, % of the defaults' (geometric) mean.

    Returns
    -------
    DataFrame with one row per workload (in order of appearance) and columns :data:`COLUMNS`:
    ``best_config`` in words (the knobs that differ from the defaults), ``best_levels`` (knob ->
    level), ``n_configs`` (configurations compared with the defaults), ``pct_change`` and its
    simultaneous CI ``ci_low``/``ci_high`` (% of the defaults' geometric mean), ``p_adj`` (Dunnett's
    p, adjusted over that workload's configurations), and ``verdict``:
    ``improve`` (CI excludes 0 on the better side and the estimate is at least the SESOI),
    ``regress`` (the same on the worse side: even the best configuration is worse than the defaults),
    ``no effect`` (CI inside +-SESOI), ``inconclusive`` (anything else), or ``untestable`` with the
    ``reason`` (no baseline runs, nothing to compare, no residual degrees of freedom).
    Workloads are not adjusted for one another: each is its own question, as in the paper's count.
    """
    better = _check(data, knobs, metric, direction, baseline, workload, alpha, sesoi_pct)
    rows = [_one_workload(name, group, list(knobs), metric, better, baseline, alpha, sesoi_pct)
            for name, group in data.groupby(workload, sort=False, dropna=False)]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def share_improved(table: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """k of n workloads improved, the share and its exact Clopper-Pearson CI (one row).

    ``table`` is :func:`workload_improvements`' result; ``untestable`` workloads do not count in n.
    With n = 0 the share and CI are NaN.

    >>> share_improved(pd.DataFrame({"verdict": ["no effect"] * 10})).round(4).to_dict("records")
    [{'k': 0, 'n': 10, 'share': 0.0, 'ci_low': 0.0, 'ci_high': 0.3085, 'level': 0.95}]
    """
    if not isinstance(table, pd.DataFrame) or "verdict" not in table.columns:
        raise DataError("share_improved needs the table from workload_improvements (a 'verdict' column)")
    if not 0 < level < 1:
        raise DataError(f"level must be between 0 and 1 (e.g. 0.95), got {level!r}")
    testable = table["verdict"] != UNTESTABLE
    n = int(testable.sum())
    k = int((table["verdict"] == IMPROVE).sum())
    low = high = share = np.nan
    if n:
        ci = sps.binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
        low, high, share = float(ci.low), float(ci.high), k / n
    return pd.DataFrame({"k": [k], "n": [n], "share": [share], "ci_low": [low], "ci_high": [high], "level": [level]},
                        columns=list(SHARE_COLUMNS))


def config_label(levels: Mapping[str, Any], baseline: Mapping[str, Any]) -> str:
    """The knobs of ``levels`` that differ from ``baseline``, as ``knob=level, ...`` ("defaults" if none).

    >>> config_label({"a": 1, "b": 2}, {"a": 1, "b": 3})
    'b=2'
    """
    changed = [f"{knob}={value}" for knob, value in levels.items() if value != baseline.get(knob)]
    return ", ".join(changed) or "defaults"


def _check(data: pd.DataFrame, knobs: Sequence[str], metric: str, direction: str, baseline: Mapping[str, Any],
           workload: str, alpha: float, sesoi_pct: float) -> Direction:
    if not isinstance(data, pd.DataFrame):
        raise DataError(f"data must be a pandas DataFrame, got {type(data).__name__}; pass store.tidy()")
    if not knobs:
        raise DataError("knobs is empty: name the knob columns that make a configuration")
    for column in [*knobs, metric, workload]:
        if column not in data.columns:
            raise DataError(f"unknown column {column!r}; the data has: {', '.join(map(str, data.columns))}")
    if not pd.api.types.is_numeric_dtype(data[metric]) or pd.api.types.is_bool_dtype(data[metric]):
        raise DataError(f"metric column {metric!r} is not numeric (dtype {data[metric].dtype}); choose a metric")
    missing = [knob for knob in knobs if knob not in baseline]
    if missing:
        raise DataError(f"baseline has no level for {', '.join(missing)}; give every knob's default level")
    if not 0 < alpha < 1:
        raise DataError(f"alpha must be between 0 and 1 (e.g. 0.05), got {alpha!r}")
    if not sesoi_pct > 0:
        raise DataError(f"sesoi_pct must be > 0 (a % of the defaults' mean, e.g. 5), got {sesoi_pct!r}")
    try:
        return Direction.parse(direction)
    except Exception:
        raise DataError(f"direction {direction!r} must be maximize or minimize (or max/min)") from None


def _untestable(name: Any, reason: str, n_configs: int = 0, n_baseline: int = 0) -> dict[str, Any]:
    return {"workload": name, "best_config": None, "best_levels": None, "n_configs": n_configs,
            "n_baseline": n_baseline, "baseline_mean": np.nan, "best_mean": np.nan, "pct_change": np.nan,
            "ci_low": np.nan, "ci_high": np.nan, "p_adj": np.nan, "verdict": UNTESTABLE, "reason": reason}


def _one_workload(name: Any, group: pd.DataFrame, knobs: list[str], metric: str, better: Direction,
                  baseline: Mapping[str, Any], alpha: float, sesoi_pct: float) -> dict[str, Any]:
    values = pd.to_numeric(group[metric], errors="coerce")
    group = group.loc[np.isfinite(values) & (values > 0)]
    configs = {key if isinstance(key, tuple) else (key,): np.log(g[metric].to_numpy(float))
               for key, g in group.groupby(knobs, sort=True, dropna=False)}
    control_key = tuple(baseline[knob] for knob in knobs)
    control = next((v for key, v in configs.items() if _same(key, control_key)), None)
    others = {key: v for key, v in configs.items() if not _same(key, control_key)}
    if control is None:
        defaults = config_label(dict(zip(knobs, control_key)), {})
        return _untestable(name, f"no {metric} measured at the defaults ({defaults})", len(others))
    if not others:
        return _untestable(name, f"only the defaults were measured for {metric}", 0, len(control))
    sizes = (len(control), *(len(v) for v in others.values()))
    if sum(sizes) - len(sizes) < 1:
        return _untestable(name, f"one {metric} value per configuration: no replicates to estimate the noise; "
                           "run at least 2 replicates", len(others), len(control))
    result = sps.dunnett(*others.values(), control=control, rng=np.random.default_rng(_SEED))
    diffs = np.array([v.mean() for v in others.values()]) - control.mean()
    half = _critical_value(sizes, 1 - alpha) * _pooled_sd([control, *others.values()]) * np.sqrt(
        1 / np.array(sizes[1:]) + 1 / sizes[0])
    best = int(np.argmax(diffs) if better is Direction.MAXIMIZE else np.argmin(diffs))
    key = list(others)[best]
    pct, low, high = (100 * np.expm1(x) for x in (diffs[best], diffs[best] - half[best], diffs[best] + half[best]))
    levels = dict(zip(knobs, key))
    return {"workload": name, "best_config": config_label(levels, baseline), "best_levels": levels,
            "n_configs": len(others), "n_baseline": len(control), "baseline_mean": float(np.exp(control.mean())),
            "best_mean": float(np.exp(others[key].mean())), "pct_change": float(pct), "ci_low": float(low),
            "ci_high": float(high), "p_adj": float(result.pvalue[best]),
            "verdict": _verdict(float(pct), float(low), float(high), better, sesoi_pct), "reason": None}


def _verdict(pct: float, low: float, high: float, better: Direction, sesoi_pct: float) -> str:
    sign = 1.0 if better is Direction.MAXIMIZE else -1.0
    gain, worst, best = sign * pct, min(sign * low, sign * high), max(sign * low, sign * high)
    if worst > 0 and gain >= sesoi_pct:
        return IMPROVE
    if best < 0 and -gain >= sesoi_pct:
        return REGRESS
    if -sesoi_pct < low and high < sesoi_pct:
        return NO_EFFECT
    return INCONCLUSIVE


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(x == y or str(x) == str(y) for x, y in zip(a, b))


def _pooled_sd(samples: Sequence[np.ndarray]) -> float:
    dof = sum(len(s) for s in samples) - len(samples)
    return float(np.sqrt(sum(((s - s.mean()) ** 2).sum() for s in samples) / dof))


@functools.lru_cache(maxsize=64)
def _critical_value(sizes: tuple[int, ...], confidence: float) -> float:
    """Dunnett's two-sided critical value for these group sizes (control first), as scipy computes it.

    It depends on the sizes only (the correlations of the comparisons and the residual degrees of
    freedom), so it is computed once per design: scipy's CI half-width on any data with these sizes,
    divided by the comparison's standard error.
    """
    rng = np.random.default_rng(0)
    samples = [rng.normal(size=n) for n in sizes]
    result = sps.dunnett(*samples[1:], control=samples[0], rng=np.random.default_rng(_SEED))
    ci = result.confidence_interval(confidence_level=confidence)
    se = _pooled_sd(samples) * np.sqrt(1 / sizes[1] + 1 / sizes[0])
    return float((ci.high[0] - ci.low[0]) / 2 / se)
