"""Crash safety against hostile or stale journals: only this machine's changes are replayed, a
crashed run is rolled back before the next one snapshots, a dry run never touches the store, and
lab names and lab state files cannot point root at other people's files.

The runner tests' file-backed fake machine (tests/runner/runner_fakes.py) stands in for the
kernel: its ``/etc/machine-id`` and boot id are files the tests write, so "another machine" and
"after a reboot" are real states of that fake machine, not mocks of the code under test.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))

from runner_fakes import INITIAL, FakeKnob, FakeLoad, FileTarget, fake_design, make_knobs, oat_plan  # noqa: E402

from tunelab.errors import SafetyError  # noqa: E402
from tunelab.paths import private_dir  # noqa: E402
from tunelab.runner.plans import run_design  # noqa: E402
from tunelab.journal import BOOT_ID_PATH, MACHINE_ID_PATH, restore_journal  # noqa: E402
from tunelab.store import HostIdentity, Store  # noqa: E402

from .conftest import assert_one_error  # noqa: E402

HERE = HostIdentity("a" * 32, "boot-1")


class IdentifiedMachine(FileTarget):
    """The fake machine with ``/etc/machine-id`` and a boot id; its load measures only the fake knobs."""

    def values(self, host: str = "server") -> dict[str, int]:
        return {name: int(self.read_text(host, FakeKnob.path_of(name))) for name in INITIAL}


@pytest.fixture
def machine(tmp_path: Path) -> FileTarget:
    """The fake machine, with a machine id and a boot id on both hosts."""
    target = IdentifiedMachine(tmp_path / "machine")
    for host in ("server", "client"):
        target.seed(INITIAL, host=host)
        for path, value in ((MACHINE_ID_PATH, HERE.machine_id), (BOOT_ID_PATH, HERE.boot_id)):
            file = target.root / host / path.lstrip("/")
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(value + "\n")
    return target


@pytest.fixture
def store(tmp_path: Path):
    with Store.open(tmp_path / "data" / "fake-study.sqlite", study="fake-study", design_hash="h",
                    design_text="name: fake-study", target_spec={"type": "file-fake", "options": {}}) as opened:
        yield opened


def _crashed_change(machine: FileTarget, store: Store, identity: HostIdentity | None, knob: str = "net.fake.alpha",
                    value: int = 16) -> None:
    """What kill -9 after `apply` leaves: a journal entry and the knob at the trial's value."""
    tid = store.begin_trial("screen:0", "screen", {knob: value})
    store.journal_apply(tid, "server", knob, None, str(INITIAL[knob]), str(value), identity=identity)
    machine.write_text("server", FakeKnob.path_of(knob), str(value))
    machine.writes.clear()


def test_the_journal_records_which_machine_and_boot_each_change_was_made_on(machine: FileTarget, store: Store) -> None:
    flaky = FakeKnob("net.fake.beta", fail_writes_after=1)          # applied, then the restore is denied
    with pytest.raises(Exception, match="could not restore"):
        run_design(fake_design(), machine, store, plan=oat_plan(), load=FakeLoad(),
                   knob_lookup=make_knobs(**{"net.fake.beta": flaky}), progress=False)
    (entry,) = store.unrestored()
    assert (entry.machine_id, entry.boot_id) == (HERE.machine_id, HERE.boot_id)


@pytest.mark.parametrize(("identity", "why"), [
    (HostIdentity("b" * 32, "boot-1"), "written on machine bbbbbbbbbbbb"),
    (HostIdentity(None, None), "does not say which machine"),
])
def test_a_change_from_another_or_an_unknown_machine_is_never_replayed(
        machine: FileTarget, store: Store, identity: HostIdentity, why: str) -> None:
    _crashed_change(machine, store, identity)
    report = restore_journal(store, machine, knob_lookup=make_knobs(), remove_orphans=False)
    assert not report.ok and why in report.refused[0]
    assert machine.writes == []                                        # nothing was written
    assert machine.values()["net.fake.alpha"] == 16 and len(store.unrestored()) == 1


def test_a_change_made_before_the_last_reboot_is_moot(machine: FileTarget, store: Store) -> None:
    _crashed_change(machine, store, HostIdentity(HERE.machine_id, "boot-0"))
    report = restore_journal(store, machine, knob_lookup=make_knobs(), remove_orphans=False)
    assert report.ok and "rebooted" in report.moot[0] and machine.writes == []
    assert store.unrestored() == []


def test_a_host_global_change_is_replayed_only_with_permission(machine: FileTarget, store: Store) -> None:
    lookup = make_knobs(**{"net.fake.alpha": FakeKnob("net.fake.alpha", scope="host")})
    _crashed_change(machine, store, HERE)
    refused = restore_journal(store, machine, knob_lookup=lookup, remove_orphans=False)
    assert not refused.ok and "--allow-host-global" in refused.refused[0] and machine.writes == []
    allowed = restore_journal(store, machine, knob_lookup=lookup, allow_host_global=True, remove_orphans=False)
    assert allowed.ok and machine.values() == INITIAL


