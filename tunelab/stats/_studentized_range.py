"""The studentized range distribution: vectorised ``cdf``, ``sf`` and ``ppf``.

Same distribution and same integral as ``scipy.stats.studentized_range`` (Lund & Lund 1983;
Batista & Castro, eq. 3):

    F(q; k, df) = ∫_0^∞ f_df(s) W(q s) ds,   W(w) = k ∫ φ(z) [Φ(z + w) - Φ(z)]^(k-1) dz,

where ``f_df`` is the density of ``sqrt(chi2_df / df)`` and ``W`` the cdf of the range of ``k``
standard normal variables. scipy evaluates it with adaptive ``nquad`` (~8 ms per value, a ``ppf``
needs ~13 of them); here both integrals use fixed composite Gauss–Legendre rules evaluated with
numpy in one shot (~0.1 ms per value), and ``ppf`` is a safeguarded Newton iteration started from
statsmodels' ``qsturng`` approximation (3-4 digits; two or three Newton steps follow). Why, and
how closely it matches scipy and a 30-digit mpmath evaluation, is in docs/stats-notes.md
("Studentized range speed"); tests/stats/test_speed_paths.py checks both.

As scipy, ``df >= 100000`` uses the ``df = ∞`` form ``F = W(q)``. ``k = 2`` uses the exact identity
``F(q; 2, df) = 2 T_df(q / √2) - 1`` with Student's t (normal from df = 100000 on, as scipy);
``df < 1`` (which no t-based family produces) is passed to scipy.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from scipy import optimize
from scipy import special as sc
from scipy import stats as ss
from statsmodels.stats.libqsturng import qsturng

#: scipy switches to the asymptotic (df = ∞) integral from this df on; so do we
ASYMPTOTIC_DF = 100_000.0

_GL_X, _GL_W = np.polynomial.legendre.leggauss(16)
#: inner integral over z in [-Z_MAX, Z_MAX]: the normal mass outside is 2 Q(9) = 2.3e-19
_Z_MAX = 9.0
#: outer integral over t = log s where the chi density is within exp(-_LOG_CUT) of its mode
_LOG_CUT = 42.0


def _gl_rule(a: float, b: float, panels: int) -> tuple[np.ndarray, np.ndarray]:
    """Composite 16-point Gauss–Legendre nodes and weights on [a, b] with ``panels`` equal panels."""
    edges = np.linspace(a, b, panels + 1)
    half = (edges[1:] - edges[:-1])[:, None] / 2
    mid = (edges[1:] + edges[:-1])[:, None] / 2
    return (mid + half * _GL_X).ravel(), (half * _GL_W).ravel()


@functools.lru_cache(maxsize=64)
def _inner_rule(k: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nodes ``z``, ``Φ(z)`` and ``φ(z)`` times the weights of the inner integral for ``k`` means.

    The integrand ``φ(z) [Φ(z + w) - Φ(z)]^(k-1)`` gets steeper as k grows: ``4 + 3 ln k`` panels
    of 16 nodes on [-9, 9] (8 for k = 3, 18 for k = 100) agree with a 60-panel rule to 2e-15.
    """
    z, weights = _gl_rule(-_Z_MAX, _Z_MAX, math.ceil(4 + 3 * math.log(k)))
    return z, sc.ndtr(z), np.exp(-z * z / 2) / math.sqrt(2 * math.pi) * weights


def _power(x: np.ndarray, exponent: float) -> np.ndarray:
    """``x ** exponent`` for ``x >= 0``; small integer exponents by multiplication (faster)."""
    if exponent == 0:
        return np.ones_like(x)
    if float(exponent).is_integer() and exponent <= 8:
        out = x.copy()
        for _ in range(int(exponent) - 1):
            out *= x
        return out
    return np.power(x, exponent)


