"""One linear model of a metric on all knobs of a factorial, fractional or Plackett–Burman design.

:func:`fit_model` builds the model matrix itself (sum-to-zero coding, as R's ``contr.sum``):
main effects of every factor, the two-factor interactions the design can estimate cleanly, and an
additive block term; it fits it with statsmodels OLS and returns tidy tables: the model's tests
(type II, or type III when unbalanced; HC3 Wald or a Freedman–Lane permutation test when the
residuals call for it; Lenth's pseudo standard error when there is no residual degree of freedom),
estimated marginal means, each level's contrast against the baseline level (averaged over the
other factors, Dunnett-adjusted on the model's contrasts), simple effects within the levels of an
interacting factor, residual diagnostics and standardised effects.

Every fit (OLS, the type II/III sums of squares, HC3, Freedman–Lane, Lenth) is of the response
shifted to one of its values (:func:`tunelab.stats.numerics.shifted`; on the log scale
``log(y / c)`` by ``log1p``), which no test, contrast or interval depends on; the shift is added
back to the marginal means and fitted values. On data with a large constant offset (NIST StRD
SmLs09: 1000000000000.4) the fit is then exact to float64: differences to ~1e-14, where the raw
values gave 0.083-0.115 for steps of 0.1 (tests/stats/test_reference_offsets.py). Library
warnings are caught at the call; those that qualify a result become :attr:`ModelFit.notes`.

Examples
--------
>>> import pandas as pd
>>> df = pd.DataFrame({"a": [0, 0, 1, 1] * 3, "b": [0, 1, 0, 1] * 3,
...                    "y": [10.0, 11, 20, 21, 10.5, 11.4, 19.6, 21.2, 9.8, 10.9, 20.3, 20.8]})
>>> fit = fit_model(df, "y", ["a", "b"], baseline={"a": 0, "b": 0})
>>> fit.terms["term"].tolist(), fit.test
(['a', 'b', 'a:b'], 'ols_type2')
>>> round(float(fit.contrasts.query("knob == 'a' and at == ''")["estimate"].iloc[0]), 2)
9.88
"""
from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import optimize, stats as ss

from tunelab.errors import DataError
from tunelab.stats._validate import check_columns, encode, sorted_levels
from tunelab.stats.numerics import log_shifted, quietly, shifted
from tunelab.stats.omnibus import lenth_pse

#: ``interactions: auto`` estimates the clean two-factor interactions only if, all of them in the model,
#: this many residual degrees of freedom remain; otherwise none (main effects only). Taking them one
#: by one until the df ran out kept an arbitrary subset of a fraction's alias chains and left 2 df:
#: an unreplicated 2^(7-3) then found 3 % of the active knobs instead of 76 % (bench_screen_power)
MIN_RESIDUAL_DF = 3
#: with fewer residual df than this the residual checks say nothing: plain F tests
MIN_DF_FOR_CHECKS = 5
#: an interaction whose columns are explained beyond this R² by the main effects (over the design's
#: distinct points) is partially aliased with them (Plackett–Burman) and left out of the model
MAX_ALIAS_R2 = 0.1
#: residual checks: Shapiro–Wilk below this -> permutation test; Brown–Forsythe by knob below this -> HC3.
#: Both are 0.01: the model is fitted on the log scale for ratio metrics, where the variance is
#: expected even, and HC3's small-sample penalty is large (every run of a Plackett–Burman 8 x 2 has
#: leverage 0.5), so a pre-test at 0.05 would send 5 % of well-behaved studies to a test with
#: about half the power (docs/stats-notes.md, "Model route")
NORMALITY_ALPHA = 0.01
VARIANCE_ALPHA = 0.01
TESTS = {"ols_type2": "F test, type II", "ols_type3": "F test, type III", "hc3_wald": "HC3 Wald F test",
         "freedman_lane": "Freedman–Lane permutation test", "lenth": "Lenth's pseudo standard error"}
TERM_COLUMNS = ["term", "kind", "df1", "df2", "statistic", "p", "partial_eta2", "test", "aliases"]
CONTRAST_COLUMNS = ["knob", "level", "baseline", "at", "estimate", "se", "df", "t", "p", "ci_low", "ci_high",
                    "p_adj", "adj_ci_low", "adj_ci_high"]
EMMEANS_COLUMNS = ["knob", "level", "by", "by_level", "mean", "se", "ci_low", "ci_high"]
RESIDUAL_COLUMNS = ["row", "fitted", "residual", "studentized", "leverage"]
EFFECT_COLUMNS = ["term", "estimate", "se", "t", "p"]
INTERACTION_COLUMNS = ["term", "knob", "level", "baseline", "other", "other_level", "other_baseline", "estimate", "se",
                       "df", "t", "p", "ci_low", "ci_high"]


class TermKind(Enum):
    """What a model term is; its text is the terms table's ``kind`` column (``terms["kind"] == TermKind.MAIN.value``)."""

    MAIN = "main"
    INTERACTION = "interaction"
    BLOCK = "block"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Term:
    """A model term: its factors (one for a main effect or block, two for an interaction) and columns."""

    name: str
    kind: TermKind
    factors: tuple[str, ...]
    columns: slice


