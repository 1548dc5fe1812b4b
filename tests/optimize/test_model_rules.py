"""The default engine's budget rules (issue 30): when pairwise terms enter the model, cliffs learned from
one measurement, and the race's share by budget and noise. SYNTHETIC data only; no timing."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tunelab.model import Metric
from tunelab.optimize import EngineSettings, make_engine, refine
from tunelab.optimize.engines.model import (CLIFF_RATIO, PAIR_SHARES, RACE_MIN_BUDGET, RACE_SHARE, RELEVANCE,
                                            InteractionModel, pair_shares, race_budget)
from tunelab.optimize.space import space_from_spec
from tunelab.simulator import SimulatorEvaluator, get_surface

SPACE = space_from_spec({f"k{i}": {"kind": "choice", "values": ["a", "b", "c"]} for i in range(4)})
QPS = (Metric("qps", "maximize"),)


def engine(name: str = "tunelab", budget: int = 40, **options):
    return make_engine(name, EngineSettings(SPACE, QPS, seed=2, budget=budget, options=options))


def every_config() -> list[dict]:
    return [dict(zip(SPACE.ids, levels)) for levels in itertools.product("abc", repeat=4)]


# ---- the model grows with the data ----------------------------------------------------------------

def test_pairwise_terms_enter_only_past_the_number_of_knobs() -> None:
    knobs = len(SPACE.upper)
    assert knobs == 4
    assert pair_shares(knobs, knobs) == (0.0,)
    assert pair_shares(knobs + 1, knobs) == PAIR_SHARES


def test_the_fitted_model_has_no_pair_term_while_the_data_are_few() -> None:
    """An XOR interaction of k0 and k1 (no main effect): with 4 configurations (as many as knobs) the model may
    not use pairs; with all 81 it chooses them (the marginal likelihood prefers the pair share)."""
    def value(c: dict) -> float:
        return 100.0 + (10.0 if (c["k0"] == "a") != (c["k1"] == "a") else 0.0)

    configs = every_config()
    X = np.array([SPACE.encode(c) for c in configs], dtype=float)
    y = np.log([value(c) for c in configs])
    ordered = np.zeros(X.shape[1], dtype=bool)
    few = InteractionModel(X[:4], y[:4], ordered, pair_shares(4, len(SPACE.upper)))
    many = InteractionModel(X, y, ordered, pair_shares(len(X), len(SPACE.upper)))
    assert few.pair == 0.0
    assert many.pair > 0.0


# ---- cliffs ---------------------------------------------------------------------------------------

def test_a_level_only_a_collapsed_configuration_had_is_excluded() -> None:
    refiner = engine("model")
    from tunelab.optimize.engines import Candidate

    for config in [{"k0": "a", "k1": "a", "k2": "a", "k3": "a"}, {"k0": "b", "k1": "b", "k2": "b", "k3": "a"},
                   {"k0": "c", "k1": "c", "k2": "c", "k3": "a"}]:
        refiner.tell(Candidate(config), [{"qps": 100.0}])
    refiner.tell(Candidate({"k0": "a", "k1": "b", "k2": "c", "k3": "c"}), [{"qps": 10.0}])
    assert refiner.cliffs() == {(3, 2)}          # k3=c: no healthy configuration had it
    refiner.tell(Candidate({"k0": "b", "k1": "a", "k2": "a", "k3": "b"}), [{"qps": float("nan")}])  # failed
    assert refiner.cliffs() == {(3, 2), (3, 1)}
    refiner.asks = 1                              # past the design: the model proposes
    for _ in range(5):
        for candidate in refiner.ask(None):
            assert candidate.config["k3"] == "a"
            refiner.tell(candidate, [{"qps": 100.0}])
    assert all(c["k3"] == "a" for c in refiner.leaders(4))


# ---- the race's share -----------------------------------------------------------------------------

@pytest.mark.parametrize("budget, noise, expected", [
    (RACE_MIN_BUDGET - 1, 1.0, 0),               # too small to race
    (30, 0.02, 0),                               # the noise is small against the SESOI: no race
    (30, 0.1, 2), (30, 0.5, 9), (30, 1.0, 9),    # the share grows with the noise up to RACE_SHARE
    (100, 1.0, 30), (60, 0.1, 4),
])
def test_race_budget_by_budget_and_noise(budget: int, noise: float, expected: int) -> None:
    assert race_budget(budget, noise) == expected
    assert race_budget(budget, noise) <= RACE_SHARE * budget


class _Model:
    """A fitted model's noise share and scale (log units): noise SD = sqrt(noise) * scale."""

    def __init__(self, noise: float, scale: float = 0.1) -> None:
        self.noise, self.scale = noise, scale


def test_the_tunelab_engine_stops_its_search_to_leave_the_race_its_share() -> None:
    from tunelab.optimize.engines import Candidate

    refiner = engine("tunelab", budget=30)
    refiner.asks = 1                                  # told after the first ask: the search's own measurements
    for config in every_config()[:21]:
        refiner.tell(Candidate(config), [{"qps": 100.0}])
    assert refiner.spent() == 21
    # noise SD 0.1 * sqrt(0.3) = 5.5 % against the default SESOI of 5 %: a full race, 30 - 9 <= 21
    assert refiner.search_done(_Model(0.3))
    assert not refiner.search_done(_Model(0.02, 0.01))   # noise SD 0.14 %: search to the end
    assert not engine("model", budget=30).search_done(_Model(0.3))   # the model engine never races
    for config in every_config()[21:31]:
        refiner.tell(Candidate(config), [{"qps": 100.0}])
    assert not refiner.search_done(_Model(0.6))       # the budget is spent: a continued search searches on


