"""How a metric responds over each knob's range: the analyses of space-filling and range designs.

:func:`range_effects` reads a Latin hypercube (or any design whose knobs take many numeric values)
with one regression of the metric on every knob at once: a linear and, when the runs allow it, a
quadratic term per knob in the knob's value coded to [-1, 1] over its observed range. It returns
each knob's F test and the predicted change from the knob's baseline value to every point of its
range, with confidence intervals, so a knob can be ranked by the size of its effect over the range
and compared with the smallest effect of interest. :func:`morris_effects` reads a Morris design
(SALib's elementary effects: μ, μ* and σ per knob).

Both take the tidy run table (one row per run, knob columns and metric columns) and return tidy
DataFrames whose columns are fixed (:data:`TERMS_COLUMNS`, :data:`CURVE_COLUMNS`,
:data:`MORRIS_COLUMNS`). Runs whose metric is missing (failed runs) are left out; every other
problem is a :class:`~tunelab.errors.DataError` that says what to do.

Examples
--------
>>> import numpy as np, pandas as pd
>>> rng = np.random.default_rng(1)
>>> df = pd.DataFrame({"a": rng.uniform(0, 100, 30), "b": rng.uniform(0, 100, 30)})
>>> df["y"] = 50 + 0.2 * df["a"] + rng.normal(0, 1, 30)
>>> terms, curves = range_effects(df, "y", ["a", "b"], baseline={"a": 0, "b": 0})
>>> terms["knob"].tolist(), terms["shape"].tolist()
(['a', 'b'], ['quadratic', 'quadratic'])
>>> round(float(terms["change_max"].iloc[0]))             # +0.2 per unit over ~100 units
20
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as ss

from tunelab.errors import DataError
from tunelab.stats._validate import check_columns
from tunelab.stats.numerics import log_shifted, shifted

#: columns of the first table of :func:`range_effects`, one row per knob, sorted by ``rank`` (1 = the
#: largest predicted change from the baseline anywhere in the range, ``max(|change_max|, |change_min|)``):
#: ``shape`` (``linear`` | ``quadratic``), ``df1``, ``df2``, ``statistic`` (F of the knob's terms) and ``p``;
#: the coefficients ``linear``, ``quadratic`` (NaN when linear) on the coded scale with their
#: ``_low``/``_high`` interval; ``baseline``, ``x_min``, ``x_max`` (the observed range); ``change_max`` (the
#: largest predicted increase over the grid), its interval ``change_max_low``/``change_max_high`` and where
#: it is, ``x_at_max``; the same for the largest decrease (``change_min``…, ``x_at_min``); ``max_abs_ci``, the
#: largest absolute bound of the ``1 - 2 alpha`` intervals over the grid: the knob's effect is smaller than
#: a SESOI everywhere in the range (equivalence) when ``max_abs_ci`` is below it
TERMS_COLUMNS = ["knob", "rank", "shape", "df1", "df2", "statistic", "p",
                 "linear", "linear_low", "linear_high", "quadratic", "quadratic_low", "quadratic_high",
                 "baseline", "x_min", "x_max",
                 "change_max", "change_max_low", "change_max_high", "x_at_max",
                 "change_min", "change_min_low", "change_min_high", "x_at_min", "max_abs_ci"]
#: columns of the second table of :func:`range_effects`, ``grid`` rows per knob: the predicted change
#: from the baseline at knob value ``x``, its standard error and ``1 - alpha`` interval
CURVE_COLUMNS = ["knob", "x", "estimate", "se", "ci_low", "ci_high"]
#: columns of :func:`morris_effects`, one row per knob
MORRIS_COLUMNS = ["knob", "mu", "mu_star", "sigma", "mu_star_conf"]
#: residual degrees of freedom the model must keep, after all its terms, to include quadratic terms
MIN_QUADRATIC_DF = 3
#: most grid points per response curve
MAX_GRID = 10_001
#: bootstrap resamples allowed for the confidence interval of μ*
MIN_RESAMPLES = 100
MAX_RESAMPLES = 100_000
SCALES = ("linear", "log")


# --------------------------------------------------------------------------------------------
# input checks


def _knob_list(knobs: Sequence[str]) -> list[str]:
    if isinstance(knobs, str):
        return [knobs]
    knobs = list(knobs)
    if not knobs:
        raise DataError("knobs is empty; name at least one knob column")
    for i, knob in enumerate(knobs):
        if knob in knobs[:i]:
            raise DataError(f"knob {knob!r} is listed twice in knobs; list each knob column once")
    return knobs


def _numeric(values: pd.Series, what: str) -> np.ndarray:
    """A column as float64; booleans count as 0/1, anything else not numeric is a DataError."""
    if pd.api.types.is_bool_dtype(values) or pd.api.types.is_numeric_dtype(values):
        return values.to_numpy(dtype=np.float64)
    try:
        return pd.to_numeric(values.map(lambda v: float(v) if isinstance(v, bool) else v),
                             errors="raise").to_numpy(dtype=np.float64)
    except (ValueError, TypeError):
        sample = next((v for v in values.tolist() if not isinstance(v, (int, float, np.number))), values.iloc[0])
        raise DataError(f"{what} is not numeric (values like {sample!r}); a response over a range needs numeric "
                        "knob values: analyse word or multi-value knobs with the factorial model") from None


def _runs(data: pd.DataFrame, dv: str, knobs: list[str], log_y: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` of the usable runs: knob values as floats, and ``dv`` (its log with ``log_y``) shifted
    by one of its observations (:func:`tunelab.stats.numerics.shifted`): every result here is a change
    or a slope, which the shift leaves alone, and a large constant offset then costs no digits."""
    check_columns(data, dv, knobs, role="knob")
    values = data[dv]
    usable = data[values.notna()]
    y = usable[dv].to_numpy(dtype=np.float64)
    if not np.isfinite(y).all():
        raise DataError(f"dv column {dv!r} has infinite values; drop or fix those rows")
    if log_y and len(y) and y.min() <= 0:
        raise DataError(f"dv column {dv!r} has values <= 0 (smallest {y.min():g}), so it cannot be analysed on the "
                        "log scale; use log_y=False (the linear scale) for this metric")
    columns = []
    for knob in knobs:
        missing = int(usable[knob].isna().sum())
        if missing:
            raise DataError(f"knob column {knob!r} has {missing} missing value(s) in runs with a {dv!r} value; "
                            "drop those rows or fix the store")
        columns.append(_numeric(usable[knob], f"knob column {knob!r}"))
    x = np.column_stack(columns) if columns else np.empty((len(y), 0))
    return x, (log_shifted(y)[0] if log_y else shifted(y)[0])


