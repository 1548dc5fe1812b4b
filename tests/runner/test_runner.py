"""The runner with a file-backed fake target: order of operations, outcomes, resume, safety."""
from __future__ import annotations

from pathlib import Path

import pytest
from runner_fakes import BASELINE, INITIAL, FakeKnob, FakeLoad, FileTarget, expected_qps, fake_design, make_knobs, oat_plan

from tunelab.errors import KnobError, SafetyError
from tunelab.runner.binding import BoundKnob
from tunelab.runner.plans import run_design
from tunelab.runner.trials import run_trial
from tunelab.journal import restore_journal
from tunelab.store import Store


def _run(target: FileTarget, store: Store, **kwargs):
    kwargs.setdefault("load", FakeLoad())
    kwargs.setdefault("knob_lookup", make_knobs())
    design = kwargs.pop("design", fake_design())
    plan = kwargs.pop("plan", oat_plan())
    return run_design(design, target, store, plan=plan, progress=False, **kwargs)


def test_every_planned_run_is_measured_at_its_levels_and_the_machine_is_restored(target: FileTarget, store: Store) -> None:
    plan = oat_plan()
    summary = _run(target, store, plan=plan)
    assert (summary.planned, summary.ok, summary.failed, summary.skipped) == (len(plan), len(plan), 0, 0)
    assert target.values("server") == INITIAL and target.values("client") == INITIAL
    assert store.unrestored() == []
    tidy = store.tidy().sort_values("run_id")
    assert tidy["run_id"].tolist() == plan.sort_values("run_id")["run_id"].tolist()
    # knobs as read back equal the plan, and the metric is the fake service's function of them
    by_run = plan.set_index("run_id")
    for _, row in tidy.iterrows():
        planned = by_run.loc[row["run_id"], list(INITIAL)].to_dict()
        assert {k: row[k] for k in INITIAL} == planned
        assert row["qps"] == pytest.approx(expected_qps(planned))
    # execution followed run_order (the fake plan runs run_ids in reverse)
    assert store.trials()["run_key"].tolist() == [f"screen:{i}" for i in plan["run_id"]]


def test_changes_are_journalled_and_unchanged_knobs_are_not_written(target: FileTarget, store: Store) -> None:
    plan = oat_plan(knobs=["net.fake.gamma"])  # levels 9 (baseline) and 7 (= current value)
    _run(target, store, plan=plan, design=fake_design(knobs=["net.fake.gamma"]))
    journal = store.journal()
    assert journal[["knob_id", "old_text", "new_text", "state"]].values.tolist() == [["net.fake.gamma", "7", "9", "restored"]]
    writes = [text for host, path, text in target.writes if path.endswith("gamma")]
    assert writes == ["9", "7"]  # apply + restore for the baseline trial, nothing for the trial at 7


def test_timings_provenance_and_foreign_cpu_are_recorded(target: FileTarget, store: Store) -> None:
    _run(target, store, plan=oat_plan().head(1))
    trial = store.trials().iloc[0]
    assert {"snapshot", "apply", "verify", "prepare", "load", "parse", "record", "restore"} <= set(trial["timings"])
    assert all(v >= 0 for v in trial["timings"].values())
    assert trial["provenance"]["snapshot"] == {k: str(v) for k, v in INITIAL.items()}
    assert trial["provenance"]["target"] == {"target": "file-fake"}
    assert trial["provenance"]["design_hash"] == "hash-1"
    assert trial["foreign_cpu_s"] == 0.0
    assert target.commands[0][:3] == ("fake-load", "-l", "1.0")  # ONE invocation of warmup_s + measure_s


def test_resume_after_ctrl_c_restores_then_skips_done_runs(target: FileTarget, store: Store) -> None:
    plan = oat_plan()
    seen = []

    def interrupt_third_measurement(name: str) -> None:
        seen.append(name)
        if name == "after_apply" and seen.count("after_apply") == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(target, store, plan=plan, checkpoint=interrupt_third_measurement)
    assert target.values("server") == INITIAL and store.unrestored() == []
    assert store.trials()["status"].tolist() == ["ok", "ok", "interrupted"]
    summary = _run(target, store, plan=plan)
    assert (summary.skipped, summary.ok) == (2, len(plan) - 2)
    trials = store.trials()
    ok_per_key = trials[trials["status"] == "ok"].groupby("run_key").size()
    assert sorted(ok_per_key.index) == sorted(f"screen:{i}" for i in plan["run_id"]) and set(ok_per_key) == {1}
    assert _run(target, store, plan=plan).skipped == len(plan)


