"""The pymoo engines ``ga`` and ``nsga2`` behind ask/tell: search, determinism, exact resume, presets, options."""
from __future__ import annotations

import json
import math
from typing import Any, Callable

import numpy as np
import pytest

from tunelab.model import Metric
from tunelab.optimize.engines.base import (FAILED_PENALTY, Candidate, EngineSettings, RefineError, make_engine,
                                           typed_config)
from tunelab.optimize.engines.pymoo_engine import (ENGINES, PRESETS, PymooRefiner, adaptive_rates, genetic_options, population_diversity)
from tunelab.optimize.engines.pymoo_operators import ResetMutation, TruncationSelection
from tunelab.optimize.space import (ChoiceDimension, IntDimension, SearchSpace, TripletDimension, space_from_spec)

QPS = (Metric("qps", "maximize"),)
TWO = (Metric("qps", "maximize"), Metric("latency_ms", "minimize"))
GRID4 = space_from_spec({f"k{i}": {"kind": "int", "low": 0, "high": 9} for i in range(4)})   # 10^4 configurations


def separable(config: dict[str, Any]) -> dict[str, float]:
    """Maximum 0 at k_i = 7 for every knob."""
    return {"qps": -float(sum((v - 7) ** 2 for v in config.values()))}


def tradeoff(config: dict[str, Any]) -> dict[str, float]:
    """qps grows with k0, latency grows with k0 and with k1's distance from 9: the front is k1 = 9, any k0."""
    return {"qps": float(config["k0"]), "latency_ms": float(config["k0"] + (9 - config["k1"]) ** 2)}


def engine(name: str = "ga", *, space: SearchSpace = GRID4, objectives=QPS, seed: int = 0, budget: int = 200,
           preset: str | None = None, **options: Any) -> PymooRefiner:
    return make_engine(name, EngineSettings(space, objectives, seed, budget, options=options), preset)


def generation(e: PymooRefiner, f: Callable[[dict], dict], told: list | None = None) -> list[Candidate]:
    """Ask one population, tell each candidate its measurement; returns what was asked."""
    batch = e.ask()
    for c in batch:
        measurements = [f(c.config)]
        e.tell(c, measurements)
        if told is not None:
            told.append((c.config, measurements))
    return batch


def configs(batch: list[Candidate]) -> list[tuple]:
    return [(tuple(sorted(c.config.items())), c.origin) for c in batch]


# ---- search --------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_ga_finds_the_optimum_of_a_separable_function_in_a_few_generations(seed: int) -> None:
    # 10^4 configurations; 25 generations of the lab preset ask <= 158: random search hits the optimum ~1.6 %
    e = engine(seed=seed, preset="lab")
    best = -math.inf
    for _ in range(25):
        best = max([best] + [separable(c.config)["qps"] for c in generation(e, separable)])
    assert best == 0.0


def test_nsga2_with_two_conflicting_objectives_spreads_over_the_front() -> None:
    e = engine("nsga2", objectives=TWO, seed=1, pop_size=12)
    for _ in range(30):
        generation(e, tradeoff)
    front = [ind for ind in e.algorithm.pop if ind.get("rank") == 0]
    points = {e.space.decode(ind.X)["k0"] for ind in front if e.space.decode(ind.X)["k1"] == 9}
    assert len(front) >= 6
    assert all(e.space.decode(ind.X)["k1"] == 9 for ind in front), "a rank-0 member off the true front"
    assert max(points) - min(points) >= 6, f"the front covers only qps {sorted(points)}"


def test_nsga2_runs_with_one_objective() -> None:
    e = engine("nsga2", seed=2, pop_size=8)
    first = [separable(c.config)["qps"] for c in generation(e, separable)]
    for _ in range(10):
        generation(e, separable)
    assert max(separable(e.space.decode(ind.X))["qps"] for ind in e.algorithm.pop) > max(first)


def test_a_failed_measurement_is_told_as_the_penalty() -> None:
    e = engine(pop_size=4)
    batch = e.ask()
    for c in batch:
        e.tell(c, [{"qps": math.nan}] if c is batch[0] else [separable(c.config)])
    failed = [ind for ind in e.algorithm.pop if e.space.decode(ind.X) == batch[0].config]
    assert [ind.F[0] for ind in failed] == [FAILED_PENALTY]


