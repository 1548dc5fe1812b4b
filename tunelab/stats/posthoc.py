"""Pairwise post-hoc comparisons, all in one long shape, plus matrix and compact-letter views.

Every test returns one row per pair of groups (groups in sorted order, ``group1`` before
``group2``) with columns ``[group1, group2, estimate, ci_low, ci_high, statistic, p, p_adj]``
where ``estimate`` is ``group2 - group1`` (R ``TukeyHSD`` convention), ``p`` is unadjusted and
``p_adj`` is adjusted for the family of all pairs.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import scikit_posthocs as sp
from scipy import stats as ss

from tunelab.errors import DataError
from tunelab.stats import _studentized_range as srange
from tunelab.stats._validate import Groups, check_input, grouped
from tunelab.stats.multiplicity import adjust
from tunelab.stats.numerics import centred, quietly

POSTHOC_COLUMNS = ["group1", "group2", "estimate", "ci_low", "ci_high", "statistic", "p", "p_adj"]



def _pair_table(levels: Sequence[Any], i1: np.ndarray, i2: np.ndarray, estimate: np.ndarray,
                half_width: np.ndarray, t: np.ndarray, df: Any, p_adj: Any) -> pd.DataFrame:
    """The long post-hoc table of the pairs ``(i1, i2)``: estimate ± half width, t, its two-sided
    p on ``df`` and the studentized-range adjusted p (clipped to [0, 1])."""
    return pd.DataFrame({
        "group1": [levels[i] for i in i1],
        "group2": [levels[i] for i in i2],
        "estimate": estimate,
        "ci_low": estimate - half_width,
        "ci_high": estimate + half_width,
        "statistic": t,
        "p": 2 * ss.t.sf(np.abs(t), df),
        "p_adj": np.clip(np.atleast_1d(p_adj), 0.0, 1.0),
    }, columns=POSTHOC_COLUMNS)

def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise DataError(f"alpha must be between 0 and 1, got {alpha!r}; 0.05 is the usual choice")


def tukey_hsd(data: pd.DataFrame, dv: str, between: str, alpha: float = 0.05) -> pd.DataFrame:
    """Tukey's honestly significant difference test (Tukey–Kramer for unequal group sizes).

    Equal to R ``TukeyHSD(aov(dv ~ between), conf.level = 1 - alpha)`` and to statsmodels
    ``pairwise_tukeyhsd``, whose arithmetic it repeats with a faster studentized-range
    distribution (see :func:`tukey_table` and docs/stats-notes.md, "Studentized range speed").

    Returns
    -------
    DataFrame
        Columns ``[group1, group2, estimate, ci_low, ci_high, statistic, p, p_adj]``:
        ``estimate = mean(group2) - mean(group1)`` with the simultaneous ``1 - alpha`` interval;
        ``statistic`` is the signed t from the pooled within-group variance (Tukey's
        ``q = sqrt(2) |t|``); ``p`` the unadjusted two-sided t-test p on ``N - k`` df;
        ``p_adj`` the Tukey (studentized range) p.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"k": list("aaabbbccc"), "y": [1.0, 2, 3, 2, 3, 4, 6, 7, 8]})
    >>> tukey_hsd(df, "y", "k")[["group1", "group2", "estimate"]].values.tolist()
    [['a', 'b', 1.0], ['a', 'c', 5.0], ['b', 'c', 4.0]]
    """
    _check_alpha(alpha)
    clean = check_input(data, dv, between)
    levels, samples = grouped(clean, dv, between)
    return tukey_table(levels, samples, alpha)


def tukey_table(levels: list[Any], samples: list[np.ndarray], alpha: float) -> pd.DataFrame:
    """Tukey HSD from the groups' values: statsmodels ``MultiComparison.tukeyhsd`` arithmetic.

    statsmodels computes ``MS_within`` (``np.var`` of the group-demeaned values with ``ddof = k``),
    ``std_pairs = sqrt(MS_within (1/n_i + 1/n_j) / 2)``, the range statistic
    ``|mean_j - mean_i| / std_pairs`` with p ``studentized_range.sf(., k, N - k)``, and the interval
    ``estimate ± studentized_range.ppf(1 - alpha, k, N - k) · std_pairs``. The same here, except that
    the studentized range comes from :mod:`tunelab.stats._studentized_range` (scipy's takes ~0.1 s
    per quantile; the two agree to 1e-10, see the module). A test compares this function with
    ``pairwise_tukeyhsd``.
    """
    k = len(levels)
    samples = centred(samples)   # differences and variances: exact with a large offset
    counts = np.array([len(y) for y in samples], dtype=float)
    means = np.array([np.mean(y) for y in samples])
    n = int(counts.sum())
    demeaned = np.concatenate([y - m for y, m in zip(samples, means)])
    ms_within = float(np.var(demeaned, ddof=k))
    i1, i2 = np.triu_indices(k, 1)
    estimate = means[i2] - means[i1]
    se = np.sqrt(ms_within * (1.0 / counts[i1] + 1.0 / counts[i2]))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = estimate / se
        q = np.abs(estimate) / (se / np.sqrt(2))
    q_crit = float(srange.ppf(1 - alpha, k, n - k))
    half_width = q_crit * (se / np.sqrt(2))
    return _pair_table(levels, i1, i2, estimate, half_width, t, n - k, srange.sf(q, k, n - k))


def lsmeans_table(levels: list[Any], means: np.ndarray, cov: np.ndarray, df: float, alpha: float) -> pd.DataFrame:
    """Every pair of least-squares means of a blocked model with the Tukey–Kramer adjustment.

    ``estimate = mean_j - mean_i`` with ``se`` from the means' covariance ``cov`` (the model's
    residual variance, or its HC3 sandwich), ``t = estimate / se`` on the model's residual ``df``,
    ``p_adj = P(Q > sqrt(2) |t|; k, df)`` (studentized range) and the simultaneous interval
    ``estimate ± q(1 - alpha; k, df) / sqrt(2) · se``: R ``emmeans::pairs(emmeans(fit, "level"),
    adjust = "tukey")``. With one observation per cell and no block this is :func:`tukey_table`.
    """
    k = len(levels)
    i1, i2 = np.triu_indices(k, 1)
    estimate = means[i2] - means[i1]
    se = np.sqrt(np.clip(cov[i1, i1] + cov[i2, i2] - 2.0 * cov[i1, i2], 0.0, None))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = estimate / se
    half_width = float(srange.ppf(1 - alpha, k, df)) / np.sqrt(2) * se
    return _pair_table(levels, i1, i2, estimate, half_width, t, df, srange.sf(np.sqrt(2) * np.abs(t), k, df))


def games_howell(data: pd.DataFrame, dv: str, between: str, alpha: float = 0.05) -> pd.DataFrame:
    """Games–Howell test for unequal variances (pingouin ``pairwise_gameshowell`` arithmetic).

    ``p_adj`` is the studentized-range p ``P(Q > sqrt(2)|t|; k, df)`` with the Welch–Satterthwaite
    df of each pair, as in R ``rstatix::games_howell_test`` and ``PMCMRplus::gamesHowellTest``.
    The interval is ``estimate ± q(1 - alpha; k, df) / sqrt(2) · se`` (rstatix); pingouin reports
    no interval. See :func:`games_howell_table` for why pingouin itself is not called.

    Returns
    -------
    DataFrame
        Columns ``[group1, group2, estimate, ci_low, ci_high, statistic, p, p_adj]``;
        ``statistic`` is the signed Welch t of ``group2 - group1`` and ``p`` its unadjusted
        two-sided p.
    """
    _check_alpha(alpha)
    clean = check_input(data, dv, between)
    levels, samples = grouped(clean, dv, between)
    return games_howell_table(levels, samples, alpha)


def games_howell_table(levels: list[Any], samples: list[np.ndarray], alpha: float) -> pd.DataFrame:
    """Games–Howell from the groups' values: pingouin ``pairwise_gameshowell`` arithmetic.

    pingouin: ``v = var(ddof=1) / n`` per group, ``se = sqrt(v_i + v_j)``, ``T = diff / se``,
    Welch df ``(v_i + v_j)^2 / (v_i^2 / (n_i - 1) + v_j^2 / (n_j - 1))`` and p
    ``studentized_range.sf(sqrt(2) |T|, k, df)`` clipped to [0, 1]. The same here with
    :mod:`tunelab.stats._studentized_range` (scipy's costs ~8 ms per p and ~0.1 s per quantile);
    a test compares this function with pingouin.
    """
    k = len(levels)
    samples = centred(samples)
    counts = np.array([len(y) for y in samples], dtype=float)
    means = np.array([np.mean(y) for y in samples])
    v = np.array([np.var(y, ddof=1) for y in samples]) / counts
    i1, i2 = np.triu_indices(k, 1)
    estimate = means[i2] - means[i1]
    se = np.sqrt(v[i1] + v[i2])
    with np.errstate(divide="ignore", invalid="ignore"):
        t = estimate / se
        df = (v[i1] + v[i2]) ** 2 / (v[i1] ** 2 / (counts[i1] - 1) + v[i2] ** 2 / (counts[i2] - 1))
    if k == 2:  # q(1 - alpha; 2, df) / sqrt(2) is exactly t(1 - alpha/2, df)
        critical = ss.t.ppf(1 - alpha / 2, df)
    else:
        critical = np.atleast_1d(srange.ppf(1 - alpha, k, df)) / np.sqrt(2)
    half_width = critical * se
    return _pair_table(levels, i1, i2, estimate, half_width, t, df, srange.sf(np.sqrt(2) * np.abs(t), k, df))


def dunn(data: pd.DataFrame, dv: str, between: str, p_adjust: str = "holm") -> pd.DataFrame:
    """Dunn's (1964) rank test after Kruskal–Wallis (scikit-posthocs ``posthoc_dunn``).

    The z statistic uses the tie-corrected variance
    ``(N(N+1)/12 - sum(t^3 - t) / (12(N-1))) (1/n_i + 1/n_j)`` of Dunn (1964) and Glantz (2012),
    as R ``FSA::dunnTest`` and ``PMCMRplus::kwAllPairsDunnTest``. ``p`` is two-sided (R
    ``dunn.test`` reports one-sided ``p = P(Z > |z|)`` unless ``altp = TRUE``).

    Parameters
    ----------
    p_adjust : {'holm', 'bonferroni', 'fdr_bh', 'none'}
        statsmodels ``multipletests`` method (R ``p.adjust`` "holm", "bonferroni", "BH").

    Returns
    -------
    DataFrame
        Columns ``[group1, group2, estimate, ci_low, ci_high, statistic, p, p_adj]``:
        ``estimate`` is the mean-rank difference ``group2 - group1`` (ranks of the pooled data),
        ``ci_low``/``ci_high`` are NaN, ``statistic`` the signed z.
    """
    clean = check_input(data, dv, between)
    return dunn_table(Groups.of(clean, dv, between), p_adjust)


def dunn_table(groups: Groups, p_adjust: str) -> pd.DataFrame:
    """:func:`dunn` on already grouped values."""
    levels = groups.levels
    ranks = ss.rankdata(groups.y)
    mean_ranks = pd.Series(ranks).groupby(groups.codes).mean().reindex(range(len(levels))).to_numpy()
    matrix, _ = quietly(sp.posthoc_dunn, groups.frame, val_col="y", group_col="g", p_adjust=None)   # all ties: NaN
    i1, i2 = np.triu_indices(len(levels), 1)
    p = np.array([float(matrix.loc[a, b]) for a, b in zip(i1, i2)])
    estimate = mean_ranks[i2] - mean_ranks[i1]
    z = np.sign(estimate) * ss.norm.isf(p / 2)
    return pd.DataFrame({
        "group1": [levels[i] for i in i1],
        "group2": [levels[i] for i in i2],
        "estimate": estimate,
        "ci_low": np.nan,
        "ci_high": np.nan,
        "statistic": z,
        "p": p,
        "p_adj": adjust(p, method=p_adjust),
    }, columns=POSTHOC_COLUMNS)


_SYMMETRIC = {"p", "p_adj"}
_ANTISYMMETRIC = {"estimate", "statistic"}


def _check_long(long: pd.DataFrame, value: str | None = None) -> None:
    needed = ["group1", "group2"] + ([value] if value else [])
    missing = [c for c in needed if c not in long.columns]
    if missing:
        raise DataError(f"post-hoc table lacks column(s) {missing}; pass the output of tukey_hsd, "
                        "games_howell or dunn")


def _groups_in_order(long: pd.DataFrame) -> list[Any]:
    return list(dict.fromkeys([*long["group1"].tolist(), *long["group2"].tolist()]))


def to_matrix(long: pd.DataFrame, value: str = "p_adj") -> pd.DataFrame:
    """Square group × group view of a post-hoc table (scikit-posthocs shape, for ``sign_plot``).

    Parameters
    ----------
    value : {'p_adj', 'p', 'estimate', 'statistic'}
        p columns give a symmetric matrix with 1.0 on the diagonal; ``estimate`` and
        ``statistic`` an antisymmetric one (``M[g1, g2]`` = row value, i.e. ``g2 - g1``;
        ``M[g2, g1]`` = its negative) with 0.0 on the diagonal.

    Returns
    -------
    DataFrame
        Index and columns are the groups in order of first appearance; pairs absent from
        ``long`` are NaN.
    """
    if value not in _SYMMETRIC | _ANTISYMMETRIC:
        raise DataError(f"value must be one of p_adj, p, estimate, statistic; got {value!r}")
    _check_long(long, value)
    groups = _groups_in_order(long)
    pos = {g: i for i, g in enumerate(groups)}
    out = np.full((len(groups), len(groups)), np.nan)
    sign = 1.0 if value in _SYMMETRIC else -1.0
    for g1, g2, v in zip(long["group1"].tolist(), long["group2"].tolist(), long[value].to_numpy(dtype=float)):
        out[pos[g1], pos[g2]] = v
        out[pos[g2], pos[g1]] = sign * v
    np.fill_diagonal(out, 1.0 if value in _SYMMETRIC else 0.0)
    index = pd.Index(groups, dtype=object)
    return pd.DataFrame(out, index=index, columns=index)


def compact_letters(long: pd.DataFrame, alpha: float = 0.05, order: Sequence[Any] | None = None) -> pd.DataFrame:
    """Compact letter display: groups sharing a letter are not significantly different.

    Piepho's (2004) insert-and-absorb algorithm on the pairs with ``p_adj < alpha``. Letters are
    assigned in ``order`` (default: order of first appearance), so the first group gets 'a';
    pass groups sorted by mean for the usual display.

    Returns
    -------
    DataFrame
        Columns ``[group, letters]``, one row per group in ``order``.

    Examples
    --------
    >>> import pandas as pd
    >>> long = pd.DataFrame({"group1": ["a", "a", "b"], "group2": ["b", "c", "c"],
    ...                      "p_adj": [0.5, 0.001, 0.002]})
    >>> compact_letters(long)["letters"].tolist()
    ['a', 'a', 'b']
    """
    _check_alpha(alpha)
    _check_long(long, "p_adj")
    groups = _groups_in_order(long)
    if order is not None:
        order = list(order)
        if set(order) != set(groups) or len(order) != len(groups):
            raise DataError(f"order must list each group exactly once; groups are {groups}, got {order}")
        groups = order
    columns: list[set[Any]] = [set(groups)]
    significant = long.loc[long["p_adj"].to_numpy(dtype=float) < alpha, ["group1", "group2"]]
    for g1, g2 in zip(significant["group1"].tolist(), significant["group2"].tolist()):
        updated: list[set[Any]] = []
        for column in columns:
            if g1 in column and g2 in column:
                updated.extend([column - {g1}, column - {g2}])
            else:
                updated.append(column)
        # absorb: drop columns contained in another column (and duplicates)
        unique = [c for i, c in enumerate(updated) if c and c not in updated[:i]]
        columns = [c for c in unique if not any(c < other for other in unique)]
    rank = {g: i for i, g in enumerate(groups)}
    columns.sort(key=lambda c: sorted(rank[g] for g in c))
    letters = [_letter(i) for i in range(len(columns))]
    return pd.DataFrame({
        "group": pd.Series(groups, dtype=object),
        "letters": ["".join(letters[i] for i, c in enumerate(columns) if g in c) for g in groups],
    })


def _letter(i: int) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    return alphabet[i] if i < 26 else alphabet[i // 26 - 1] + alphabet[i % 26]
