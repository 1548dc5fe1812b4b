"""`tunelab validate` through the command line on the simulator target: once in a fresh interpreter (a
subprocess, as a user runs it), the other cases in this process (:mod:`cli_helpers`: the same exit status,
stdout, stderr and files, without 1-2 s of interpreter start-up each).

Failure is loud: trials that all fail give the verdict ``untestable``, the first failure's reason and exit
status 5; some failed trials are counted; ``nan`` is never printed. A request that cannot be meant (a
candidate equal to the baseline, a duration <= 0, an unknown or ignored load setting) is one error line,
exit status 2, with no store written and no sysctl.d file.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import tunelab_here  # noqa: F401 - the fixture

from tunelab.optimize.confirm import EXIT_STATUS

ROOT = Path(__file__).resolve().parents[1]
SIMPLE = ["validate", "--target", "simulator", "--surface", "simple", "--metric", "qps:max:5", "--blocks", "3"]
NAN = re.compile(r"\bnan\b", re.IGNORECASE)


def tunelab(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m tunelab ARGS`` in ``cwd`` (so a default ``data/`` would appear there)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tunelab", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_every_trial_failing_is_untestable_with_the_first_reason_and_exit_5(tmp_path: Path) -> None:
    proc = tunelab(SIMPLE + ["--candidate", "net.core.somaxconn=1024", "--target-option", "fail_after=0",
                             "--store", "v.sqlite", "--json", "v.json"], tmp_path)
    assert proc.returncode == EXIT_STATUS["untestable"] == 5, proc.stderr
    lines = proc.stdout.splitlines()
    assert "verdict: UNTESTABLE" in lines
    assert ("all 12 trials failed; first failure: simulator returned 1: simulator: this testbed broke after "
            "0 measurements (option fail_after)") in lines
    assert "  [overload] qps: untestable (0 usable blocks, need 2)" in lines
    assert not NAN.search(proc.stdout)
    # stderr holds only the progress (one line per round on a pipe): every trial counted, as failed
    assert proc.stderr.splitlines() == ["validate-simulator: round 1, 12/12 trials, 0 ok, 0 flagged, 12 failed, "
                                        + proc.stderr.split(" 12 failed, ", 1)[1].rstrip("\n")], proc.stderr
    assert any(line.startswith("no sysctl.d file written: the verdict is UNTESTABLE") for line in lines)
    payload = json.loads((tmp_path / "v.json").read_text(), parse_constant=lambda name: pytest.fail(f"{name} in JSON"))
    assert payload["verdict"] == "untestable" and payload["failures"]["failed"] == payload["failures"]["trials"] == 12
    assert payload["sysctl"]["written"] is False and not (tmp_path / "v-sysctl").exists()


def test_some_failed_trials_are_counted_and_too_few_usable_blocks_read_untestable(tunelab_here,
                                                                                  tmp_path: Path) -> None:
    # 12 trials in order b0: A B B A, b1: A B B A, b2: ...; from the 6th on every one fails, so only block 0
    # has both arms: 1 usable block
    proc = tunelab_here(SIMPLE + ["--candidate", "net.core.somaxconn=1024", "--target-option", "fail_after=5",
                                  "--store", "v.sqlite"], tmp_path)
    assert proc.returncode == 5, proc.stderr
    assert ("7 of 12 trials failed; first failure: simulator returned 1: simulator: this testbed broke after "
            "5 measurements (option fail_after)") in proc.stdout.splitlines()
    assert "  [overload] qps: untestable (1 usable blocks, need 2)" in proc.stdout.splitlines()
    assert not NAN.search(proc.stdout)


def test_some_failed_trials_with_enough_blocks_still_judge_and_say_how_many_failed(tunelab_here,
                                                                                   tmp_path: Path) -> None:
    # 16 trials; the first 9 succeed: blocks 0 and 1 complete, block 2 only its first A, block 3 nothing
    proc = tunelab_here(SIMPLE + ["--blocks", "4", "--candidate", "net.core.somaxconn=1024", "--target-option",
                                  "fail_after=9", "--store", "v.sqlite", "--json", "v.json"], tmp_path)
    payload = json.loads((tmp_path / "v.json").read_text())
    assert payload["table"][0]["blocks"] == 2 and payload["verdict"] != "untestable"
    assert proc.returncode == EXIT_STATUS[payload["verdict"]]
    assert "7 of 16 trials failed; first failure: simulator returned 1" in proc.stdout
    assert not NAN.search(proc.stdout)


REFUSED = {
    "candidate equals current": (["--candidate", "net.core.somaxconn=128"],
                                 "the candidate equals the baseline (the target's current values: "
                                 "net.core.somaxconn=128); there is nothing to validate: change at least one "
                                 "knob's value"),
    "equal after canonicalisation": (["--candidate", "net.ipv4.tcp_abort_on_overflow=0"],
                                     "the candidate equals the baseline (the target's current values: "
                                     "net.ipv4.tcp_abort_on_overflow=False); there is nothing to validate: change "
                                     "at least one knob's value"),
    "equal to a given baseline": (["--baseline", "net.ipv4.tcp_abort_on_overflow=on", "--candidate",
                                   "net.ipv4.tcp_abort_on_overflow=1"],
                                  "the candidate equals the baseline (the baseline given: "
                                  "net.ipv4.tcp_abort_on_overflow=True); there is nothing to validate: change at "
                                  "least one knob's value"),
    "negative measure": (["--candidate", "net.core.somaxconn=1024", "--measure", "-1"],
                         "the measured time (--measure) must be a number of seconds > 0, got -1"),
    "zero measure": (["--candidate", "net.core.somaxconn=1024", "--measure", "0"],
                     "the measured time (--measure) must be a number of seconds > 0, got 0"),
    "negative warm-up": (["--candidate", "net.core.somaxconn=1024", "--warmup", "-1"],
                         "the warm-up (--warmup) must be a number of seconds >= 0 (0: none), got -1"),
    "unknown load setting": (["--candidate", "net.core.somaxconn=1024", "--load-setting", "foo=1"],
                             "simulated: unknown load setting 'foo'; known settings: profile, key"),
    "ignored load setting": (["--candidate", "net.core.somaxconn=1024", "--load-setting", "key=mine"],
                             "simulated: load setting 'key' is set by tunelab for every trial (its run key), so a "
                             "value given for it would be ignored; remove --load-setting key=..."),
    "one block": (["--candidate", "net.core.somaxconn=1024", "--blocks", "1"],
                  "confirmation needs at least 2 ABBA blocks to estimate its variance, got 1; pass 2 or more"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_meaningless_request_is_one_line_before_anything_runs(tunelab_here, tmp_path: Path, case: str) -> None:
    args, message = REFUSED[case]
    proc = tunelab_here(SIMPLE + args, tmp_path)  # the default store: data/validate-simulator.sqlite under tmp_path
    assert proc.returncode == 2
    assert proc.stderr == f"tunelab: error: {message}\n" and proc.stdout == ""
    assert list(tmp_path.iterdir()) == []         # no store, no data/ directory, no sysctl.d files


def test_an_unknown_dnsperf_setting_is_refused_before_a_lab_is_built(tunelab_here, tmp_path: Path) -> None:
    # the same check as `tunelab run` (the load's declared settings): the lab is never brought up
    proc = tunelab_here(["validate", "--target", "lab", "--load", "dnsperf", "--candidate", "net.core.somaxconn=1024",
                         "--load-setting", "foo=1"], tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("tunelab: error: dnsperf: unknown load setting 'foo'; known settings: ")
    assert len(proc.stderr.splitlines()) == 1 and list(tmp_path.iterdir()) == []


def test_improve_writes_the_sysctl_d_file_and_rollback_next_to_the_default_store(tunelab_here,
                                                                                 tmp_path: Path) -> None:
    proc = tunelab_here(SIMPLE + ["--blocks", "4", "--candidate", "net.core.somaxconn=1024", "--candidate",
                                  "net.ipv4.tcp_congestion_control=bbr", "--json", "v.json"], tmp_path)
    payload = json.loads((tmp_path / "v.json").read_text())
    assert proc.returncode == 0 and payload["verdict"] == "improve", proc.stdout + proc.stderr
    folder = tmp_path / "data" / "validate-simulator-sysctl"
    conf, rollback = folder / "90-tunelab-validate-simulator.conf", folder / "90-tunelab-validate-simulator.conf.rollback"
    assert f"sysctl.d file: {Path('data/validate-simulator-sysctl') / conf.name}" in proc.stdout.splitlines()
    body = [line for line in conf.read_text().splitlines() if not line.startswith("#")]
    assert body == ["net.core.somaxconn = 1024", "net.ipv4.tcp_congestion_control = bbr"]
    assert [line for line in rollback.read_text().splitlines() if not line.startswith("#")] == [
        "net.core.somaxconn = 128", "net.ipv4.tcp_congestion_control = cubic"]
    files = payload["sysctl"]["files"]
    assert files["conf"]["content"] == conf.read_text() and files["rollback"]["content"] == rollback.read_text()


def test_write_sysctl_chooses_the_directory(tunelab_here, tmp_path: Path) -> None:
    proc = tunelab_here(SIMPLE + ["--blocks", "4", "--candidate", "net.core.somaxconn=1024", "--store", "v.sqlite",
                                  "--write-sysctl", "out/etc"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in (tmp_path / "out" / "etc").iterdir()) == [
        "90-tunelab-validate-simulator.conf", "90-tunelab-validate-simulator.conf.rollback"]
    assert not (tmp_path / "v-sysctl").exists()