@dataclass(frozen=True)
class ModelFit:
    """What :func:`fit_model` computed; every table is a tidy DataFrame on the model's scale.

    Attributes
    ----------
    terms : DataFrame
        :data:`TERM_COLUMNS`, one row per main effect, interaction and block term.
    contrasts : DataFrame
        :data:`CONTRAST_COLUMNS`: each level against the baseline, averaged over the other factors
        (``at == ""``) and within each level of an interacting factor (``at == "other=level"``).
    emmeans : DataFrame
        :data:`EMMEANS_COLUMNS`: marginal means per knob level, and per cell of each interaction.
    residuals : DataFrame
        :data:`RESIDUAL_COLUMNS`; ``row`` is the data's index label.
    effects : DataFrame
        :data:`EFFECT_COLUMNS`: standardised effects of the one-degree-of-freedom terms (the
        half-normal and Pareto plots), ``estimate`` = high level minus low level.
    interactions : DataFrame
        :data:`INTERACTION_COLUMNS`: per estimated interaction, how much the effect of ``knob``'s
        ``level`` (vs its baseline) at ``other = other_level`` differs from that at the other
        knob's baseline (a difference of differences; a ratio of ratios on the log scale).
    test, reason : str
        The tests' route (a key of :data:`TESTS`) and why it was taken.
    notes : list of str
        What the tables need said beside them: interactions left out, and library warnings that
        qualify a result (e.g. "Shapiro–Wilk on 6,000 residuals: p approximate (SciPy)").
    """

    terms: pd.DataFrame
    contrasts: pd.DataFrame
    emmeans: pd.DataFrame
    residuals: pd.DataFrame
    effects: pd.DataFrame
    residual_df: float
    test: str
    reason: str
    scale: str
    interactions: pd.DataFrame
    assumptions: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# the model matrix


def contr_sum(n_levels: int) -> np.ndarray:
    """R's ``contr.sum``: an ``n × (n - 1)`` coding whose rows sum to zero over the levels.

    >>> contr_sum(3).tolist()
    [[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]]
    """
    return np.vstack([np.eye(n_levels - 1), -np.ones((1, n_levels - 1))])


def _rowwise_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Interaction columns: every column of ``a`` times every column of ``b`` (``a`` outer)."""
    return (a[:, :, None] * b[:, None, :]).reshape(len(a), -1)


@dataclass
class _Design:
    """The model matrix under construction: factor codings, columns and terms."""

    y: np.ndarray                    # the response minus ``shift`` (see fit_model)
    levels: dict[str, list[Any]]
    codes: dict[str, np.ndarray]     # factor -> level index per run
    coding: dict[str, np.ndarray]    # factor -> contr.sum matrix
    terms: list[Term] = field(default_factory=list)
    shift: float = 0.0               # added back to means and fitted values

    def main(self, factor: str) -> np.ndarray:
        return self.coding[factor][self.codes[factor]]

    def interaction(self, a: str, b: str) -> np.ndarray:
        return _rowwise_product(self.main(a), self.main(b))

    def columns_of(self, factors: tuple[str, ...]) -> np.ndarray:
        return self.main(factors[0]) if len(factors) == 1 else self.interaction(*factors)

    def matrix(self, terms: Sequence[Term] | None = None) -> np.ndarray:
        chosen = self.terms if terms is None else terms
        return np.column_stack([np.ones(len(self.y))] + [self.columns_of(t.factors) for t in chosen])

    def add(self, name: str, kind: TermKind, factors: tuple[str, ...]) -> None:
        start = 1 + sum(t.columns.stop - t.columns.start for t in self.terms)
        width = self.columns_of(factors).shape[1]
        self.terms.append(Term(name, kind, factors, slice(start, start + width)))


def _rank(x: np.ndarray) -> int:
    return int(np.linalg.matrix_rank(x, tol=1e-8 * max(1.0, float(np.abs(x).max(initial=0.0))) * max(x.shape)))


def _alias_r2(candidate: np.ndarray, mains: np.ndarray, points: np.ndarray) -> float:
    """Largest R² of the candidate's columns on the main-effect columns over the distinct points."""
    xc, mc = candidate[points], mains[points]
    mc = np.column_stack([np.ones(len(mc)), mc])
    worst = 0.0
    for column in xc.T:
        centred = column - column.mean()
        total = float(centred @ centred)
        if total < 1e-12:
            return 1.0
        fitted = mc @ np.linalg.lstsq(mc, column, rcond=None)[0]
        worst = max(worst, float(((fitted - column.mean()) ** 2).sum()) / total)
    return worst