def _check_level(alpha: float, name: str, upper: float) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < upper:
        raise DataError(f"{name} must be a number between 0 and {upper:g}, got {alpha!r}; 0.05 is the usual choice")


def _check_int(value: Any, name: str, low: int, high: int, hint: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise DataError(f"{name} must be a whole number from {low} to {high:,}, got {value!r}; {hint}")


# --------------------------------------------------------------------------------------------
# regression over the ranges


def _scales(x_scale: Mapping[str, str] | None, knobs: list[str]) -> dict[str, str]:
    scales = dict(x_scale or {})
    for knob, scale in scales.items():
        if knob not in knobs:
            raise DataError(f"x_scale names {knob!r}, which is not one of knobs {knobs}; remove it or add the knob")
        if scale not in SCALES:
            raise DataError(f"x_scale[{knob!r}] must be 'linear' or 'log', got {scale!r}")
    return {knob: scales.get(knob, "linear") for knob in knobs}


def _baseline_value(baseline: Mapping[str, Any], knob: str, scale: str) -> float:
    if not isinstance(baseline, Mapping) or knob not in baseline:
        raise DataError(f"baseline has no value for knob {knob!r}; pass the design's baseline "
                        "(knob -> value, design.baseline)")
    value = baseline[knob]
    if isinstance(value, bool):
        value = float(value)
    if not isinstance(value, (int, float, np.number)) or not math.isfinite(float(value)):
        raise DataError(f"baseline[{knob!r}] = {value!r} is not a finite number; a response over a range needs a "
                        "numeric baseline")
    if scale == "log" and value <= 0:
        raise DataError(f"baseline[{knob!r}] = {value!r} is not positive, so it has no place on the log scale; "
                        f"use x_scale[{knob!r}] = 'linear'")
    return float(value)


def _first_confounded(columns: list[np.ndarray], names: list[str]) -> str | None:
    """The first column that adds no rank to the ones before it (intercept first), or None."""
    rank = 0
    for i in range(len(columns)):
        new = int(np.linalg.matrix_rank(np.column_stack(columns[:i + 1])))
        if new == rank:
            return names[i]
        rank = new
    return None


def range_effects(data: pd.DataFrame, dv: str, knobs: Sequence[str], baseline: Mapping[str, Any], *,
                  x_scale: Mapping[str, str] | None = None, log_y: bool = False, alpha: float = 0.05,
                  grid: int = 21) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One regression of ``dv`` on every knob over its observed range, and each knob's response curve.

    Each knob's value ``x`` (or ``log x`` where ``x_scale[knob] == "log"``) is coded to
    ``c = 2 (x - min) / (max - min) - 1`` in [-1, 1] over the values the usable runs took. The
    model is ``y = b0 + Σ (lin_k c_k + quad_k c_k²)`` fitted by least squares on all usable runs
    (``y`` is ``log dv`` with ``log_y``): a quadratic term for every knob with three or more
    distinct values when :data:`MIN_QUADRATIC_DF` residual degrees of freedom remain after all
    terms, else linear terms only (``shape`` says which). Each knob is tested with the F test of
    its own terms given all the others (the extra-sum-of-squares test; statsmodels
    ``OLS(...).f_test``). A knob's predicted change from its baseline value ``c0`` to ``c`` is
    ``lin (c - c0) + quad (c² - c0²)``; its standard error comes from the model's covariance and
    the intervals use Student's t with the residual degrees of freedom. A baseline outside the
    observed range is extrapolated to.

    Parameters
    ----------
    data : DataFrame
        Tidy runs: one row per run with the knob columns and ``dv``. Rows whose ``dv`` is missing
        (failed runs) are left out.
    dv : str
        The metric column.
    knobs : list of str
        Knob columns to regress on; numeric (booleans count as 0/1), each with two or more values.
    baseline : mapping
        Knob -> baseline value; changes are predicted against it.
    x_scale : mapping, optional
        Knob -> ``"linear"`` (default) or ``"log"`` (regress on ``log x``: ranges given with
        ``scale: log``).
    log_y : bool
        Fit ``log dv``: changes are then log ratios (``100 (exp(change) - 1)`` is a percentage).
    alpha : float
        ``1 - alpha`` intervals for the coefficients and the changes; ``max_abs_ci`` uses
        ``1 - 2 alpha`` intervals (an equivalence test at level ``alpha``).
    grid : int
        Points per response curve, evenly spaced in ``c`` (geometrically in ``x`` on the log scale).

    Returns
    -------
    terms, curves : DataFrame
        :data:`TERMS_COLUMNS` (one row per knob, by ``rank``) and :data:`CURVE_COLUMNS` (``grid``
        rows per knob in that order); the comments of those constants define every column.

    Raises
    ------
    DataError
        Bad columns, a knob with one value, a bad baseline, fewer runs than the linear model needs
        (a slope per knob, the intercept and one for the noise), or knobs confounded in these runs.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"a": [1, 2, 3, 4, 5, 6], "y": [10.0, 12.1, 13.9, 16.0, 18.1, 19.9]})
    >>> terms, curves = range_effects(df, "y", ["a"], baseline={"a": 1}, grid=6)
    >>> terms["shape"].iloc[0], round(float(terms["change_max"].iloc[0]), 1), float(terms["x_at_max"].iloc[0])
    ('quadratic', 9.9, 6.0)
    """
    knobs = _knob_list(knobs)
    _check_level(alpha, "alpha", 0.5)
    _check_int(grid, "grid", 2, MAX_GRID, "21 points draw a smooth curve")
    scales = _scales(x_scale, knobs)
    x, y = _runs(data, dv, knobs, log_y)
    _check_enough_runs(x, dv)
    axes = [_coded_axis(x[:, j], knob, scales[knob], baseline) for j, knob in enumerate(knobs)]
    design, index, shapes = _range_design([axis.coded for axis in axes], knobs)
    import statsmodels.api as sm

    fit = sm.OLS(y, design).fit()
    grid_c = np.linspace(-1.0, 1.0, int(grid))
    found = [_knob_response(fit, index[j], axis, grid_c, alpha) for j, axis in enumerate(axes)]
    rows = [{"knob": knob, "rank": 0, "shape": shapes[j], **row,
             "baseline": _baseline_value(baseline, knob, scales[knob])} for j, (knob, (row, _)) in
            enumerate(zip(knobs, found))]
    return _ranked(rows, [curve.assign(knob=knob) for knob, (_, curve) in zip(knobs, found)])


def _check_enough_runs(x: np.ndarray, dv: str) -> None:
    """DataError unless the runs ``x`` (one column per knob) can fit the linear model and its noise."""
    n, k = x.shape
    needed = k + 2
    if n < needed:
        raise DataError(f"{n} usable runs of {dv!r} are too few for {k} knob(s): the linear model has {k + 1} "
                        f"parameters (an intercept and a slope per knob) and needs at least {needed} runs to "
                        f"estimate the noise; run more configurations (a Latin hypercube of samples >= {needed}) "
                        "or analyse fewer knobs")


def _ranked(rows: list[dict[str, Any]], curves: list[pd.DataFrame]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The terms and curves ranked by each knob's largest predicted change (ties keep the knobs' order)."""
    size = [max(abs(row["change_max"]), abs(row["change_min"])) for row in rows]
    order = sorted(range(len(rows)), key=lambda j: -size[j])
    for rank, j in enumerate(order, start=1):
        rows[j]["rank"] = rank
    terms = pd.DataFrame([rows[j] for j in order], columns=TERMS_COLUMNS)
    return terms, pd.concat([curves[j] for j in order], ignore_index=True)[CURVE_COLUMNS]


