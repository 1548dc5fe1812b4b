"""The Optuna engines (tpe, gp, cmaes, optuna-nsga2) behind the ask/tell contract: typed candidates,
seeded determinism, resume from JSON state, baseline first, re-tells, failures, NSGA-II generations."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import pytest

from tunelab.model import Metric
from tunelab.optimize.engines.base import ENGINES, Candidate, EngineSettings, RefineError, typed_config
from tunelab.optimize.engines.optuna_engine import (GA_GENERATION_KEY, SAMPLERS, OptunaRefiner, gene_names,
                                                    missing_extra, optuna_distributions, pooled_values)
from tunelab.optimize.history import config_key
from tunelab.optimize.space import space_from_spec

QPS = Metric("qps", "maximize")
LATENCY = Metric("latency_ms", "minimize")
ENGINE_NAMES = ["tpe", "gp", "cmaes", "optuna-nsga2"]
#: what each engine's natural batch is made small with (gp proposals cost ~0.2 s each)
SMALL = {"tpe": {"batch_size": 4, "n_startup_trials": 3}, "gp": {"batch_size": 2, "n_startup_trials": 3},
         "cmaes": {"popsize": 4, "n_startup_trials": 3}, "optuna-nsga2": {"population_size": 4}}
BASELINE = {"somaxconn": 128, "cc": "cubic", "sack": True, "rmem": (4096, 87380, 6291456)}


@pytest.fixture
def space():
    """108 configurations: an int on a log grid, a string choice, a bool and a choice of triplets."""
    return space_from_spec({
        "somaxconn": {"kind": "int", "low": 16, "high": 4096, "scale": "log", "n": 9},
        "cc": {"kind": "choice", "values": ["cubic", "bbr", "reno"]},
        "sack": {"kind": "choice", "values": [True, False]},
        "rmem": {"kind": "choice", "values": [(4096, 87380, 6291456), (4096, 262144, 16777216)]},
    })


def qps(config: dict[str, Any]) -> float:
    """A deterministic response: best at somaxconn 1024 with bbr, sack and the large buffers."""
    return (100.0 - 5.0 * (math.log2(config["somaxconn"]) - 10) ** 2 + 20.0 * (config["cc"] == "bbr")
            + 3.0 * config["sack"] + 4.0 * (config["rmem"][1] == 262144))


def measure(config: dict[str, Any]) -> dict[str, float]:
    return {"qps": qps(config), "latency_ms": 1000.0 / qps(config) + config["somaxconn"] / 1000.0}


def settings(space, name: str, seed: int = 0, objectives=(QPS,), **kw) -> EngineSettings:
    options = {**SMALL[name], **kw.pop("options", {})}
    return EngineSettings(space, tuple(objectives), seed=seed, budget=kw.pop("budget", 24),
                          baseline=kw.pop("baseline", BASELINE), initial=kw.pop("initial", ()), options=options)


def run(s: EngineSettings, name: str, batches: int, stop: int | None = None) -> list[list[tuple]]:
    """Ask/tell ``batches`` natural batches like the driver (pooled measurements, re-tells of repeats);
    with ``stop``: a new engine restored from the JSON state after batch ``stop`` goes on."""
    engine = ENGINES.get(name)(s)
    told: dict[tuple, tuple[dict, list]] = {}
    asked = []
    for k in range(batches):
        if k == stop:
            state = json.loads(json.dumps(engine.state()))
            engine = ENGINES.get(name)(s)
            # the store's order of the told configurations need not be the engine's: give them reversed
            engine.restore(state, [(json.loads(json.dumps(c)), m) for c, m in reversed(told.values())])
        batch = engine.ask()
        asked.append([(c.config, c.origin) for c in batch])
        for candidate in batch:
            key = config_key(candidate.config)
            config, measurements = told.setdefault(key, (candidate.config, []))
            measurements.append(measure(config))
            engine.tell(candidate, measurements)
    return asked


def test_the_four_engines_are_registered_and_optuna_loads_lazily():
    assert set(SAMPLERS) == set(ENGINE_NAMES) and all(name in ENGINES for name in ENGINE_NAMES)
    code = ("import sys, tunelab.optimize.engines.optuna_engine as m; "
            "print('optuna' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_genes_map_to_ordered_int_and_categorical_distributions(space):
    from optuna.distributions import CategoricalDistribution, IntDistribution

    dists = optuna_distributions(space)
    assert list(dists) == gene_names(space) == ["somaxconn", "cc", "sack", "rmem"]
    assert dists["somaxconn"] == IntDistribution(0, 8)   # the log grid's index: order kept
    assert dists["cc"] == CategoricalDistribution((0, 1, 2))
    assert isinstance(dists["sack"], CategoricalDistribution) and isinstance(dists["rmem"], CategoricalDistribution)
    triplets = space_from_spec({"r": {"kind": "triplet", "components": [{"low": 1, "high": 3}] * 3},
                                "levels": {"kind": "choice", "values": [16, 128, 4096]}})
    assert optuna_distributions(triplets) == {f"r:{i}": IntDistribution(0, 2) for i in range(3)} | {
        "levels": IntDistribution(0, 2)}


def check_asks(space, name: str, asked: list[list[tuple]]) -> None:
    """Baseline first, then the engine's proposals, each configuration once, typed as the space."""
    configs = [c for batch in asked for c, _ in batch]
    assert len({config_key(c) for c in configs}) == len(configs)
    assert asked[0][0] == (BASELINE, "baseline")
    assert {o for batch in asked for _, o in batch[1:]} <= {name, "random"}
    for config in configs:
        assert config == typed_config(space, config)
        assert [type(config[k]) for k in ("somaxconn", "cc", "sack", "rmem")] == [int, str, bool, tuple]


