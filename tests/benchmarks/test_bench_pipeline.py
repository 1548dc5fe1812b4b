"""benchmarks/bench_pipeline.py (issue 38): it runs end to end at a tiny size (tune and a peer, SMAC3 left out with a
note when missing), and its scores are right on cases checked by hand."""
from __future__ import annotations

import doctest
import importlib
import json
import math
import os
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory):
    """The benchmark's module; its run leases (``TUNELAB_RUN_DIR``, set on import) in a directory of this test's,
    the environment of the other tests untouched."""
    before = os.environ.get("TUNELAB_RUN_DIR")
    os.environ["TUNELAB_RUN_DIR"] = str(tmp_path_factory.mktemp("run"))
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("bench_pipeline")
    finally:
        sys.path.remove(str(BENCHMARKS))
        if before is None:
            os.environ.pop("TUNELAB_RUN_DIR")
        else:
            os.environ["TUNELAB_RUN_DIR"] = before


@pytest.fixture
def own_leases(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """tune's run leases in this test's directory (tunelab read /run/tunelab on import): a crashed run of another
    tunelab user on this machine does not stop the benchmark's, which apply nothing."""
    import tunelab.leases

    monkeypatch.setattr(tunelab.leases, "LEASE_DIR", tmp_path / "leases")


def test_the_docstring_examples_hold(bench) -> None:
    failed, tried = doctest.testmod(bench)
    assert tried >= 3 and failed == 0


def test_scores_of_known_recommendations(bench) -> None:
    surface = bench.surface_of("wide27")
    best, base = (surface.truth(c)["qps"] for c in (surface.optimum("qps"), surface.baseline))
    assert bench.regret_pct("wide27", surface.optimum("qps")) == 0.0
    assert bench.regret_pct("wide27", surface.baseline) == pytest.approx(100 * (best - base) / best)
    assert bench.true_gain_pct("wide27", surface.optimum("qps")) == pytest.approx(100 * (best / base - 1))
    runs = [{"hit": bool(surface.within(c, 2.0)), "regret": bench.regret_pct("wide27", c), "seconds": 1.0}
            for c in (surface.optimum("qps"), surface.baseline)]
    cell = bench.scores(runs)
    assert [r["hit"] for r in runs] == [True, False]       # the baseline is 18.7 % below the optimum
    assert cell["hit"] == 0.5 and cell["regret"] == pytest.approx(100 * (best - base) / best / 2)
    # Wilson 95 % for 1 of 2, by hand: (0.5 + z²/4 -+ z sqrt(0.125 + z²/16)) / (1 + z²/2), z = 1.96
    assert (cell["low"], cell["high"]) == pytest.approx((0.0945, 0.9055), abs=1e-4)


def test_the_published_surface_has_inert_knobs_a_cliff_and_a_known_optimum(bench) -> None:
    surface = bench.surface_of("rosenbrock24c")
    best = surface.optimum("qps")
    assert len(surface.space) == 24 and bench.regret_pct("rosenbrock24c", best) == 0.0
    inert = list(surface.space)[-1]
    other = {**best, inert: surface.space[inert]["values"][-1]}
    assert bench.regret_pct("rosenbrock24c", other) == 0.0            # a knob outside the function: no effect
    assert bench.regret_pct("rosenbrock24c", surface.baseline) > 10   # the baseline is far from the optimum
    # the screen's ceiling: every active knob kept reaches the optimum; one of them dropped does not; none: baseline
    active = [k for k in surface.space if best[k] != surface.baseline[k]]
    assert len(active) == 4 and bench.ceiling_regret("rosenbrock24c", active) == 0.0
    assert bench.ceiling_regret("rosenbrock24c", active[1:]) > 2.0
    assert bench.ceiling_regret("rosenbrock24c", []) == bench.regret_pct("rosenbrock24c", surface.baseline)


def test_it_runs_end_to_end_at_a_tiny_size(bench, own_leases, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    runs = tmp_path / "runs.jsonl"
    bench.main(["--seeds", "2", "--budgets", "60", "--surfaces", "wide27", "--methods", "tune,random,smac",
                "--jobs", "1", "--results", str(runs), "--json", str(tmp_path / "scores.json")])
    out = capsys.readouterr().out
    import refine_peers
    assert ("smac left out" in out) != refine_peers.smac_installed()
    rows = [json.loads(line) for line in runs.read_text().splitlines()]
    assert sorted((r["task"][1], r["task"][3]) for r in rows) == sorted(
        [(m, s) for m in ("tune", "random") + (("smac",) if refine_peers.smac_installed() else ()) for s in (0, 1)])
    for row in rows:
        assert "error" not in row["out"] and sum(row["out"]["spent"].values()) <= 60
    tune = [r["out"] for r in rows if r["task"][1] == "tune"]
    # the ceiling over the kept knobs (NaN when they hold too many configurations to enumerate) is no worse than
    # the baseline's regret
    baseline_regret = bench.regret_pct("wide27", bench.surface_of("wide27").baseline)
    assert all(math.isnan(r["ceiling"]) or r["ceiling"] <= baseline_regret for r in tune)
    assert all(r["verdict"] in ("improve", "regress", "equivalent", "inconclusive", "untestable", "stopped",
                                "unconfirmed") for r in tune)
    lines = out.splitlines()
    assert any(line.strip().startswith("tune ") for line in lines) and "honesty" in out and "goals:" in out
    scores = json.loads((tmp_path / "scores.json").read_text(), parse_constant=pytest.fail)   # strict JSON
    assert {(c["method"], c["n"]) for c in scores["cells"]} >= {("tune", 2), ("random", 2)}
    bench.main(["--seeds", "2", "--budgets", "60", "--surfaces", "wide27", "--methods", "tune,random",
                "--jobs", "1", "--results", str(runs)])             # every run is read back, none is run again
    assert len(runs.read_text().splitlines()) == len(rows)
