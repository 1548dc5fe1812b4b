"""Refinement read back from the store: the stored search history (never re-run), the fallback for stores
without one, and the confirm/validate trials of the example stores."""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from report_helpers import copy_store, nb_outputs, store_params, stores_with
from tunelab.report import ReportError, load_study, refinement

REFINES = stores_with("refine")
ABBAS = stores_with("confirm", "validate")
BUDGET = 40
SURFACE = "simple"      # SYNTHETIC: qps (max) and latency_mean_ms (min) over three knobs


def _refine_store(path: Path, *, stored: bool = True) -> dict[str, object]:
    """A store with a real refinement on the SYNTHETIC simulator surface, run by the driver.

    Search ``refine`` (the default engine, with its race; its measurements are refine trials) and, when
    ``stored``, search ``random`` on two objectives (logged only: two searches in one store would share
    run keys). Without ``stored`` the same trials are written but no search state (a store measured
    without a search log). Returns the driver's own results by search id.
    """
    from tunelab.optimize.driver import refine
    from tunelab.optimize.evaluators import StoreEvaluator
    from tunelab.optimize.history import MemorySearchLog, StoreSearchLog
    from tunelab.simulator import SimulatorEvaluator, get_surface
    from tunelab.store import Store

    surface = get_surface(SURFACE)
    text = json.dumps({"surface": SURFACE, "cv": 0.03, "space": {k: dict(v) for k, v in surface.space.items()}},
                      sort_keys=True, default=str)
    results = {}
    with Store.open(path, study=f"sim-{SURFACE}", design_hash=hashlib.sha256(text.encode()).hexdigest(),
                    design_text=text) as store:
        inner = SimulatorEvaluator(surface, seed=1)
        results["refine"] = refine(surface.search_space(), StoreEvaluator(inner, store, "refine"), ["qps:max"],
                                   budget=BUDGET, seed=1, baseline=surface.baseline,
                                   log=StoreSearchLog(store, "refine") if stored else MemorySearchLog())
        if stored:
            results["random"] = refine(surface.search_space(), inner, ["qps:max", "latency_mean_ms:min"],
                                       engine="random", budget=BUDGET, seed=2, baseline=surface.baseline,
                                       log=StoreSearchLog(store, "random"))
    return results


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    """(store path, the driver's results) of a store with two stored searches."""
    path = tmp_path_factory.mktemp("stored") / "sim-simple.sqlite"
    return path, _refine_store(path)


