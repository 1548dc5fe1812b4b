"""The SYNTHETIC surfaces ``smooth`` and ``wide27``: size, baseline, optimum, few near-optimal configurations,
interactions; and the exact (non-enumerating) optimum and counts of an AdditiveSurface against enumeration."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tunelab.errors import TargetError
from tunelab.knobs import get_knob
from tunelab.model import KnobId, level_value
from tunelab.simulator import SimulatorEvaluator, SimulatorTarget, Surface, get_surface
from tunelab.simulator.surfaces import AdditiveSurface, AdditiveTruth, best_configs, count_within

NEW = ("smooth", "wide27")


@pytest.fixture(scope="module")
def smooth() -> Surface:
    return get_surface("smooth")


@pytest.fixture(scope="module")
def wide() -> AdditiveSurface:
    return get_surface("wide27")


@pytest.mark.parametrize("name", NEW)
def test_description_metrics_and_catalogue_knobs(name):
    surface = get_surface(name)
    assert surface.description.startswith("SYNTHETIC")
    assert dict(surface.metrics) == {"qps": "maximize", "latency_mean_ms": "minimize"}
    for kid, value in surface.baseline.items():   # every knob is a catalogue knob, its baseline a valid value
        assert get_knob(KnobId.parse(kid).name).validate(value) == level_value(value)


@pytest.mark.parametrize("name", NEW)
def test_baseline_is_a_point_of_the_space(name):
    surface = get_surface(name)
    space = surface.search_space()
    assert space.decode(space.encode(surface.baseline)) == {k: level_value(v) for k, v in surface.baseline.items()}


@pytest.mark.parametrize("name", NEW)
def test_simulator_target_starts_at_the_baseline(name):
    surface = get_surface(name)
    assert SimulatorTarget(name).current_config() == {k: level_value(v) for k, v in surface.baseline.items()}


def test_smooth_size_and_few_near_optimal(smooth):
    table = smooth.table()
    assert smooth.search_space().size == len(table) == 9 * 7 * 6 * 4
    near = count_within(smooth)
    assert near == sum(smooth.within(c) for c in smooth.search_space().all_configs())
    assert 1 <= near <= 10                     # a handful of 1512
    assert not smooth.within(smooth.baseline)
    assert smooth.truth(smooth.optimum())["qps"] > 1.2 * smooth.truth(smooth.baseline)["qps"]


def test_smooth_has_one_peak(smooth):
    """Unimodal (quasi-concave): on the straight path (log2 of the sizes, fin_timeout linear) between two
    configurations the true qps never drops below the lower of its two ends, so there is no second peak."""
    configs = smooth.search_space().all_configs()
    logs = ["net.core.somaxconn", "net.core.rmem_max", "net.core.netdev_max_backlog"]
    rng = np.random.default_rng(0)
    for i, j in rng.integers(0, len(configs), size=(300, 2)):
        config, other = configs[i], configs[j]
        path = []
        for t in np.linspace(0, 1, 21):
            point = {k: 2 ** ((1 - t) * math.log2(config[k]) + t * math.log2(other[k])) for k in logs}
            point["net.ipv4.tcp_fin_timeout"] = (1 - t) * config["net.ipv4.tcp_fin_timeout"] + \
                t * other["net.ipv4.tcp_fin_timeout"]
            path.append(smooth.truth(point)["qps"])
        assert min(path) >= min(path[0], path[-1]) - 1e-9, config


def test_smooth_interactions_move_the_best_level(smooth):
    """The best somaxconn depends on rmem_max, the best backlog on somaxconn (a one-at-a-time screen misses them)."""
    table = smooth.table()

    def best_level(knob, **fixed):
        rows = table
        for kid, value in fixed.items():
            rows = rows[rows[kid] == value]
        return rows.loc[rows["qps"].idxmax(), knob]

    others = {"net.core.netdev_max_backlog": 1000, "net.ipv4.tcp_fin_timeout": 60}
    low = best_level("net.core.somaxconn", **{"net.core.rmem_max": 262144}, **others)
    high = best_level("net.core.somaxconn", **{"net.core.rmem_max": 16777216}, **others)
    assert low < high
    rest = {"net.core.rmem_max": 4194304, "net.ipv4.tcp_fin_timeout": 30}
    assert best_level("net.core.netdev_max_backlog", **{"net.core.somaxconn": 64}, **rest) < \
        best_level("net.core.netdev_max_backlog", **{"net.core.somaxconn": 4096}, **rest)


def test_wide27_size_is_beyond_enumeration(wide):
    space = wide.search_space()
    assert len(wide.space) == 27
    assert all(2 <= len(spec["values"]) <= 4 for spec in wide.space.values())
    assert space.size == math.prod(len(spec["values"]) for spec in wide.space.values()) > 1e9
    with pytest.raises(TargetError, match="too many"):
        wide.table()


def test_wide27_is_sparse(wide):
    """About five knobs change qps by more than 1 % on their own; the others by at most 0.5 %."""
    base = wide.truth(wide.baseline)["qps"]
    swing = {}
    for kid, spec in wide.space.items():
        changes = [abs(wide.truth({**wide.baseline, kid: v})["qps"] / base - 1) for v in spec["values"]]
        swing[kid] = max(changes)
    large = [k for k, s in swing.items() if s > 0.01]
    assert 4 <= len(large) <= 6
    assert all(s <= 0.005 + 1e-12 for k, s in swing.items() if k not in large)


def test_wide27_interactions(wide):
    base = dict(wide.baseline)
    rmem = "net.ipv4.tcp_rmem"
    big = wide.space[rmem]["values"][2]

    def gain(config, kid, value):
        return wide.truth({**config, kid: value})["qps"] - wide.truth(config)["qps"]

    # big receive buffers help with window scaling and not without it
    assert gain(base, rmem, big) > 0
    assert gain({**base, "net.ipv4.tcp_window_scaling": False}, rmem, big) <= 0
    # busy polling costs alone and pays with busy_read
    assert gain(base, "net.core.busy_poll", 50) < 0 < gain({**base, "net.core.busy_read": 50}, "net.core.busy_poll", 50)


def test_wide27_optimum_and_near_share(wide):
    best = wide.optimum()
    assert wide.within(best) and not wide.within(wide.baseline)
    # no single change improves the optimum
    value = wide.truth(best)["qps"]
    for kid, spec in wide.space.items():
        assert all(wide.truth({**best, kid: v})["qps"] <= value for v in spec["values"])
    share = count_within(wide) / wide.search_space().size
    assert 0 < share < 0.01
    top = best_configs(wide, 5)
    assert top[0] == best and len(top) == 5
    scores = [wide.truth(c)["qps"] for c in top]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 5


def _restricted(wide: AdditiveSurface, knobs: list[str]) -> tuple[Surface, AdditiveSurface]:
    """The same truth on a subset of wide27's knobs: as an enumerable Surface and as an AdditiveSurface."""
    truth = AdditiveTruth({k: t for k, t in wide.truth_fn.mains.items() if k in knobs},
                          {p: t for p, t in wide.truth_fn.pairs.items() if set(p) <= set(knobs)})
    space = {k: wide.space[k] for k in knobs}
    baseline = {k: wide.baseline[k] for k in knobs}
    args = ("sub", "SYNTHETIC subset of wide27", space, baseline, wide.metrics, truth)
    return Surface(*args), AdditiveSurface(*args)