# ---- ask / tell protocol -------------------------------------------------------------------------


def test_baseline_and_initial_configurations_come_first_then_random_ones_with_origins() -> None:
    baseline, extra = {f"k{i}": 0 for i in range(4)}, {f"k{i}": 1 for i in range(4)}
    e = make_engine("ga", EngineSettings(GRID4, QPS, 0, 200, baseline, (extra, baseline), {"pop_size": 5}))
    batch = e.ask()
    assert [c.config for c in batch[:2]] == [baseline, extra]
    assert [c.origin for c in batch] == ["baseline"] + ["initial"] * 4
    assert len({tuple(c.config.values()) for c in batch}) == 5
    for c in batch:
        e.tell(c, [separable(c.config)])
    assert {c.origin for c in e.ask()} == {"offspring"}


def test_a_partial_ask_keeps_the_rest_pending_and_pymoo_waits_for_every_tell() -> None:
    e = engine(pop_size=6, offspring=6)
    first, second = e.ask(4), e.ask(4)
    assert (len(first), len(second)) == (4, 2)
    for c in first + second[:1]:
        e.tell(c, [separable(c.config)])
    assert e.generation == 0
    assert e.ask() == second[1:], "the untold member is asked again, not a new generation"
    e.tell(second[1], [separable(second[1].config)])
    assert e.generation == 1
    assert {c.origin for c in e.ask()} == {"offspring"}


def test_a_re_told_configuration_updates_the_population() -> None:
    e = engine(pop_size=4)
    batch = generation(e, separable)
    target = batch[1].config
    e.tell(batch[1], [separable(target), {"qps": 5.0}])
    F = [ind.F[0] for ind in e.algorithm.pop if e.space.decode(ind.X) == target]
    assert F == [-(separable(target)["qps"] + 5.0) / 2]


def test_leaders_are_the_best_distinct_population_members() -> None:
    e = engine(pop_size=8)
    assert e.leaders(3) == []
    for _ in range(3):
        generation(e, separable)
    pop = sorted((separable(e.space.decode(ind.X))["qps"] for ind in e.algorithm.pop), reverse=True)
    assert [separable(c)["qps"] for c in e.leaders(3)] == pop[:3]
    n = engine("nsga2", objectives=TWO, pop_size=8)
    for _ in range(3):
        generation(n, tradeoff)
    ranks = {n.space.key(n.space.decode(ind.X)): ind.get("rank") for ind in n.algorithm.pop}
    leading = [ranks[n.space.key(c)] for c in n.leaders(8)]
    assert leading == sorted(leading) and leading[0] == 0


def test_a_space_smaller_than_the_population_is_exhausted_cleanly() -> None:
    e = engine(space=space_from_spec({"a": {"kind": "choice", "values": [1, 2, 3]}}), pop_size=8)
    asked = [len(generation(e, lambda c: {"qps": float(c["a"])})) for _ in range(4)]
    assert asked[0] == 3 and asked[-1] == 0
    assert e.exhausted and e.ask() == []


def test_same_seed_same_asks_other_seed_other_asks() -> None:
    def run(seed: int) -> list:
        e = engine(seed=seed, preset="ioperf")
        return [configs(generation(e, separable)) for _ in range(6)]
    assert run(4) == run(4)
    assert run(4) != run(5)


def test_knob_types_are_kept() -> None:
    space = SearchSpace([
        IntDimension("net.core.somaxconn", 16, 4096, scale="log", n=9),
        ChoiceDimension("cc", ("cubic", "bbr", "reno")),
        ChoiceDimension("syncookies", (True, False)),
        TripletDimension("tcp_rmem", tuple(IntDimension(f"r{i}", lo, hi, scale="log", n=5)   # type: ignore[arg-type]
                                           for i, (lo, hi) in enumerate([(4096, 65536), (16384, 1 << 20),
                                                                         (65536, 1 << 24)]))),
    ])
    e = engine(space=space, pop_size=10)
    seen = []
    for _ in range(5):
        seen += generation(e, lambda c: {"qps": float(c["net.core.somaxconn"] + c["tcp_rmem"][1] / 1000)})
    state = json.loads(json.dumps(e.state()))
    restored = engine(space=space, pop_size=10)
    restored.restore(state, [])
    seen += restored.ask()
    for c in seen:
        v = c.config
        assert type(v["net.core.somaxconn"]) is int and type(v["cc"]) is str and type(v["syncookies"]) is bool
        assert type(v["tcp_rmem"]) is tuple and all(type(x) is int for x in v["tcp_rmem"])
        assert list(v["tcp_rmem"]) == sorted(v["tcp_rmem"])


