"""Omnibus tests: is there any difference between the levels of a knob?

One-way ANOVA, Welch's ANOVA, Kruskal–Wallis, factorial ANOVA (statsmodels ``anova_lm``) and
Lenth's method for unreplicated two-level designs.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pingouin as pg
import statsmodels.api as sm
import statsmodels.formula.api as smf
from scipy import stats as ss

from tunelab.errors import DataError
from tunelab.stats._validate import Groups, check_input, encode, grouped, sorted_levels
from tunelab.stats.numerics import quietly, shifted, sums_of_squares


def anova_oneway(data: pd.DataFrame, dv: str, between: str) -> pd.DataFrame:
    """Classic one-way ANOVA (equal variances), as ``scipy.stats.f_oneway`` and R ``aov``.

    Returns
    -------
    DataFrame
        Rows ``between`` and ``'Residual'``; columns ``[source, ss, df, ms, F, p, eta2, omega2]``.
        ``eta2 = SS_between / SS_total``; ``omega2 = (SS_between - df_between MS_within) /
        (SS_total + MS_within)``. F, p, eta2 and omega2 are NaN on the Residual row.

    Notes
    -----
    The sums of squares come from the group means (``SS_between = Σ n_i (mean_i - mean)^2``,
    ``SS_within = Σ (y - mean_i)^2``) of the values shifted to one observation (exact to float64
    on data with a large constant offset, NIST StRD SmLs01-09), and ``F = MS_between /
    MS_within``. This used statsmodels ``anova_lm(ols("y ~ C(g)"))``, whose
    formula interface costs ~12-25 ms per call (0.4-0.8 s of a 30-knob screen); the numbers are
    the same (a test compares them; docs/stats-notes.md, "Screen speed").

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"k": list("aaabbbccc"), "y": [1.0, 2, 3, 2, 3, 4, 6, 7, 8]})
    >>> round(float(anova_oneway(df, "y", "k").loc[0, "F"]), 3)
    21.0
    """
    clean = check_input(data, dv, between)
    v = anova_values(grouped(clean, dv, between)[1])
    return pd.DataFrame({
        "source": [between, "Residual"],
        "ss": [v["ss_b"], v["ss_w"]],
        "df": [v["df_b"], v["df_w"]],
        "ms": [v["ms_b"], v["ms_w"]],
        "F": [v["F"], np.nan],
        "p": [v["p"], np.nan],
        "eta2": [v["eta2"], np.nan],
        "omega2": [v["omega2"], np.nan],
    })


def anova_values(samples: list[np.ndarray]) -> dict[str, float]:
    """:func:`anova_oneway`'s numbers on already grouped values.

    The sums of squares come from the centred two-pass formulas of
    :func:`tunelab.stats.numerics.sums_of_squares`; ``F = MS_between / MS_within`` and ``p`` its F
    tail, so the table agrees with itself (SciPy's ``f_oneway`` centres too: a test checks that its
    F is the same to 1e-13).
    """
    ss_b, ss_w = sums_of_squares(samples)
    df_b, df_w = float(len(samples) - 1), float(sum(len(y) for y in samples) - len(samples))
    ss_t = ss_b + ss_w
    with np.errstate(divide="ignore", invalid="ignore"):
        ms_b, ms_w = np.float64(ss_b) / df_b, np.float64(ss_w) / df_w
        f_value = ms_b / ms_w              # constant groups: inf (means differ) or NaN (all equal), as SciPy
        eta2 = np.float64(ss_b) / ss_t
        omega2 = (ss_b - df_b * ms_w) / (ss_t + ms_w)
    p_value = float(ss.f.sf(f_value, df_b, df_w)) if not np.isnan(f_value) else math.nan
    return {"ss_b": ss_b, "ss_w": ss_w, "df_b": df_b, "df_w": df_w, "ms_b": float(ms_b), "ms_w": float(ms_w),
            "F": float(f_value), "p": p_value, "eta2": float(eta2), "omega2": float(omega2)}


def welch_anova(data: pd.DataFrame, dv: str, between: str) -> pd.DataFrame:
    """Welch's one-way ANOVA for unequal variances (pingouin ``welch_anova``).

    Equivalent to R ``oneway.test(dv ~ between, var.equal = FALSE)``.

    Returns
    -------
    DataFrame
        One row, columns ``[source, F, df1, df2, p]``; ``df2`` is Welch's fractional df.
    """
    clean = check_input(data, dv, between)
    groups = Groups.of(clean, dv, between)
    for level, y in zip(groups.levels, groups.samples):
        if np.ptp(y) == 0:
            raise DataError(f"Welch's ANOVA is undefined when a group has no variation: every {dv!r} value of "
                            f"{between} = {level!r} is {y[0]!r}; use kruskal() (rank-based) instead")
    return pd.DataFrame([{"source": between, **welch_values(groups)}])


def welch_values(groups: Groups) -> dict[str, float]:
    """:func:`welch_anova`'s numbers ``{F, df1, df2, p}`` on already grouped values; NaN (not an
    error) when a group has no variation, where Welch's weights ``n / s^2`` are undefined."""
    if any(np.ptp(y) == 0 for y in groups.samples):
        return {"F": np.nan, "df1": float(len(groups.samples) - 1), "df2": np.nan, "p": np.nan}
    frame = groups.frame.assign(y=groups.centred_y)   # exact with large offsets
    table, _ = quietly(pg.welch_anova, data=frame, dv="y", between="g")
    return {"F": float(table["F"].iloc[0]), "df1": float(table["ddof1"].iloc[0]),
            "df2": float(table["ddof2"].iloc[0]), "p": float(table["p_unc"].iloc[0])}


