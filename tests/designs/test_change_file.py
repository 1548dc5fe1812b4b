"""Change files (`tunelab validate CHANGE.yaml`): every bad file is one `tunelab: error:` line naming the file
(and its line where there is one), exit status 2, nothing on stdout, nothing built, no store written.

The good file parses into the typed, frozen ChangeFile the schema in tunelab/designs/change.py describes.
"""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tunelab.cli import main
from tunelab.designs.change import BlockRule, load_change

ROOT = Path(__file__).resolve().parents[2]


def good(tmp: Path) -> dict:
    """A valid change file's content (files made in ``tmp``): ssh server, dnsperf with the operator's queries."""
    (tmp / "queries.txt").write_text("www.example.org. A\nexample.org. MX\n; a comment\n\nmail.example.org. AAAA\n")
    (tmp / "candidate.conf").write_text("# candidate\nnet.core.somaxconn = 4096\n")
    (tmp / "id_test").write_text("not a real key\n")
    (tmp / "known_hosts").write_text("")
    return {"name": "somaxconn-4096",
            "server": {"ssh": "root@192.0.2.10:22", "key": "id_test", "known_hosts": "known_hosts",
                       "restart": "systemctl restart nsd", "software": "nsd"},
            "load": {"generator": "dnsperf", "query_file": "queries.txt", "server_address": "192.0.2.53",
                     "transport": "tcp", "profiles": {"normal": {"rate": 2000, "clients": 4},
                                                      "overload": {"clients": 64}}},
            "baseline": "current", "candidate": "candidate.conf", "metrics": ["latency_mean_ms:min:5"],
            "blocks": {"min": 4, "max": 16, "until": "decided"}, "warmup_s": 2, "measure_s": 8,
            "allow_host_global": False}


def write(tmp: Path, content: dict | str) -> Path:
    path = tmp / "change.yaml"
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False))
    return path


def test_the_good_file_is_a_typed_frozen_change(tmp_path: Path) -> None:
    change = load_change(write(tmp_path, good(tmp_path)))
    assert change.study == "validate-somaxconn-4096"
    assert change.blocks == BlockRule(4, 16, 4, "decided", "linear") and change.blocks.looks() == [4, 8, 12, 16]
    assert dict(change.candidate) == {"net.core.somaxconn": 4096} and change.baseline == "current"
    assert change.restart == ("systemctl", "restart", "nsd") and change.software == "nsd"
    queries = str((tmp_path / "queries.txt").resolve())
    assert dict(change.load.profiles["normal"]) == {"query_file": queries, "mode": "tcp",
                                                    "server_address": "192.0.2.53", "rate": 2000, "clients": 4}
    assert change.target_spec("dns") == {"type": "ssh", "options": {
        "server": "root@192.0.2.10:22", "connect_kwargs": {"key_filename": str((tmp_path / "id_test").resolve())},
        "known_hosts": str((tmp_path / "known_hosts").resolve()),
        "service_commands": {"dns": ["systemctl", "restart", "nsd"]}}}
    with pytest.raises(dataclasses.FrozenInstanceError):
        change.name = "other"         # type: ignore[misc]


def test_a_load_host_runs_the_load_and_both_keys_are_offered(tmp_path: Path) -> None:
    (tmp_path / "id_load").write_text("not a real key either\n")
    content = put(good(tmp_path), {"ssh": "tester@192.0.2.20:2200", "key": "id_load", "known_hosts": "known_hosts"},
                  "load_host")
    options = load_change(write(tmp_path, content)).target_spec()["options"]
    assert options["client"] == "tester@192.0.2.20:2200" and "service_commands" not in options
    assert options["connect_kwargs"] == {"key_filename": [str((tmp_path / name).resolve())
                                                          for name in ("id_test", "id_load")]}
    assert "client_known_hosts" not in options          # the same file as the server's


def test_a_load_host_may_trust_its_own_known_hosts_file(tmp_path: Path) -> None:
    (tmp_path / "load_known_hosts").write_text("")
    content = put(good(tmp_path), {"ssh": "tester@192.0.2.20", "known_hosts": "load_known_hosts"}, "load_host")
    options = load_change(write(tmp_path, content)).target_spec()["options"]
    assert options["known_hosts"] == str((tmp_path / "known_hosts").resolve())
    assert options["client_known_hosts"] == str((tmp_path / "load_known_hosts").resolve())


