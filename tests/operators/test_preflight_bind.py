"""The pre-flight of ``tunelab validate CHANGE.yaml`` against BIND 9 through ssh, as docs/operators.md shows it.

Production runs BIND 9 (``named``, restarted by its own command) behind a real sshd, the load host runs dnsperf
(:mod:`operator_hosts`). An operator asking "does somaxconn matter on MY server?":

- under a UDP load the knob cannot act (it limits TCP's accept queue): refused before any trial, in one line
  naming the reason and ``--force``; nothing applied, restarted or stored;
- under a TCP load, BIND's own listen backlog (``tcp-listen-queue``, default 10; ``ss -ltn`` shows it over ssh)
  caps the accept queue below both 1024 and 4096: refused the same way, naming the backlog of 10;
- with ``tcp-listen-queue 4096`` the knob acts: tests/operators/test_validate_change_ssh.py validates somaxconn 16
  against 4096 there under TCP overload to a decided verdict.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from dns_helpers import require_tools

sys.path.insert(0, str(Path(__file__).resolve().parent))
from operator_hosts import ORIGINAL_SOMAXCONN, OperatorHosts, change_file, operator_hosts, restarts  # noqa: E402

pytestmark = pytest.mark.lab

#: dnsperf under TCP overload: 200 connections, a new one every 100 queries (the accept queue is exercised)
TCP_OVERLOAD = {"clients": 200, "max_outstanding": 10000, "queries_per_conn": 100, "timeout": 1}


def needs_bind() -> None:
    require_tools("sshd", "ssh-keygen", "dnsperf", "named", "ss", hint="apt-get install openssh-server dnsperf bind9")


def assert_refused_before_anything(hosts: OperatorHosts, change: Path, *reasons: str) -> str:
    """Validate ``change``: exit 2, one ``tunelab: error: CHANGE.yaml: pre-flight: ...`` line naming ``reasons`` and --force;
    nothing restarted, written or stored. Returns the line."""
    started = restarts(hosts)
    run = hosts.run_tunelab("validate", str(change), "--allow-design-commands", timeout_s=90)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2, (run.returncode, run.stdout, run.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith(f"tunelab: error: {change}: pre-flight: "), run.stderr
    assert "--force" in lines[0] and all(reason in lines[0] for reason in reasons), lines[0]
    assert restarts(hosts) == started                    # the restart command never ran
    assert hosts.somaxconn() == ORIGINAL_SOMAXCONN       # no knob was written
    assert not (hosts.workdir / "data").exists()        # no store: not a trial was recorded
    return lines[0]


def test_bind_default_backlog_udp_load_is_refused_naming_udp(tmp_path: Path):
    needs_bind()
    with operator_hosts(tmp_path, software="bind9") as hosts:
        change = change_file(hosts, "bind-somaxconn", transport="udp",
                             profiles={"overload": {"clients": 4, "max_outstanding": 500}}, baseline="current",
                             candidate={"net.core.somaxconn": 4096})
        line = assert_refused_before_anything(hosts, change, "net.core.somaxconn [profile overload]: cannot act",
                                              "sends UDP only", "transport: tcp")
        assert "more" not in line                        # the one problem: an uncapped profile, qps can move


def test_bind_default_backlog_tcp_load_is_refused_naming_its_backlog_of_10(tmp_path: Path):
    needs_bind()
    with operator_hosts(tmp_path, software="bind9") as hosts:
        change = change_file(hosts, "bind-somaxconn", profiles={"overload": TCP_OVERLOAD}, baseline="current",
                             candidate={"net.core.somaxconn": 4096})
        assert_refused_before_anything(hosts, change, "asks listen() for a backlog of 10", "`ss -ltn`",
                                       "tcp-listen-queue", "1024 and 4096")