def kruskal(data: pd.DataFrame, dv: str, between: str) -> pd.DataFrame:
    """Kruskal–Wallis rank test with the tie-corrected H of R's ``kruskal.test`` (scipy ``kruskal``).

    Returns
    -------
    DataFrame
        One row, columns ``[source, H, df, p, epsilon2]`` where ``epsilon2 = H / (N - 1)``
        (Tomczak & Tomczak 2014, equal to ``H / ((N^2 - 1) / (N + 1))`` as in R
        ``rcompanion::epsilonSquared``). H and p are NaN if all values are equal.
    """
    clean = check_input(data, dv, between)
    return pd.DataFrame([{"source": between, **kruskal_values(grouped(clean, dv, between)[1])}])


def kruskal_values(samples: list[np.ndarray]) -> dict[str, float]:
    """:func:`kruskal`'s numbers ``{H, df, p, epsilon2}`` on already grouped values."""
    n = sum(len(y) for y in samples)
    if max(np.max(y) for y in samples) == min(np.min(y) for y in samples):
        h, p = np.nan, np.nan
    else:
        result = ss.kruskal(*samples)
        h, p = float(result.statistic), float(result.pvalue)
    return {"H": h, "df": len(samples) - 1, "p": p, "epsilon2": h / (n - 1)}


def _term_formula(names: Sequence[str], contrast: str) -> str:
    return ":".join(f"C({name}{contrast})" for name in names)


