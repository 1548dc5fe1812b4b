"""Exact arithmetic for the statistics: a shifted origin before every sum of squares and fit, and
library warnings caught at the call.

Metrics can sit on a large constant (a counter near 1e12, a latency in ns near 1e9) while their
differences are small. Least squares and one-pass sums of squares on such raw values lose the
leading digits the offset occupies: at 1e12 the spacing of float64 is 1.2e-4, so a level
difference of 0.1 comes out anywhere between 0.083 and 0.115. Every statistic that does not
depend on the origin (differences, sums of squares, F, t, p) is therefore computed on
``y - c``, where ``c`` is one of the observations (:func:`origin`): by Sterbenz's lemma that
subtraction is exact for every value within a factor of two of ``c``, so nothing is lost before
the fit. Means are reported as ``c + mean(y - c)``. On the log scale ``log(y) - log(c)`` is
computed as ``log1p((y - c) / c)``: ``log(y)`` itself is resolved only to 3.6e-15 near
``log(1e12) = 27.6``, up to 3 % of ``log(1e12 + 0.5) - log(1e12 + 0.4) = 1e-13``.

>>> y = np.array([1e12 + 0.4, 1e12 + 0.3, 1e12 + 0.5])
>>> shifted(y)[0].tolist(), bool(shifted(y)[1] == y[0])
([0.0, -0.0999755859375, 0.0999755859375], True)
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import pandas as pd

T = TypeVar("T")


def origin(values: np.ndarray) -> float:
    """The value subtracted before a fit: the middle observation (the lower median), 0 when empty.

    An observation, not an average, so that ``y - origin`` is exact near it; the middle one so
    that an outlying first run does not become the origin of the others.

    >>> origin(np.array([5.0, 1.0, 3.0, 2.0]))
    2.0
    """
    y = np.asarray(values, dtype=float)
    if not len(y):
        return 0.0
    middle = (len(y) - 1) // 2
    return float(np.partition(y, middle)[middle])


def shifted(values: np.ndarray) -> tuple[np.ndarray, float]:
    """``(y - c, c)`` with ``c`` = :func:`origin` (``y - c`` is exact for ``c/2 <= y <= 2c``)."""
    y = np.asarray(values, dtype=float)
    c = origin(y)
    return y - c, c


def log_shifted(values: np.ndarray) -> tuple[np.ndarray, float]:
    """``(log(y) - log(c), log(c))`` for positive ``y``, the difference as ``log1p((y - c) / c)``.

    >>> y = np.array([1e12 + 0.4, 1e12 + 0.5, 1e12 + 0.3])
    >>> float(log_shifted(y)[0][1])   # log(y[1] / y[0]) of the stored values, to the last digit
    9.997558593745501e-14
    >>> float(np.log(y[1]) - np.log(y[0]))   # the difference of the logs is 0.5 % off
    9.947598300641403e-14
    """
    y = np.asarray(values, dtype=float)
    c = origin(y)
    return np.log1p((y - c) / c), math.log(c)


class Centred(list):
    """Groups' values already shifted by one shared origin: :func:`centred` returns them as they are, so
    the shift is computed once per grouping (:attr:`tunelab.stats._validate.Groups.centred`) however
    many statistics read it."""


def centred(samples: Sequence[np.ndarray]) -> Centred:
    """The groups' values minus one observation, :func:`origin` of them all: differences of means,
    variances and sums of squares do not depend on it, and a large constant offset costs no digits.
    Values that are :class:`Centred` already come back unchanged (shifting them again would subtract 0).

    >>> [y.tolist() for y in centred([np.array([1e12 + 0.5]), np.array([1e12 + 0.25, 1e12])])]
    [[0.25], [0.0, -0.25]]
    """
    if isinstance(samples, Centred):
        return samples
    arrays = [np.asarray(y, dtype=float) for y in samples]
    c = origin(np.concatenate(arrays)) if arrays else 0.0
    return Centred(y - c for y in arrays)


def sums_of_squares(samples: Sequence[np.ndarray]) -> tuple[float, float]:
    """One-way ``(SS_between, SS_within)`` by the centred two-pass formulas.

    The values are :func:`centred`, the group means of the centred values taken (first pass), then
    ``SS_within = Σ (y - m_i)^2`` and ``SS_between = Σ n_i (m_i - m)^2`` (second pass), never
    ``Σ y^2 - N m^2``, which loses every digit the offset occupies.

    >>> sums_of_squares([np.array([1.0, 2, 3]), np.array([6.0, 7, 8])])
    (37.5, 4.0)
    """
    values = centred(samples)
    counts = np.array([len(y) for y in values], dtype=float)
    means = np.array([float(np.mean(y)) for y in values])
    grand = float(np.sum(counts * means) / counts.sum())
    ss_b = float(np.sum(counts * (means - grand) ** 2))
    # a constant group adds exactly 0 (its mean may be off by an ulp): constant groups give F = inf, as SciPy
    ss_w = float(sum(float(np.sum((y - m) ** 2)) if np.ptp(y) > 0 else 0.0 for y, m in zip(values, means)))
    return ss_b, ss_w


def quietly(function: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T, list[str]]:
    """Call a library function with its warnings caught: ``(result, [warning messages])``.

    Library warnings (SciPy's "p-value may not be accurate", statsmodels' convergence warnings,
    NumPy's division warnings) never reach the terminal; the caller turns the ones that matter into
    notes of its result.

    >>> quietly(lambda: warnings.warn("approximate", UserWarning) or 1)
    (1, ['approximate'])
    """
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="ignore"):
        warnings.simplefilter("always")
        result = function(*args, **kwargs)
    return result, list(dict.fromkeys(str(w.message) for w in caught))


#: effects that agree to this relative tolerance are tied: a fit is exact to ~1e-14 of the data's
#: spread, so levels with the same runs get effects that differ in the last digits only
TIE_RTOL = 1e-9


def first_best(values: pd.Series) -> Any:
    """The label of the largest value, the first in order among values tied with it to :data:`TIE_RTOL`.

    The tie rule of the verdicts: among levels whose effects are equal up to rounding (exactly tied
    in the data), the first level in design order is chosen, never the one that rounding happened
    to favour; ``Series.idxmax`` would pick by the last digit.

    >>> first_best(pd.Series([0.09997558593749802, -0.1, 0.09997558593749885], index=[3, 4, 5]))
    3
    >>> first_best(pd.Series([0.1, 0.2]))
    1
    """
    numbers = values.to_numpy(dtype=float)
    finite = numbers[np.isfinite(numbers)]
    if np.isnan(numbers).all():
        return values.index.tolist()[0]
    top = float(np.nanmax(numbers))
    margin = TIE_RTOL * float(np.max(np.abs(finite))) if np.isfinite(top) else 0.0
    tied = numbers >= top - margin
    return values.index.tolist()[int(np.flatnonzero(tied)[0])]