def test_host_global_knob_is_refused_before_any_write(target: FileTarget, store: Store) -> None:
    lookup = make_knobs(**{"net.fake.beta": FakeKnob("net.fake.beta", scope="host")})
    with pytest.raises(SafetyError, match="net.fake.beta.*--allow-host-global"):
        _run(target, store, knob_lookup=lookup)
    assert target.writes == [] and target.commands == [] and store.trials().empty
    # allowed explicitly, or by the design, it runs and is restored
    summary = _run(target, store, knob_lookup=lookup, design=fake_design(allow_host_global=True))
    assert summary.ok == summary.planned and target.values() == INITIAL


def test_run_trial_refuses_host_global_on_its_own(target: FileTarget, store: Store) -> None:
    spec = BoundKnob("net.fake.beta", FakeKnob("net.fake.beta", scope="host"))
    with pytest.raises(SafetyError):
        run_trial(target, FakeLoad(), [spec], {"net.fake.beta": 5}, "refine:g0:i0", "refine", store, 0, 1)
    assert target.writes == [] and store.trials().empty


def test_out_of_range_level_is_refused_before_any_write(target: FileTarget, store: Store) -> None:
    plan = oat_plan()
    plan.loc[plan.index[-1], "net.fake.alpha"] = 2_000_000
    with pytest.raises(KnobError, match="2000000 is outside"):
        _run(target, store, plan=plan)
    assert target.writes == [] and store.trials().empty


def test_verify_mismatch_fails_the_trial_naming_knob_wanted_and_got(target: FileTarget, store: Store) -> None:
    lookup = make_knobs(**{"net.fake.alpha": FakeKnob("net.fake.alpha", clamp_at=1024)})
    summary = _run(target, store, knob_lookup=lookup)
    trials = store.trials()
    failed = trials[trials["status"] == "failed"]
    assert summary.failed == len(failed) > 0
    assert all("net.fake.alpha: wanted '4096', read back '1024'" in r for r in failed["reason"])
    assert len(target.commands) == summary.ok  # no load ran for a failed verify
    assert target.values() == INITIAL and store.unrestored() == []


@pytest.mark.parametrize(("target_kwargs", "load", "reason"), [
    ({"load_rc": 1}, FakeLoad(), "fake-load exited 1: boom"),
    ({"load_stdout": ""}, FakeLoad(), "fake-load exited 0: no output"),
    ({}, FakeLoad(parse_raises=True), "unexpected ValueError: parser exploded"),
])
def test_a_failing_load_is_a_failed_trial_with_its_reason(tmp_path: Path, store: Store, target_kwargs, load, reason) -> None:
    target = FileTarget(tmp_path / "m2", **target_kwargs)
    target.seed(INITIAL)
    summary = _run(target, store, load=load, plan=oat_plan().head(2))
    trials = store.trials()
    assert summary.failed == 2 and trials["status"].tolist() == ["failed", "failed"]
    assert all(reason in r for r in trials["reason"])
    assert all(m == {} for m in trials["metrics"])  # never recorded as zero
    assert store.tidy(include_flagged=True).empty and target.values() == INITIAL


def test_flagged_measurement_is_kept_apart(target: FileTarget, store: Store) -> None:
    summary = _run(target, store, load=FakeLoad(flag=True), plan=oat_plan().head(2))
    assert summary.flagged == 2 and store.tidy().empty
    assert store.tidy(include_flagged=True)["reason"].tolist() == ["achieved 10% of the requested rate"] * 2


