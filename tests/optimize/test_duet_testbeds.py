"""A duet on two testbeds of a testbeds file: side 0 on the first, side 1 on the second, both up for the run.

On SYNTHETIC simulator testbeds (fast): the pairs, the sides swapped over each level's pairs and held by
the two testbeds, the testbed recorded with every trial (plan column, provenance, the run's description),
each testbed's knobs back at their values afterwards; validate the same. The refusals go through the CLI
(exit status 2, one line, nothing recorded). After a crash each side's journal entries go back on its own
testbed (:class:`tunelab.duet.SideJournal`).
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

import tunelab
from tunelab.cli import main
from tunelab.designs import load_design, make_plan
from tunelab.duet import DuetError, SideJournal, sides_on_testbeds
from tunelab.knobs import get_knob
from tunelab.runner.plans import recover_journal
from tunelab.simulator import SimulatorTarget
from tunelab.store import Store
from tunelab.testbeds import Testbed

from simulator_helpers import SOMAXCONN_KNOB, simulator_design  # tests/ is on sys.path (tests/conftest.py)

SIDES = ("sim-a", "sim-b")
SOMAXCONN = "net.core.somaxconn"


def duet_design(tmp_path: Path, replicates: int = 4) -> Path:
    path = tmp_path / "duet.yaml"
    text = simulator_design("duet-beds", cv=0.02, knobs=(SOMAXCONN_KNOB,), replicates=str(replicates),
                            extra="measurement: duet\n")
    path.write_text(text.replace("cv: 0.02}", "cv: 0.02, common_cv: 0.1}"))
    return path


def beds_file(tmp_path: Path, entries: list[dict]) -> Path:
    path = tmp_path / "beds.yaml"
    path.write_text(yaml.safe_dump({"testbeds": entries}))
    return path


def two_simulators(tmp_path: Path) -> Path:
    return beds_file(tmp_path, [{"name": name, "type": "simulator"} for name in SIDES])


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[SimulatorTarget]:
    """Every simulator target built during the test, in order."""
    made: list[SimulatorTarget] = []
    original = SimulatorTarget.up           # the constructor's signature is the target's option schema: keep it

    def remember(self: SimulatorTarget) -> None:
        original(self)
        if all(target is not self for target in made):
            made.append(self)
    monkeypatch.setattr(SimulatorTarget, "up", remember)
    return made


def test_a_duet_design_runs_one_side_on_each_of_two_simulator_testbeds(tmp_path: Path,
                                                                      built: list[SimulatorTarget]) -> None:
    store_path, design = tmp_path / "duet.sqlite", duet_design(tmp_path)
    planned = len(make_plan(load_design(design)))
    run = tunelab.run(design, testbeds=two_simulators(tmp_path), store=store_path, progress=False)

    assert run.ok == run.planned == 2 * planned and run.failed == 0      # each planned run beside a baseline
    with Store(store_path, readonly=True) as store:
        tidy, trials, runs = store.tidy(), store.trials("screen"), store.run_targets()
        assert store.unrestored() == []
        journal = store.journal()
    assert (tidy["testbed"] == tidy["duet_side"].map(dict(enumerate(SIDES)))).all()   # side 0 on sim-a, 1 on sim-b
    for _, pair in tidy.groupby("duet_pair"):
        assert sorted(pair["testbed"]) == list(SIDES) and sorted(pair["duet_arm"]) == ["A", "B"]
    varied = tidy[(tidy["duet_arm"] == "B") & tidy["varied_knob"].notna()]
    assert sorted(varied["testbed"]) == ["sim-a", "sim-a", "sim-b", "sim-b"]       # the level swaps testbeds
    for provenance, plan in zip(trials["provenance"], trials["plan"]):
        assert provenance["duet"] == {"pair": plan["duet_pair"], "side": plan["duet_side"], "arm": plan["duet_arm"],
                                      "testbed": SIDES[plan["duet_side"]]}
    assert [described["testbed"] for described in runs] == list(SIDES)   # the run's description of each side
    # each testbed ran its side's trials and holds its knobs' values of before the run again
    sides = [target for target in built if target.measurements]
    assert [target.measurements for target in sides] == [planned, planned]
    fresh = SimulatorTarget(surface="simple", cv=0.02)
    assert all(target.current_config() == fresh.current_config() for target in sides)
    on_side = dict(zip(trials["trial_id"], [plan["duet_side"] for plan in trials["plan"]]))
    assert {on_side[trial_id] for trial_id in journal["trial_id"]} == {0, 1} and set(journal["state"]) == {"restored"}
    assert set(tunelab.screen(store_path).verdicts["test"]) == {"duet+paired_t"}


def test_duet_validate_runs_on_two_simulator_testbeds(tmp_path: Path) -> None:
    beds = beds_file(tmp_path, [{"name": name, "type": "simulator", "options": {"common_cv": 0.1}} for name in SIDES])
    store_path = tmp_path / "validate.sqlite"
    run = tunelab.validate(None, {SOMAXCONN: 1024}, baseline={SOMAXCONN: 128}, metrics=["qps:max:5"],
                           store=store_path, measurement="duet", pairs=4, write_sysctl=False, testbeds=beds)

    measured = run.confirmation.measurements
    assert measured[measured["arm"] == "A"].sort_values("pair")["side"].tolist() == [0, 1, 1, 0]
    assert run.provenance["measurement"]["testbeds"] == list(SIDES)
    with Store(store_path, readonly=True) as store:
        trials = store.trials("validate")
        runs = store.run_targets()
    plans = pd.DataFrame(list(trials["plan"]))
    assert len(trials) == 8 and set(trials["status"]) == {"ok"}
    assert (plans["testbed"] == plans["duet_side"].map(dict(enumerate(SIDES)))).all()
    assert [p["duet"]["testbed"] for p in trials["provenance"]] == list(plans["testbed"])
    assert [side["testbed"] for side in runs[-1]["sides"]] == list(SIDES)


# ---- refusals: one line, exit status 2, nothing recorded -----------------------------------------------------

RUN_REFUSED = {
    "three testbeds": ([{"name": n, "type": "simulator"} for n in ("s1", "s2", "s3")], [],
                       "measurement: duet runs on exactly 2 testbeds"),
    "one testbed": ([{"name": "s1", "type": "simulator"}], [], "the testbeds file lists 1: s1 (simulator)"),
    "two kinds": ([{"name": "s1", "type": "simulator"}, {"name": "lab1", "type": "lab"}], [],
                  "its 2 testbeds must be of one kind, got s1 (simulator), lab1 (lab); make both simulator"),
    "two local": ([{"name": "here1", "type": "local"}, {"name": "here2", "type": "local"}], [],
                  "not local (here1 (local), here2 (local)): two local testbeds are this one machine"),
    "one ssh server": ([{"name": "h1", "type": "ssh", "options": {"server": "root@192.0.2.7:22"}},
                        {"name": "h2", "type": "ssh", "options": {"server": "192.0.2.7"}}], [],
                       "testbeds h1 and h2 both name the server 192.0.2.7:22"),
    "a scheduler": ([{"name": n, "type": "simulator"} for n in SIDES], ["--scheduler", "tcp://127.0.0.1:1"],
                    "drop --scheduler"),
}


@pytest.mark.parametrize("case", sorted(RUN_REFUSED))
def test_a_duet_on_testbeds_it_cannot_use_is_one_line_through_the_cli(tmp_path: Path, case: str,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    entries, flags, words = RUN_REFUSED[case]
    store = tmp_path / "refused.sqlite"
    status = main(["run", str(duet_design(tmp_path)), "--testbeds", str(beds_file(tmp_path, entries)),
                   "--store", str(store), "--no-progress", *flags])
    err = capsys.readouterr().err
    assert status == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("tunelab: error: ") and words in err
    assert not store.exists()


VALIDATE = ["validate", "--candidate", f"{SOMAXCONN}=1024", "--baseline", f"{SOMAXCONN}=128", "--metric", "qps:max:5"]
VALIDATE_REFUSED = {
    "sequential": (["--pairs", "4"], "--testbeds goes with --measurement duet"),
    "with a target": (["--measurement", "duet", "--target", "simulator"], "do not mix with --testbeds"),
    "three testbeds": (["--measurement", "duet", "three"], "measurement: duet runs on exactly 2 testbeds"),
}


@pytest.mark.parametrize("case", sorted(VALIDATE_REFUSED))
def test_a_duet_validation_on_testbeds_it_cannot_use_is_one_line_through_the_cli(
        tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    flags, words = VALIDATE_REFUSED[case]
    count = 3 if "three" in flags else 2
    beds = beds_file(tmp_path, [{"name": f"s{n}", "type": "simulator"} for n in range(count)])
    store = tmp_path / "refused.sqlite"
    status = main([*VALIDATE, "--testbeds", str(beds), "--store", str(store),
                   *[flag for flag in flags if flag != "three"]])
    err = capsys.readouterr().err
    assert status == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("tunelab: error: ") and words in err
    assert not store.exists()


def test_the_plan_of_a_duet_validation_names_each_side_s_testbed(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    status = main([*VALIDATE, "--testbeds", str(two_simulators(tmp_path)), "--measurement", "duet", "--pairs", "4",
                   "--store", str(tmp_path / "plan.sqlite"), "--plan"])
    out = capsys.readouterr().out
    assert status == 0 and "side 0 (testbed sim-a): simulator" in out and "side 1 (testbed sim-b): simulator" in out
    assert not (tmp_path / "plan.sqlite").exists()


def test_a_duet_design_for_ssh_hosts_runs_only_on_two_testbeds(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    design = duet_design(tmp_path)
    design.write_text(re.sub(r"target: .*", "target: {type: ssh, options: {server: root@192.0.2.7}}",
                             design.read_text()))
    store = tmp_path / "refused.sqlite"
    status = main(["run", str(design), "--store", str(store), "--no-progress"])
    err = capsys.readouterr().err
    assert status == 2 and len(err.splitlines()) == 1, err
    assert "a duet on ssh needs two hosts, one per side: run it with --testbeds FILE" in err
    assert not store.exists()
    # with testbeds, the design's ssh options are both hosts' defaults; each testbed names its own server
    design_target = {"type": "ssh", "options": {"server": "root@192.0.2.7", "known_hosts": "/k", "connect_timeout_s": 3}}
    zero, one = sides_on_testbeds([Testbed("h1", "ssh", {"server": "root@192.0.2.1"}),
                               Testbed("h2", "ssh", {"server": "root@192.0.2.2"})], design_target)
    assert zero.spec == {"type": "ssh", "options": {"server": "root@192.0.2.1", "known_hosts": "/k",
                                                   "connect_timeout_s": 3}}
    assert one.spec["options"]["server"] == "root@192.0.2.2" and one.spec["options"]["known_hosts"] == "/k"


def test_two_lab_testbeds_share_the_cpus_as_the_layout_says() -> None:
    zero, one = sides_on_testbeds([Testbed("lab1", "lab"), Testbed("lab2", "lab")], layout="split", cpus=[0, 1])
    assert (zero.name, zero.spec) == ("lab1", {"type": "lab", "options": {"name": "lab1", "server_cpu": 0,
                                                                           "client_cpu": 0}})
    assert (one.name, one.spec) == ("lab2", {"type": "lab", "options": {"name": "lab2", "server_cpu": 1,
                                                                         "client_cpu": 1}})
    with pytest.raises(DuetError, match="contradict"):
        sides_on_testbeds([Testbed("lab1", "lab", {"server_cpu": 0}), Testbed("lab2", "lab")], layout="split", cpus=[0, 1])


# ---- crash recovery: each side's journal back on its own testbed ------------------------------------------------


class LastingSimulator(SimulatorTarget):
    """A simulator whose per-namespace knobs outlive a crash (as an ssh host's do), so recovery must replay them."""

    ephemeral_netns = False


def test_after_a_crash_each_side_s_changes_go_back_on_its_own_testbed(tmp_path: Path) -> None:
    knob = get_knob(SOMAXCONN)
    sides = [LastingSimulator(), LastingSimulator()]
    with Store.open(tmp_path / "crashed.sqlite", study="s", design_hash="h", design_text="x") as store:
        for side, (old, new) in enumerate([("100", "16"), ("200", "128")]):   # each side's own value before the trial
            trial = store.begin_trial(f"screen:1{':duet-base' if side else ''}", "screen", {SOMAXCONN: int(new)},
                                      plan={"run_id": 1, "duet_pair": 1, "duet_side": side})
            store.journal_apply_many(trial, [("server", SOMAXCONN, None, old + "\n", new + "\n")])
            knob.write(sides[side], "server", int(new))                       # then the run died
        for side, target in enumerate(sides):
            recover_journal(SideJournal(store, side), target)                 # type: ignore[arg-type]
        assert store.unrestored() == []
    assert [knob.read(target, "server") for target in sides] == [100, 200]
