"""Encoding round trips of every knob type and decoding of arbitrary gene vectors."""
from __future__ import annotations

import numpy as np
import pytest

from tunelab.errors import DesignError
from tunelab.knobs import get_knob
from tunelab.optimize.space import (ChoiceDimension, IntDimension, SearchSpace, TripletDimension,
                                    dimension_from_design_knob, space_from_spec)

SPACE = space_from_spec({
    "net.core.somaxconn": {"kind": "int", "low": 16, "high": 4096, "scale": "log", "n": 9},
    "net.ipv4.tcp_fin_timeout": {"kind": "int", "low": 10, "high": 60, "step": 10},
    "net.ipv4.tcp_congestion_control": {"kind": "choice", "values": ["cubic", "reno", "bbr"]},
    "net.ipv4.tcp_abort_on_overflow": {"kind": "choice", "values": [False, True]},
    "net.ipv4.tcp_wmem": {"kind": "choice", "values": [(4096, 16384, 4194304), (4096, 65536, 16777216)]},
    "net.ipv4.tcp_rmem": {"kind": "triplet", "components": [
        {"low": 4096, "high": 8192, "step": 4096},
        {"low": 65536, "high": 262144, "scale": "log", "n": 3},
        {"low": 4194304, "high": 16777216, "scale": "log", "n": 3}]},
})


def test_every_configuration_round_trips_and_is_valid_for_the_kernel_knob() -> None:
    configs = SPACE.all_configs()
    assert len(configs) == SPACE.size == 9 * 6 * 3 * 2 * 2 * (2 * 3 * 3)
    for config in configs[::7]:
        assert SPACE.decode(SPACE.encode(config)) == config
        for kid, value in config.items():
            assert get_knob(kid).validate(value) == value  # canonical and in range


def test_log_grid_is_geometric_and_linear_grid_has_the_step() -> None:
    som = SPACE.dimensions[0]
    assert som.grid == (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
    fin = SPACE.dimensions[1]
    assert [fin.value_at(i) for i in range(fin.sizes[0])] == [10, 20, 30, 40, 50, 60]


def test_decoding_rounds_and_clips_genes_into_range() -> None:
    config = SPACE.decode([100.4, -3, 1.6, 0.2, 1, 0, 0, 0])
    assert config["net.core.somaxconn"] == 4096
    assert config["net.ipv4.tcp_fin_timeout"] == 10
    assert config["net.ipv4.tcp_congestion_control"] == "bbr"
    assert config["net.ipv4.tcp_abort_on_overflow"] is False


def test_ordered_triplet_components_are_sorted_when_decoded() -> None:
    dim = TripletDimension("t", (IntDimension("a", 1, 9, step=4), IntDimension("b", 1, 9, step=4),
                                 IntDimension("c", 1, 9, step=4)))
    assert dim.decode([2, 0, 1]) == (1, 5, 9)


def test_off_grid_values_snap_to_the_nearest_point() -> None:
    som = IntDimension("s", 16, 4096, scale="log", n=9)
    assert som.decode(som.encode(1000)) == 1024
    assert ChoiceDimension("c", (1, 10, 100)).encode(12) == (1,)


def test_unknown_choice_is_an_error_naming_the_values() -> None:
    with pytest.raises(DesignError, match=r"'vegas' is not one of the searched values \['cubic', 'bbr'\]"):
        ChoiceDimension("cc", ("cubic", "bbr")).encode("vegas")


@pytest.mark.parametrize("bad, message", [
    (lambda: IntDimension("s", 10, 5), r"low < high"),
    (lambda: IntDimension("s", 0, 5, scale="log"), r"log needs low > 0"),
    (lambda: ChoiceDimension("c", (1, 1)), r"duplicates"),
    (lambda: SearchSpace([]), r"empty"),
    (lambda: space_from_spec({"x": {"kind": "spline"}}), r"No search dimension kind named 'spline'"),
])
def test_bad_dimensions_are_rejected(bad, message) -> None:
    with pytest.raises(DesignError, match=message):
        bad()


def test_design_knob_becomes_a_range_or_a_choice() -> None:
    ranged = dimension_from_design_knob({"id": "net.core.somaxconn", "low": 16, "high": 4096, "scale": "log",
                                         "levels": [16, 4096]}, refine_points=5)
    assert ranged.grid == (16, 64, 256, 1024, 4096)
    listed = dimension_from_design_knob({"id": "net.ipv4.tcp_rmem", "levels": [(1, 2, 3), (4, 5, 6)]})
    assert listed.values == ((1, 2, 3), (4, 5, 6))


def test_random_genes_stay_in_bounds() -> None:
    genes = SPACE.random_genes(np.random.default_rng(0), 200)
    assert (genes >= SPACE.lower).all() and (genes <= SPACE.upper).all()
    assert len({tuple(g) for g in genes}) > 150