def test_knob_needing_restart_restarts_the_service_each_trial(target: FileTarget, store: Store) -> None:
    lookup = make_knobs(**{"net.fake.alpha": FakeKnob("net.fake.alpha", requires_restart=True)})
    summary = _run(target, store, knob_lookup=lookup)
    assert target.restarts == ["fake-svc"] * summary.planned
    assert target.resets == summary.planned


def test_failed_restore_keeps_the_trial_and_the_journal_entry(target: FileTarget, store: Store, tmp_path: Path) -> None:
    flaky = FakeKnob("net.fake.beta", fail_writes_after=1)  # the apply works, the restore is denied
    with pytest.raises(KnobError, match="could not restore net.fake.beta.*tunelab restore"):
        _run(target, store, knob_lookup=make_knobs(**{"net.fake.beta": flaky}))
    assert store.trials()["status"].tolist() == ["ok"]
    (entry,) = store.unrestored()
    assert entry.knob_id == "net.fake.beta" and entry.old_text == str(INITIAL["net.fake.beta"])
    assert target.values()["net.fake.beta"] != INITIAL["net.fake.beta"]
    report = restore_journal(store, target, knob_lookup=make_knobs())
    assert report.ok and len(report.restored) == 1
    assert target.values() == INITIAL and store.unrestored() == []


def test_restore_on_a_lab_target_resolves_netns_entries_as_gone(store: Store, monkeypatch) -> None:
    import tunelab.journal

    monkeypatch.setattr(tunelab.journal, "remove_orphan_labs", lambda: ["abc123"])  # no real labs touched
    tid = store.begin_trial("screen:0", "screen", {})
    store.journal_apply(tid, "server", "net.fake.alpha", None, "128", "16")
    report = restore_journal(store, knob_lookup=make_knobs(), target_spec={"type": "lab", "options": {}})
    assert report.ok and report.restored == [] and "(orphaned lab abc123 removed)" in report.moot[0]
    assert report.labs_removed == ["abc123"]
    assert store.unrestored() == [] and "nothing to restore" in store.journal()["note"].iloc[0]


def test_baseline_of_fake_design_is_a_planned_config() -> None:
    plan = oat_plan()
    baseline_rows = plan[plan["is_baseline"]]
    assert len(baseline_rows) == 1 and baseline_rows[list(BASELINE)].iloc[0].to_dict() == BASELINE


def test_a_knob_the_target_lacks_or_a_missing_tool_stops_the_run_before_any_write(
        target: FileTarget, store: Store, tmp_path: Path) -> None:
    """Preflight: every knob is read once and the load's tools are looked up before the first
    trial, so a kernel without the sysctl (here: its file is gone) or an uninstalled load generator
    is one clear error listing all problems, and nothing is applied or recorded."""
    from tunelab.errors import TargetError

    (tmp_path / "machine" / "server" / "proc" / "sys" / "net" / "fake" / "alpha").unlink()
    load = FakeLoad()
    load.tools = ("no-such-load-generator",)
    with pytest.raises(TargetError, match=r"(?s)nothing was applied.*net\.fake\.alpha.*no-such-load-generator"):
        _run(target, store, load=load)
    assert target.writes == [] and target.commands == [] and store.trials().empty


def test_run_summary_warns_when_other_processes_load_the_machine() -> None:
    """Other processes are the main noise source: the summary says so when the median trial
    shared more than 10 % of the machine, and stays quiet otherwise."""
    from tunelab.runner.outcomes import RunSummary, TrialOutcome

    def outcome(cpu_s: float) -> TrialOutcome:
        return TrialOutcome(1, "screen:0", "ok", None, {}, {"qps": 1.0}, {}, True, cpu_s)

    busy, quiet = RunSummary("s", Path("x"), planned=3), RunSummary("s", Path("x"), planned=3)
    for cpu_s in (4.0, 5.0, 0.1):          # 2 CPUs x 8 s trials = 16 CPU-seconds
        busy.count(outcome(cpu_s), machine_cpu_s=16.0)
        quiet.count(outcome(cpu_s / 10), machine_cpu_s=16.0)
    assert "warning: other processes used 25 % of the machine" in str(busy)
    assert "warning" not in str(quiet) and quiet.ok == 3