@pytest.fixture(scope="module")
def unstored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with refine trials but no search tables: a schema-1 store (tables dropped, version 1)."""
    path = tmp_path_factory.mktemp("old") / "sim-simple.sqlite"
    _refine_store(path, stored=False)
    db = sqlite3.connect(path)
    try:
        db.executescript("DROP TABLE search_batches; DROP TABLE searches; PRAGMA user_version = 1;")
    finally:
        db.close()
    return path


def _copy(path: Path, tmp_path: Path) -> Path:
    return copy_store(path, tmp_path / "copy")


# ---- the stored search, read back --------------------------------------------------------------------

def test_settings_and_winner_are_read_from_the_store(searched: tuple[Path, dict]) -> None:
    path, results = searched
    study = load_study(path)
    table = refinement.searches(study)
    assert table["search_id"].tolist() == ["refine", "random"]
    first = table.iloc[0]
    assert (first["engine"], first["seed"], first["budget"], first["objectives"], first["status"]) == (
        "tunelab", 1, BUDGET, ["qps:max"], "done")
    assert first["knobs"] == list(results["refine"].winner) and first["evaluations"] == BUDGET
    assert table.iloc[1]["objectives"] == ["qps:max", "latency_mean_ms:min"]
    for search_id, result in results.items():
        winner = refinement.stored_winner(study, search_id)
        assert winner["config"] == result.winner and winner["engine"] == result.engine
    assert refinement.stored_winner(study)["search_id"] == "random"     # the newest finished search
    shown = refinement.settings_table(table)
    assert shown["race share"].tolist()[1] == "0 %" and "qps:max, latency_mean_ms:min" in shown["objectives"].tolist()


def test_convergence_is_the_drivers_batch_table(searched: tuple[Path, dict]) -> None:
    """What the report draws from the stored records equals what the driver computed in memory."""
    path, results = searched
    batches = refinement.search_batches(load_study(path))
    conv = refinement.convergence(batches, "qps")
    for search_id, result in results.items():
        mine = conv[conv["search_id"] == search_id].reset_index(drop=True)
        theirs = result.batches
        assert mine["stage"].tolist() == theirs["stage"].tolist()
        assert mine["evaluations"].tolist() == theirs["evaluations"].tolist()
        assert mine["evaluations"].is_monotonic_increasing and mine["evaluations"].iloc[-1] == BUDGET
        for column in ("incumbent_mean", "incumbent_se", "best_mean", "mean", "worst_mean", "baseline_mean"):
            np.testing.assert_allclose(mine[column].to_numpy(float), theirs[column].to_numpy(float), rtol=1e-12,
                                       err_msg=f"{search_id}: {column}")
        search = mine[mine["stage"] == "search"]["incumbent_mean"]
        assert search.is_monotonic_increasing    # measured once each in the search stage: the best mean only rises
    assert (conv["stage"] == "race").any()


def test_race_rounds_are_the_drivers_race(searched: tuple[Path, dict]) -> None:
    path, results = searched
    batches = refinement.search_batches(load_study(path), "refine")
    rounds = refinement.race_rounds(batches, "qps")
    race = results["refine"].race
    assert len(rounds) == len(race) > 0
    assert rounds["round"].tolist() == race["round"].tolist()
    assert rounds["n"].tolist() == race["n"].tolist()
    assert rounds["survived"].tolist() == race["survived"].tolist()
    np.testing.assert_allclose(rounds["mean"].to_numpy(float), race["qps_mean"].to_numpy(float), rtol=1e-12)
    replicated = rounds[rounds["n"] >= 2]
    assert ((replicated["ci_low"] < replicated["mean"]) & (replicated["mean"] < replicated["ci_high"])).all()
    last = rounds[rounds["round"] == rounds["round"].max()]
    assert refinement.config_label(results["refine"].winner) in last[last["survived"]]["candidate"].tolist()


def test_candidate_estimates_and_pareto_from_the_stored_estimates(searched: tuple[Path, dict]) -> None:
    path, results = searched
    study = load_study(path)
    means = refinement.candidate_estimates(refinement.search_batches(study))
    knobs = list(results["random"].winner)
    for search_id, result in results.items():
        mine = means[means["search_id"] == search_id]
        assert len(mine) == len(result.estimates) and mine["is_baseline"].sum() == 1
        theirs = {tuple(r[k] for k in knobs): r["qps_mean"] for r in result.estimates.to_dict("records")}
        for row in mine.to_dict("records"):
            assert np.isclose(row["qps"], theirs[tuple(row[k] for k in knobs)])
    random = means[means["search_id"] == "random"]
    directions = {"qps": "maximize", "latency_mean_ms": "minimize"}
    points = refinement.pareto_points(random, "qps", "latency_mean_ms", directions, results["random"].winner, knobs)
    front = points[points["front"]]
    assert front["is_winner"].any()
    for row in front.itertuples():   # nothing off the front is better in both
        assert not ((points["qps"] > row.qps) & (points["latency_mean_ms"] < row.latency_mean_ms)).any()
    assert refinement.winners_table(study)["search_id"].tolist() == ["refine", "random"]


def test_figures_of_the_stored_search(searched: tuple[Path, dict]) -> None:
    from tunelab.errors import DataError
    from tunelab.report import figures

    batches = refinement.search_batches(load_study(searched[0]))
    conv = refinement.convergence(batches, "qps")
    ax = figures.convergence_figure(conv, "qps").axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:3] == ["tunelab (refine)", "random", "baseline (default)"]
    base = [line for line in ax.lines if line.get_label() == "baseline (default)"][0]
    assert np.isclose(base.get_ydata()[0], conv["baseline_mean"].dropna().groupby(conv["search_id"]).last().mean())
    rounds = refinement.race_rounds(batches, "qps")
    race = figures.racing_figure(rounds, "qps")
    assert [a.get_title() for a in race.axes] == ["tunelab (refine)"]
    with pytest.raises(DataError, match="no race rounds"):
        figures.racing_figure(rounds.iloc[:0], "qps")
    with pytest.raises(DataError, match="not one of their objectives"):
        figures.convergence_figure(conv.assign(incumbent_mean=np.nan), "qps")


def test_non_dominated() -> None:
    mask = refinement.non_dominated(np.array([[1.0, 2.0], [2.0, 1.0], [2.0, 2.0], [1.0, 2.0]]))
    assert mask.tolist() == [True, True, False, True]
    assert refinement.non_dominated(np.zeros((0, 2))).tolist() == []


# ---- malformed stored records: one ReportError line naming the store and the field ---------------------

DAMAGES = {
    "candidate n": ("UPDATE search_batches SET record = json_set(record, '$.candidates[0].n', 'two') "
                    "WHERE search_id = 'refine' AND batch = 0", "record.candidates[0].n"),
    "estimate mean": ("UPDATE search_batches SET record = json_set(record, '$.candidates[1].estimates.qps.mean', "
                      "'fast') WHERE search_id = 'refine' AND batch = 1", "candidates[1].estimates.qps.mean"),
    "missing stage": ("UPDATE search_batches SET record = json_remove(record, '$.stage') "
                      "WHERE search_id = 'random' AND batch = 2", "record.stage is missing"),
    "candidate status": ("UPDATE search_batches SET record = json_set(record, '$.candidates[0].status', 'won') "
                         "WHERE search_id = 'refine' AND batch = 0", "record.candidates[0].status"),
    "candidates": ("UPDATE search_batches SET record = json_set(record, '$.candidates', 7) "
                   "WHERE search_id = 'refine' AND batch = 0", "record.candidates must be a list"),
    "settings knobs": ("UPDATE searches SET settings = json_set(settings, '$.knobs', 'all') "
                       "WHERE search_id = 'random'", "settings.knobs"),
    "settings objective": ("UPDATE searches SET settings = json_set(settings, '$.objectives[0]', 'qps:up') "
                           "WHERE search_id = 'refine'", "settings.objectives[0]"),
    "winner level": ("UPDATE searches SET winner = json_set(winner, '$.config.\"net.core.somaxconn\"', "
                     "json('{\"x\": 1}')) WHERE search_id = 'refine'", "winner.config.net.core.somaxconn"),
    "evaluations": ("UPDATE search_batches SET record = json_set(record, '$.evaluations', 3) "
                    "WHERE search_id = 'refine' AND batch = 4", "disagree with the batch row"),
    "unknown search": ("INSERT INTO search_batches SELECT 'ghost', batch, stage, evaluations, record, ts "
                       "FROM search_batches WHERE search_id = 'refine' AND batch = 0", "belongs to no stored search"),
    "not JSON": ("UPDATE search_batches SET record = '{not json' WHERE search_id = 'refine' AND batch = 3",
                 "does not hold valid JSON"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_malformed_stored_records_are_one_clear_line(damage: str, searched: tuple[Path, dict],
                                                     tmp_path: Path) -> None:
    sql, field = DAMAGES[damage]
    path = _copy(searched[0], tmp_path)
    db = sqlite3.connect(path)
    try:
        db.execute(sql)
        db.commit()
    finally:
        db.close()
    study = load_study(path)            # the other notebooks still load the study
    assert refinement.has_search(study)
    with pytest.raises(ReportError) as info:
        table = refinement.searches(study)
        refinement.stored_winner(study)
        batches = refinement.search_batches(study)
        refinement.convergence(batches, refinement.search_objectives(table)[0])
    message = str(info.value)
    assert "\n" not in message and str(path) in message and field in message, message


def test_objective_must_be_known(searched: tuple[Path, dict]) -> None:
    batches = refinement.search_batches(load_study(searched[0]))
    with pytest.raises(ReportError, match="not an objective of the stored searches"):
        refinement.convergence(batches, "retransmits")
    assert refinement.convergence(batches, "latency_mean_ms")["incumbent_mean"].notna().any()
    assert refinement.race_rounds(batches[batches["stage"] == "search"], "qps").empty


# ---- stores without a stored search ---------------------------------------------------------------------

def test_store_without_search_tables_falls_back_to_the_measurements(unstored: Path) -> None:
    study = load_study(unstored)
    assert not refinement.has_search(study) and refinement.searches(study).empty
    assert refinement.search_batches(study).empty
    assert refinement.stored_winner(study) is None
    history = refinement.search_history(study)
    assert len(history) == BUDGET and history["measurement"].tolist() == list(range(1, BUDGET + 1))
    assert set(history["stage"]) == {"search", "race"} and history["is_baseline"].any()
    means = refinement.config_means(history, refinement.search_knobs(study), ["qps"])
    assert means["n"].sum() == BUDGET


@pytest.mark.parametrize("store", store_params(REFINES, "holds refine trials"))
def test_example_refine_stores_read_back(store: Path, tmp_path: Path) -> None:
    study = load_study(copy_store(store, tmp_path))
    history = refinement.search_history(study)
    assert len(history) and history["measurement"].is_monotonic_increasing
    if refinement.has_search(study):
        assert len(refinement.convergence(refinement.search_batches(study),
                                          refinement.search_objectives(refinement.searches(study))[0]))


# ---- notebook 03 with the search code unavailable --------------------------------------------------------

#: makes the notebook's kernel unable to search: pymoo and optuna cannot be imported (the GA/NSGA-II and Optuna
#: engines stay registered but cannot build an algorithm) and the driver's refine and make_engine raise; writes a
#: marker so the test knows it ran
_NO_SEARCH = '''
import importlib, importlib.abc, os, sys

class _NoSearchLibraries(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pymoo", "optuna") or name == "tunelab.optimize.search":
            raise ModuleNotFoundError(f"No module named {name!r} (the report test blocks the search code)", name=name)
        return None

sys.meta_path.insert(0, _NoSearchLibraries())

def _refuse(*args, **kwargs):
    raise RuntimeError("the report ran a search; it must read the stored history only")

import tunelab.optimize as _optimize
import tunelab.optimize.driver as _driver
_driver.refine = _optimize.refine = _refuse
_driver.make_engine = _refuse
_libraries = []
for _name in ("pymoo", "optuna"):
    try:
        importlib.import_module(_name)
        _libraries.append(_name + "-importable")
    except ModuleNotFoundError:
        _libraries.append(_name + "-blocked")
with open(os.environ["TUNELAB_TEST_NO_SEARCH"], "w") as marker:
    marker.write(" ".join(_libraries))
'''


@pytest.mark.parametrize("kind", ["stored", "unstored"])
def test_notebook_reads_the_stored_history_without_the_search_code(
        kind: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tunelab.report import execute_notebook, notebook_path

    source = request.getfixturevalue("searched")[0] if kind == "stored" else request.getfixturevalue("unstored")
    blocker = tmp_path / "site"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(_NO_SEARCH)
    marker = tmp_path / "blocked.txt"
    # the blocker first, then the checkout under test (the kernel must import this tunelab, not an installed one)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(blocker), str(Path(__file__).resolve().parents[2])]))
    monkeypatch.setenv("TUNELAB_TEST_NO_SEARCH", str(marker))
    out = execute_notebook(notebook_path("03"), tmp_path / "03.ipynb", {"study": str(_copy(source, tmp_path))})
    libraries = marker.read_text().split()
    assert libraries == ["pymoo-blocked", "optuna-blocked"], f"the kernel could still use pymoo or optuna: {libraries}"
    outputs = nb_outputs(out)
    assert not [o for o in outputs if o["output_type"] == "error" or o.get("name") == "stderr"]
    alts = [o.get("metadata", {}).get("image/png", {}).get("alt") or o.get("metadata", {}).get("alt") or ""
            for o in outputs if "image/png" in o.get("data", {})]
    text = " ".join(str(o.get("data", {}).get("text/html", "")) for o in outputs)
    if kind == "stored":
        assert any(a.startswith("convergence of tunelab, random") for a in alts), alts
        assert any(a.startswith("race rounds") for a in alts), alts
        assert any(a.startswith("Pareto front of qps against latency_mean_ms in search") for a in alts), alts
        assert "No stored search" not in text and "qps:max, latency_mean_ms:min" in text
    else:
        assert "No stored search in this store" in text
        assert any(a.startswith("every refine measurement of qps") for a in alts), alts
        assert not any(a.startswith(("convergence of", "race rounds")) for a in alts)


# ---- confirmation and validation trials ----------------------------------------------------------------

@pytest.mark.parametrize("store", store_params(ABBAS, "holds confirm or validate trials"))
def test_abba_comparisons(store: Path, tmp_path: Path) -> None:
    from tunelab.optimize.confirm import VERDICTS

    study = load_study(copy_store(store, tmp_path))
    comparisons = refinement.abba_comparisons(study)
    assert comparisons
    for comparison in comparisons:
        assert set(comparison.measurements["arm"]) == {"A", "B"} and comparison.baseline and comparison.candidate
        goals = refinement.comparison_goals(study, list(comparison.measurements.columns))
        table = refinement.judge(comparison, goals)
        assert set(table["verdict"]) <= set(VERDICTS)


def test_run_key_patterns() -> None:
    assert refinement.REFINE_KEY.match("refine:17:r2").group("event", "replicate") == ("17", "2")
    assert refinement.REFINE_KEY.match("refine:b3:c1:r0").group("batch", "candidate") == ("3", "1")
    assert refinement.REFINE_KEY.match("refine:race2:c0:r4").group("round", "racer", "replicate") == ("2", "0", "4")
    assert refinement.REFINE_KEY.match("refine:b3:r0") is None
    match = refinement.ABBA_KEY.match("validate:overload:0123abcd:b3:2B")
    assert match.group("phase", "profile", "digest", "block", "position", "arm") == (
        "validate", "overload", "0123abcd", "3", "2", "B")
    assert refinement.ABBA_KEY.match("confirm:0123abcd:b0:0A").group("profile") is None