def test_typed_config_keeps_a_sorted_triplet_as_asked() -> None:
    # a sorted triplet's components may lie off their own grids; typed_config() must not move them
    space = SearchSpace([TripletDimension("r", tuple(IntDimension(f"r{i}", lo, hi, scale="log", n=5)  # type: ignore
                                                     for i, (lo, hi) in enumerate([(4096, 65536), (16384, 1 << 20),
                                                                                   (65536, 1 << 24)])))])
    e = engine(space=space, pop_size=30)
    batch = e.ask()
    assert all(typed_config(space, json.loads(json.dumps(c.config))) == c.config for c in batch)
    for c in batch:
        e.tell(Candidate(typed_config(space, c.config), c.origin), [{"qps": float(sum(c.config["r"]))}])
    assert e.generation == 1


# ---- state and restore ---------------------------------------------------------------------------


def _resume_case(name: str, objectives, f, preset: str | None, options: dict[str, Any]) -> None:
    gens, stop = 8, 3
    a = engine(name, objectives=objectives, seed=7, preset=preset, **options)
    told_a: list = []
    batches_a = []
    for g in range(gens):
        batches_a.append(configs(generation(a, f, told_a)))
        if g == 1:   # a re-measurement (e.g. by the race) of a population member
            member = a.space.decode(a.algorithm.pop[0].X)
            a.tell(Candidate(member), [f(member), f(member)])
            told_a.append((member, [f(member), f(member)]))

    b = engine(name, objectives=objectives, seed=7, preset=preset, **options)
    told_b: list = []
    for g in range(stop):
        generation(b, f, told_b)
        if g == 1:
            member = b.space.decode(b.algorithm.pop[0].X)
            b.tell(Candidate(member), [f(member), f(member)])
            told_b.append((member, [f(member), f(member)]))
    state = json.loads(json.dumps(b.state(), allow_nan=False))
    c = engine(name, objectives=objectives, seed=7, preset=preset, **options)
    c.restore(state, told_b)
    assert c.state() == state
    assert [configs(generation(c, f)) for _ in range(gens - stop)] == batches_a[stop:]
    assert c.state() == json.loads(json.dumps(a.state()))


@pytest.mark.parametrize("name, objectives, f, preset, options", [
    ("ga", QPS, separable, "lab", {}),
    ("ga", QPS, separable, "ioperf", {}),
    ("ga", QPS, separable, None, {"pop_size": 12, "selection": 0.25, "gene_mutation": 0.3}),
    ("nsga2", TWO, tradeoff, None, {"pop_size": 10, "offspring": 6}),
])
def test_restore_continues_exactly_as_the_uninterrupted_engine(name, objectives, f, preset, options) -> None:
    _resume_case(name, objectives, f, preset, options)


@pytest.mark.parametrize("asked, told, stored", [(0, 0, False), (3, 0, False), (3, 2, True), (10, 4, False),
                                                  (10, 4, True), (10, 10, False)])