@dataclass(frozen=True)
class _Axis:
    """One knob's values coded to [-1, 1] over its observed range (on its own scale)."""

    values: np.ndarray      # the knob's values in the runs
    coded: np.ndarray       # c = 2 (t - lo) / (hi - lo) - 1, t = x or log x
    centre: float           # the baseline's coded value
    low: float              # the range on the fitted scale (log x on the log scale)
    high: float
    log: bool


def _coded_axis(values: np.ndarray, knob: str, scale: str, baseline: Mapping[str, Any]) -> _Axis:
    """The knob's coded axis; DataError for a log scale with values <= 0 or a single value."""
    if scale == "log" and (values <= 0).any():
        raise DataError(f"knob {knob!r} has values <= 0 (smallest {values.min():g}), so it has no log scale; "
                        f"use x_scale[{knob!r}] = 'linear'")
    t = np.log(values) if scale == "log" else values
    lo, hi = float(t.min()), float(t.max())
    if not hi > lo:
        raise DataError(f"knob {knob!r} takes the single value {values[0]:g} in the {len(values)} usable runs, so no "
                        "effect over a range can be estimated; drop it from knobs")
    base = _baseline_value(baseline, knob, scale)
    tb = math.log(base) if scale == "log" else base
    return _Axis(values, 2 * (t - lo) / (hi - lo) - 1, 2 * (tb - lo) / (hi - lo) - 1, lo, hi, scale == "log")