def _interaction_pairs(design: _Design, factors: list[str], interactions: str | Sequence[tuple[str, str]],
                       points: np.ndarray, notes: list[str], aliases: dict[str, list[str]]) -> list[tuple[str, str]]:
    """The two-factor interactions to estimate; aliased and partially aliased ones are named, not fitted."""
    if interactions == "none" or len(factors) < 2:
        return []
    all_pairs = list(itertools.combinations(factors, 2))
    if interactions == "all":
        return all_pairs
    if not isinstance(interactions, str):
        pairs = []
        for pair in interactions:
            if len(pair) != 2 or any(f not in factors for f in pair) or pair[0] == pair[1]:
                raise DataError(f"interaction {list(pair)!r} must name two different knobs of the model {factors}")
            pairs.append((pair[0], pair[1]) if factors.index(pair[0]) < factors.index(pair[1]) else (pair[1], pair[0]))
        return pairs
    if interactions != "auto":
        raise DataError(f"interactions must be 'auto', 'none', 'all' or a list of knob pairs, got {interactions!r}")
    mains = np.column_stack([design.main(f) for f in factors])
    current = design.matrix()
    rank, n = _rank(current), len(design.y)
    included = {t.name: design.columns_of(t.factors) for t in design.terms}
    chosen: list[tuple[str, str]] = []
    partial: list[str] = []
    confounded: list[str] = []
    for a, b in all_pairs:
        name, candidate = f"{a}:{b}", design.interaction(a, b)
        width = candidate.shape[1]
        trial = np.column_stack([current, candidate])
        if _rank(trial) < rank + width:
            partners = [term for term, cols in included.items()
                        if _rank(np.column_stack([cols, candidate])) <= _rank(cols)]
            for partner in partners:
                aliases.setdefault(partner, []).append(name)
            if not partners:
                confounded.append(name)
            continue
        if _alias_r2(candidate, mains, points) > MAX_ALIAS_R2:
            partial.append(name)
            continue
        chosen.append((a, b))
        included[name] = candidate
        current, rank = trial, rank + width
    if chosen and n - rank < MIN_RESIDUAL_DF:
        names = [f"{a}:{b}" for a, b in chosen]
        for name in names:
            aliases.pop(name, None)
        notes.append(f"the {len(names)} estimable two-factor interaction(s) would leave {n - rank} residual degrees of "
                     f"freedom (fewer than {MIN_RESIDUAL_DF}), so the model holds main effects only; name the "
                     "interactions you expect in analysis.interactions, or add replicates")
        chosen = []
    if confounded:
        shown = ", ".join(confounded[:5]) + (f" and {len(confounded) - 5} more" if len(confounded) > 5 else "")
        notes.append(f"{len(confounded)} two-factor interaction(s) cannot be estimated: they are confounded with "
                     f"combinations of the other terms of this design ({shown})")
    if partial:
        notes.append(f"interactions {', '.join(partial)} are partially aliased with the main effects (as in a "
                     "Plackett–Burman design), so the model holds main effects only for them")
    return chosen


# --------------------------------------------------------------------------------------------
# fitting and tests


