"""Testbeds as blocks: a study run on several identical test machines at once.

Every trial records its ``testbed``; when the usable runs name two or more, the screen treats the
testbed as an additive blocking factor (docs/stats-notes.md, "Testbeds as blocks"):

* :func:`fit_blocked` fits one knob's runs as ``metric ~ C(level) + C(testbed)`` (statsmodels
  OLS) for the ANOVA family: the knob's F test (classic and HC3 Wald), its least-squares means
  (block-adjusted level means) with their covariance (model-based and HC3), and the runs with each
  testbed's estimated offset removed (``aligned``: their level means are the least-squares means,
  their deviations the model's residuals). :func:`lsmeans_effects` gives each level's % change
  against the baseline with a residual-bootstrap interval, :func:`lsmeans_equivalence` its TOST.
* :func:`stratified_kruskal` and :func:`stratified_dunn` are the rank route stratified by testbed:
  van Elteren's scores (ranks within each testbed over its runs + 1) and their permutation
  moments within testbeds; with one testbed they are Kruskal–Wallis and Dunn.
* :func:`between_testbed_spread` reports how far apart the testbeds are per metric: each
  testbed's runs, its offset from the others adjusted for the configurations it ran, and the
  block's F test.

A study run on one testbed (no ``testbed`` column, or a single value) has no block: the screen
analyses it exactly as before.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as ss

from tunelab.errors import DataError
from tunelab.stats._validate import check_columns, check_input, encode, level_matches, sorted_levels
from tunelab.stats.model_screen import tost_p_values
from tunelab.stats.multiplicity import adjust
from tunelab.stats.numerics import shifted
from tunelab.stats.posthoc import POSTHOC_COLUMNS

#: the tidy column naming each run's testbed (plan column ``testbed``); a block, never a knob
TESTBED = "testbed"
#: columns of :func:`between_testbed_spread` (the screen's ``testbeds`` table)
TESTBED_COLUMNS = ["metric", "testbed", "n", "mean", "sd", "baseline_n", "baseline_mean", "offset", "offset_pct",
                   "statistic", "df1", "df2", "p", "partial_eta2", "spread_pct"]
#: bootstrap resamples of residuals drawn at once (each a float), as in :mod:`tunelab.stats.effects`
_BATCH_VALUES = 2_000_000


def present_testbeds(data: pd.DataFrame, knobs: Sequence[str]) -> list[Any]:
    """The testbeds of the usable runs in sorted order; empty unless the data's ``testbed``
    column holds two or more (and is not one of ``knobs``).

    >>> present_testbeds(pd.DataFrame({"testbed": ["lab2", "lab1", "lab1"]}), ["k"])
    ['lab1', 'lab2']
    >>> present_testbeds(pd.DataFrame({"testbed": ["lab1", "lab1"]}), ["k"])
    []
    """
    if TESTBED in knobs or TESTBED not in data.columns:
        return []
    present = sorted_levels(data[TESTBED].dropna())
    return present if len(present) >= 2 else []


# --------------------------------------------------------------------------------------------
# the ANOVA family: y ~ C(level) + C(block)


@dataclass(frozen=True)
class BlockedFit:
    """One knob's runs fitted as ``y ~ C(level) + C(block)`` (:func:`fit_blocked`).

    Attributes
    ----------
    lsmeans : ndarray
        Least-squares mean of each level (the level's mean with every block weighted equally).
    cov, cov_hc3 : ndarray
        Covariance of ``lsmeans`` from the model's residual variance, and its HC3 sandwich.
    df_resid : float
        Residual degrees of freedom ``N - k - (B - 1)``.
    knob, knob_hc3, block : dict
        F tests ``{F, df1, df2, p, partial_eta2}`` of the level term (classic and HC3 Wald; type
        II = type III in an additive model) and of the block term.
    aligned : ndarray
        The runs (in row order) with each block's estimated offset from the mean block removed.
    residuals : ndarray
        The model's residuals (row order).
    influence : ndarray
        ``k × N``: how each run's value moves the least-squares means (``lsmeans = influence @ y``).
    codes : ndarray
        The level code of each run.
    """

    lsmeans: np.ndarray
    cov: np.ndarray
    cov_hc3: np.ndarray
    df_resid: float
    knob: dict[str, float]
    knob_hc3: dict[str, float]
    block: dict[str, float]
    aligned: np.ndarray
    residuals: np.ndarray
    influence: np.ndarray
    codes: np.ndarray


def _dummies(codes: np.ndarray, count: int) -> np.ndarray:
    """Treatment coding: one 0/1 column per code 1..count-1 (code 0 is the reference)."""
    return (codes[:, None] == np.arange(1, count)[None, :]).astype(float)


def _f_row(result: Any, columns: slice, width: int, rss: float) -> dict[str, float]:
    """The F test of ``columns`` (a term) in a fitted statsmodels OLS result."""
    restriction = np.zeros((width, len(result.params)))
    restriction[np.arange(width), np.arange(columns.start, columns.stop)] = 1.0
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        test = result.f_test(restriction)
    f_value = float(np.squeeze(test.fvalue))
    df2 = float(result.df_resid)
    term_ss = f_value * width * rss / df2 if df2 > 0 else math.nan
    return {"F": f_value, "df1": float(width), "df2": df2, "p": float(np.squeeze(test.pvalue)),
            "partial_eta2": term_ss / (term_ss + rss) if term_ss + rss > 0 else math.nan}


def fit_blocked(y: np.ndarray, codes: np.ndarray, block_codes: np.ndarray, n_levels: int,
                n_blocks: int) -> BlockedFit:
    """Fit ``y ~ C(level) + C(block)`` with statsmodels OLS (treatment coding, level 0 and block 0
    as references) and derive the knob's tests, least-squares means and aligned values.

    Raises
    ------
    DataError
        A level whose runs all sit on blocks where no other level ran (its effect is confounded
        with the testbeds), or no residual degrees of freedom.
    """
    import statsmodels.api as sm

    x = np.column_stack([np.ones(len(y)), _dummies(codes, n_levels), _dummies(block_codes, n_blocks)])
    if np.linalg.matrix_rank(x) < x.shape[1]:
        raise DataError("the knob's levels and the testbeds are confounded in these runs (some level ran only on "
                        "testbeds where no other level ran); run every level, or the baseline, on each testbed")
    if len(y) - x.shape[1] < 1:
        raise DataError(f"{len(y)} runs leave no residual degrees of freedom for the knob and the "
                        f"{n_blocks} testbeds; add replicates")
    response, shift = shifted(y)          # exact with a large constant offset; the means get it back
    result = sm.OLS(response, x).fit()
    rss = float(result.ssr)
    levels = slice(1, n_levels)
    blocks = slice(n_levels, n_levels + n_blocks - 1)
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        robust = result.get_robustcov_results(cov_type="HC3")
    # least-squares means: intercept + the level's effect + the average block effect
    lsm = np.zeros((n_levels, x.shape[1]))
    lsm[:, 0] = 1.0
    lsm[np.arange(1, n_levels), np.arange(1, n_levels)] = 1.0
    lsm[:, blocks] = 1.0 / n_blocks
    block_effect = np.concatenate([[0.0], result.params[blocks]])
    return BlockedFit(lsmeans=shift + lsm @ result.params, cov=lsm @ np.asarray(result.cov_params()) @ lsm.T,
                      cov_hc3=lsm @ np.asarray(robust.cov_params()) @ lsm.T, df_resid=float(result.df_resid),
                      knob=_f_row(result, levels, n_levels - 1, rss),
                      knob_hc3={**_f_row(robust, levels, n_levels - 1, rss), "partial_eta2": math.nan},
                      block=_f_row(result, blocks, n_blocks - 1, rss),
                      aligned=y - (block_effect[block_codes] - block_effect.mean()),
                      residuals=np.asarray(result.resid), influence=lsm @ np.linalg.pinv(x), codes=codes)


def bootstrap_lsmeans(fit: BlockedFit, n_boot: int, seed: int) -> np.ndarray:
    """``n_boot × k`` least-squares means of a residual bootstrap of the blocked model.

    Each resample draws every level's residuals with replacement from that level's residuals
    (so each level keeps its own spread) and refits the model (the least-squares means are linear
    in the data: ``lsmeans + influence @ residuals*``), so the testbed offsets are re-estimated
    in every resample.
    """
    rng = np.random.default_rng(seed)
    rows = [np.flatnonzero(fit.codes == i) for i in range(len(fit.lsmeans))]
    out = np.empty((n_boot, len(fit.lsmeans)))
    batch = max(1, _BATCH_VALUES // max(1, len(fit.codes)))
    for start in range(0, n_boot, batch):
        stop = min(n_boot, start + batch)
        shift = np.zeros((stop - start, len(fit.lsmeans)))
        for mine in rows:
            drawn = fit.residuals[mine][rng.integers(0, len(mine), size=(stop - start, len(mine)))]
            shift += drawn @ fit.influence[:, mine].T
        out[start:stop] = fit.lsmeans + shift
    return out


def lsmeans_effects(fit: BlockedFit, levels: Sequence[Any], baseline: Any, n_boot: int, seed: int,
                    ci: float = 0.95) -> pd.DataFrame:
    """Each level's % change of its least-squares mean against the baseline's, with the percentile
    interval of :func:`bootstrap_lsmeans` (columns of :func:`tunelab.stats.pct_change`).

    Raises
    ------
    DataError
        A baseline least-squares mean of 0 (no % change exists).
    """
    base = list(levels).index(baseline)
    base_mean = float(fit.lsmeans[base])
    if base_mean == 0:
        raise DataError(f"the baseline {baseline!r} has a testbed-adjusted mean of 0, so a percent change is "
                        "undefined; give the metric an absolute smallest effect of interest (sesoi_abs)")
    boot = bootstrap_lsmeans(fit, n_boot, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = 100.0 * (boot / boot[:, [base]] - 1.0)
    rows = []
    for i, level in enumerate(levels):
        if i == base:
            continue
        low, high = (float(v) for v in np.quantile(pct[:, i], [(1 - ci) / 2, (1 + ci) / 2]))
        rows.append({"level": level, "baseline": baseline, "mean": float(fit.lsmeans[i]), "baseline_mean": base_mean,
                     "pct_change": 100.0 * (float(fit.lsmeans[i]) / base_mean - 1.0), "ci_low": low, "ci_high": high})
    return pd.DataFrame(rows, columns=["level", "baseline", "mean", "baseline_mean", "pct_change", "ci_low", "ci_high"])


def lsmeans_equivalence(fit: BlockedFit, levels: Sequence[Any], baseline: Any, sesoi_pct: float,
                        alpha: float) -> pd.DataFrame:
    """TOST of each level's least-squares mean against the baseline's within ±``sesoi_pct`` % of the
    baseline's, with the HC3 standard error of the difference on the model's residual df (columns
    of :func:`tunelab.stats.tost` plus ``sesoi_pct``)."""
    base = list(levels).index(baseline)
    base_mean = float(fit.lsmeans[base])
    margin = sesoi_pct / 100.0 * abs(base_mean)
    rows = []
    for i, level in enumerate(levels):
        if i == base:
            continue
        difference = float(fit.lsmeans[i] - base_mean)
        variance = fit.cov_hc3[i, i] + fit.cov_hc3[base, base] - 2.0 * fit.cov_hc3[i, base]
        se = math.sqrt(variance) if variance > 0 else 0.0
        p_lower, p_upper = tost_p_values(difference, se, fit.df_resid, -margin, margin, alpha)
        rows.append({"level": level, "baseline": baseline, "pct_change": 100.0 * difference / base_mean,
                     "lower_bound": -margin, "upper_bound": margin, "p_lower": p_lower, "p_upper": p_upper,
                     "p": max(p_lower, p_upper), "equivalent": bool(max(p_lower, p_upper) < alpha),
                     "sesoi_pct": sesoi_pct})
    return pd.DataFrame(rows, columns=["level", "baseline", "pct_change", "lower_bound", "upper_bound", "p_lower",
                                       "p_upper", "p", "equivalent", "sesoi_pct"])


# --------------------------------------------------------------------------------------------
# the rank route: van Elteren's stratified rank tests


def van_elteren_scores(y: np.ndarray, strata: np.ndarray) -> np.ndarray:
    """Each run's midrank within its stratum divided by the stratum's runs + 1 (van Elteren 1960).

    >>> van_elteren_scores(np.array([5.0, 1, 3, 10, 30, 20]), np.array([0, 0, 0, 1, 1, 1])).tolist()
    [0.75, 0.25, 0.5, 0.25, 0.75, 0.5]
    """
    scores = np.empty(len(y))
    for stratum in np.unique(strata):
        mine = strata == stratum
        scores[mine] = ss.rankdata(y[mine]) / (mine.sum() + 1.0)
    return scores


def _stratified_moments(scores: np.ndarray, codes: np.ndarray, strata: np.ndarray,
                        k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per level the score sum ``T``, its expectation and covariance when the scores are permuted
    within each stratum (Strasser & Weber 1999), and the levels' run counts."""
    total, expected, cov = np.zeros(k), np.zeros(k), np.zeros((k, k))
    for stratum in np.unique(strata):
        mine = strata == stratum
        a, g = scores[mine], codes[mine]
        n = len(a)
        m = np.bincount(g, minlength=k).astype(float)
        total += np.bincount(g, weights=a, minlength=k)
        expected += m * a.mean()
        if n > 1:
            variance = float(np.mean((a - a.mean()) ** 2))
            cov += variance / (n - 1) * (n * np.diag(m) - np.outer(m, m))
    return total, expected, cov, np.bincount(codes, minlength=k).astype(float)


def stratified_kruskal_values(y: np.ndarray, codes: np.ndarray, strata: np.ndarray, k: int) -> dict[str, float]:
    """:func:`stratified_kruskal`'s numbers ``{H, df, p, epsilon2}`` on coded arrays."""
    total, expected, cov, _ = _stratified_moments(van_elteren_scores(y, strata), codes, strata, k)
    if not np.abs(cov).max(initial=0.0) > 0:
        return {"H": math.nan, "df": k - 1, "p": math.nan, "epsilon2": math.nan}
    rank = np.linalg.matrix_rank(cov)
    deviation = total - expected
    h = float(deviation @ np.linalg.pinv(cov) @ deviation)
    return {"H": h, "df": int(rank), "p": float(ss.chi2.sf(h, rank)), "epsilon2": h / (len(y) - 1)}


def _grouped_with_strata(data: pd.DataFrame, dv: str, between: str,
                         strata: str) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray]:
    check_columns(data, dv, [between, strata])
    missing = int(data[strata].isna().sum())
    if missing:
        raise DataError(f"column {strata!r} has {missing} missing value(s); drop those rows or fix the store")
    clean = check_input(data, dv, between)
    levels = sorted_levels(clean[between])
    return levels, encode(clean[between], levels), clean[dv].to_numpy(), encode(data[strata],
                                                                                sorted_levels(data[strata]))