@pytest.mark.parametrize("name", ["tpe", "cmaes", "optuna-nsga2"])
def test_asks_are_typed_distinct_and_resume_exactly(space, name):
    s = settings(space, name)
    uninterrupted = run(s, name, 4)
    assert run(s, name, 4, stop=2) == uninterrupted   # a fresh engine, restored from JSON, asks the same
    check_asks(space, name, uninterrupted)


@pytest.mark.parametrize("name", ["tpe", "cmaes", "optuna-nsga2"])
def test_the_seed_decides_the_asks(space, name):
    assert run(settings(space, name, seed=3), name, 3) == run(settings(space, name, seed=3), name, 3)
    assert run(settings(space, name, seed=3), name, 3) != run(settings(space, name, seed=4), name, 3)


def test_tpe_finds_the_optimum_of_a_deterministic_response(space):
    s = settings(space, "tpe", budget=40, options={"batch_size": 4, "n_startup_trials": 8})
    asked = run(s, "tpe", 10)
    best = max(qps(c) for batch in asked for c, _ in batch)
    assert best == max(qps(c) for c in space.all_configs())


def test_baseline_then_initial_then_proposals(space):
    initial = ({"somaxconn": 1024, "cc": "bbr", "sack": False, "rmem": [4096, 262144, 16777216]},)
    engine = ENGINES.get("tpe")(settings(space, "tpe", initial=initial))
    first = engine.ask(3)
    assert [c.origin for c in first] == ["baseline", "initial", "tpe", "tpe", "tpe"]
    assert first[1].config["rmem"] == (4096, 262144, 16777216)      # a JSON list is given back as a tuple
    for c in first:
        engine.tell(c, [measure(c.config)])
    assert [c.origin for c in engine.ask(2)] == ["tpe", "tpe"]


def test_a_configuration_told_again_is_seen_with_its_new_mean(space):
    """Told the same final pooled measurements, two engines ask the same, whatever was told before;
    an engine that missed the re-tell asks otherwise."""
    a, b, c = (ENGINES.get("tpe")(settings(space, "tpe", seed=1, options={"n_startup_trials": 1})) for _ in range(3))
    batch = a.ask(4)
    assert b.ask(4) == c.ask(4) == batch
    best = max(batch, key=lambda cand: qps(cand.config))
    worse = [{"qps": 0.0, "latency_ms": 50.0}] * 9
    for engine in (a, c):
        for cand in batch:
            engine.tell(cand, [measure(cand.config)])
    a.tell(best, [measure(best.config)] + worse)   # re-measured: the best so far is now the worst
    for cand in batch:
        b.tell(cand, [measure(cand.config)] + (worse if cand == best else []))
    assert a.ask(4) == b.ask(4) != c.ask(4)
    assert a.state() != c.state()   # different asks, different order of configurations