def _lstsq(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    beta = np.linalg.lstsq(x, y, rcond=None)[0]
    resid = y - x @ beta
    return beta, float(resid @ resid)


def _columns_except(design: _Design, drop: Sequence[Term]) -> np.ndarray:
    return design.matrix([t for t in design.terms if t not in drop])


def _contains(term: Term, other: Term) -> bool:
    """True when ``other`` is a higher-order term containing every factor of ``term``."""
    return other is not term and other.kind is TermKind.INTERACTION and set(term.factors) <= set(other.factors)


def _type_ss(design: _Design, term: Term, typ: int, rss_full: float) -> float:
    if typ == 3 or term.kind is TermKind.INTERACTION:
        return _lstsq(_columns_except(design, [term]), design.y)[1] - rss_full
    higher = [t for t in design.terms if _contains(term, t)]
    without_higher = _lstsq(_columns_except(design, higher), design.y)[1]
    return _lstsq(_columns_except(design, higher + [term]), design.y)[1] - without_higher


def _balanced(design: _Design, x: np.ndarray) -> bool:
    """Different terms' columns are orthogonal (then types I, II and III agree)."""
    for t1, t2 in itertools.combinations(design.terms, 2):
        cross = x[:, t1.columns].T @ x[:, t2.columns]
        if np.abs(cross).max(initial=0.0) > 1e-8 * len(design.y):
            return False
    return True


def _wald(beta: np.ndarray, cov: np.ndarray, columns: slice, higher: Sequence[slice] = ()) -> tuple[float, int]:
    """Wald F of ``beta[columns] = 0``; with ``higher`` (the columns of the terms containing this one)
    the type II hypothesis of R's ``car::Anova``: ``H = L_T - L_T V L_R' (L_R V L_R')^-1 L_R``."""
    width = columns.stop - columns.start
    try:
        return _wald_f(beta, cov, columns, higher), width
    except np.linalg.LinAlgError:      # a zero covariance (runs without any variation): no test
        return math.nan, width


def _wald_f(beta: np.ndarray, cov: np.ndarray, columns: slice, higher: Sequence[slice]) -> float:
    width = columns.stop - columns.start
    hypothesis = np.zeros((width, len(beta)))
    hypothesis[:, columns] = np.eye(width)
    rest = [i for s in higher for i in range(s.start, s.stop)]
    if rest:
        l_r = np.zeros((len(rest), len(beta)))
        l_r[np.arange(len(rest)), rest] = 1.0
        hypothesis = hypothesis - hypothesis @ cov @ l_r.T @ np.linalg.solve(l_r @ cov @ l_r.T, l_r)
    b = hypothesis @ beta
    return float(b @ np.linalg.solve(hypothesis @ cov @ hypothesis.T, b)) / width


def _freedman_lane(design: _Design, x: np.ndarray, term: Term, f_obs: float, df_res: float,
                   rng: np.random.Generator, n_perm: int) -> float:
    """Freedman & Lane (1983): permute the residuals of the model without ``term`` (NaN for a NaN F)."""
    if math.isnan(f_obs):
        return math.nan
    reduced = np.delete(x, np.arange(term.columns.start, term.columns.stop), axis=1)
    beta_r = np.linalg.lstsq(reduced, design.y, rcond=None)[0]
    fitted, resid = reduced @ beta_r, design.y - reduced @ beta_r
    perms = np.stack([rng.permutation(len(resid)) for _ in range(n_perm)], axis=1)
    ys = fitted[:, None] + resid[perms]
    q_full, _ = np.linalg.qr(x)
    q_red, _ = np.linalg.qr(reduced)
    rss_full = ((ys - q_full @ (q_full.T @ ys)) ** 2).sum(axis=0)
    rss_red = ((ys - q_red @ (q_red.T @ ys)) ** 2).sum(axis=0)
    width = term.columns.stop - term.columns.start
    with np.errstate(divide="ignore", invalid="ignore"):
        f_perm = ((rss_red - rss_full) / width) / (rss_full / df_res)
    return float((1 + np.sum(f_perm >= f_obs * (1 - 1e-12))) / (n_perm + 1))


def _variance_p(resid: np.ndarray, design: _Design, factors: Sequence[str]) -> float:
    """Does the residual spread differ between a knob's levels? p, Bonferroni over the knobs.

    When every configuration was run at least twice, the spread of each configuration (log of the
    SD of its residuals) is compared between each knob's levels (one-way ANOVA); otherwise
    Brown–Forsythe (median-centred Levene) on the residuals grouped by each knob's levels. Runs of
    one configuration are not independent residuals (they are deviations from a shared fitted
    mean), and a regression of the squared residuals on the model's columns (Breusch–Pagan) is
    degenerate in replicated saturated designs, where those columns span every configuration.
    """
    codes = np.column_stack([design.codes[f] for f in factors])
    _, config, counts = np.unique(codes, axis=0, return_inverse=True, return_counts=True)
    config = config.ravel()
    p_values = []
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")
        if counts.min() >= 2:
            log_sd = np.array([math.log(max(np.std(resid[config == c], ddof=1), 1e-300)) for c in range(len(counts))])
            first = np.array([np.flatnonzero(config == c)[0] for c in range(len(counts))])
            for factor in factors:
                level = design.codes[factor][first]
                groups = [log_sd[level == i] for i in range(len(design.levels[factor]))]
                if min(len(g) for g in groups) >= 2 and np.ptp(log_sd) > 0:
                    p_values.append(float(ss.f_oneway(*groups).pvalue))
        else:
            for factor in factors:
                groups = [resid[design.codes[factor] == i] for i in range(len(design.levels[factor]))]
                if min(len(g) for g in groups) >= 2 and np.ptp(resid) > 0:
                    p_values.append(float(ss.levene(*groups, center="median").pvalue))
    p_values = [p for p in p_values if not math.isnan(p)]
    return min(1.0, min(p_values) * len(p_values)) if p_values else math.nan


def _shapiro_p(values: np.ndarray) -> tuple[float, list[str]]:
    """Shapiro–Wilk p of the studentized residuals (NaN for fewer than 3 or constant values) and the
    notes its warnings call for (SciPy's p is approximate above 5000 values)."""
    if len(values) < 3 or not np.ptp(values) > 0:
        return math.nan, []
    result, caught = quietly(ss.shapiro, values)
    notes = [f"Shapiro–Wilk on {len(values):,} residuals: p approximate (SciPy)" if "may not be accurate" in message
             else f"Shapiro–Wilk (SciPy): {message}" for message in caught]
    return float(result.pvalue), notes


def _route(shapiro_p: float, resid: np.ndarray, design: _Design, factors: Sequence[str],
           leverage: np.ndarray, robust: str) -> tuple[str, str, dict[str, float]]:
    """The test route from the residuals: ``(route, reason, {shapiro_p, variance_p})``."""
    variance_p = _variance_p(resid, design, factors)
    checks = {"shapiro_p": shapiro_p, "variance_p": variance_p}
    normal = "not computable" if math.isnan(shapiro_p) else f"p={shapiro_p:.3g}"
    if robust in ("hc3", "permutation"):
        route = "hc3_wald" if robust == "hc3" else "freedman_lane"
        return route, f"{TESTS[route]} (asked for)", checks
    if robust == "none":
        return "ols", "F tests of the model (no residual checks asked for)", checks
    df_res = len(resid) - int(round(float(leverage.sum())))
    if df_res < MIN_DF_FOR_CHECKS:
        return "ols", (f"only {df_res} residual degrees of freedom: too few to check the residuals; F tests of the "
                       "model"), checks
    if not math.isnan(shapiro_p) and shapiro_p < NORMALITY_ALPHA:
        return "freedman_lane", (f"model residuals clearly non-normal (Shapiro–Wilk p={shapiro_p:.3g} < "
                                 f"{NORMALITY_ALPHA}): Freedman–Lane permutation test of each term"), checks
    spread = f"spread by knob level, Bonferroni p={variance_p:.3g}"
    if not math.isnan(variance_p) and variance_p < VARIANCE_ALPHA:
        if leverage.max(initial=0.0) < 0.99:
            return "hc3_wald", (f"residuals normal enough (Shapiro–Wilk {normal}) but their spread differs between "
                                f"a knob's levels ({spread} < {VARIANCE_ALPHA}): HC3 Wald tests"), checks
        return "freedman_lane", (f"residual spread differs between a knob's levels ({spread}) and single-run cells "
                                 "make HC3 undefined: Freedman–Lane permutation test"), checks
    even = "not computable" if math.isnan(variance_p) else spread
    return "ols", f"model residuals normal enough (Shapiro–Wilk {normal}) and of even spread ({even})", checks


# --------------------------------------------------------------------------------------------
# contrasts and means


def max_t_quantile(corr: np.ndarray, df: float, alpha: float, seed: int = 0) -> float:
    """The two-sided ``1 - alpha`` quantile of ``max |T_i|`` for a multivariate t (Dunnett's constant).

    One contrast gives the ordinary t quantile; several use scipy's multivariate t distribution
    (randomised quasi-Monte Carlo, reproducible with ``seed``, accurate to about 1e-3).
    """
    m = len(corr)
    if m == 1:
        return float(ss.t.ppf(1 - alpha / 2, df))
    return float(optimize.brentq(lambda q: _max_t_cdf(q, corr, df, seed) - (1 - alpha), 1e-3, 100.0, xtol=1e-6))


def _max_t_cdf(q: float, corr: np.ndarray, df: float, seed: int) -> float:
    m = len(corr)
    dist = ss.multivariate_t(loc=np.zeros(m), shape=corr, df=df if np.isfinite(df) else 1e9, allow_singular=True)
    return float(dist.cdf(np.full(m, q), lower_limit=np.full(m, -q), random_state=seed))


def _dunnett(rows: list[dict[str, Any]], vectors: list[np.ndarray], cov: np.ndarray, df: float, alpha: float,
             seed: int) -> None:
    """Add ``p_adj`` and ``adj_ci_*`` to one family of contrast rows (in place)."""
    c = np.array(vectors)
    v = c @ cov @ c.T
    d = np.sqrt(np.clip(np.diag(v), 1e-300, None))
    corr = v / np.outer(d, d)
    q = max_t_quantile(corr, df, alpha, seed)
    for row in rows:
        t = abs(row["t"])
        row["p_adj"] = (row["p"] if len(rows) == 1 or not np.isfinite(t)
                        else float(min(1.0, max(row["p"], 1 - _max_t_cdf(t, corr, df, seed)))))
        row["adj_ci_low"], row["adj_ci_high"] = row["estimate"] - q * row["se"], row["estimate"] + q * row["se"]


def _contrast_row(knob: str, level: Any, baseline: Any, at: str, vector: np.ndarray, beta: np.ndarray,
                  cov: np.ndarray, df: float, alpha: float) -> dict[str, Any]:
    estimate = float(vector @ beta)
    se = float(math.sqrt(max(vector @ cov @ vector, 0.0)))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = estimate / se if se > 0 else (math.copysign(math.inf, estimate) if estimate else math.nan)
    p = float(2 * ss.t.sf(abs(t), df)) if not math.isnan(t) else math.nan
    q = float(ss.t.ppf(1 - alpha / 2, df))
    return {"knob": knob, "level": level, "baseline": baseline, "at": at, "estimate": estimate, "se": se, "df": df,
            "t": t, "p": p, "ci_low": estimate - q * se, "ci_high": estimate + q * se}


def _vector(design: _Design, width: int, parts: Mapping[str, np.ndarray]) -> np.ndarray:
    """A contrast vector with the given term columns set (by term name) and zeros elsewhere."""
    vector = np.zeros(width)
    for term in design.terms:
        if term.name in parts:
            vector[term.columns] = parts[term.name]
    return vector


def _interaction_part(term: Term, codes: Mapping[str, np.ndarray]) -> np.ndarray:
    a, b = term.factors
    return np.outer(codes[a], codes[b]).ravel()


def _contrasts(design: _Design, factors: list[str], baseline: Mapping[str, Any], beta: np.ndarray, cov: np.ndarray,
               df: float, alpha: float, seed: int) -> pd.DataFrame:
    width = len(beta)
    rows: list[dict[str, Any]] = []
    interactions = [t for t in design.terms if t.kind is TermKind.INTERACTION]
    for knob in factors:
        levels, coding = design.levels[knob], design.coding[knob]
        base = levels.index(baseline[knob])
        others = [i for i in range(len(levels)) if i != base]
        diff = {i: coding[i] - coding[base] for i in others}
        family = [(_contrast_row(knob, levels[i], levels[base], "", v, beta, cov, df, alpha), v)
                  for i in others for v in [_vector(design, width, {knob: diff[i]})]]
        _dunnett([r for r, _ in family], [v for _, v in family], cov, df, alpha, seed)
        rows += [r for r, _ in family]
        for term in interactions:
            if knob not in term.factors:
                continue
            other = term.factors[1] if term.factors[0] == knob else term.factors[0]
            for j, level in enumerate(design.levels[other]):
                family = []
                for i in others:
                    codes = {knob: diff[i], other: design.coding[other][j]}
                    v = _vector(design, width, {knob: diff[i], term.name: _interaction_part(term, codes)})
                    family.append((_contrast_row(knob, levels[i], levels[base], f"{other}={level}", v, beta, cov,
                                                 df, alpha), v))
                _dunnett([r for r, _ in family], [v for _, v in family], cov, df, alpha, seed)
                rows += [r for r, _ in family]
    return pd.DataFrame(rows, columns=CONTRAST_COLUMNS)


def _interaction_contrasts(design: _Design, baseline: Mapping[str, Any], beta: np.ndarray, cov: np.ndarray,
                           df: float, alpha: float) -> pd.DataFrame:
    rows = []
    for term in (t for t in design.terms if t.kind is TermKind.INTERACTION):
        knob, other = term.factors
        k_levels, o_levels = design.levels[knob], design.levels[other]
        kb, ob = k_levels.index(baseline[knob]), o_levels.index(baseline[other])
        for i in (i for i in range(len(k_levels)) if i != kb):
            for j in (j for j in range(len(o_levels)) if j != ob):
                codes = {knob: design.coding[knob][i] - design.coding[knob][kb],
                         other: design.coding[other][j] - design.coding[other][ob]}
                vector = _vector(design, len(beta), {term.name: _interaction_part(term, codes)})
                row = _contrast_row(knob, k_levels[i], k_levels[kb], "", vector, beta, cov, df, alpha)
                rows.append({"term": term.name, "knob": knob, "level": k_levels[i], "baseline": k_levels[kb],
                             "other": other, "other_level": o_levels[j], "other_baseline": o_levels[ob],
                             **{k: row[k] for k in ("estimate", "se", "df", "t", "p", "ci_low", "ci_high")}})
    return pd.DataFrame(rows, columns=INTERACTION_COLUMNS)


def _emmeans(design: _Design, factors: list[str], beta: np.ndarray, cov: np.ndarray, df: float,
             alpha: float) -> pd.DataFrame:
    width, q = len(beta), float(ss.t.ppf(1 - alpha / 2, df))
    rows = []

    def add(knob: str, level: Any, by: str | None, by_level: Any, vector: np.ndarray) -> None:
        mean, se = design.shift + float(vector @ beta), float(math.sqrt(max(vector @ cov @ vector, 0.0)))
        rows.append({"knob": knob, "level": level, "by": by, "by_level": by_level, "mean": mean, "se": se,
                     "ci_low": mean - q * se, "ci_high": mean + q * se})

    for knob in factors:
        for i, level in enumerate(design.levels[knob]):
            vector = _vector(design, width, {knob: design.coding[knob][i]})
            vector[0] = 1.0
            add(knob, level, None, None, vector)
    for term in (t for t in design.terms if t.kind is TermKind.INTERACTION):
        a, b = term.factors
        for i, level in enumerate(design.levels[a]):
            for j, by_level in enumerate(design.levels[b]):
                codes = {a: design.coding[a][i], b: design.coding[b][j]}
                vector = _vector(design, width, {a: codes[a], b: codes[b],
                                                 term.name: _interaction_part(term, codes)})
                vector[0] = 1.0
                add(a, level, b, by_level, vector)
    return pd.DataFrame(rows, columns=EMMEANS_COLUMNS)


def _estimates(design: _Design, factors: list[str], baseline: Mapping[str, Any], beta: np.ndarray, cov: np.ndarray,
               df: float, alpha: float, seed: int) -> dict[str, pd.DataFrame]:
    """The tables every route derives from the coefficients and their covariance."""
    return {"contrasts": _contrasts(design, factors, baseline, beta, cov, df, alpha, seed),
            "emmeans": _emmeans(design, factors, beta, cov, df, alpha),
            "interactions": _interaction_contrasts(design, baseline, beta, cov, df, alpha),
            "effects": _effects(design, beta, cov, df)}


def _effects(design: _Design, beta: np.ndarray, cov: np.ndarray, df: float) -> pd.DataFrame:
    """Standardised effects of the one-degree-of-freedom terms (high minus low level)."""
    rows = []
    for term in design.terms:
        if term.kind is TermKind.BLOCK or term.columns.stop - term.columns.start != 1:
            continue
        vector = np.zeros(len(beta))
        vector[term.columns] = -2.0 if term.kind is TermKind.MAIN else 2.0   # contr.sum codes the first level +1
        estimate, se = float(vector @ beta), float(math.sqrt(max(vector @ cov @ vector, 0.0)))
        t = estimate / se if se > 0 else math.nan
        rows.append({"term": term.name, "estimate": estimate, "se": se, "t": t,
                     "p": float(2 * ss.t.sf(abs(t), df)) if not math.isnan(t) else math.nan})
    return pd.DataFrame(rows, columns=EFFECT_COLUMNS)


# --------------------------------------------------------------------------------------------
# the public function


def _prepare(data: pd.DataFrame, dv: str, factors: list[str], block: str | None,
             log: bool) -> tuple[pd.DataFrame, np.ndarray, float]:
    """The usable runs, the response on the model's scale minus its shift, and the shift."""
    if isinstance(factors, str):
        factors = [factors]
    if not factors or len(set(factors)) != len(factors):
        raise DataError(f"factors must be a non-empty list of distinct knob columns, got {factors!r}")
    columns = list(factors) + ([block] if block else [])
    check_columns(data, dv, columns, role="factor")
    values = data[dv]
    clean = data.loc[values.notna() & data[columns].notna().all(axis=1), columns]
    y = values[clean.index].to_numpy(dtype=float)
    if len(y) < 2:
        raise DataError(f"{dv!r} has {len(y)} usable value(s); a model needs runs")
    if log:
        if (y <= 0).any():
            raise DataError(f"{dv!r} has values <= 0 ({int((y <= 0).sum())} runs), so it cannot be analysed on the "
                            "log scale; give the metric `scale: linear` (and `sesoi_abs` when its baseline is 0)")
    for factor in factors:
        if clean[factor].nunique() < 2:
            raise DataError(f"knob {factor!r} takes a single level {clean[factor].iloc[0]!r} in the usable runs of "
                            f"{dv!r}; it has no effect to estimate")
    response, shift = log_shifted(y) if log else shifted(y)
    return clean, response, shift


def fit_model(data: pd.DataFrame, dv: str, factors: list[str], *, baseline: Mapping[str, Any] | None = None,
              interactions: str | Sequence[tuple[str, str]] = "auto", block: str | None = None, log: bool = False,
              typ: int | None = None, robust: str = "none", alpha: float = 0.05, seed: int = 0,
              n_perm: int = 999) -> ModelFit:
    """Fit one linear model of ``dv`` on every factor and return its tests, means and contrasts.

    Parameters
    ----------
    data : DataFrame
        Tidy runs; rows with a missing ``dv`` or factor are left out.
    dv : str
        The metric column.
    factors : list of str
        Knob columns (categorical: every distinct value is a level).
    baseline : dict, optional
        Factor -> reference level of the contrasts (default: each factor's first sorted level).
    interactions : {'auto', 'none', 'all'} or list of pairs
        ``'auto'`` estimates each two-factor interaction that is neither aliased with the terms
        already in the model nor partially aliased with the main effects (R² above
        :data:`MAX_ALIAS_R2` over the design's points), all of them or none: none when they would
        leave fewer than :data:`MIN_RESIDUAL_DF` residual degrees of freedom; aliased ones are named
        in the terms' ``aliases`` column.
    block : str, optional
        An additive blocking column (never interacting).
    log : bool
        Fit ``log(dv)``: effects become log ratios (computed as ``log1p((y - c) / c)``, exact
        for values far from 0 such as ``1e12 + 0.4``).
    typ : {2, 3}, optional
        Sums of squares; default 2 for balanced (orthogonal) data, else 3.
    robust : {'none', 'auto', 'hc3', 'permutation'}
        ``'auto'`` checks the residuals (Shapiro–Wilk, Brown–Forsythe by knob) and switches to a
        Freedman–Lane permutation test (non-normal) or HC3 Wald tests (uneven variance).
    alpha, seed, n_perm
        Level of the intervals; seed of the permutations and of the Dunnett integration.

    Raises
    ------
    DataError
        Unknown columns, a factor with one level, non-positive values with ``log``, confounded
        main effects, or more parameters than runs in a design that is not two-level.
    """
    if typ not in (None, 2, 3):
        raise DataError(f"typ must be 2 or 3 (or None to choose from the balance), got {typ!r}")
    if robust not in ("none", "auto", "hc3", "permutation"):
        raise DataError(f"robust must be 'none', 'auto', 'hc3' or 'permutation', got {robust!r}")
    factors = [factors] if isinstance(factors, str) else list(factors)
    clean, y, shift = _prepare(data, dv, factors, block, log)
    levels = {f: sorted_levels(clean[f]) for f in factors + ([block] if block else [])}
    baseline = {f: (baseline or {}).get(f, levels[f][0]) for f in factors}
    for factor in factors:
        if baseline[factor] not in levels[factor]:
            raise DataError(f"baseline {baseline[factor]!r} of {factor!r} is not among its usable levels {levels[factor]}")
    design = _Design(y=y, levels=levels, codes={f: encode(clean[f], levels[f]) for f in levels},
                     coding={f: contr_sum(len(levels[f])) for f in levels}, shift=shift)
    if block and len(levels[block]) > 1:
        design.add(block, TermKind.BLOCK, (block,))
    for factor in factors:
        design.add(factor, TermKind.MAIN, (factor,))
    x_main = design.matrix()
    if _rank(x_main) < x_main.shape[1]:
        raise DataError(f"the main effects of {factors} are confounded in the usable runs of {dv!r} (two knobs always "
                        "change together, or a level combination is missing); run the full design, or screen fewer knobs")
    notes: list[str] = []
    aliases: dict[str, list[str]] = {}
    _, points = np.unique(np.column_stack([design.codes[f] for f in factors]), axis=0, return_index=True)
    for a, b in _interaction_pairs(design, factors, interactions, points, notes, aliases):
        design.add(f"{a}:{b}", TermKind.INTERACTION, (a, b))
    x = design.matrix()
    n, p = x.shape
    if _rank(x) < p:
        raise DataError(f"the model of {dv!r} with interactions {interactions!r} is not estimable from these runs (its "
                        "terms are aliased); use interactions: auto")
    if n - p < 1:
        two_level = all(len(levels[f]) == 2 for f in factors)
        if two_level and interactions in ("auto", "none"):
            return _lenth_fit(design, factors, baseline, alpha, seed, log, notes, aliases)
        raise DataError(f"the model of {dv!r} has {p} parameters but only {n} usable runs, so no residual degrees "
                        "of freedom are left to test it; add replicates or use fewer interactions")
    return _ols_fit(design, clean, factors, baseline, typ, robust, alpha, seed, n_perm, log, notes, aliases)


def _ols_fit(design: _Design, clean: pd.DataFrame, factors: list[str], baseline: Mapping[str, Any], typ: int | None,
             robust: str, alpha: float, seed: int, n_perm: int, log: bool, notes: list[str],
             aliases: dict[str, list[str]]) -> ModelFit:
    import statsmodels.api as sm

    x = design.matrix()
    n, p = x.shape
    df_res = float(n - p)
    model, fit_warnings = quietly(lambda: sm.OLS(design.y, x).fit())
    influence = model.get_influence()
    leverage = np.asarray(influence.hat_matrix_diag)
    # a run with leverage 1 has no studentized residual: NumPy's division warning says nothing more
    studentized = np.asarray(quietly(lambda: influence.resid_studentized_internal)[0])
    shapiro_p, shapiro_notes = _shapiro_p(studentized[leverage < 1 - 1e-8])
    route, reason, checks = _route(shapiro_p, np.asarray(model.resid), design, factors, leverage, robust)
    notes = notes + shapiro_notes + [f"model fit (statsmodels): {message}" for message in fit_warnings]
    balanced = _balanced(design, x)
    typ = typ or (2 if balanced else 3)
    rss = float(model.ssr)
    cov = np.asarray(model.cov_params())
    if route == "hc3_wald":
        robust_fit, hc3_warnings = quietly(model.get_robustcov_results, cov_type="HC3")
        cov = np.asarray(robust_fit.cov_params())
        notes += [f"HC3 covariance (statsmodels): {message}" for message in hc3_warnings]
    rng = np.random.default_rng(seed)
    rows = []
    for term in design.terms:
        width = term.columns.stop - term.columns.start
        ss_term = max(_type_ss(design, term, typ, rss), 0.0)   # a difference of RSS: never below 0
        f_value = (ss_term / width) / (rss / df_res) if rss > 0 else (math.inf if ss_term > 0 else math.nan)
        if route == "hc3_wald":
            higher = [t.columns for t in design.terms if _contains(term, t)] if typ == 2 else []
            f_value = _wald(model.params, cov, term.columns, higher)[0]
        p_value = float(ss.f.sf(f_value, width, df_res))
        if route == "freedman_lane":
            f_value = _wald(model.params, np.asarray(model.cov_params()), term.columns)[0]
            p_value = _freedman_lane(design, x, term, f_value, df_res, rng, n_perm)
        rows.append({"term": term.name, "kind": term.kind.value, "df1": float(width), "df2": df_res, "statistic": f_value,
                     "p": p_value, "partial_eta2": ss_term / (ss_term + rss) if ss_term + rss > 0 else math.nan,
                     "test": f"ols_type{typ}" if route == "ols" else route,
                     "aliases": " = ".join(aliases.get(term.name, []))})
    test = f"ols_type{typ}" if route == "ols" else route
    if route == "ols":
        reason += f": type {'II' if typ == 2 else 'III'} F tests" + ("" if balanced else " (unbalanced data)")
    residuals = pd.DataFrame({"row": clean.index, "fitted": design.shift + model.fittedvalues, "residual": model.resid,
                              "studentized": studentized, "leverage": leverage}, columns=RESIDUAL_COLUMNS)
    return ModelFit(terms=pd.DataFrame(rows, columns=TERM_COLUMNS), residuals=residuals, residual_df=df_res,
                    test=test, reason=reason, scale="log" if log else "linear", assumptions=checks, notes=notes,
                    **_estimates(design, factors, baseline, np.asarray(model.params), cov, df_res, alpha, seed))


def _lenth_fit(design: _Design, factors: list[str], baseline: Mapping[str, Any], alpha: float, seed: int, log: bool,
               notes: list[str], aliases: dict[str, list[str]]) -> ModelFit:
    """A saturated two-level design: every term's effect is judged against Lenth's (1989) PSE."""
    x = design.matrix()
    beta = np.linalg.lstsq(x, design.y, rcond=None)[0]
    effects = np.array([2.0 * beta[t.columns][0] for t in design.terms if t.kind is not TermKind.BLOCK])
    pse = lenth_pse(effects)
    m = len(effects)
    d = m / 3.0
    # an effect is 2 beta and PSE estimates its standard error; orthogonal +-1 columns give every
    # coefficient (the intercept too) the variance (PSE / 2)^2 and no covariance
    cov = np.eye(len(beta)) * (pse / 2.0) ** 2
    rows = []
    for term in design.terms:
        if term.kind is TermKind.BLOCK:
            continue
        t = 2.0 * beta[term.columns][0] / pse if pse > 0 else math.nan
        rows.append({"term": term.name, "kind": term.kind.value, "df1": 1.0, "df2": d, "statistic": t * t,
                     "p": float(2 * ss.t.sf(abs(t), d)) if not math.isnan(t) else math.nan, "partial_eta2": math.nan,
                     "test": "lenth", "aliases": " = ".join(aliases.get(term.name, []))})
    reason = (f"no residual degrees of freedom (an unreplicated two-level design): each of the {m} effects is judged "
              f"against Lenth's pseudo standard error (PSE={pse:.3g}, {d:.3g} df); this rests on effect sparsity, "
              "the assumption that most effects are null")
    return ModelFit(terms=pd.DataFrame(rows, columns=TERM_COLUMNS), residuals=pd.DataFrame(columns=RESIDUAL_COLUMNS),
                    residual_df=0.0, test="lenth", reason=reason, scale="log" if log else "linear",
                    assumptions={"pse": pse, "lenth_df": d}, notes=notes,
                    **_estimates(design, factors, baseline, beta, cov, d, alpha, seed))
