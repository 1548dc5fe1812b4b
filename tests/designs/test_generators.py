"""Properties of the pure design builders: Hadamard/PB orthogonality and balance, fractional
factorial resolution and aliases (cross-checked with pyDOE3.fracfact_aliasing), LHS strata."""
from __future__ import annotations

import string

import numpy as np
import pyDOE3
import pytest

from tunelab.designs.generators import (
    LETTERS,
    fractional_factorial,
    hadamard,
    latin_hypercube,
    map_unit_to_range,
    plackett_burman,
)
from tunelab.errors import DesignError


def assert_balanced_orthogonal(x: np.ndarray) -> None:
    runs = x.shape[0]
    assert set(np.unique(x)) == {-1, 1}
    np.testing.assert_array_equal(x.sum(axis=0), 0)                       # balanced
    np.testing.assert_array_equal(x.T @ x, runs * np.eye(x.shape[1]))     # orthogonal


@pytest.mark.parametrize("runs", [4, 8, 12, 16, 20, 24, 28, 36, 44, 48, 60])
def test_hadamard_rows_are_orthogonal(runs: int) -> None:
    h = hadamard(runs)
    np.testing.assert_array_equal(h @ h.T, runs * np.eye(runs))
    np.testing.assert_array_equal(h[:, 0], 1)


@pytest.mark.parametrize("runs", [8, 12, 20, 28])
def test_plackett_burman_full_width_is_balanced_and_orthogonal(runs: int) -> None:
    x = plackett_burman(runs - 1, runs=runs)
    assert x.shape == (runs, runs - 1)
    assert_balanced_orthogonal(x)


@pytest.mark.parametrize(("knobs", "runs"), [(3, 4), (4, 8), (7, 8), (8, 12), (11, 12), (12, 16), (19, 20), (20, 24), (27, 28)])
def test_plackett_burman_default_runs_is_next_multiple_of_four(knobs: int, runs: int) -> None:
    x = plackett_burman(knobs)
    assert x.shape == (runs, knobs)
    assert_balanced_orthogonal(x)


def test_plackett_burman_rejects_more_knobs_than_runs_minus_one() -> None:
    with pytest.raises(DesignError, match=r"12 runs holds at most 11 .* but 12 were given"):
        plackett_burman(12, runs=12)


def test_plackett_burman_rejects_runs_not_multiple_of_four() -> None:
    with pytest.raises(DesignError, match="multiple of 4"):
        plackett_burman(5, runs=10)


def test_fractional_2_7_4_has_8_runs_resolution_3() -> None:
    ff = fractional_factorial(7, generators=["D=AB", "E=AC", "F=BC", "G=ABC"])
    assert ff.runs == 8 and ff.matrix.shape == (8, 7)
    assert ff.resolution == 3
    assert_balanced_orthogonal(ff.matrix)
    # the design's columns really satisfy the generators
    a, b, c, d, e, f, g = ff.matrix.T
    np.testing.assert_array_equal(d, a * b)
    np.testing.assert_array_equal(g, a * b * c)
    # 2^4 - 1 = 15 words in the defining relation
    assert len(ff.defining_relation()) == 15


def test_negative_generator_flips_the_column() -> None:
    ff = fractional_factorial(4, generators=["D=-ABC"])
    a, b, c, d = ff.matrix.T
    np.testing.assert_array_equal(d, -a * b * c)
    assert ff.defining_relation() == ["-ABCD"]
    assert ff.resolution == 4


def _pydoe3_alias_sets(matrix: np.ndarray) -> set[frozenset[str]]:
    """Alias classes from pyDOE3, restricted to effects of order <= 2, in our letters."""
    to_ours = dict(zip(string.ascii_lowercase, LETTERS))
    out = set()
    for line in pyDOE3.fracfact_aliasing(matrix.astype(float))[0]:
        terms = {"".join(to_ours[ch] for ch in term.strip()) for term in line.split("=")}
        short = frozenset(t for t in terms if len(t) <= 2)
        if len(short) > 1:
            out.add(short)
    return out