def _range_design(coded: list[np.ndarray], knobs: list[str]) -> tuple[np.ndarray, list[list[int]], list[str]]:
    """The model matrix (intercept, linear terms, then the quadratic ones), each knob's columns, and
    its shape: quadratic for knobs with three or more values while :data:`MIN_QUADRATIC_DF` residual
    degrees of freedom remain and the curvature is not confounded, else linear."""
    n, k = len(coded[0]), len(coded)
    curvy = [j for j in range(k) if len(np.unique(coded[j])) >= 3]
    shapes = ["linear"] * k
    if n - (1 + k + len(curvy)) >= MIN_QUADRATIC_DF:
        for j in curvy:
            shapes[j] = "quadratic"
    names = ["(intercept)"] + [f"{knob}" for knob in knobs]
    columns = [np.ones(n)] + coded
    culprit = _first_confounded(columns, names)
    if culprit is not None:
        position = names.index(culprit)
        others = ", ".join(repr(name) for name in knobs[:position - 1]) or "the intercept"
        raise DataError(f"knob {culprit!r} is confounded with {others} in these runs (its values are a linear "
                        "combination of theirs), so their effects cannot be separated; use a design that varies "
                        "the knobs independently, such as a Latin hypercube")
    squares = [coded[j] ** 2 for j in range(k) if shapes[j] == "quadratic"]
    if squares and np.linalg.matrix_rank(np.column_stack(columns + squares)) < len(columns) + len(squares):
        shapes = ["linear"] * k           # curvature confounded in these runs: keep the linear model
        squares = []
    index: list[list[int]] = [[1 + j] for j in range(k)]
    for position, j in enumerate(j for j in range(k) if shapes[j] == "quadratic"):
        index[j].append(1 + k + position)
    return np.column_stack(columns + squares), index, shapes