def _range_cdf(w: np.ndarray, k: float, with_pdf: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """``W(w)`` (and ``W'(w)`` if asked) for an array ``w >= 0`` of any shape."""
    z, phi_z, pdf_z_w = _inner_rule(k)
    zw = w[..., None] + z
    inner = sc.ndtr(zw) - phi_z
    power = _power(inner, k - 2)
    cdf = k * ((power * inner) @ pdf_z_w)
    if not with_pdf:
        return cdf, None
    pdf = k * (k - 1) / math.sqrt(2 * math.pi) * ((power * np.exp(-zw * zw / 2)) @ pdf_z_w)
    return cdf, pdf


@functools.lru_cache(maxsize=512)
def _outer_rule(df: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nodes ``s_i = exp(t_i)`` and normalised weights of the outer integral over ``s`` for ``df``.

    In ``t = log s`` the chi density is ``∝ exp(df (t - (e^{2t} - 1) / 2))``, peaked at 0 with
    sd ≈ 1/sqrt(2 df); the rule covers the range where it is above ``exp(-42)`` of its peak, and
    its weights are normalised to sum to one (so the constant ``2 (df/2)^(df/2) / Γ(df/2)`` is
    not needed). Panels of 4 sd (at least 5; at most 1 unit of t, which matters for df < 4) agree
    with panels of 0.5 sd to 4e-14 for df from 1 to 1e5 and k = 3, 10.
    """
    cut = _LOG_CUT / df

    def g(t: float) -> float:
        return t - math.expm1(2 * t) / 2 + cut

    lo = optimize.brentq(g, -cut - 1.0, 0.0, xtol=1e-14)
    hi = optimize.brentq(g, 0.0, 0.5 * math.log1p(2 * cut) + 1.0, xtol=1e-14)
    sd = 1 / math.sqrt(2 * df)
    panels = max(5, math.ceil((hi - lo) / min(4 * sd, 1.0)))
    t, weights = _gl_rule(lo, hi, panels)
    log_density = df * (t - np.expm1(2 * t) / 2)
    weights = weights * np.exp(log_density)
    return np.exp(t), weights / weights.sum(), t


def _cdf_pdf(q: np.ndarray, k: float, df: float, with_pdf: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """cdf (and pdf) at ``q >= 0`` (1-d array) for one ``k`` and one ``df``."""
    if k == 2:
        x = q / math.sqrt(2)
        cdf = 1 - 2 * (ss.t.sf(x, df) if df < ASYMPTOTIC_DF else ss.norm.sf(x))
        pdf = None
        if with_pdf:
            pdf = math.sqrt(2) * (ss.t.pdf(x, df) if df < ASYMPTOTIC_DF else ss.norm.pdf(x))
        return cdf, pdf
    if df >= ASYMPTOTIC_DF:
        return _range_cdf(q, k, with_pdf)
    if df < 1:   # never from a t-test family (df >= 1); the rule would need ~40/df panels: defer to scipy
        return (ss.studentized_range.cdf(q, k, df),
                ss.studentized_range.pdf(q, k, df) if with_pdf else None)
    s, weights, _ = _outer_rule(float(df))
    w_cdf, w_pdf = _range_cdf(q[:, None] * s, k, with_pdf)
    cdf = w_cdf @ weights
    return cdf, (None if w_pdf is None else (w_pdf * s) @ weights)


def _apply(function, x, k, df) -> np.ndarray:
    """Broadcast ``x, k, df`` and call ``function(x_1d, k, df)`` once per distinct (k, df).

    Invalid shapes (k < 2, df <= 0 or NaN) give NaN, as in scipy.
    """
    x, k, df = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(k, dtype=float),
                                   np.asarray(df, dtype=float))
    out = np.full(x.shape, np.nan)
    flat_x, flat_k, flat_df, flat_out = x.ravel(), k.ravel(), df.ravel(), out.reshape(-1)
    valid = (flat_k >= 2) & (flat_df > 0)
    for kk, dd in dict.fromkeys(zip(flat_k[valid].tolist(), flat_df[valid].tolist())):
        where = (flat_k == kk) & (flat_df == dd)
        flat_out[where] = function(flat_x[where], kk, dd)
    return out[()] if out.ndim == 0 else out


def _cdf_1d(q: np.ndarray, k: float, df: float) -> np.ndarray:
    out = np.zeros(q.shape)
    inside = q > 0
    out[np.isposinf(q)] = 1.0
    inside &= np.isfinite(q)
    if inside.any():
        out[inside] = _cdf_pdf(q[inside], k, df, with_pdf=False)[0]
    out[np.isnan(q)] = np.nan
    return np.clip(out, 0.0, 1.0)


def cdf(q, k, df) -> np.ndarray:
    """``P(Q <= q)`` for the studentized range of ``k`` means with ``df`` error df (as scipy's)."""
    return _apply(_cdf_1d, q, k, df)


def sf(q, k, df) -> np.ndarray:
    """``P(Q > q) = 1 - cdf`` (as scipy's ``studentized_range.sf``, which is ``1 - cdf`` too)."""
    return _apply(lambda x, kk, dd: 1.0 - _cdf_1d(x, kk, dd), q, k, df)


def _ppf_1d(p: np.ndarray, k: float, df: float) -> np.ndarray:
    out = np.full(p.shape, np.nan)
    out[p == 0] = 0.0
    out[p == 1] = np.inf
    todo = (p > 0) & (p < 1)
    if not todo.any():
        return out
    target = p[todo]
    if k == 2:   # exact: q = √2 t(1 - (1 - p)/2, df)
        out[todo] = math.sqrt(2) * (ss.t.isf((1 - target) / 2, df) if df < ASYMPTOTIC_DF
                                           else ss.norm.isf((1 - target) / 2))
        return out
    out[todo] = _newton(target, k, df)
    return out


def _newton(target: np.ndarray, k: float, df: float, rtol: float = 1e-10, max_iter: int = 100) -> np.ndarray:
    """Solve ``cdf(q) = target`` by Newton's method kept inside a bracket (bisection fallback).

    An entry is finished when its Newton step is below ``rtol`` relative (the step is taken: with
    quadratic convergence the error is then ~1e-20), when ``cdf(q) = target`` exactly, or when its
    bracket is narrower than ``rtol`` relative; finished entries are not iterated again.
    """
    in_table = (target >= 0.1) & (target <= 0.999) & (k <= 200) & ((df >= 2) | ((df >= 1) & (target >= 0.9)))
    guess = np.asarray(qsturng(np.clip(target, 0.1, 0.999), min(k, 200.0), max(df, 2.0)), dtype=float)
    q = np.where(in_table, guess, np.maximum(guess, 1.0)).reshape(target.shape)
    lo = np.zeros_like(q)
    hi = np.full_like(q, np.inf)
    active = np.ones(q.shape, dtype=bool)
    for _ in range(max_iter):
        x = q[active]
        value, density = _cdf_pdf(x, k, df, with_pdf=True)
        err = value - target[active]
        low = np.where(err < 0, np.maximum(lo[active], x), lo[active])
        high = np.where(err > 0, np.minimum(hi[active], x), hi[active])
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = x - err / density
        small = np.isfinite(newton) & (np.abs(newton - x) <= rtol * x)
        outside = ~np.isfinite(newton) | (newton <= low) | (newton >= high)
        bisect = np.where(np.isfinite(high), (low + high) / 2, 2 * x)
        q[active] = np.where(small | (err == 0), np.where(err == 0, x, newton), np.where(outside, bisect, newton))
        lo[active], hi[active] = low, high
        active[active] = ~(small | (err == 0) | (high - low <= rtol * x))
        if not active.any():
            break
    return q


def ppf(p, k, df) -> np.ndarray:
    """Quantile ``q`` with ``cdf(q, k, df) = p`` (as scipy's ``studentized_range.ppf``)."""
    return _apply(_ppf_1d, p, k, df)