def stratified_kruskal(data: pd.DataFrame, dv: str, between: str, strata: str) -> pd.DataFrame:
    """Kruskal–Wallis stratified by ``strata``: a linear rank test with van Elteren's scores.

    Within each stratum the runs are ranked (midranks for ties) and divided by the stratum's runs
    + 1; ``T`` sums each level's scores; under the null hypothesis the scores are exchangeable within
    each stratum, which gives ``E[T]`` and ``Cov[T]`` exactly, and ``H = (T - E)' Cov^+ (T - E)`` is
    referred to chi² with ``k - 1`` df. With one stratum this is the tie-corrected Kruskal–Wallis H;
    with two levels the square of van Elteren's z.

    Returns
    -------
    DataFrame
        One row, columns ``[source, H, df, p, epsilon2]`` (``epsilon2 = H / (N - 1)``).

    Examples
    --------
    >>> df = pd.DataFrame({"k": ["a", "b"] * 6, "lab": ["x"] * 6 + ["y"] * 6,
    ...                    "y": [1.0, 2, 1.5, 2.5, 1.2, 2.2, 11, 12, 11.5, 12.5, 11.2, 12.2]})
    >>> round(float(stratified_kruskal(df, "y", "k", "lab")["H"].iloc[0]), 3)
    7.714
    """
    levels, codes, y, strata_codes = _grouped_with_strata(data, dv, between, strata)
    return pd.DataFrame([{"source": between, **stratified_kruskal_values(y, codes, strata_codes, len(levels))}])