def _knob_response(fit: Any, cols: list[int], axis: _Axis, grid_c: np.ndarray,
                   alpha: float) -> tuple[dict[str, Any], pd.DataFrame]:
    """One knob's test, coefficients and predicted change from its baseline over the grid (a
    :data:`TERMS_COLUMNS` row without knob, rank, shape and baseline) and its curve."""
    beta, cov, df2, rss = fit.params, np.asarray(fit.cov_params()), int(fit.df_resid), float(fit.ssr)
    t_ci = float(ss.t.ppf(1 - alpha / 2, df2))
    t_eq = float(ss.t.ppf(1 - alpha, df2))
    width = len(beta)
    b = beta[cols]
    if rss > 0:
        restriction = np.zeros((len(cols), width))
        restriction[np.arange(len(cols)), cols] = 1.0
        test = fit.f_test(restriction)
        statistic, p = float(np.squeeze(test.fvalue)), float(test.pvalue)
    else:                      # an exact fit: no noise to test against
        statistic = math.inf if np.any(b != 0) else math.nan
        p = 0.0 if statistic == math.inf else math.nan
    se = np.sqrt(np.diag(cov)[cols])
    contrast = np.zeros((len(grid_c), width))
    contrast[:, cols[0]] = grid_c - axis.centre
    if len(cols) == 2:
        contrast[:, cols[1]] = grid_c ** 2 - axis.centre ** 2
    estimate = contrast @ beta
    se_curve = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", contrast, cov, contrast), 0.0))
    t_values = axis.low + (grid_c + 1) / 2 * (axis.high - axis.low)
    x_grid = np.exp(t_values) if axis.log else t_values
    x_grid[0], x_grid[-1] = axis.values.min(), axis.values.max()        # exact ends, free of exp/log rounding
    hi_i, lo_i = int(np.argmax(estimate)), int(np.argmin(estimate))
    quadratic = len(cols) == 2

    def bounds(name: str, value: float, half: float) -> dict[str, float]:
        return {name: float(value), f"{name}_low": float(value - half), f"{name}_high": float(value + half)}

    row = {"df1": len(cols), "df2": df2, "statistic": statistic, "p": p, **bounds("linear", b[0], t_ci * se[0]),
           **(bounds("quadratic", b[1], t_ci * se[1]) if quadratic else
              {"quadratic": math.nan, "quadratic_low": math.nan, "quadratic_high": math.nan}),
           "x_min": float(axis.values.min()), "x_max": float(axis.values.max()),
           **bounds("change_max", estimate[hi_i], t_ci * se_curve[hi_i]), "x_at_max": float(x_grid[hi_i]),
           **bounds("change_min", estimate[lo_i], t_ci * se_curve[lo_i]), "x_at_min": float(x_grid[lo_i]),
           "max_abs_ci": float(np.max(np.abs(estimate) + t_eq * se_curve))}
    curve = pd.DataFrame({"x": x_grid, "estimate": estimate, "se": se_curve, "ci_low": estimate - t_ci * se_curve,
                          "ci_high": estimate + t_ci * se_curve})
    return row, curve


# --------------------------------------------------------------------------------------------
# Morris elementary effects