def _value_and_changes(surface: Surface, config: dict) -> tuple[float, int]:
    return (round(surface.truth(config)["qps"], 6),
            sum(level_value(config[k]) != level_value(v) for k, v in surface.baseline.items()))


@pytest.fixture(scope="module")
def restricted(wide) -> tuple[Surface, AdditiveSurface]:
    """Both interactions, three main effects, two tiny ones and one without effect (6912 configurations)."""
    return _restricted(wide, ["net.ipv4.tcp_rmem", "net.ipv4.tcp_window_scaling", "net.core.busy_read",
                              "net.core.busy_poll", "link.mtu[eth0]", "net.core.netdev_max_backlog",
                              "net.ipv4.tcp_timestamps", "net.core.dev_weight", "net.ipv4.tcp_fin_timeout"])


@pytest.mark.parametrize("tolerance", [0.5, 2.0, 5.0])
def test_additive_answers_equal_enumeration(restricted, tolerance):
    enumerated, additive = restricted
    assert additive.optimum() == enumerated.optimum()
    assert count_within(additive, tolerance) == count_within(enumerated, tolerance)
    assert count_within(additive, tolerance, "latency_mean_ms") == count_within(enumerated, tolerance,
                                                                                "latency_mean_ms")
    # the same distinct values, each with a configuration changing as few knobs (ties may pick another one)
    assert [_value_and_changes(additive, c) for c in best_configs(additive, 6)] == \
        [_value_and_changes(enumerated, c) for c in best_configs(enumerated, 6)]