def stratified_dunn_table(levels: list[Any], y: np.ndarray, codes: np.ndarray, strata: np.ndarray,
                           p_adjust: str) -> pd.DataFrame:
    """:func:`stratified_dunn` on coded arrays."""
    k = len(levels)
    total, expected, cov, counts = _stratified_moments(van_elteren_scores(y, strata), codes, strata, k)
    excess = (total - expected) / counts
    i1, i2 = np.triu_indices(k, 1)
    contrast = np.zeros((len(i1), k))
    contrast[np.arange(len(i1)), i2] = 1.0 / counts[i2]
    contrast[np.arange(len(i1)), i1] = -1.0 / counts[i1]
    estimate = excess[i2] - excess[i1]
    se = np.sqrt(np.clip(np.einsum("ij,jk,ik->i", contrast, cov, contrast), 0.0, None))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = estimate / se
    p = 2.0 * ss.norm.sf(np.abs(z))
    return pd.DataFrame({"group1": [levels[i] for i in i1], "group2": [levels[i] for i in i2], "estimate": estimate,
                         "ci_low": np.nan, "ci_high": np.nan, "statistic": z, "p": p,
                         "p_adj": adjust(p, method=p_adjust)}, columns=POSTHOC_COLUMNS)


def stratified_dunn(data: pd.DataFrame, dv: str, between: str, strata: str, p_adjust: str = "holm") -> pd.DataFrame:
    """Dunn's pairwise test stratified by ``strata``, after :func:`stratified_kruskal`.

    Each pair compares the levels' mean van Elteren scores net of their expectation; its variance
    comes from the same within-stratum permutation covariance as the omnibus test, so with one
    stratum this is Dunn's (1964) test with the tie-corrected variance (scikit-posthocs
    ``posthoc_dunn``).

    Returns
    -------
    DataFrame
        Columns ``[group1, group2, estimate, ci_low, ci_high, statistic, p, p_adj]``: ``estimate``
        is the difference of the two levels' mean scores net of expectation (``group2 - group1``;
        a shift in within-stratum rank per stratum run + 1), ``statistic`` the signed z, ``p``
        two-sided, ``p_adj`` adjusted with ``p_adjust`` over the pairs.
    """
    levels, codes, y, strata_codes = _grouped_with_strata(data, dv, between, strata)
    return stratified_dunn_table(levels, y, codes, strata_codes, p_adjust)