def test_the_race_shrinks_past_ten_knobs() -> None:
    """27 knobs: the race gets at most 10/27 of its share (11 of 100 measurements, not 30)."""
    from tunelab.optimize.engines import Candidate

    wide = make_engine("tunelab", EngineSettings(space_from_spec(
        {f"k{i}": {"kind": "choice", "values": ["a", "b"]} for i in range(27)}), QPS, seed=1, budget=100))
    wide.asks = 1
    configs = [{f"k{j}": "ab"[(i >> j) & 1] if j < 7 else "a" for j in range(27)} for i in range(89)]
    for config in configs[:80]:
        wide.tell(Candidate(config), [{"qps": 100.0}])
    assert not wide.search_done(_Model(0.3))           # 80 < 100 - 11 (a full share would stop at 70)
    for config in configs[80:]:
        wide.tell(Candidate(config), [{"qps": 100.0}])
    assert wide.search_done(_Model(0.3))               # 89 = 100 - 11


def test_the_noise_ratio_is_the_models_noise_sd_against_the_sesoi() -> None:
    from tunelab.optimize.engines import Candidate

    refiner = engine("tunelab", budget=30)
    refiner.tell(Candidate(every_config()[0]), [{"qps": 100.0}])
    assert refiner.noise_ratio(_Model(0.25, 0.1)) == pytest.approx(0.05 / np.log(1.05))
    refiner.tell(Candidate(every_config()[1]), [{"qps": -1.0}])     # not on a log scale: a full race
    assert refiner.noise_ratio(_Model(0.25, 0.1)) == float("inf")


def test_measurements_told_before_the_first_ask_are_not_the_searchs() -> None:
    from tunelab.optimize.engines import Candidate

    refiner = engine("tunelab", budget=30)
    refiner.tell(Candidate(every_config()[0]), [{"qps": 100.0}, {"qps": 101.0}])   # a warm start
    refiner.ask(None)
    assert refiner.pretold == 2 and refiner.spent() == 0
    again = engine("tunelab", budget=30)
    again.restore(refiner.state(), [(every_config()[0], [{"qps": 100.0}, {"qps": 101.0}])])
    assert again.spent() == 0


def test_refine_races_at_most_its_share_and_never_below_the_minimum_budget() -> None:
    surface = get_surface("hard512")
    for budget in (RACE_MIN_BUDGET - 2, 40):
        result = refine(surface.search_space(), SimulatorEvaluator(surface, seed=4), ["qps:max"], budget=budget,
                        seed=4, baseline=surface.baseline)
        raced = int((result.history["stage"] == "race").sum())
        assert result.evaluations == budget
        assert raced <= round(RACE_SHARE * budget)
        if budget < RACE_MIN_BUDGET:
            assert raced == 0


def test_a_continued_search_races_on_its_extra_measurements(tmp_path) -> None:
    """The engine is rebuilt with the first budget, so it cannot end a continuation's search itself: the driver
    reserves its continued_race_share of the extra measurements."""
    from tunelab.optimize.evaluators import StoreEvaluator
    from tunelab.optimize.history import StoreSearchLog
    from tunelab.store import Store

    surface = get_surface("hard512")
    with Store.open(tmp_path / "s.sqlite", study="s", design_hash="h", design_text="t") as store:
        def run(budget: int):
            return refine(surface.search_space(), StoreEvaluator(SimulatorEvaluator(surface, seed=4), store),
                          ["qps:max"], budget=budget, seed=4, baseline=surface.baseline, log=StoreSearchLog(store))
        run(30)
        more = run(50)
    extra = more.history.iloc[30:]
    assert len(extra) == 20
    assert int((extra["stage"] == "race").sum()) == round(RACE_SHARE * 20)


# ---- automatic relevance ----------------------------------------------------------------------------------

def test_relevance_weighs_the_knob_that_matters_and_predicts_better() -> None:
    """Only k0 moves the value (level c: +10 %) among 8 knobs, 20 configurations with 0.5 % noise: after the
    relevance rounds k0 weighs most, over three times any idle knob, and the predictions over all 3^8
    configurations are closer to the truth than with every knob weighing the same."""
    rng = np.random.default_rng(5)
    every = np.array(list(itertools.product(range(3), repeat=8)), dtype=float)
    X = every[rng.choice(len(every), 20, replace=False)]
    truth = np.log(100.0 * np.where(every[:, 0] == 2, 1.1, 1.0))
    y = np.log(100.0 * np.where(X[:, 0] == 2, 1.1, 1.0)) + rng.normal(0.0, 0.005, len(X))
    ordered = np.zeros(8, dtype=bool)
    equal = InteractionModel(X, y, ordered, (0.0,), relevance=0)
    weighed = InteractionModel(X, y, ordered, (0.0,), relevance=2)
    assert equal.weights.tolist() == [1.0] * 8
    assert weighed.weights.mean() == pytest.approx(1.0)
    assert weighed.weights.argmax() == 0 and weighed.weights[0] > 3 * np.delete(weighed.weights, 0).max()
    error = {name: float(np.sqrt(np.mean((model.predict_mean(every) - truth) ** 2)))
             for name, model in (("equal", equal), ("weighed", weighed))}
    assert error["weighed"] < error["equal"]



def test_knobs_weigh_alike_unless_the_relevance_option_asks_for_rounds() -> None:
    assert engine("tunelab").relevance == RELEVANCE == 0
    assert engine("tunelab", relevance=2).relevance == 2