@pytest.mark.parametrize("old_text", ["-5", "99999999999", "abc", "", "1; reboot"])
def test_a_crafted_old_value_the_catalogue_refuses_is_not_written(machine: FileTarget, store: Store,
                                                                   old_text: str) -> None:
    knob = "net.ipv4.tcp_fin_timeout"                       # the real catalogue knob: 1..2**31-1 seconds
    machine.seed({knob: 60})
    tid = store.begin_trial("screen:0", "screen", {})
    store.journal_apply(tid, "server", knob, None, old_text, "10", identity=HERE)
    report = restore_journal(store, machine, remove_orphans=False)
    assert report.failed and not report.restored, report.lines()
    assert machine.writes == []


def test_a_rerun_after_kill_9_puts_the_original_back_before_its_first_snapshot(machine: FileTarget,
                                                                                store: Store) -> None:
    _crashed_change(machine, store, HERE)                      # the crashed trial left alpha at 16
    summary = run_design(fake_design(), machine, store, plan=oat_plan(), load=FakeLoad(), knob_lookup=make_knobs(),
                         progress=False)
    assert summary.failed == 0 and store.unrestored() == []
    assert machine.values() == INITIAL                          # the machine's own value, not the crashed 16
    snapshots = [p["snapshot"]["net.fake.alpha"] for p in store.trials().dropna(subset=["provenance"])["provenance"]]
    assert snapshots and set(snapshots) == {str(INITIAL["net.fake.alpha"])}


def test_a_rerun_refuses_to_start_when_the_crashed_change_cannot_be_put_back(machine: FileTarget,
                                                                             store: Store) -> None:
    _crashed_change(machine, store, HostIdentity("b" * 32, "boot-1"))
    with pytest.raises(SafetyError, match="tunelab restore fake-study"):
        run_design(fake_design(), machine, store, plan=oat_plan(), load=FakeLoad(), knob_lookup=make_knobs(),
                   progress=False)
    assert machine.writes == [] and machine.commands == []      # nothing applied, nothing run
    assert len(store.trials()) == 1                              # only the crashed trial


DRY_DESIGN = """
name: dry-study
target: {type: lab}
load: {generator: dnsperf, profile: low}
warmup_s: 1
measure_s: 1
metrics: [{name: latency_mean_ms, direction: minimize, sesoi_pct: 5}]
knobs: [{name: net.ipv4.tcp_fin_timeout, levels: [60, 10]}]
design: {type: oat, replicates: 1}
preflight: {controls: [net.ipv4.tcp_fin_timeout]}
"""


def test_a_dry_run_never_writes_the_real_store(tmp_path: Path, monkeypatch, cli) -> None:
    monkeypatch.chdir(tmp_path)
    design = tmp_path / "dry.yaml"
    design.write_text(DRY_DESIGN)
    result = cli("run", design, "--target", "dry-run", "--no-progress")
    assert result.status == 0, result.err
    assert "nothing was applied, run or recorded" in result.out
    assert not (tmp_path / "data").exists()                     # no store, not even an empty one


@pytest.fixture
def lab_dirs(tmp_path: Path, monkeypatch):
    """Point the lab module's state and disk directories into tmp_path."""
    from tunelab.targets import lab as lab_module

    monkeypatch.setattr(lab_module, "RUN_DIR", tmp_path / "run")
    monkeypatch.setattr(lab_module, "STATE_DIR", tmp_path / "run" / "labs")
    monkeypatch.setattr(lab_module, "DISK_DIR", tmp_path / "disk")
    return lab_module


@pytest.mark.parametrize("name", ["../../..", "..", "a/b", "/etc", "-all", "UPPER", "x" * 25, "", "a b", "a\x00b",
                                  "../victim", ".hidden"])
def test_lab_down_refuses_a_name_that_is_not_a_lab_name(lab_dirs, tmp_path: Path, cli, name: str) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("x")
    result = cli("lab", "down", f"--name={name}")
    assert result.status == 2 and "lab name" in result.err, result.err
    assert (victim / "keep").exists()


@pytest.mark.parametrize("field", ["workdir", "disk_file", "namespaces", "disk_device", "name"])
def test_a_planted_lab_state_file_cannot_make_root_delete_other_files(lab_dirs, tmp_path: Path, field: str) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("x")
    state = {"name": "planted", "namespaces": {"server": "tl-planted-srv"}, "addresses": {},
             "workdir": str(lab_dirs.STATE_DIR / "planted"), "owner_pid": 1, "owner_start": 0.0, "detached": False}
    state[field] = {"workdir": str(victim), "disk_file": str(victim / "keep"), "disk_device": "/dev/sda",
                    "namespaces": {"server": "some-other-namespace"}, "name": "other"}[field]
    lab_dirs.STATE_DIR.mkdir(parents=True)
    (lab_dirs.STATE_DIR / "planted.json").write_text(json.dumps(state))
    for found in lab_dirs.list_states():
        problems = lab_dirs.destroy(found)
        assert problems and "refused" in problems[0]
    assert (victim / "keep").exists()


