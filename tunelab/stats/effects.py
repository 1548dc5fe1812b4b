"""Effect sizes: standardized differences and percent change against the baseline.

eta², omega² and partial eta² are reported by the omnibus functions in :mod:`tunelab.stats.omnibus`.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pingouin as pg

from tunelab.errors import DataError
from tunelab.stats._validate import check_input, grouped


def level_sample(levels: list[Any], samples: list[np.ndarray], between: str, level: Any, role: str) -> np.ndarray:
    for candidate, y in zip(levels, samples):
        if candidate == level:
            return y
    raise DataError(f"{role} {level!r} is not a level of {between!r}; levels are {levels}")


def cohens_d(data: pd.DataFrame, dv: str, between: str, group1: Any, group2: Any) -> pd.DataFrame:
    """Cohen's d and Hedges' g of ``group2 - group1`` (pingouin ``compute_effsize``/``compute_esci``).

    ``d`` uses the pooled SD; ``g`` is d times the small-sample correction. The CI is for ``g``:
    ``g ± t(0.975, n1 + n2 - 2) · sqrt((n1 + n2) / (n1 n2) + g² / (2 (n1 + n2)))`` (pingouin,
    R ``effsize::cohen.d(hedges.correction = TRUE, noncentral = FALSE)`` up to its SE formula).
    pingouin rounds the interval to 2 decimals by default; we ask for full precision.

    Returns
    -------
    DataFrame
        One row, columns ``[group1, group2, d, g, ci_low, ci_high]``.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"k": list("aaabbb"), "y": [1.0, 2, 3, 2, 3, 4]})
    >>> float(cohens_d(df, "y", "k", "a", "b")["d"].iloc[0])
    1.0
    """
    clean = check_input(data, dv, between)
    levels, samples = grouped(clean, dv, between)
    x1 = level_sample(levels, samples, between, group1, "group1")
    x2 = level_sample(levels, samples, between, group2, "group2")
    d = float(pg.compute_effsize(x2, x1, paired=False, eftype="cohen"))
    g = float(pg.compute_effsize(x2, x1, paired=False, eftype="hedges"))
    ci = pg.compute_esci(stat=g, nx=len(x2), ny=len(x1), eftype="hedges", decimals=15)
    return pd.DataFrame({"group1": [group1], "group2": [group2], "d": [d], "g": [g],
                         "ci_low": [float(ci[0])], "ci_high": [float(ci[1])]})


def _pct_statistic(x: np.ndarray, base: np.ndarray, axis: int = -1) -> np.ndarray:
    return 100.0 * (np.mean(x, axis=axis) / np.mean(base, axis=axis) - 1.0)


#: a bootstrap batch holds at most this many resampled values (16 MB of indices)
_BATCH_VALUES = 2_000_000


def _bootstrap_means(y: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Means of ``n_boot`` resamples of ``y`` (with replacement, same size), in batches.

    Each resample draws ``len(y)`` indices uniformly with ``rng.integers`` (as
    ``scipy.stats.bootstrap`` does), so resample ``b`` is ``y[idx[b]]`` and its statistic
    the plain mean.
    """
    n = len(y)
    out = np.empty(n_boot)
    batch = max(1, _BATCH_VALUES // n)
    for start in range(0, n_boot, batch):
        stop = min(n_boot, start + batch)
        idx = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = y[idx].mean(axis=1)
    return out


#: bootstrap resamples allowed (``--n-boot``): at least enough for a percentile interval, at most what
#: fits in memory and time (each resample of each level is a float; 100,000 gives CI ends to ~0.1 %)
MIN_N_BOOT = 100
MAX_N_BOOT = 100_000
#: largest bootstrap seed (numpy's SeedSequence takes non-negative integers)
MAX_SEED = 2**63 - 1


def check_bootstrap(n_boot: int, seed: int = 0) -> None:
    """DataError unless ``n_boot`` is an integer from :data:`MIN_N_BOOT` to :data:`MAX_N_BOOT` and
    ``seed`` one from 0 to :data:`MAX_SEED`; called before anything is allocated."""
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or not MIN_N_BOOT <= n_boot <= MAX_N_BOOT:
        raise DataError(f"n_boot (--n-boot) must be a whole number from {MIN_N_BOOT} to {MAX_N_BOOT:,} bootstrap "
                        f"resamples, got {n_boot!r}; 1000 (the default) is plenty for a 95 % interval")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= MAX_SEED:
        raise DataError(f"seed (--seed) must be a whole number from 0 to {MAX_SEED}, got {seed!r}")


def _check_boot(n_boot: int, ci: float) -> None:
    if not 0 < ci < 1:
        raise DataError(f"ci must be between 0 and 1, got {ci!r}; 0.95 is the usual choice")
    check_bootstrap(n_boot)


def _streams(seed: int, count: int) -> list[np.random.Generator]:
    """``count`` independent generators: the children of ``SeedSequence(seed)``."""
    return [np.random.default_rng(child) for child in np.random.SeedSequence(seed).spawn(count)]


def pct_change(
    data: pd.DataFrame,
    dv: str,
    between: str,
    baseline: Any,
    n_boot: int = 2000,
    seed: int = 0,
    ci: float = 0.95,
) -> pd.DataFrame:
    """Percent change of each level's mean against the baseline level's mean, with bootstrap CI.

    ``pct_change = 100 (mean(level) / mean(baseline) - 1)``. The interval is a percentile
    bootstrap that resamples each group independently (within groups), ``n_boot`` times: the
    ``(1 - ci)/2`` and ``(1 + ci)/2`` quantiles (linear interpolation) of
    ``100 (mean(level*) / mean(baseline*) - 1)`` over the resamples, the same estimator as
    ``scipy.stats.bootstrap(method='percentile')`` with two samples. The resampled means are
    drawn with numpy directly (see docs/stats-notes.md, "Bootstrap speed"): the baseline's
    ``n_boot`` resamples come from child 0 of ``SeedSequence(seed)`` and are shared by every
    level (each level's CI is still a two-sample percentile bootstrap), the i-th non-baseline
    level (sorted order) uses child i.

    Returns
    -------
    DataFrame
        One row per non-baseline level (sorted order), columns
        ``[level, baseline, mean, baseline_mean, pct_change, ci_low, ci_high]``.

    Raises
    ------
    DataError
        Unknown baseline level, a baseline mean of zero, or bad ``n_boot``/``ci``.
    """
    _check_boot(n_boot, ci)
    clean = check_input(data, dv, between)
    levels, samples = grouped(clean, dv, between)
    return pct_change_table(levels, samples, between, dv, baseline, n_boot, seed, ci)


def pct_change_table(levels: list[Any], samples: list[np.ndarray], between: str, dv: str, baseline: Any,
                      n_boot: int, seed: int, ci: float, cache: dict | None = None) -> pd.DataFrame:
    """:func:`pct_change` on grouped values. ``cache`` (a dict the caller keeps) reuses the
    baseline's resampled means when the same baseline values, ``n_boot`` and ``seed`` come again,
    as in a one-at-a-time screen where every knob shares the baseline runs."""
    _check_boot(n_boot, ci)
    n_boot = int(n_boot)
    base = level_sample(levels, samples, between, baseline, "baseline")
    base_mean = float(np.mean(base))
    if base_mean == 0:
        raise DataError(f"the baseline {between}={baseline!r} has mean 0 for {dv!r}, so a percent change is "
                        "undefined; report absolute differences (tukey_hsd estimate) instead")
    others = [(level, y) for level, y in zip(levels, samples) if y is not base]
    streams = _streams(seed, len(others) + 1)
    base_means = None
    quantiles = [(1 - ci) / 2, (1 + ci) / 2]
    rows = []
    for (level, y), rng in zip(others, streams[1:]):
        point = float(_pct_statistic(y, base))
        if np.ptp(y) == 0 and np.ptp(base) == 0:
            low = high = point
        else:
            if base_means is None:
                key = (base.tobytes(), n_boot, seed)
                base_means = cache.get(key) if cache is not None else None
                if base_means is None:
                    base_means = _bootstrap_means(base, n_boot, streams[0])
                    if cache is not None:
                        cache[key] = base_means
            level_means = _bootstrap_means(y, n_boot, rng)
            low, high = (float(v) for v in np.quantile(100.0 * (level_means / base_means - 1.0), quantiles))
        rows.append({"level": level, "baseline": baseline, "mean": float(np.mean(y)), "baseline_mean": base_mean,
                     "pct_change": point, "ci_low": low, "ci_high": high})
    return pd.DataFrame(rows, columns=["level", "baseline", "mean", "baseline_mean", "pct_change",
                                       "ci_low", "ci_high"])
