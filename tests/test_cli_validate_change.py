"""`tunelab validate CHANGE.yaml` as a user runs it on the SYNTHETIC simulator target: the same
loud failures as the flags (every trial failed: ``untestable``, the first reason, exit 5; a candidate equal to
the current value, a negative duration: one error line before anything runs), blocks in rounds that stop when
decided, the provenance in --json, and ``--plan`` accepting what validate starts. ``nan`` is never printed.
The validation that stops when decided runs in a fresh interpreter (a subprocess); the other cases run in this
process (:mod:`cli_helpers`: the same exit status, output and files, without 1-2 s of interpreter start-up).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cli_helpers import tunelab_here  # noqa: F401 - the fixture

from tunelab.cli import main

ROOT = Path(__file__).resolve().parents[1]
NAN = re.compile(r"\bnan\b", re.IGNORECASE)


def tunelab(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tunelab", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=180)


def change(tmp: Path, **edits) -> Path:
    content = {"name": "sim-somaxconn", "target": {"type": "simulator", "options": {"surface": "simple"}},
               "candidate": {"net.core.somaxconn": 4096}, "metrics": ["qps:max:5"],
               "blocks": {"min": 4, "max": 16, "until": "decided"}, **edits}
    path = tmp / "change.yaml"
    path.write_text(yaml.safe_dump(content, sort_keys=False))
    return path


def test_blocks_in_rounds_stop_when_decided_and_the_json_carries_the_provenance(tmp_path: Path) -> None:
    change(tmp_path)
    proc = tunelab(["validate", "change.yaml", "--json", "v.json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "verdict: IMPROVE" in lines and not NAN.search(proc.stdout)
    note = next(line for line in lines if line.startswith("blocks: looks at 4"))
    assert note.endswith("of at most 16 per profile (linear alpha spending); stopped: every metric decided")
    payload = json.loads((tmp_path / "v.json").read_text())
    assert payload["table"][0]["blocks"] < 16 and payload["blocks_note"] == note
    assert payload["provenance"]["server"] == {"type": "simulator", "options": {"surface": "simple"}}
    assert payload["provenance"]["verdict"] == "improve"
    conf = tmp_path / "data" / "validate-sim-somaxconn-sysctl" / "90-tunelab-validate-sim-somaxconn.conf"
    assert "net.core.somaxconn = 4096" in conf.read_text()
    assert (tmp_path / "data" / "validate-sim-somaxconn.sqlite").exists()


def test_every_trial_failing_is_untestable_with_the_first_reason_and_exit_5(tunelab_here, tmp_path: Path) -> None:
    change(tmp_path, target={"type": "simulator", "options": {"surface": "simple", "fail_after": 0}})
    proc = tunelab_here(["validate", "change.yaml"], tmp_path)
    assert proc.returncode == 5, proc.stderr
    lines = proc.stdout.splitlines()
    assert "verdict: UNTESTABLE" in lines
    assert ("all 16 trials failed; first failure: simulator returned 1: simulator: this testbed broke after 0 "
            "measurements (option fail_after)") in lines
    assert any(line.endswith("stopped: no usable block (every trial failed)") for line in lines)
    assert "  [overload] qps: untestable (0 usable blocks, need 2)" in lines and not NAN.search(proc.stdout)


@pytest.mark.parametrize("edits, message", [
    ({"candidate": {"net.core.somaxconn": 128}},
     "the candidate equals the baseline (the target's current values: net.core.somaxconn=128)"),
    ({"measure_s": -1}, "measure_s: must be > 0.0, got -1"),
    ({"load": {"generator": "dnsperf", "profiles": ["low"]}}, "the simulator target measures with its own load"),
])
def test_a_meaningless_change_is_one_line_before_anything_runs(tmp_path: Path, edits: dict, message: str,
                                                               capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    change(tmp_path, **edits)
    for extra in ([], ["--plan"]):                # the plan refuses what validate refuses
        status = main(["validate", "change.yaml", *extra])
        out, err = capsys.readouterr()
        assert status == 2 and out == "", out
        assert err.startswith("tunelab: error: change.yaml") and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "data").exists()


def test_the_plan_accepts_what_validate_starts_and_runs_nothing(tunelab_here, tmp_path: Path) -> None:
    change(tmp_path)
    proc = tunelab_here(["validate", "change.yaml", "--plan", "--json", "plan.json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "baseline: net.core.somaxconn=128 (read just now, read-only)" in proc.stdout
    assert "blocks per profile: 4 first, then 4 more per round while a metric is undecided, at most 16" in proc.stdout
    assert json.loads((tmp_path / "plan.json").read_text())["estimate_s"] == {"min": 32.0, "max": 128.0}
    assert not (tmp_path / "data").exists()


def test_flags_keep_working_and_refuse_a_missing_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--candidate", "net.core.somaxconn=1024"]) == 2
    assert "--target is required without a change file" in capsys.readouterr().err
    assert main(["validate", "--target", "simulator", "--surface", "simple", "--candidate", "net.core.somaxconn=1024",
                 "--measure", "-1"]) == 2
    assert "the measured time (--measure) must be a number of seconds > 0, got -1" in capsys.readouterr().err


def test_an_unknown_or_ignored_setting_in_a_lab_change_is_one_line_before_a_lab_is_built(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "q.txt").write_text("r1.tunelab.test. A\n")
    for profile, message in (({"foo": 1}, "load.profiles.normal.foo: dnsperf: unknown load setting 'foo'"),
                             ({"records": 10}, "records sizes the generated query file and would be ignored")):
        path = change(tmp_path, target={"type": "lab"}, load={"generator": "dnsperf", "query_file": "q.txt",
                                                             "profiles": {"normal": profile}})
        assert main(["validate", str(path)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