def _bounds(bounds: Mapping[str, Any], knobs: list[str]) -> list[tuple[float, float]]:
    out = []
    for knob in knobs:
        if not isinstance(bounds, Mapping) or knob not in bounds:
            raise DataError(f"bounds has no (low, high) for knob {knob!r}; pass the design's knob ranges")
        pair = bounds[knob]
        try:
            low, high = (float(v) for v in pair)
        except (TypeError, ValueError):
            raise DataError(f"bounds[{knob!r}] must be a pair (low, high) of numbers, got {pair!r}") from None
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise DataError(f"bounds[{knob!r}]: `low < high` must hold for finite numbers, but got ({low=}, {high=})")
        out.append((low, high))
    return out


def _describe(knobs: list[str], values: np.ndarray) -> str:
    return ", ".join(f"{knob}={value:g}" for knob, value in zip(knobs, values))


def morris_effects(points: pd.DataFrame, data: pd.DataFrame, dv: str, knobs: Sequence[str],
                   bounds: Mapping[str, tuple[float, float]], *, levels: int = 4, log_y: bool = False, seed: int = 0,
                   num_resamples: int = 1000, conf_level: float = 0.95) -> pd.DataFrame:
    """Morris' elementary effects of each knob (``SALib.analyze.morris.analyze``).

    ``points`` are the Morris design's points in trajectory order (the ``morris`` generator's
    ``info["points"]``, repeats kept): trajectories of ``len(knobs) + 1`` points in which each
    point moves one knob. Each point's response is the mean of ``dv`` (of ``log dv`` with
    ``log_y``) over the usable runs of ``data`` whose knob values equal the point's. An elementary
    effect is a trajectory's change in the response divided by Morris' step
    Δ = ``levels / (2 (levels - 1))`` of the unit range, so it estimates the change over the
    knob's whole range (``bounds``): μ is their mean, μ* the mean of their absolute values (the
    importance: compare it with the SESOI, a log ratio with ``log_y``), σ their standard deviation
    (large against μ*: curvature or interactions), ``mu_star_conf`` the half-width of a bootstrap
    ``conf_level`` interval of μ*.

    Parameters
    ----------
    points : DataFrame
        One column per knob, ``r (len(knobs) + 1)`` rows in trajectory order, ``r >= 2``.
    data : DataFrame
        Tidy runs with the knob columns and ``dv``; rows whose ``dv`` is missing are left out.
    dv : str
        The metric column.
    knobs : list of str
        Knob columns (numeric: booleans count as 0/1).
    bounds : mapping
        Knob -> ``(low, high)``, the design's range (``info["ranges"]``); every point lies in it.
    levels : int
        The Morris grid levels of the design (``info["levels"]``), even.
    log_y : bool
        Analyse ``log dv``.
    seed, num_resamples, conf_level
        The bootstrap of ``mu_star_conf``.

    Returns
    -------
    DataFrame
        :data:`MORRIS_COLUMNS`, one row per knob, sorted by ``mu_star`` (largest first).

    Raises
    ------
    DataError
        Points not in trajectories of one-knob moves, a point outside ``bounds``, a point with no
        usable run (naming its configuration), or bad columns and arguments.

    Examples
    --------
    >>> import pandas as pd
    >>> pts = pd.DataFrame({"a": [0, 1, 1, 1, 0, 0], "b": [0, 0, 1, 1, 1, 0]})
    >>> runs = pts.assign(y=10 * pts["a"] + 2 * pts["b"])
    >>> out = morris_effects(pts, runs, "y", ["a", "b"], {"a": (0, 1), "b": (0, 1)}, levels=2)
    >>> out[["knob", "mu_star"]].to_dict("list")
    {'knob': ['a', 'b'], 'mu_star': [10.0, 2.0]}
    """
    knobs = _knob_list(knobs)
    k = len(knobs)
    matrix, box = _morris_points(points, knobs, bounds, levels, seed, num_resamples, conf_level)
    response = _point_responses(matrix, data, dv, knobs, log_y)

    from SALib.analyze import morris                 # deferred: SALib is needed by this analysis only

    unit = np.column_stack([(matrix[:, j] - low) / (high - low) for j, (low, high) in enumerate(box)])
    problem = {"num_vars": k, "names": list(knobs), "bounds": [[0.0, 1.0]] * k}
    result = morris.analyze(problem, unit, response, num_resamples=int(num_resamples), conf_level=float(conf_level),
                            num_levels=int(levels), seed=int(seed))
    out = pd.DataFrame({"knob": list(knobs),
                        **{column: np.asarray(result[column], dtype=np.float64) for column in MORRIS_COLUMNS[1:]}})
    return out.sort_values("mu_star", ascending=False, kind="stable").reset_index(drop=True)