def test_additive_surface_refuses_non_additive_truth():
    with pytest.raises(TargetError, match="AdditiveTruth"):
        AdditiveSurface("x", "SYNTHETIC x", {"a": {"kind": "choice", "values": [1, 2]}}, {"a": 1},
                        {"qps": "maximize", "latency_mean_ms": "minimize"}, lambda c, s: {"qps": 1.0})


def test_best_configs_prefers_fewest_changes_among_ties():
    surface = get_surface("wide27")
    best = best_configs(surface, 1)[0]
    zero_effect = "net.core.optmem_max"          # no term names it: every level ties
    assert best[zero_effect] == surface.baseline[zero_effect]


@pytest.mark.parametrize("name", NEW)
def test_noise_is_seeded_and_around_the_truth(name):
    surface = get_surface(name, cv=0.03)
    draws = [SimulatorEvaluator(surface, seed=1).evaluate(surface.baseline, 0, key=f"k{i}")["qps"] for i in range(400)]
    again = SimulatorEvaluator(surface, seed=1).evaluate(surface.baseline, 0, key="k0")["qps"]
    assert again == draws[0]
    truth = surface.truth(surface.baseline)["qps"]
    cv = surface.config_cv(surface.baseline)
    assert abs(np.mean(draws) / truth - 1) < 4 * cv / math.sqrt(len(draws))   # 4 standard errors


def test_the_simulator_target_applies_and_restores_wide27s_link_knobs(tmp_path) -> None:
    """wide27 has link.mtu / link.txqueuelen, written with `ip link set`: the simulator answers it on its own
    in-memory links (and refuses anything else), so a refinement on the surface runs through the real runner."""
    from tunelab.cli import main
    from tunelab.simulator.target import SimulatorTarget

    target = SimulatorTarget("wide27")
    assert target.run("server", ["ip", "link", "set", "dev", "eth0", "mtu", "9000"], 1).ok
    assert target.current_config()["link.mtu[eth0]"] == 9000
    assert target.run("server", ["ip", "link", "set", "dev", "nope0", "mtu", "9000"], 1).returncode == 1
    assert target.run("server", ["ip", "link", "set", "dev", "eth0", "up"], 1).returncode == 2
    assert target.run("server", ["ip", "link", "del", "eth0"], 1).returncode == 127
    assert main(["refine", "--target", "simulator", "--surface", "wide27", "--budget", "8", "--confirm-blocks", "0",
                 "--store", str(tmp_path / "w.sqlite")]) == 2          # host-global knobs need the flag
    assert main(["refine", "--target", "simulator", "--surface", "wide27", "--budget", "8", "--confirm-blocks", "0",
                 "--allow-host-global", "--store", str(tmp_path / "w.sqlite")]) == 0