@pytest.mark.parametrize(("k", "generators"), [(7, ["D=AB", "E=AC", "F=BC", "G=ABC"]), (6, ["E=ABC", "F=BCD"]),
                                              (7, ["F=ABCD", "G=ABCE"]), (10, ["G=ABC", "H=ABD", "J=ACE", "K=BDEF"])])
def test_alias_structure_matches_pydoe3(k: int, generators: list[str]) -> None:
    ff = fractional_factorial(k, generators=generators)
    ours = set()
    for effect, partners in ff.aliases().items():
        short = frozenset([effect] + [p.lstrip("-") for p in partners])
        if len(short) > 1:
            ours.add(short)
    assert ours == _pydoe3_alias_sets(ff.matrix)


# fewest runs per (k, resolution) from the standard tables of minimum-run 2^(k-p) designs
# (e.g. Montgomery, Design and Analysis of Experiments, Table 8.14)
@pytest.mark.parametrize(("k", "resolution", "runs"), [(7, 3, 8), (5, 5, 16), (6, 4, 16), (8, 4, 16), (4, 4, 8),
                                                       (15, 3, 16), (20, 4, 64), (11, 5, 128), (12, 5, 256), (25, 3, 32)])
def test_default_generators_reach_resolution_in_fewest_runs(k: int, resolution: int, runs: int) -> None:
    ff = fractional_factorial(k, resolution=resolution)
    assert ff.runs == runs
    assert ff.resolution >= resolution
    assert_balanced_orthogonal(ff.matrix)
    # resolution checked independently: no product of fewer than `resolution` columns is constant
    import itertools
    for order in range(1, resolution):
        for cols in itertools.combinations(range(k), order):
            assert abs(ff.matrix[:, cols].prod(axis=1).sum()) < runs


def test_runs_without_resolution_picks_highest_reachable() -> None:
    assert fractional_factorial(7, runs=16).resolution == 4      # 2^(7-3)_IV is the best 16-run design
    assert fractional_factorial(5, runs=16).resolution == 5


def test_unreachable_resolution_names_k_runs_and_resolution() -> None:
    with pytest.raises(DesignError, match=r"k=9 knobs in 16 runs reaches resolution 4"):
        fractional_factorial(9, runs=16, resolution=4)


def test_explicit_generators_below_requested_resolution_fail() -> None:
    with pytest.raises(DesignError, match="resolution 3, below the requested 4"):
        fractional_factorial(4, generators=["D=AB"], resolution=4)


def test_latin_hypercube_hits_every_stratum_once() -> None:
    n, d = 12, 4
    u = latin_hypercube(n, d, np.random.default_rng(3))
    for column in u.T:
        assert sorted((column * n).astype(int)) == list(range(n))


@pytest.mark.parametrize(("low", "high", "scale", "step"), [(0, 100_000, "linear", None), (16, 65536, "log", None),
                                                            (4096, 6_291_456, "linear", 4096)])
def test_mapping_keeps_lhs_strata_for_integer_knobs(low: int, high: int, scale: str, step: int | None) -> None:
    n = 10
    u = latin_hypercube(n, 1, np.random.default_rng(7))[:, 0]
    values = [map_unit_to_range(x, low, high, scale, step, strata=n) for x in u]
    assert all(isinstance(v, int) and low <= v <= high for v in values)
    if step:
        assert all((v - low) % step == 0 for v in values)
    transform = np.log if scale == "log" else (lambda v: v)
    position = (transform(np.array(values, dtype=float)) - transform(low)) / (transform(high) - transform(low))
    strata = np.minimum((position * n).astype(int), n - 1)
    assert sorted(strata) == list(range(n))


def test_mapping_reaches_both_ends() -> None:
    assert map_unit_to_range(0.0, 10, 20) == 10
    assert map_unit_to_range(0.9999, 10, 20) == 20
    assert map_unit_to_range(0.9999, 0, 10, step=3) == 9          # clipped to the grid below high