def _morris_points(points: pd.DataFrame, knobs: list[str], bounds: Mapping[str, tuple[float, float]], levels: int,
                   seed: int, num_resamples: int, conf_level: float) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """The checked arguments of :func:`morris_effects`: the points as a matrix (one column per knob)
    and the bounds; DataError for anything that is not a whole Morris design inside its bounds."""
    k = len(knobs)
    if not isinstance(points, pd.DataFrame):
        raise DataError(f"points must be a pandas DataFrame of the design's points, got {type(points).__name__}; "
                        "pass pd.DataFrame(info['points']) of the morris design")
    for knob in knobs:
        if knob not in points.columns:
            raise DataError(f"points have no column {knob!r}; they have: {', '.join(map(str, points.columns))}")
    _check_int(levels, "levels", 2, 10_000, "pass the design's info['levels'] (4 by default)")
    if levels % 2:
        raise DataError(f"levels must be even (the Morris grid of the design), got {levels}")
    _check_int(num_resamples, "num_resamples", MIN_RESAMPLES, MAX_RESAMPLES, "1000 is plenty for a 95 % interval")
    _check_int(seed, "seed", 0, 2**63 - 1, "any fixed number makes the bootstrap repeatable")
    _check_level(conf_level, "conf_level", 1.0)
    size = k + 1
    if len(points) % size or len(points) < 2 * size:
        raise DataError(f"{len(points)} points do not make two or more whole trajectories of {size} points "
                        f"({k} knobs + 1); pass every point of the morris design in order (info['points'])")
    box = _bounds(bounds, knobs)
    matrix = np.column_stack([_numeric(points[knob], f"points column {knob!r}") for knob in knobs])
    for j, (knob, (low, high)) in enumerate(zip(knobs, box)):
        column = matrix[:, j]
        outside = np.flatnonzero((column < low) | (column > high) | np.isnan(column))
        if len(outside):
            raise DataError(f"point {int(outside[0])} has {knob}={column[outside[0]]:g}, outside bounds [{low:g}, "
                            f"{high:g}]; pass the bounds of the design that produced the points")
    for start in range(0, len(matrix), size):
        moves = (np.diff(matrix[start:start + size], axis=0) != 0).sum(axis=1)
        if (moves != 1).any():
            i = start + int(np.flatnonzero(moves != 1)[0])
            raise DataError(f"points {i} and {i + 1} differ in {int(moves[i - start])} knobs, but consecutive "
                            f"points of a Morris trajectory move exactly one; pass the design's points unchanged "
                            "and in order (info['points'])")
    return matrix, box


def _point_responses(matrix: np.ndarray, data: pd.DataFrame, dv: str, knobs: list[str], log_y: bool) -> np.ndarray:
    """Each Morris point's response: the mean of ``dv`` (``log dv``) over the usable runs at its configuration."""
    x, y = _runs(data, dv, knobs, log_y)
    size = len(knobs) + 1
    sums: dict[tuple[float, ...], list[float]] = {}
    for key, value in zip(map(tuple, x), y):
        entry = sums.setdefault(key, [0.0, 0])
        entry[0] += value
        entry[1] += 1
    response = np.empty(len(matrix))
    for i, row in enumerate(matrix):
        entry = sums.get(tuple(row))
        if entry is None:
            raise DataError(f"configuration {_describe(knobs, row)} (point {i}, trajectory {i // size} of the Morris "
                            f"design) has no usable run of {dv!r}; every point of a trajectory is needed for its "
                            "elementary effects: re-run that configuration, or drop its trajectory from points")
        response[i] = entry[0] / entry[1]
    return response