# --------------------------------------------------------------------------------------------
# the between-testbed spread


def _config_codes(data: pd.DataFrame, factors: Sequence[str]) -> np.ndarray:
    """One integer code per distinct combination of ``factors`` (the runs' configurations)."""
    if not factors:
        return np.zeros(len(data), dtype=np.int64)
    return data.groupby(list(factors), sort=False, dropna=False).ngroup().to_numpy(dtype=np.int64)


def _block_test(y: np.ndarray, configs: np.ndarray, blocks: np.ndarray,
                n_blocks: int) -> tuple[dict[str, float], np.ndarray]:
    """The block's F test in ``y ~ C(config) + C(block)`` and the block effects (sum to zero).

    The configurations are absorbed (Frisch–Waugh–Lovell: ``y`` and the block dummies demeaned
    within each configuration), so a study of thousands of configurations needs no dummy per
    configuration; the numbers equal statsmodels ``anova_lm(ols("y ~ C(config) + C(block)"), typ=2)``.
    """
    nan = {"F": math.nan, "df1": float(n_blocks - 1), "df2": math.nan, "p": math.nan, "partial_eta2": math.nan}
    y = shifted(y)[0]                      # sums of squares: exact with a large constant offset
    n_configs = int(configs.max()) + 1
    df_resid = len(y) - n_configs - (n_blocks - 1)
    d = _dummies(blocks, n_blocks)
    counts = np.bincount(configs, minlength=n_configs).astype(float)

    def within(values: np.ndarray) -> np.ndarray:
        means = np.column_stack([np.bincount(configs, weights=column, minlength=n_configs) / counts
                                 for column in values.T])
        return values - means[configs]

    y_w, d_w = within(y[:, None])[:, 0], within(d)
    if df_resid < 1 or np.linalg.matrix_rank(d_w) < n_blocks - 1:
        return nan, np.full(n_blocks, math.nan)
    beta, *_ = np.linalg.lstsq(d_w, y_w, rcond=None)
    rss_reduced = float(y_w @ y_w)
    rss = float(np.sum((y_w - d_w @ beta) ** 2))
    effects = np.concatenate([[0.0], beta])
    effects = effects - effects.mean()
    term = max(rss_reduced - rss, 0.0)
    if rss > 0:
        f_value = (term / (n_blocks - 1)) / (rss / df_resid)
        p = float(ss.f.sf(f_value, n_blocks - 1, df_resid))
    else:      # no noise left: the testbeds differ exactly, or (term 0 too) every value is the same
        f_value, p = (math.inf, 0.0) if term > 0 else (math.nan, math.nan)
    return {"F": float(f_value), "df1": float(n_blocks - 1), "df2": float(df_resid), "p": p,
            "partial_eta2": term / rss_reduced if rss_reduced > 0 else math.nan}, effects


