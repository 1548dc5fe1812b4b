"""The local and dry-run targets, plus the shared helpers (no root needed)."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tunelab.errors import TargetError
from tunelab.targets import get_target
from tunelab.targets.dryrun import DryRunTarget
from tunelab.targets.hostinfo import ForeignCpuMeter, parse_version
from tunelab.targets.lab import tbf_args
from tunelab.targets.local import LocalTarget
from tunelab.targets.services import dns_query_packet, parse_dns_header

SOMAXCONN = "/proc/sys/net/core/somaxconn"


def test_registry_knows_every_target():
    assert {"lab", "local", "ssh", "dry-run"} <= set(__import__("tunelab.targets", fromlist=["TARGETS"]).TARGETS.names())
    with pytest.raises(TargetError, match="No target named 'cloud'"):
        get_target("cloud")


def test_local_reads_proc_and_writes_files(tmp_path):
    target = LocalTarget()
    assert target.read_text("server", SOMAXCONN) == Path(SOMAXCONN).read_text()
    path = tmp_path / "sub" / "queries.txt"
    target.write_text("client", str(path), "r1.tunelab.test. A\n")
    assert path.read_text() == "r1.tunelab.test. A\n"
    assert target.address("server") == "127.0.0.1"
    assert target.is_writable("client", str(path)) and not target.is_writable("client", str(tmp_path / "nope" / "x"))
    with pytest.raises(TargetError, match="no host 'router'"):
        target.read_text("router", SOMAXCONN)
    with pytest.raises(TargetError, match="could not read /nonexistent"):
        target.read_text("server", "/nonexistent")


def test_local_run_returns_output_and_kills_the_group_on_timeout(tmp_path):
    target = LocalTarget()
    result = target.run("client", ["sh", "-c", 'echo "$1"; echo err >&2; exit 3', "sh", "a; b"], timeout_s=5)
    assert (result.returncode, result.stdout, result.stderr, result.ok) == (3, "a; b\n", "err\n", False)
    marker = tmp_path / "survivor"
    start = time.monotonic()
    slow = target.run("client", ["sh", "-c", f"(sleep 1; touch {marker}) & sleep 30"], timeout_s=0.3)
    assert slow.timed_out and time.monotonic() - start < 5
    time.sleep(1.2)
    assert not marker.exists()  # the background child died with its group
    assert target.run("client", ["no-such-program-xyz"], timeout_s=5).returncode == 127
    with pytest.raises(TargetError, match="list of arguments"):
        target.run("client", "echo hi", timeout_s=5)
    pinned = target.run("server", ["grep", "Cpus_allowed_list", "/proc/self/status"], timeout_s=5, cpu=0)
    assert pinned.stdout.split()[-1] == "0"


def test_local_restart_needs_a_configured_command(tmp_path):
    marker = tmp_path / "restarted"
    target = LocalTarget(service_commands={"dns": ["touch", str(marker)]})
    target.restart_service("dns")
    assert marker.exists()
    with pytest.raises(TargetError, match="service_commands="):
        LocalTarget().restart_service("dns")


def test_dry_run_records_but_never_acts(tmp_path, capsys):
    target = DryRunTarget()
    path = tmp_path / "written"
    target.write_text("server", str(path), "1")
    result = target.run("client", ["touch", str(tmp_path / "ran")], timeout_s=5)
    target.restart_service("dns")
    assert not path.exists() and not (tmp_path / "ran").exists()
    assert result.dry and result.ok and result.stdout == ""
    assert [a["action"] for a in target.actions] == ["write", "run", "restart_service"]
    assert target.actions[0] == {"action": "write", "host": "server", "path": str(path), "text": "1"}
    assert "[dry-run] write" in capsys.readouterr().out
    assert target.read_text("server", SOMAXCONN) == Path(SOMAXCONN).read_text()


def test_foreign_cpu_counts_a_process_that_is_not_ours():
    meter = ForeignCpuMeter()
    subprocess.run(["sh", "-c", "timeout 0.6 sh -c 'while :; do :; done' >/dev/null 2>&1 &"], check=True)
    time.sleep(0.8)
    assert meter() >= 0.4


def test_parse_version_and_tbf_and_dns_helpers():
    assert parse_version("fio-3.39\n") == "3.39"
    assert parse_version("NSD version 4.6.1\nWritten by NLnet Labs.") == "4.6.1"
    assert parse_version("no digits here") is None
    args = tbf_args(80)
    assert args[:3] == ["tbf", "rate", "80mbit"]
    burst, limit = int(args[4]), int(args[6])
    assert burst >= 80e6 / 8 / 250 and limit == int(80e6 / 8 * 0.02)
    assert tbf_args(80, 3000)[-1] == "3000"
    # RFC 1035: header of 12 bytes, QNAME as length-prefixed labels, QTYPE A=1, QCLASS IN=1
    packet = dns_query_packet("r1.tunelab.test.", 0xBEEF)
    assert packet == bytes.fromhex("beef0000000100000000000002723107") + b"tunelab\x04test\x00\x00\x01\x00\x01"
    qid, answer = parse_dns_header(bytes.fromhex("beef8403000100000000000000"))
    assert qid == 0xBEEF and answer.rcode == 3 and answer.authoritative and answer.answer_count == 0