def test_restore_from_a_state_taken_inside_a_generation(asked: int, told: int, stored: bool) -> None:
    """A state recorded after ``asked`` candidates of a generation were handed out and ``told`` of them
    told; with ``stored`` the rest were measured too (the store has them) and reach the engine only
    through ``restore``'s ``told``. The resumed engine completes that generation and continues exactly."""
    def start() -> tuple[PymooRefiner, list]:
        e, told_pairs = engine("nsga2", objectives=TWO, seed=3, pop_size=10), []
        for _ in range(2):
            generation(e, tradeoff, told_pairs)
        return e, told_pairs

    a, _ = start()
    reference = [configs(generation(a, tradeoff)) for _ in range(4)]

    b, told_b = start()
    half = b.ask(asked) if asked else []
    for cand in half[:told]:
        b.tell(cand, [tradeoff(cand.config)])
        told_b.append((cand.config, [tradeoff(cand.config)]))
    state = json.loads(json.dumps(b.state()))
    if stored:
        told_b += [(cand.config, [tradeoff(cand.config)]) for cand in half[told:]]

    c = engine("nsga2", objectives=TWO, seed=3, pop_size=10)
    c.restore(state, told_b)
    completed = configs(half[:told]) + (configs(half[told:]) if stored else [])
    while c.generation == 2:
        batch = c.ask()
        assert batch, "the resumed engine asked nothing before its generation was complete"
        completed += configs(batch)
        for cand in batch:
            c.tell(cand, [tradeoff(cand.config)])
    assert sorted(completed) == sorted(reference[0])
    assert [configs(generation(c, tradeoff)) for _ in range(3)] == reference[1:]


def test_restore_refuses_a_used_engine_another_engines_state_and_garbage() -> None:
    e = engine(pop_size=4)
    generation(e, separable)
    state = e.state()
    with pytest.raises(RefineError, match="freshly made"):
        e.restore(state, [])
    with pytest.raises(RefineError, match="not a nsga2 state"):
        engine("nsga2", pop_size=4).restore(state, [])
    with pytest.raises(RefineError, match="unreadable"):
        engine(pop_size=4).restore({**state, "population": [{"genes": [1]}]}, [])
    fresh = engine(pop_size=4)
    fresh.ask()
    with pytest.raises(RefineError, match="same settings"):
        engine(pop_size=4, seed=9).restore(fresh.state(), [])


# ---- presets and options -------------------------------------------------------------------------


def test_gembala2013_options_reach_pymoo() -> None:
    e = engine(preset="gembala2013", budget=PRESETS.get("gembala2013").budget)
    algorithm = e.algorithm
    assert algorithm.pop_size == 80 and algorithm.n_offsprings == 8
    assert isinstance(algorithm.mating.selection, TruncationSelection) and algorithm.mating.selection.fraction == 0.1
    assert isinstance(algorithm.mating.mutation, ResetMutation)
    assert (e.crossover_rate, e.mutation_rate) == (0.5, 0.16)
    assert len(generation(e, separable)) == 80
    assert len(generation(e, separable)) == 8
    assert PRESETS.get("gembala2013").budget == 80 + 40 * 8


def test_every_preset_is_for_a_pymoo_engine_and_builds() -> None:
    for name in ("gembala2013", "ioperf", "lab", "nsga2-crowding"):
        preset = PRESETS.get(name)
        objectives = TWO if preset.engine == "nsga2" else QPS
        e = engine(preset.engine, objectives=objectives, preset=name, budget=preset.budget)
        assert e.algorithm.pop_size == min(preset.options["pop_size"], GRID4.size)
        assert preset.description


def test_nsga2_crowding_preset_follows_seed_003() -> None:
    e = engine("nsga2", objectives=TWO, preset="nsga2-crowding", budget=6432)
    assert (e.algorithm.pop_size, e.algorithm.n_offsprings) == (32, 32)
    assert (e.crossover_rate, e.mutation_rate, e.algorithm.mating.mutation.gene_prob) == (1.0, 0.75, 0.05)
    assert type(e.algorithm.survival).__name__ == "RankAndCrowding"


def test_the_population_shrinks_to_a_small_budget() -> None:
    assert engine(preset="gembala2013", budget=30).algorithm.pop_size == 30
    assert engine(preset="lab", budget=1).algorithm.pop_size == 2
    assert genetic_options({"pop_size": 80, "selection": 0.1}, budget=30).offspring == 3