def anova_factorial(
    data: pd.DataFrame,
    dv: str,
    factors: list[str],
    typ: int = 2,
    interactions: bool | int = True,
    block: str | None = None,
) -> pd.DataFrame:
    """Factorial ANOVA of several knobs at once (statsmodels ``ols`` + ``anova_lm``).

    Parameters
    ----------
    factors : list of str
        Knob columns (at least one).
    typ : {1, 2, 3}
        Sums-of-squares type. Type III uses sum-to-zero contrasts ``C(x, Sum)`` for every factor,
        as R ``car::Anova(lm(..., contrasts = contr.sum), type = 3)``; types I and II are
        independent of the coding. Type II is the default (R ``car::Anova(type = 2)``).
    interactions : bool or int
        ``True``: every interaction (R ``y ~ a * b * c``); ``False``: main effects only
        (``y ~ a + b + c``); an int ``m``: interactions up to order ``m`` (``y ~ (a + b + c)^m``).
    block : str, optional
        Blocking column, entered as an additive factor (never interacting).

    Returns
    -------
    DataFrame
        One row per term and ``'Residual'`` (the intercept row of Type III is dropped); columns
        ``[source, ss, df, F, p, partial_eta2]`` with ``partial_eta2 = SS / (SS + SS_residual)``
        and ``F = (SS / df) / (SS_residual / df_residual)``. Interaction sources are named ``'a:b'``.
        The model is fitted to the metric shifted to one of its values
        (:func:`tunelab.stats.numerics.shifted`), which no sum of squares depends on, so a large
        constant offset costs no digits.

    Raises
    ------
    DataError
        Bad input, or no residual degrees of freedom (unreplicated design with all interactions:
        use ``interactions=2`` or :func:`lenth_effects`).
    """
    if typ not in (1, 2, 3):
        raise DataError(f"typ must be 1, 2 or 3, got {typ!r}")
    factors = [factors] if isinstance(factors, str) else list(factors)
    if not factors:
        raise DataError("factors is empty; name at least one knob column")
    if len(set(factors)) != len(factors):
        raise DataError(f"factors has duplicates: {factors}")
    columns = factors + ([block] if block is not None else [])
    clean = check_input(data, dv, columns, min_group_size=1)
    frame = pd.DataFrame({"y": shifted(clean[dv].to_numpy())[0]})
    names = {}
    for i, column in enumerate(columns):
        code = f"f{i}" if column != block else "blk"
        frame[code] = encode(clean[column], sorted_levels(clean[column]))
        names[code] = column
    terms = _factorial_terms([f"f{i}" for i in range(len(factors))], interactions)
    contrast = ", Sum" if typ == 3 else ""
    _check_residual_df(frame, terms, block is not None, dv, factors)
    rhs = ([f"C(blk{contrast})"] if block is not None else []) + [_term_formula(t, contrast) for t in terms]
    model = smf.ols("y ~ " + " + ".join(rhs), data=frame).fit()
    table, _ = quietly(sm.stats.anova_lm, model, typ=typ)
    table = table.drop(index=[i for i in table.index if i == "Intercept"])
    lookup = {_term_formula(t, contrast): ":".join(names[c] for c in t) for t in terms}
    lookup.update({f"C(blk{contrast})": block, "Residual": "Residual"})
    out = pd.DataFrame({"source": [lookup[str(i)] for i in table.index],
                        "ss": table["sum_sq"].to_numpy(dtype=float), "df": table["df"].to_numpy(dtype=float),
                        "F": table["F"].to_numpy(dtype=float), "p": table["PR(>F)"].to_numpy(dtype=float)})
    ss_resid = float(table.loc["Residual", "sum_sq"])
    with np.errstate(divide="ignore", invalid="ignore"):
        out["partial_eta2"] = np.where(out["source"] == "Residual", np.nan, out["ss"] / (out["ss"] + ss_resid))
    return out


def _factorial_terms(codes: list[str], interactions: bool | int) -> list[tuple[str, ...]]:
    """The model's terms: every combination of the factor codes up to the interaction order."""
    max_order = len(codes) if interactions is True else (1 if interactions is False else int(interactions))
    if max_order < 1:
        raise DataError(f"interactions must be True, False or an order >= 1, got {interactions!r}")
    return [t for order in range(1, min(max_order, len(codes)) + 1) for t in itertools.combinations(codes, order)]


def _check_residual_df(frame: pd.DataFrame, terms: list[tuple[str, ...]], blocked: bool, dv: str,
                       factors: list[str]) -> None:
    """DataError unless the model leaves residual degrees of freedom.

    The parameters are counted before the design matrix is built: a model with more parameters
    than runs has no residual df anyway, and many-level "factors" (e.g. a metric taken for a knob)
    would make a design matrix of hundreds of thousands of columns.
    """
    n_levels = {code: int(frame[code].nunique()) for code in frame.columns if code != "y"}
    parameters = 1 + sum(math.prod(n_levels[c] - 1 for c in t) for t in terms) + (n_levels["blk"] - 1 if blocked else 0)
    if parameters >= len(frame):
        raise DataError(f"the model of {dv!r} on {factors} has no residual degrees of freedom "
                        f"({len(frame)} runs, {parameters} parameters); use interactions=2 or "
                        "False, add replicates, or use lenth_effects() for an unreplicated 2-level design")