def drop(mapping: dict, *path: str) -> dict:
    inner = mapping
    for key in path[:-1]:
        inner = inner[key]
    del inner[path[-1]]
    return mapping


def put(mapping: dict, value, *path: str) -> dict:
    inner = mapping
    for key in path[:-1]:
        inner = inner[key]
    inner[path[-1]] = value
    return mapping


BAD = {
    "unknown key, did you mean": (lambda c, t: put(c, 8, "measure"), "change.yaml:", "unknown key 'measure'; did "
                                  "you mean 'measure_s'?"),
    "unknown nested key": (lambda c, t: put(c, "x", "server", "restrat"), "server.restrat",
                           "did you mean 'restart'?"),
    "wrong type": (lambda c, t: put(c, "eight", "measure_s"), "measure_s", "must be a number, got 'eight'"),
    "negative duration": (lambda c, t: put(c, -1, "measure_s"), "measure_s", "must be > 0.0, got -1"),
    "negative warm-up": (lambda c, t: put(c, -2, "warmup_s"), "warmup_s", "must be >= 0.0, got -2"),
    "missing query file": (lambda c, t: put(c, "nowhere.txt", "load", "query_file"), "load.query_file",
                           "query file '" ),
    "missing candidate file": (lambda c, t: put(c, "missing.conf", "candidate"), "change.yaml:20: candidate: candidate "
                               "file", "missing.conf' does not exist"),
    "bad ssh spec": (lambda c, t: put(c, "root@db1:99999", "server", "ssh"), "server.ssh",
                     "ssh host 'root@db1:99999' is invalid"),
    "missing key file": (lambda c, t: put(c, "no_key", "server", "key"), "server.key", "ssh key file"),
    "candidate equal to the baseline": (lambda c, t: put(c, {"net.core.somaxconn": 4096}, "baseline"), "change.yaml",
                                        "the candidate equals the baseline (the baseline given: "
                                        "net.core.somaxconn=4096)"),
    "unknown knob": (lambda c, t: put(c, {"net.core.somaxcon": 4096}, "candidate"), "candidate.net.core.somaxcon",
                     "did you mean net.core.somaxconn?"),
    "bad knob value": (lambda c, t: put(c, {"net.core.somaxconn": -5}, "candidate"), "candidate.net.core.somaxconn",
                       "-5"),
    "unknown load setting": (lambda c, t: put(c, {"clients": 4, "foo": 1}, "load", "profiles", "normal"),
                             "load.profiles.normal.foo", "unknown load setting 'foo'"),
    "ignored load setting": (lambda c, t: put(c, {"records": 100}, "load", "profiles", "normal"),
                             "load.profiles.normal", "records sizes the generated query file and would be ignored"),
    "unknown metric": (lambda c, t: put(c, ["latency_mean:min:5"], "metrics"), "metrics[0]",
                       "did you mean 'latency_mean_ms'?"),
    "bad transport": (lambda c, t: put(c, "quic", "load", "transport"), "load.transport", "choose one of udp, tcp"),
    "bad server address": (lambda c, t: put(c, "ns1.example.org", "load", "server_address"), "load.server_address",
                           "an IPv4 or IPv6 address"),
    "blocks below two": (lambda c, t: put(c, 1, "blocks"), "blocks", "must be >= 2"),
    "blocks min above max": (lambda c, t: put(c, {"min": 8, "max": 4}, "blocks"), "blocks",
                             "min=8 is larger than max=4"),
    "no profiles": (lambda c, t: put(c, {}, "load", "profiles"), "load.profiles", "name one or more profiles"),
    "no server": (lambda c, t: drop(c, "server"), "change.yaml", "`server` is required"),
    "bad name": (lambda c, t: put(c, "Some Name", "name"), "name", "is not a valid study name"),
    "restart that cannot be split": (lambda c, t: put(c, "systemctl 'restart", "server", "restart"), "server.restart",
                                     "cannot split"),
    "bad line in the candidate file": (lambda c, t: (t / "candidate.conf").write_text("# x\nsomaxconn 4096\n") and c,
                                       "candidate.conf:2", "'somaxconn 4096' is not 'name = value'"),
    "query file line": (lambda c, t: (t / "queries.txt").write_text("www.example.org. A\nexample.org BOGUS\n") and c,
                        "load.query_file", "queries.txt, line 2: type 'BOGUS' is not a DNS RR type"),
    "missing load host known_hosts": (lambda c, t: put(c, {"ssh": "tester@192.0.2.20", "known_hosts": "nope"},
                                                       "load_host"), "load_host.known_hosts", "nope' does not exist"),
    "server and target": (lambda c, t: put(c, {"type": "lab"}, "target"), "target",
                          "give either server (and load_host), or target, not both"),
    "malformed YAML": (lambda c, t: "name: x\nserver: [\n", "change.yaml:", "malformed YAML"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_each_bad_change_file_is_one_error_line(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    edit, where, message = BAD[case]
    path = write(tmp_path, edit(good(tmp_path), tmp_path))
    status = main(["validate", str(path), "--allow-design-commands"])
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    assert err.startswith(f"tunelab: error: {path}") and err.count("\n") == 1, err
    assert where in err and message in err, err
    assert not (tmp_path / "data").exists()


def test_a_restart_is_refused_without_the_flag_before_anything_is_built(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str],
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)          # 192.0.2.10 is TEST-NET-1: a connection attempt would hang, not pass
    status = main(["validate", str(write(tmp_path, good(tmp_path)))])
    _, err = capsys.readouterr()
    assert status == 2 and err.count("\n") == 1
    assert "net.core.somaxconn needs the dns service restarted with server.restart (`systemctl restart nsd`)" in err
    assert "pass --allow-design-commands to run it" in err and not (tmp_path / "data").exists()


def test_a_knob_that_needs_a_restart_without_a_restart_command_is_refused(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["validate", str(write(tmp_path, drop(good(tmp_path), "server", "restart")))])
    _, err = capsys.readouterr()
    assert status == 2 and "takes effect only after the dns service restarts" in err and "server.restart" in err


def test_a_flag_the_change_file_sets_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["validate", str(write(tmp_path, good(tmp_path))), "--blocks", "3"])
    _, err = capsys.readouterr()
    assert status == 2
    assert "--blocks cannot be combined with a change file" in err and err.count("\n") == 1


def test_the_offline_plan_lists_every_command_where_and_as_whom(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, good(tmp_path))
    status = main(["validate", str(path), "--plan", "--offline", "--allow-design-commands"])
    out, err = capsys.readouterr()
    assert status == 0 and err == ""
    assert "server: 192.0.2.10:22 over ssh, as root" in out
    assert "systemctl restart nsd (restarts dns; runs because --allow-design-commands was given)" in out
    assert "dnsperf -m tcp -s 192.0.2.53 -p 53" in out and "-Q 2000" in out and "-c 64" in out
    assert f"copy {(tmp_path / 'queries.txt').resolve()} to" in out and "mode 0700" in out
    # 4 to 16 blocks x 2 profiles x 4 trials x (2 + 8 + 1 + 2 s)
    assert f"estimated time: {4 * 2 * 4 * 13 // 60} min {4 * 2 * 4 * 13 % 60} s to " \
           f"{16 * 2 * 4 * 13 // 60} min {16 * 2 * 4 * 13 % 60} s" in out
    assert not (tmp_path / "data").exists()


def test_the_plan_without_the_flag_shows_the_restart_and_refuses_as_validate_would(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["validate", str(write(tmp_path, good(tmp_path))), "--plan", "--offline"])
    out, err = capsys.readouterr()
    assert status == 2
    assert "systemctl restart nsd (restarts dns; NOT allowed yet" in out
    assert "pass --allow-design-commands to run it" in err


def test_no_traceback_from_the_command_line(tmp_path: Path) -> None:
    path = write(tmp_path, put(good(tmp_path), -1, "measure_s"))
    proc = subprocess.run([sys.executable, "-m", "tunelab", "validate", str(path)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"tunelab: error: {path}:") and "measure_s: must be > 0.0, got -1" in proc.stderr
