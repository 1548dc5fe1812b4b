"""Input checks shared by every statistics function, and the group helpers built on them.

Every public function in :mod:`tunelab.stats` calls :func:`check_input` first, so bad input fails
early with a :class:`~tunelab.errors.DataError` that names the column, the value and the fix.
"""
from __future__ import annotations

import functools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tunelab.errors import DataError
from tunelab.stats.numerics import Centred, origin


def _as_list(between: str | Sequence[str]) -> list[str]:
    return [between] if isinstance(between, str) else list(between)


def level_matches(values: pd.Series, level: Any) -> np.ndarray:
    """Elementwise ``value == level`` with Python semantics (tuple levels compare as tuples).

    Scalar levels use one vectorised numpy comparison (also on object columns that mix tuples and
    scalars, where numpy falls back to ``==`` per element); tuple levels compare element by element.
    """
    if isinstance(level, (tuple, list)):
        return np.fromiter((v == level for v in values.tolist()), dtype=bool, count=len(values))
    array = values.to_numpy()
    try:
        result = array == level
    except (TypeError, ValueError):
        result = None
    if isinstance(result, np.ndarray) and result.shape == array.shape and result.dtype == bool:
        return result
    return np.fromiter((v == level for v in values.tolist()), dtype=bool, count=len(values))


def check_columns(data: pd.DataFrame, dv: str, columns: Sequence[str], role: str = "between") -> None:
    """DataError unless ``data`` is a DataFrame holding ``dv`` (numeric) and ``columns`` (not ``dv``)."""
    if not isinstance(data, pd.DataFrame):
        raise DataError(f"data must be a pandas DataFrame, got {type(data).__name__}; "
                        "pass the tidy frame from store.tidy() or pd.read_csv()")
    for column in [dv, *columns]:
        if column not in data.columns:
            known = ", ".join(map(str, data.columns))
            raise DataError(f"unknown column {column!r}; the data has: {known}")
    if dv in columns:
        raise DataError(f"column {dv!r} is used both as dv and as a {role} column; choose a metric for dv")
    values = data[dv]
    if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values):
        raise DataError(f"dv column {dv!r} is not numeric (dtype {values.dtype}); choose a metric column, "
                        f"or convert it with pd.to_numeric(data[{dv!r}])")


def check_input(
    data: pd.DataFrame,
    dv: str,
    between: str | Sequence[str],
    min_group_size: int = 2,
) -> pd.DataFrame:
    """Check a tidy frame for a between-groups analysis and return a clean copy.

    Parameters
    ----------
    data : DataFrame
        Long (tidy) data, one row per observation. Never modified.
    dv : str
        Numeric dependent variable (a metric column).
    between : str or list of str
        Grouping column(s) (knob columns).
    min_group_size : int
        Smallest number of observations each level of each ``between`` column must have
        (2 by default: a variance needs two values).

    Returns
    -------
    DataFrame
        A copy holding only ``[*between, dv]`` with ``dv`` as float64 and a fresh RangeIndex.

    Raises
    ------
    DataError
        Unknown column, non-numeric ``dv``, missing values, a single level, or a group smaller
        than ``min_group_size``.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"knob": ["a", "a", "b", "b"], "qps": [1.0, 2.0, 3.0, 4.0]})
    >>> check_input(df, "qps", "knob").shape
    (4, 2)
    """
    factors = _as_list(between)
    if not factors and isinstance(data, pd.DataFrame):
        raise DataError("between is empty; name at least one grouping (knob) column")
    check_columns(data, dv, factors)
    for column in [dv, *factors]:
        missing = int(data[column].isna().sum())
        if missing:
            raise DataError(f"column {column!r} has {missing} missing value(s); drop those rows "
                            f"(data.dropna(subset=[{column!r}])) or fix the store")
    out = data[[*factors, dv]].copy()
    out[dv] = out[dv].astype("float64")
    if not np.isfinite(out[dv].to_numpy()).all():
        raise DataError(f"dv column {dv!r} has infinite values; drop or fix those rows")
    for column in factors:
        counts = _level_counts(out[column])
        if len(counts) < 2:
            raise DataError(f"between column {column!r} has a single level {counts.index[0]!r}; "
                            "a comparison needs at least two levels")
        small = counts[counts < min_group_size]
        if len(small):
            level = small.index[0]
            raise DataError(f"group {column}={level!r} has {int(small.iloc[0])} observation(s) but at least "
                            f"{min_group_size} are needed; add replicates")
    return out.reset_index(drop=True)


