"""Warm starts and continued searches (issue 30, item 3), on the SYNTHETIC simulator only.

* a refinement warm-started from a screen's store counts the screen's measurements (told to the engine
  before its first ask, never measured again, outside the budget), and its first asks differ from a cold start;
* a finished search run again with a larger budget measures exactly the extra measurements, and any other
  changed setting is one error line naming it;
* both resume exactly after a crash.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import tunelab
import tunelab.simulator  # noqa: F401 - registers the simulator target
from tunelab.cli import main
from tunelab.optimize import refine
from tunelab.optimize.evaluators import StoreEvaluator
from tunelab.optimize.history import StoreSearchLog, config_key
from tunelab.simulator import SimulatorEvaluator, get_surface
from tunelab.store import Store
from simulator_helpers import CONGESTION_KNOB, SOMAXCONN_KNOB, simulator_design  # tests/ is on sys.path

BUDGET = 16


class Crash(Exception):
    pass


def crash_at(n: int):
    def hook(count: int, key: str) -> None:
        if count == n:
            raise Crash
    return hook


@pytest.fixture(scope="module")
def screened(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A recorded OAT screen of two knobs on the simulator: its design file and its store."""
    where = tmp_path_factory.mktemp("screen")
    design = where / "warm.yaml"
    design.write_text(simulator_design("warm-sim", cv=0.03, knobs=(SOMAXCONN_KNOB, CONGESTION_KNOB), replicates="3"))
    store = where / "warm.sqlite"
    tunelab.run(design, store=store, progress=False)
    return design, store


def copy_of(store: Path, tmp_path: Path) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    shutil.copy(store, tmp_path / store.name)
    return tmp_path / store.name


def search_records(path: Path) -> list[dict]:
    with Store(path, readonly=True) as store:
        return list(store.search_batches("tunelab")["record"])


def configs_of(record: dict) -> set[tuple]:
    return {config_key(entry["config"]) for entry in record["candidates"]}


def test_a_warm_start_counts_the_screens_points_and_changes_the_first_asks(screened, tmp_path: Path) -> None:
    design, screen_store = screened
    with Store(screen_store, readonly=True) as store:
        screen = store.trials("screen")
    screen = screen[screen["status"] == "ok"]
    screen_configs = {config_key(c) for c in screen["config"]}
    warm_path, cold_path = copy_of(screen_store, tmp_path / "w"), copy_of(screen_store, tmp_path / "c")
    warm = tunelab.refine(design, store=warm_path, budget=BUDGET, confirm_blocks=0, warm_start=True)
    cold = tunelab.refine(design, store=cold_path, budget=BUDGET, confirm_blocks=0)
    history = warm.result.history
    told = history[history["origin"] == "screen"]
    assert warm.result.warm == len(told) == len(screen) == 9          # 3 baseline + 2 knobs x 3 replicates
    assert sorted(told["key"]) == sorted(screen["run_key"])
    assert warm.measured == cold.measured == BUDGET                      # the screen's points are outside the budget
    assert warm.result.evaluations == BUDGET + len(screen)
    assert f"{BUDGET + len(screen)} measurements ({len(screen)} taken from the store, {len(screen)} of them the " \
           "screen's (warm start)" in warm.counts_text()
    warm_records, cold_records = search_records(warm_path), search_records(cold_path)
    assert warm_records[0]["warm"] is True and configs_of(warm_records[0]) == screen_configs
    assert configs_of(warm_records[1]) != configs_of(cold_records[0])   # the engine's first ask knows the screen
    searched = history[(history["stage"] == "search") & (history["origin"] != "screen")]
    assert not {config_key(row[list(warm.levels)].to_dict()) for _, row in searched.iterrows()} & screen_configs


