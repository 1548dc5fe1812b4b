"""Multiplicity adjustment of a family of p-values (statsmodels ``multipletests``)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from statsmodels.stats.multitest import multipletests

from tunelab.errors import DataError

#: tunelab names (statsmodels names) -> R ``p.adjust`` names, for the methods text
METHODS = {"holm": "holm", "bonferroni": "bonferroni", "fdr_bh": "BH", "none": "none"}


def adjust(pvalues: Sequence[float] | np.ndarray, method: str = "holm") -> np.ndarray:
    """Adjust p-values for multiple testing.

    Parameters
    ----------
    pvalues : array_like
        Unadjusted p-values; NaN entries (tests that could not be computed) stay NaN and are not
        counted in the family.
    method : {'holm', 'bonferroni', 'fdr_bh', 'none'}
        statsmodels ``multipletests`` names; identical to R ``p.adjust`` with
        ``"holm"``, ``"bonferroni"`` and ``"BH"``.

    Returns
    -------
    ndarray
        Adjusted p-values, same shape and order as ``pvalues``, capped at 1.

    Examples
    --------
    >>> adjust([0.01, 0.04, 0.03], "holm").round(3).tolist()
    [0.03, 0.06, 0.06]
    """
    if method not in METHODS:
        raise DataError(f"unknown p-value adjustment {method!r}; choose one of {', '.join(METHODS)}")
    p = np.asarray(pvalues, dtype=float)
    finite = ~np.isnan(p)
    if np.any((p[finite] < 0) | (p[finite] > 1)):
        raise DataError(f"p-values must lie in [0, 1], got {p[finite][(p[finite] < 0) | (p[finite] > 1)][:3].tolist()}")
    out = p.copy()
    if method == "none" or not finite.any():
        return out
    if method == "holm":
        out[finite] = _holm(p[finite])
    else:
        out[finite] = multipletests(p[finite], method=method)[1]
    return np.minimum(out, 1.0)


def _holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjustment, exactly as ``multipletests(p, method="holm")[1]``.

    statsmodels 0.15's Holm branch calls ``gc.collect()`` on every call (multitest.py, line 246),
    which costs 50-500 ms in a large process and dominated :func:`tunelab.stats.screen`'s run
    time; the arithmetic below is the same (``max_{j<=i} (m - j + 1) p_(j)``, capped at 1) and a
    unit test checks it against statsmodels.
    """
    order = np.argsort(p, kind="stable")
    m = len(p)
    stepped = np.maximum.accumulate(p[order] * np.arange(m, 0, -1))
    out = np.empty(m)
    out[order] = np.minimum(stepped, 1.0)
    return out