def lenth_pse(effects: np.ndarray) -> float:
    """Lenth's (1989) pseudo standard error of a set of contrasts: ``s0 = 1.5 median|c|``, then
    ``1.5 median{|c| : |c| < 2.5 s0}`` (NaN when nothing is left); it has ``len(effects) / 3`` df.

    >>> round(lenth_pse(np.array([21.625, 3.125, 9.875, 14.625, 0.125, -18.125, 16.625, 2.375, -0.375, -1.125,
    ...                           1.875, 4.125, -1.625, -2.625, 1.375])), 4)
    2.625
    """
    abs_c = np.abs(np.asarray(effects, dtype=float))
    trimmed = abs_c[abs_c < 2.5 * 1.5 * np.median(abs_c)]
    return float(1.5 * np.median(trimmed)) if len(trimmed) else math.nan


def lenth_effects(data: pd.DataFrame, dv: str, factors: list[str], alpha: float = 0.05) -> pd.DataFrame:
    """Lenth's (1989) pseudo standard error test for unreplicated two-level designs.

    Each factor's lower level (in sorted order) is coded -1, the higher +1. Effects are
    ``mean(y | +) - mean(y | -)`` for the main effects and for every interaction column that is
    orthogonal to all earlier columns (so aliased interactions of a regular fraction and the
    partially aliased ones of a Plackett–Burman design are left out), up to ``N - 1`` effects.

    With the ``m`` effects ``c``: ``s0 = 1.5 median|c|``, ``PSE = 1.5 median{|c| : |c| < 2.5 s0}``,
    ``d = m / 3``, margin of error ``ME = t(1 - alpha/2, d) PSE`` and simultaneous margin
    ``SME = t(gamma, d) PSE`` with ``gamma = (1 + (1 - alpha)^(1/m)) / 2``.

    Returns
    -------
    DataFrame
        One row per effect, columns ``[term, effect, pse, t, significant_me, significant_sme]``
        with ``t = effect / PSE``; ``significant_me`` is ``|effect| > ME``.

    Raises
    ------
    DataError
        A factor without exactly two levels, unbalanced or non-orthogonal main-effect columns,
        or fewer than two estimable effects.
    """
    if isinstance(factors, str):
        factors = [factors]
    clean = check_input(data, dv, list(factors), min_group_size=1)
    y = shifted(clean[dv].to_numpy())[0]   # effects are differences: exact with a large offset
    n = len(y)
    columns: list[tuple[str, np.ndarray]] = []
    for factor in factors:
        levels = sorted_levels(clean[factor])
        if len(levels) != 2:
            raise DataError(f"lenth_effects needs two-level factors, but {factor!r} has {len(levels)} levels "
                            f"{levels}; use anova_factorial() for multi-level designs")
        x = np.where(encode(clean[factor], levels) == 1, 1.0, -1.0)
        if x.sum() != 0:
            raise DataError(f"factor {factor!r} is unbalanced ({int((x > 0).sum())} runs high, "
                            f"{int((x < 0).sum())} low); Lenth's method needs an orthogonal two-level design")
        columns.append((factor, x))
    for (a, xa), (b, xb) in itertools.combinations(columns, 2):
        if xa @ xb != 0:
            raise DataError(f"factors {a!r} and {b!r} are not orthogonal; Lenth's method needs an orthogonal "
                            "two-level design (full or regular fractional factorial, Plackett–Burman)")
    for order in range(2, len(factors) + 1):
        for combo in itertools.combinations(range(len(factors)), order):
            if len(columns) >= n - 1:
                break
            x = np.prod([columns[i][1] for i in combo], axis=0)
            if abs(x.sum()) < 1e-9 and all(abs(x @ c) < 1e-9 for _, c in columns):
                columns.append((":".join(factors[i] for i in combo), x))
    m = len(columns)
    if m < 2:
        raise DataError(f"Lenth's method needs at least two effects, got {m}; add factors")
    effects = np.array([(x @ y) / (n / 2) for _, x in columns])
    abs_c = np.abs(effects)
    pse = lenth_pse(effects)
    d = m / 3.0
    me = ss.t.ppf(1 - alpha / 2, d) * pse
    gamma = (1 + (1 - alpha) ** (1.0 / m)) / 2
    sme = ss.t.ppf(gamma, d) * pse
    with np.errstate(divide="ignore", invalid="ignore"):
        t = effects / pse
    return pd.DataFrame({
        "term": [name for name, _ in columns],
        "effect": effects,
        "pse": pse,
        "t": t,
        "significant_me": abs_c > me,
        "significant_sme": abs_c > sme,
    })