def test_private_dir_refuses_a_planted_symlink_and_a_world_writable_directory(tmp_path: Path) -> None:
    made = private_dir(tmp_path / "fresh")
    assert (os.stat(made).st_mode & 0o777) == 0o700
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SafetyError, match="symbolic link"):
        private_dir(tmp_path / "link")
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o1777)
    with pytest.raises(SafetyError, match="writable by others"):
        private_dir(open_dir)


def test_restore_cli_with_a_bad_name_is_one_error(cli, tmp_path: Path) -> None:
    result = cli("restore", "no-such-study", "--data-dir", tmp_path)
    assert_one_error(result, "no-such-study")


# ---- run leases: a crashed run of ANY study blocks the next run until it is restored -------------


@pytest.fixture
def lease_dir(tmp_path: Path, monkeypatch) -> Path:
    import tunelab.leases

    directory = tmp_path / "leases"
    directory.mkdir()
    monkeypatch.setattr(tunelab.leases, "LEASE_DIR", directory)
    return directory


def _dead_pid() -> tuple[int, float]:
    import subprocess

    import psutil

    proc = subprocess.Popen(["true"])
    started = psutil.Process(proc.pid).create_time()
    proc.wait()
    return proc.pid, started


def _lease(lease_dir: Path, store_path: Path, pid_started: tuple[int, float]) -> Path:
    path = lease_dir / f"{pid_started[0]}.json"
    path.write_text(json.dumps({"pid": pid_started[0], "started": pid_started[1], "store": str(store_path)}))
    return path


def _crashed_store(tmp_path: Path, name: str, target_type: str) -> Path:
    path = tmp_path / "data" / f"{name}.sqlite"
    with Store.open(path, study=name, design_hash="h", design_text="", target_spec={"type": target_type}) as store:
        tid = store.begin_trial("screen:0", "screen", {})
        store.journal_apply(tid, "server", "net.ipv4.tcp_fin_timeout", None, "60", "10", identity=HERE)
    return path


def test_a_dead_run_with_live_changes_blocks_every_other_run(tmp_path: Path, lease_dir: Path) -> None:
    from tunelab.leases import check_crashed_runs

    crashed = _crashed_store(tmp_path, "crashed", "local")
    lease = _lease(lease_dir, crashed, _dead_pid())
    with pytest.raises(SafetyError, match=f"{crashed}.*tunelab restore STORE"):
        check_crashed_runs(own_store=tmp_path / "data" / "other.sqlite")
    assert lease.exists()
    check_crashed_runs(own_store=crashed)          # the study itself recovers its own journal instead


@pytest.mark.parametrize("case", ["lab namespaces vanished", "store deleted", "store restored", "unreadable lease"])
def test_a_dead_lease_without_live_changes_is_dropped(tmp_path: Path, lease_dir: Path, case: str) -> None:
    from tunelab.leases import check_crashed_runs

    crashed = _crashed_store(tmp_path, "crashed", "lab" if case == "lab namespaces vanished" else "local")
    if case == "store deleted":
        crashed.unlink()
    if case == "store restored":
        with Store(crashed) as store:
            store.journal_restored(store.unrestored()[0].entry_id)
    lease = _lease(lease_dir, crashed, _dead_pid())
    if case == "unreadable lease":
        lease.write_text("{not json")
        check_crashed_runs()
        assert lease.exists()                     # never acted on, never blocks
        return
    check_crashed_runs()
    assert not lease.exists()


def test_a_live_run_lease_is_left_alone(tmp_path: Path, lease_dir: Path) -> None:
    import psutil

    from tunelab.leases import check_crashed_runs

    crashed = _crashed_store(tmp_path, "busy", "local")
    me = psutil.Process()
    lease = _lease(lease_dir, crashed, (me.pid, me.create_time()))
    check_crashed_runs()
    assert lease.exists()


def test_a_dead_runs_loads_are_stopped_by_the_next_sweep(tmp_path: Path, lease_dir: Path) -> None:
    """fio's workers leave the process group and outlive a kill -9 of the run: the marker finds them."""
    import subprocess

    from tunelab.leases import Lease, sweep
    from tunelab.targets.process import RUN_ID_ENV

    dead = _dead_pid()
    marker = Lease(dead[0], dead[1], "").run_id
    load = subprocess.Popen(["sleep", "60"], env={**os.environ, RUN_ID_ENV: marker}, start_new_session=True)
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        _lease(lease_dir, tmp_path / "gone.sqlite", dead)
        sweep()
        assert load.wait(timeout=5) == -9                 # the dead run's load is gone
        assert bystander.poll() is None                   # nobody else's process is touched
    finally:
        for proc in (load, bystander):
            proc.kill()
            proc.wait()


def test_every_command_carries_its_runs_marker(tmp_path: Path) -> None:
    from tunelab.targets.process import RUN_ID_ENV, run_argv, run_id

    result = run_argv(["sh", "-c", f"echo ${RUN_ID_ENV}"], timeout_s=10)
    assert result.stdout.strip() == run_id()