def between_testbed_spread(data: pd.DataFrame, metrics: Sequence[Mapping[str, Any]], factors: Sequence[str],
                           baseline: Mapping[str, Any]) -> pd.DataFrame:
    """How far apart the testbeds are, per metric: one row per metric × testbed.

    Parameters
    ----------
    data : DataFrame
        The usable runs, with a ``testbed`` column holding two or more testbeds.
    metrics : list of dict
        ``{name, ...}`` of each metric.
    factors : list of str
        The columns that make a configuration (the knobs, and the load profile when it is a factor).
    baseline : dict
        Knob -> baseline level; a run with every knob at its baseline is a baseline run.

    Returns
    -------
    DataFrame
        :data:`TESTBED_COLUMNS`: the testbed's usable runs ``n`` with their ``mean`` and ``sd``
        (ddof 1), its baseline runs (``baseline_n``, ``baseline_mean``); ``offset``, the testbed's
        effect in ``metric ~ C(configuration) + C(testbed)`` (block effects summing to zero: its
        difference from the average testbed with the configurations held equal), ``offset_pct``
        that offset in % of the metric's mean over all runs; per metric (the same on each of its
        rows) the block's F test (``statistic, df1, df2, p``), its ``partial_eta2`` (the share of
        the variance left by the configurations that lies between testbeds) and ``spread_pct``,
        the largest ``|offset_pct|``. NaN where the testbeds cannot be told apart from the
        configurations (each configuration ran on one testbed only).

    Examples
    --------
    >>> runs = pd.DataFrame({"k": [1, 1, 2, 2] * 2, "testbed": ["a"] * 4 + ["b"] * 4,
    ...                      "y": [9.0, 11, 19, 21, 10, 12, 20, 22]})
    >>> table = between_testbed_spread(runs, [{"name": "y"}], ["k"], {"k": 1})
    >>> table[["testbed", "n", "mean", "offset", "offset_pct"]].round(3).values.tolist()
    [['a', 4, 15.0, -0.5, -3.226], ['b', 4, 16.0, 0.5, 3.226]]
    """
    rows = []
    factors = list(factors)
    is_base = np.ones(len(data), dtype=bool)
    for knob, level in baseline.items():
        if knob in data.columns:
            is_base &= level_matches(data[knob], level)
    configs = _config_codes(data, factors)
    for metric in metrics:
        name = metric["name"]
        keep = data[name].notna().to_numpy() & data[TESTBED].notna().to_numpy()
        runs, base = data[keep], is_base[keep]
        testbeds = sorted_levels(runs[TESTBED])
        if len(testbeds) < 2:
            continue
        y = runs[name].to_numpy(dtype=float)
        blocks = encode(runs[TESTBED], testbeds)
        test, effects = _block_test(y, pd.factorize(configs[keep])[0], blocks, len(testbeds))
        grand = float(np.mean(y))
        offset_pct = 100.0 * effects / grand if grand > 0 else np.full(len(testbeds), math.nan)
        spread = float(np.max(np.abs(offset_pct))) if np.isfinite(offset_pct).all() else math.nan
        for i, testbed in enumerate(testbeds):
            mine = blocks == i
            values, base_values = y[mine], y[mine & base]
            rows.append({"metric": name, "testbed": testbed, "n": int(mine.sum()), "mean": float(values.mean()),
                         "sd": float(np.std(values, ddof=1)) if len(values) > 1 else math.nan,
                         "baseline_n": int(len(base_values)),
                         "baseline_mean": float(base_values.mean()) if len(base_values) else math.nan,
                         "offset": float(effects[i]), "offset_pct": float(offset_pct[i]),
                         "statistic": test["F"], "df1": test["df1"], "df2": test["df2"], "p": test["p"],
                         "partial_eta2": test["partial_eta2"], "spread_pct": spread})
    return pd.DataFrame(rows, columns=TESTBED_COLUMNS)