def _sort_key(value: Any) -> tuple[str, Any]:
    return (type(value).__name__, value)


def sorted_levels(values: pd.Series | Sequence[Hashable]) -> list[Any]:
    """Distinct levels in natural order (numbers numerically, strings alphabetically).

    Mixed types are ordered by type name first, so the order is always deterministic.
    """
    fast = _fast_kind(values)
    if fast:
        unique = pd.unique(values.to_numpy()).tolist()
    else:
        unique = list(dict.fromkeys(values.tolist() if isinstance(values, pd.Series) else list(values)))
    try:
        return sorted(unique)
    except TypeError:
        try:
            return sorted(unique, key=_sort_key)
        except TypeError:
            return sorted(unique, key=repr)


def _fast_kind(values: Any) -> bool:
    """True for a Series of integers, booleans or NaN-free floats: numpy paths give the same levels
    and codes as the Python-object paths (which also handle tuples, strings and mixed types)."""
    if not isinstance(values, pd.Series) or not isinstance(values.dtype, np.dtype):
        return False
    if values.dtype.kind in "iub":
        return True
    return values.dtype.kind == "f" and not np.isnan(values.to_numpy()).any()


def _level_counts(values: pd.Series) -> pd.Series:
    levels = sorted_levels(values)
    codes = encode(values, levels)
    return pd.Series(np.bincount(codes, minlength=len(levels)), index=pd.Index(levels, dtype=object))


def encode(values: pd.Series, levels: list[Any]) -> np.ndarray:
    """Integer codes 0..k-1 of ``values`` in the order of ``levels``.

    Library calls get these codes instead of the raw levels, which may be tuples (triplet
    knobs), booleans or strings with characters a formula cannot hold.
    """
    if _fast_kind(values) and levels:
        codes = _encode_numeric(values.to_numpy(), levels)
        if codes is not None:
            return codes
    index = {level: i for i, level in enumerate(levels)}
    return np.fromiter((index[v] for v in values.tolist()), dtype=np.int64, count=len(values))


def _encode_numeric(array: np.ndarray, levels: list[Any]) -> np.ndarray | None:
    """Codes by binary search when every level is a plain number; None if any value is not a level."""
    if not all(isinstance(level, (int, float, np.integer, np.floating)) for level in levels):
        return None
    table = np.asarray(levels, dtype=np.float64 if array.dtype.kind == "f" else None)
    if table.dtype.kind not in "iubf":
        return None
    order = np.argsort(table, kind="stable")
    position = np.clip(np.searchsorted(table[order], array), 0, len(levels) - 1)
    codes = order[position].astype(np.int64)
    if not np.array_equal(table[codes], array):
        return None
    return codes


def grouped(data: pd.DataFrame, dv: str, between: str) -> tuple[list[Any], list[np.ndarray]]:
    """Sorted levels of ``between`` and the ``dv`` values of each, as float arrays."""
    groups = Groups.of(data, dv, between)
    return groups.levels, groups.samples


@dataclass(frozen=True, eq=False)
class Groups:
    """One grouping of a checked frame: sorted ``levels``, the ``codes`` and ``y`` of every row (in
    row order) and the ``samples`` (``y`` of each level). Lets several tests share one pass, and one
    shift of the values by :func:`~tunelab.stats.numerics.origin` (``centred_y``, ``centred``)."""

    levels: list[Any]
    codes: np.ndarray
    y: np.ndarray
    samples: list[np.ndarray]

    @functools.cached_property
    def frame(self) -> pd.DataFrame:
        """Two columns ``[g, y]`` (integer codes, values), the shape library calls get."""
        return pd.DataFrame({"g": self.codes, "y": self.y})

    @functools.cached_property
    def centred_y(self) -> np.ndarray:
        """``y`` minus one of its observations (:func:`~tunelab.stats.numerics.origin`), in row order."""
        return self.y - origin(self.y)

    @functools.cached_property
    def centred(self) -> Centred:
        """The ``samples`` shifted as :attr:`centred_y` (what :func:`~tunelab.stats.numerics.centred` gives)."""
        return Centred(self.centred_y[self.codes == i] for i in range(len(self.levels)))

    @classmethod
    def of(cls, data: pd.DataFrame, dv: str, between: str) -> "Groups":
        levels = sorted_levels(data[between])
        codes = encode(data[between], levels)
        y = data[dv].to_numpy(dtype=np.float64)
        return cls(levels, codes, y, [y[codes == i] for i in range(len(levels))])