def test_a_failed_configuration_is_not_asked_again(space):
    assert pooled_values([{"qps": math.nan}, {"qps": math.nan}], [QPS]) is None
    assert pooled_values([{"qps": math.nan, "latency_ms": 2.0}], [QPS, LATENCY]) is None
    assert pooled_values([{"qps": 4.0, "latency_ms": 2.0}, {"qps": math.nan}], [QPS, LATENCY]) == [4.0, 2.0]
    small = space_from_spec({"a": {"kind": "choice", "values": ["x", "y", "z"]},
                             "b": {"kind": "choice", "values": [True, False]}})
    engine = ENGINES.get("tpe")(EngineSettings(small, (QPS,), seed=0, options={"n_startup_trials": 1}))
    asked = []
    for _ in range(6):
        for c in engine.ask(1):
            asked.append(config_key(c.config))
            engine.tell(c, [{"qps": math.nan}] if c.config["a"] == "x" else [{"qps": float(len(asked))}])
    assert len(set(asked)) == len(asked) == 6   # every configuration once, the failed ones included
    assert engine.ask(1) == []                  # the space is exhausted


def test_optuna_nsga2_keeps_generations_across_rebuilds_with_two_objectives(space):
    s = settings(space, "optuna-nsga2", objectives=(QPS, LATENCY))
    engine = ENGINES.get("optuna-nsga2")(s)
    sizes = []
    for _ in range(4):
        batch = engine.ask()
        sizes.append(len(batch))
        for c in batch:
            engine.tell(c, [measure(c.config)])
    assert sizes == [5, 4, 4, 4]   # the baseline, then a population of 4 per ask
    generations = [g for g in engine.state()["generation"]]
    # the restored generation attribute is the one NSGA-II reads: each population is a new generation
    assert generations == [0] * 5 + [1] * 4 + [2] * 4 + [3] * 4
    assert GA_GENERATION_KEY == "NSGAIISampler:generation"


#: the gp engine's tests need PyTorch (the optional extra); without it they are skipped, saying how to install it
needs_torch = pytest.mark.skipif(missing_extra("gp") is not None, reason=str(missing_extra("gp")))


@needs_torch
def test_gp_on_a_small_budget_resumes_exactly(space):
    s = settings(space, "gp", budget=8)   # GP proposals from the second ask on (~0.5-2 s each)
    uninterrupted = run(s, "gp", 3)
    assert [len(b) for b in uninterrupted] == [3, 2, 2]
    assert run(s, "gp", 3, stop=2) == uninterrupted
    check_asks(space, "gp", uninterrupted)


def test_cmaes_refuses_two_objectives_and_warm_starts_from_the_history(space):
    with pytest.raises(RefineError, match="one objective"):
        ENGINES.get("cmaes")(settings(space, "cmaes", objectives=(QPS, LATENCY)))
    asked = run(settings(space, "cmaes", options={"popsize": 6}), "cmaes", 4)   # warm start from 10 told on
    assert [len(b) for b in asked] == [7, 6, 6, 6]


def test_options_set_the_natural_batch(space):
    assert len(ENGINES.get("tpe")(settings(space, "tpe", options={"batch_size": 3}, baseline=None)).ask()) == 3
    with pytest.raises(RefineError, match="population_size must be at least 2"):
        ENGINES.get("optuna-nsga2")(settings(space, "optuna-nsga2", options={"population_size": 1}))
    with pytest.raises(RefineError, match="batch_size='many' is not a valid int"):
        ENGINES.get("tpe")(settings(space, "tpe", options={"batch_size": "many"}))
    with pytest.raises(RefineError, match="tpe has no option 'population_size'; its options are"):
        ENGINES.get("tpe")(settings(space, "tpe", options={"population_size": 8}))


@needs_torch
def test_gp_options_set_its_batch_and_its_noise_model(space):
    assert OptunaRefiner("gp", settings(space, "gp", baseline=None, options={"batch_size": 5})).batch == 5
    with pytest.raises(RefineError, match="deterministic_objective"):
        ENGINES.get("gp")(settings(space, "gp", options={"deterministic_objective": "maybe"}))


def test_malformed_state_is_refused(space):
    engine = ENGINES.get("tpe")(settings(space, "tpe"))
    with pytest.raises(RefineError, match="malformed"):
        engine.restore({"ask_count": 1, "order": [["x"]]}, [])
    with pytest.raises(RefineError, match="off this search space"):
        engine.restore({"ask_count": 1, "order": [[99, 0, 0, 0]]}, [])


def test_a_config_told_but_never_asked_joins_the_history(space):
    engine = ENGINES.get("tpe")(settings(space, "tpe", baseline=None))
    config = {"somaxconn": 1024, "cc": "bbr", "sack": True, "rmem": (4096, 262144, 16777216)}
    engine.tell(Candidate(config), [measure(config)])
    assert engine.state()["order"] == [[6, 1, 0, 1]]
    assert all(c.config != config for c in engine.ask(10))