def spread_phrase(rows: pd.DataFrame) -> str:
    """One metric's between-testbed spread in words, from its rows of :func:`between_testbed_spread`.

    >>> rows = pd.DataFrame({"testbed": ["lab1", "lab2"], "offset": [-5.0, 5.0], "offset_pct": [-4.96, 4.96],
    ...                      "spread_pct": [4.96, 4.96]})
    >>> spread_phrase(rows)
    '±5.0 % of the mean (lab1 -5.0 %, lab2 +5.0 %)'
    """
    first = rows.iloc[0]
    if np.isfinite(float(first["spread_pct"])):
        offsets = ", ".join(f"{t} {o:+.1f} %" for t, o in zip(rows["testbed"], rows["offset_pct"].astype(float)))
        return f"±{first['spread_pct']:.1f} % of the mean ({offsets})"
    offsets = rows["offset"].astype(float)
    if np.isfinite(offsets).all():
        return f"±{offsets.abs().max():.3g} in the metric's units (its mean is not positive, so no %)"
    return "not estimable (too few configurations ran on two testbeds)"


def spread_note(table: pd.DataFrame, testbeds: Sequence[Any]) -> str:
    """The settings note of a screen with testbeds: how many, and their spread per metric.

    >>> table = pd.DataFrame({"metric": ["qps", "qps"], "testbed": ["lab1", "lab2"], "offset": [-5.0, 5.0],
    ...                       "offset_pct": [-4.25, 4.25], "spread_pct": [4.25, 4.25]})
    >>> print(spread_note(table, ["lab1", "lab2"]))
    testbed is a blocking factor (2 testbeds: lab1, lab2): an additive block of each knob's model, ranks within \
testbeds on the rank route; between-testbed spread on qps ±4.2 % of the mean (lab1 -4.2 %, lab2 +4.2 %)
    """
    parts = [f"on {metric} {spread_phrase(rows)}" for metric, rows in table.groupby("metric", sort=False)]
    text = (f"testbed is a blocking factor ({len(testbeds)} testbeds: {', '.join(map(str, testbeds))}): an additive "
            "block of each knob's model, ranks within testbeds on the rank route")
    return text + ("; between-testbed spread " + "; ".join(parts) if parts else "")