def test_a_finished_refine_continues_with_a_larger_budget_and_refuses_other_changes(
        screened, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    design, screen_store = screened
    path = copy_of(screen_store, tmp_path)
    first = tunelab.refine(design, store=path, budget=BUDGET, confirm_blocks=0)
    more = tunelab.refine(design, store=path, budget=BUDGET + 10, confirm_blocks=0)
    assert (first.measured, more.measured) == (BUDGET, 10)
    assert more.result.evaluations == BUDGET + 10
    assert list(more.result.history["key"][:BUDGET]) == list(first.result.history["key"])
    with Store(path, readonly=True) as store:
        search = store.searches().set_index("search_id").loc["tunelab"]
        assert search["status"] == "done" and search["settings"]["continued_from"] == [BUDGET]
        assert len(store.trials("refine")) == BUDGET + 10
    capsys.readouterr()
    status = main(["refine", str(design), "--store", str(path), "--budget", str(BUDGET + 10), "--confirm-blocks", "0",
                   "--option", "batch=3"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1, err
    assert "other settings (options: {} stored, {'batch': 3} now); only the budget may change" in err[0]


def test_a_continued_search_resumes_exactly_after_a_crash(tmp_path: Path) -> None:
    surface = get_surface("hard512")
    space = surface.search_space()

    def run(store, budget, on_measure=None, inner=None):
        return refine(space, StoreEvaluator(inner or SimulatorEvaluator(surface, seed=4), store), ["qps:max"],
                      budget=budget, seed=4, baseline=surface.baseline, log=StoreSearchLog(store),
                      on_measure=on_measure)

    with Store.open(tmp_path / "whole.sqlite", study="s", design_hash="h", design_text="t") as store:
        run(store, 30)
        whole = run(store, 45)
    inner = SimulatorEvaluator(surface, seed=4)
    with Store.open(tmp_path / "crashed.sqlite", study="s", design_hash="h", design_text="t") as store:
        run(store, 30, inner=inner)
        with pytest.raises(Crash):
            run(store, 45, crash_at(37), inner)
        resumed = run(store, 45, inner=inner)
    assert inner.calls == 45                                           # nothing measured twice
    assert resumed.winner == whole.winner and resumed.evaluations == whole.evaluations == 45
    assert list(resumed.history["key"]) == list(whole.history["key"])
    assert resumed.race.equals(whole.race)


def test_a_warm_started_search_resumes_exactly_after_a_crash(tmp_path: Path) -> None:
    surface = get_surface("hard512")
    space = surface.search_space()
    probe = SimulatorEvaluator(surface, seed=9)
    configs = [space.decode(space.random_genes(__import__("numpy").random.default_rng(1), 1)[0]) for _ in range(1)]
    configs += [dict(surface.baseline)]
    warm = [(config, probe.evaluate(config, 0, key=f"screen:{i}"), f"screen:{i}") for i, config in enumerate(configs)]

    def run(store, on_measure=None, inner=None):
        return refine(space, StoreEvaluator(inner or SimulatorEvaluator(surface, seed=4), store), ["qps:max"],
                      budget=30, seed=4, baseline=surface.baseline, log=StoreSearchLog(store),
                      on_measure=on_measure, warm=warm)

    with Store.open(tmp_path / "whole.sqlite", study="s", design_hash="h", design_text="t") as store:
        whole = run(store)
    inner = SimulatorEvaluator(surface, seed=4)
    with Store.open(tmp_path / "crashed.sqlite", study="s", design_hash="h", design_text="t") as store:
        with pytest.raises(Crash):
            run(store, crash_at(20), inner)
        resumed = run(store, inner=inner)
    assert inner.calls == 30 and resumed.warm == whole.warm == len(warm)
    assert resumed.winner == whole.winner and resumed.evaluations == whole.evaluations == 30 + len(warm)
    assert list(resumed.history["key"]) == list(whole.history["key"])


def test_a_missing_warm_start_store_is_one_error_before_anything_is_opened(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "refine.sqlite"
    status = main(["refine", "--target", "simulator", "--budget", "12", "--confirm-blocks", "0", "--store", str(store),
                   "--warm-start", str(tmp_path / "missing.sqlite")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "--warm-start" in err[0] and "no such store" in err[0], err
    assert not store.exists()