def test_adaptive_rates_move_as_diversity_falls() -> None:
    e = engine(preset="ioperf", budget=400)
    for _ in range(25):
        generation(e, separable)
    rows = e.generations
    assert rows[0]["diversity"] == e.initial_diversity and (rows[0]["crossover"], rows[0]["mutation"]) == (0.9, 0.1)
    last = rows[-1]
    assert last["diversity"] < 0.6 * e.initial_diversity, "the population did not converge; nothing to adapt"
    assert (last["crossover"], last["mutation"]) == adaptive_rates(last["diversity"], e.initial_diversity,
                                                                   (0.9, 0.7), (0.1, 0.25))
    assert last["crossover"] < 0.85 and last["mutation"] > 0.14
    assert (e.crossover_rate, e.mutation_rate) == (last["crossover"], last["mutation"])


def test_fixed_rates_stay_fixed_without_adaptive() -> None:
    e = engine(preset="lab")
    for _ in range(10):
        generation(e, separable)
    assert {(g["crossover"], g["mutation"]) for g in e.generations} == {(0.9, 0.3)}


def test_population_diversity_and_adaptive_rates() -> None:
    upper = np.array([3, 3, 0])
    assert population_diversity(np.array([[1, 2, 0], [1, 2, 0]]), upper) == 0.0
    assert population_diversity(np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0]]), upper) == pytest.approx(2 / 3)
    assert adaptive_rates(0.8, 0.8, (0.9, 0.7), (0.1, 0.25)) == (0.9, 0.1)
    assert adaptive_rates(1.0, 0.8, (0.9, 0.7), (0.1, 0.25)) == (0.9, 0.1)


def test_reset_mutation_changes_genes_within_bounds() -> None:
    class Problem:
        xl, xu = np.array([0.0, 0.0, 5.0]), np.array([3.0, 1.0, 5.0])
    X = np.tile([1.0, 0.0, 5.0], (200, 1))
    rng = np.random.default_rng(0)
    one = ResetMutation()._do(Problem, X, random_state=rng)
    assert ((one != X).sum(axis=1) == 1).all(), "exactly one movable gene changes"
    assert (one[:, 2] == 5).all() and (one >= Problem.xl).all() and (one <= Problem.xu).all()
    assert set(one[:, 0]) == {0.0, 1.0, 2.0, 3.0} and set(one[:, 1]) == {0.0, 1.0}
    many = ResetMutation(gene_prob=1.0)._do(Problem, X, random_state=rng)
    assert ((many[:, :2] != X[:, :2]).all())


def test_a_preset_of_another_engine_is_refused() -> None:
    settings = EngineSettings(GRID4, TWO, 0, 200)
    with pytest.raises(RefineError, match="for the 'ga' engine"):
        make_engine("nsga2", settings, "gembala2013")
    with pytest.raises(RefineError, match="for the 'nsga2' engine"):
        make_engine("ga", EngineSettings(GRID4, QPS, 0, 200), "nsga2-crowding")


def test_ga_with_two_objectives_is_refused_with_one_clear_error() -> None:
    with pytest.raises(RefineError) as info:
        make_engine("ga", EngineSettings(GRID4, TWO, 0, 200))
    message = str(info.value)
    assert "one objective" in message and "nsga2" in message and "\n" not in message


@pytest.mark.parametrize("options, match", [
    ({"population": 8}, "no option"),
    ({"pop_size": 1}, "pop_size"),
    ({"pop_size": "eight"}, "pop_size"),
    ({"crossover": 1.5}, "crossover"),
    ({"mutation": [0.1, 0.2, 0.3]}, "mutation"),
    ({"adaptive": "maybe"}, "adaptive"),
    ({"selection": 0}, "selection"),
])
def test_bad_options_are_refused(options: dict[str, Any], match: str) -> None:
    with pytest.raises(RefineError, match=match):
        engine(**options)


def test_selection_is_a_ga_option() -> None:
    with pytest.raises(RefineError, match="GA option"):
        engine("nsga2", objectives=TWO, selection=0.1)


def test_options_from_text_are_read() -> None:
    o = genetic_options({"pop_size": "12", "crossover": "0.9,0.7", "adaptive": "true"}, budget=None)
    assert (o.pop_size, o.crossover, o.adaptive) == (12, (0.9, 0.7), True)


def test_engines_are_registered() -> None:
    assert ENGINES.get("ga").__name__ == "ga_engine" and ENGINES.get("nsga2").__name__ == "nsga2_engine"
