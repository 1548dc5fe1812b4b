"""refinement.generations: a GA search per generation, checked against the raw trials of a simulator refine."""
from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest

import tunelab
from tunelab.report import figures, refinement
from tunelab.report.loading import load_study
from tunelab.simulator import get_surface

POPULATION, BUDGET = 8, 24


def _raw_trials(path: Path, metric: str) -> pd.DataFrame:
    """The refine trials straight from SQLite: generation (batch of the run key), configuration, metric."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT run_key, config, metrics FROM trials WHERE phase = 'refine' AND status = 'ok'")
        out = []
        for key, config, metrics in rows:
            match = re.search(r"/b(\d+):c\d+:r\d+$", key)
            if match:
                out.append({"generation": int(match[1]), "config": json.dumps(json.loads(config), sort_keys=True),
                            "value": json.loads(metrics)[metric]})
    return pd.DataFrame(out)


def _expected(raw: pd.DataFrame, maximize: bool, baseline: str) -> pd.DataFrame:
    """Independent per-generation table: group the trials by generation, mean per configuration."""
    pick_best, pick_worst = ("max", "min") if maximize else ("min", "max")
    size = raw.loc[raw["generation"] == 0, "config"].nunique()
    rows = []
    for g in sorted(raw["generation"].unique()):
        so_far = raw[raw["generation"] <= g].groupby("config")["value"].mean()
        kept = so_far.sort_values(ascending=not maximize).iloc[:size]
        own = raw[raw["generation"] == g].groupby("config")["value"].mean()
        rows.append({"generation": g, "offspring": len(own), "best": getattr(kept, pick_best)(),
                     "mean": kept.mean(), "worst": getattr(kept, pick_worst)(),
                     "offspring_best": getattr(own, pick_best)(), "offspring_mean": own.mean(),
                     "offspring_worst": getattr(own, pick_worst)(), "baseline": so_far[baseline]})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("objective", ["qps:max", "latency_mean_ms:min"])
def test_generations_match_the_raw_trials_of_a_ga_refine(tmp_path: Path, objective: str) -> None:
    store = tmp_path / "ga.sqlite"
    tunelab.refine(target="simulator", surface="hard512", engine="ga", preset="gembala2013", budget=BUDGET,
                   options={"pop_size": POPULATION}, objectives=[objective], confirm_blocks=0, store=store, seed=5)
    metric, direction = objective.split(":")
    table = refinement.generations(refinement.search_batches(load_study(store)), objective)
    baseline = json.dumps({k: v for k, v in get_surface("hard512").baseline.items()}, sort_keys=True)
    expected = _expected(_raw_trials(store, metric), direction == "max", baseline)

    assert set(expected["generation"]) <= set(table["generation"]) and len(expected) >= 5
    assert table["population"].iloc[0] == POPULATION and table["offspring"].iloc[0] == POPULATION
    shown = table.set_index("generation").loc[expected["generation"]].reset_index()
    population = ["best", "mean", "worst", "baseline"]
    pd.testing.assert_frame_equal(shown[population], expected[population], check_dtype=False, rtol=1e-9)
    # offspring a generation asked again (measured in an earlier one) have no trial of their own: compare the
    # generations whose offspring were all new
    fresh = (shown["offspring"] == expected["offspring"]).to_numpy()
    assert fresh.sum() >= 5
    offspring = ["offspring_best", "offspring_mean", "offspring_worst"]
    pd.testing.assert_frame_equal(shown.loc[fresh, offspring].reset_index(drop=True),
                                  expected.loc[fresh, offspring].reset_index(drop=True), check_dtype=False, rtol=1e-9)
    assert (table["best"].diff().dropna() >= 0 if direction == "max" else table["best"].diff().dropna() <= 0).all()


def test_generations_figure_draws_the_table(tmp_path: Path) -> None:
    store = tmp_path / "ga.sqlite"
    tunelab.refine(target="simulator", surface="hard512", engine="ga", preset="gembala2013", budget=12,
                   options={"pop_size": 6}, confirm_blocks=0, store=store, seed=1)
    table = refinement.generations(refinement.search_batches(load_study(store)), "qps")
    fig = figures.generations_figure(table, "qps")
    assert [line.get_label() for line in fig.axes[0].lines] == ["best", "mean", "worst", "baseline (default)"]
    plt.close(fig)
