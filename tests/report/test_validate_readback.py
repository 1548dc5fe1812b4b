"""A stored ``tunelab validate`` read back by the report (tunelab/report/refinement.py) states the CLI's verdict:
the same judge (:func:`tunelab.optimize.blocks_in_rounds.replay_looks`) with the parameters the validation stored
in its trials (block rule, the metrics and SESOI asked, the level). SYNTHETIC: the simulator target, seeded, so
every figure below is exact for this seed (no verdict here depends on noise left to chance)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tunelab.cli import main
from tunelab.designs.change import BlockRule
from tunelab.model import Metric
from tunelab.optimize.confirm import analyse_blocks, overall_verdict
from tunelab.report import ReportError, load_study, refinement

#: a validation whose blocks run in rounds (alpha 0.05 spent linearly: 0.0125 per look) on the SYNTHETIC simple
#: surface; with this seed and noise it runs to max and ends inconclusive, where every block judged at 0.05 at once
#: reads improve
SEED, CV = 10, 0.03
CANDIDATE = {"net.ipv4.tcp_congestion_control": "bbr"}
METRIC = "qps:max:3"
RULE = BlockRule(4, 16, 4)
COLUMNS = ["metric", "sesoi_pct", "blocks", "pct_change", "ci_low", "ci_high", "tost_p", "verdict", "look",
           "alpha_nominal"]


@pytest.fixture(scope="module")
def validated(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """(``tunelab validate CHANGE.yaml --json``'s payload, the store) of the validation above, run as a user does."""
    folder = tmp_path_factory.mktemp("readback")
    change = {"name": "readback", "target": {"type": "simulator",
                                             "options": {"surface": "simple", "cv": CV, "seed": SEED}},
              "candidate": CANDIDATE, "metrics": [METRIC],
              "blocks": {"min": RULE.min, "max": RULE.max, "step": RULE.step, "until": "decided"}}
    (folder / "change.yaml").write_text(yaml.safe_dump(change, sort_keys=False))
    store = folder / "readback.sqlite"
    main(["validate", str(folder / "change.yaml"), "--store", str(store), "--json", str(folder / "v.json"),
          "--write-sysctl", str(folder / "sysctl")])
    return json.loads((folder / "v.json").read_text()), store


def test_the_store_records_what_was_judged_and_how(validated: tuple[dict, Path]) -> None:
    _, store = validated
    study = load_study(store)
    (comparison,) = refinement.abba_comparisons(study)
    assert comparison.rule == RULE and comparison.alpha == 0.05
    assert comparison.goals == (Metric("qps", "maximize", 3.0),)
    # re-read, the goals are the ones asked: qps at SESOI 3 %, not the surface's qps and latency at 5 %
    goals = refinement.comparison_goals(study, list(comparison.measurements.columns), stored=comparison.goals)
    assert goals == [Metric("qps", "maximize", 3.0)]
    provenance = study.trials.loc[study.trials["phase"] == "validate", "provenance"].iloc[-1]
    assert provenance["validate_goals"] == [{"name": "qps", "direction": "maximize", "sesoi_pct": 3.0}]
    assert provenance["validate_blocks"]["max"] == RULE.max and provenance["validate_alpha"] == 0.05


def test_the_report_states_the_clis_verdict_where_a_naive_reanalysis_would_not(validated: tuple[dict, Path]) -> None:
    payload, store = validated
    study = load_study(store)
    (comparison,) = refinement.abba_comparisons(study)
    goals = refinement.comparison_goals(study, list(comparison.measurements.columns), stored=comparison.goals)
    table = refinement.judge(comparison, goals)
    assert overall_verdict(list(table["verdict"])) == payload["verdict"] == "inconclusive"
    cli = {column: [row[column] for row in payload["table"]] for column in COLUMNS}
    assert {column: list(table[column]) for column in COLUMNS} == cli
    # the defect this guards against: every stored block judged at 0.05 gives another verdict for this store
    naive = analyse_blocks(comparison.measurements, goals[0], 0.05)
    assert naive["verdict"] != payload["verdict"], naive


def test_a_damaged_stored_rule_is_one_report_error() -> None:
    where = "v.sqlite: trial 3"
    with pytest.raises(ReportError, match=r"provenance.validate_blocks.max must be a whole number >= 0"):
        refinement.stored_judging({"validate_blocks": {"min": 4, "max": "16", "step": 4, "until": "decided",
                                                       "spending": "linear"}}, where)
    with pytest.raises(ReportError, match=r"provenance.validate_blocks must be a block rule"):
        refinement.stored_judging({"validate_blocks": {"min": 1, "max": 4, "step": 1, "until": "decided",
                                                       "spending": "linear"}}, where)
    with pytest.raises(ReportError, match=r"provenance.validate_goals must be a list of metrics"):
        refinement.stored_judging({"validate_goals": [{"name": "qps", "direction": "sideways"}]}, where)
    assert refinement.stored_judging({"validate_profile": "overload"}, where) == {"alpha": None, "goals": (),
                                                                                  "rule": None}


def test_a_duet_validated_in_rounds_reads_back_with_the_clis_looks(tmp_path: Path) -> None:
    """A duet's pairs in rounds (its stored rule counts pairs, ``validate_pairs``) are read back look by look
    like ABBA blocks: the report's table equals the CLI's ``--json`` column for column."""
    change = {"name": "duet-readback", "target": {"type": "simulator",
                                                  "options": {"surface": "simple", "cv": CV, "seed": SEED}},
              "candidate": CANDIDATE, "metrics": [METRIC], "measurement": "duet",
              "blocks": {"min": 4, "max": 12, "step": 4, "until": "decided"}}
    (tmp_path / "change.yaml").write_text(yaml.safe_dump(change, sort_keys=False))
    store = tmp_path / "duet.sqlite"
    main(["validate", str(tmp_path / "change.yaml"), "--store", str(store), "--json", str(tmp_path / "v.json"),
          "--write-sysctl", str(tmp_path / "sysctl")])
    payload = json.loads((tmp_path / "v.json").read_text())
    study = load_study(store)
    (comparison,) = refinement.duet_comparisons(study)
    assert comparison.rule == BlockRule(4, 12, 4)
    table = refinement.judge(comparison, comparison.goals)
    cli = {column: [row[column] for row in payload["table"]] for column in COLUMNS}
    assert {column: list(table[column]) for column in COLUMNS} == cli
