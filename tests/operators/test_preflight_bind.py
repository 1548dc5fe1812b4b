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
from typing import Any

import pytest
import yaml
from dns_helpers import require_tools

sys.path.insert(0, str(Path(__file__).resolve().parent))
from operator_hosts import ORIGINAL_SOMAXCONN, OperatorHosts, operator_hosts  # noqa: E402

pytestmark = pytest.mark.lab

#: dnsperf under TCP overload: 200 connections, a new one every 100 queries (the accept queue is exercised)
TCP_OVERLOAD = {"clients": 200, "max_outstanding": 10000, "queries_per_conn": 100, "timeout": 1}


def needs_bind() -> None:
    require_tools("sshd", "ssh-keygen", "dnsperf", "named", "ss", hint="apt-get install openssh-server dnsperf bind9")


def write_change(hosts: OperatorHosts, transport: str, profiles: dict[str, Any], baseline: object,
                 candidate: dict[str, Any], metrics: list[str], blocks: int = 2) -> Path:
    """CHANGE.yaml in the shape docs/operators.md shows, against BIND 9."""
    change = {
        "name": "bind-somaxconn",
        "server": {"ssh": hosts.server, "key": str(hosts.key), "known_hosts": str(hosts.known_hosts),
                   "restart": hosts.restart, "software": hosts.software},
        "load_host": {"ssh": hosts.load_host, "key": str(hosts.key)},
        "load": {"generator": "dnsperf", "query_file": hosts.query_file.name, "server_address": hosts.server_address,
                 "transport": transport, "profiles": profiles},
        "baseline": baseline,
        "candidate": candidate,
        "metrics": metrics,
        "blocks": blocks,
        "warmup_s": 0.5,
        "measure_s": 2,
    }
    path = hosts.workdir / "CHANGE.yaml"
    path.write_text(yaml.safe_dump(change, sort_keys=False))
    return path


def restarts(hosts: OperatorHosts) -> int:
    """How often the DNS server was (re)started by its restart command (the first start included)."""
    log = Path(hosts.restart).parent / "restarts"
    return len(log.read_text().splitlines()) if log.exists() else 0


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
        change = write_change(hosts, "udp", {"overload": {"clients": 4, "max_outstanding": 500}}, "current",
                              {"net.core.somaxconn": 4096}, ["qps:max:5"])
        line = assert_refused_before_anything(hosts, change, "net.core.somaxconn [profile overload]: cannot act",
                                              "sends UDP only", "transport: tcp")
        assert "more" not in line                        # the one problem: an uncapped profile, qps can move


def test_bind_default_backlog_tcp_load_is_refused_naming_its_backlog_of_10(tmp_path: Path):
    needs_bind()
    with operator_hosts(tmp_path, software="bind9") as hosts:
        change = write_change(hosts, "tcp", {"overload": TCP_OVERLOAD}, "current", {"net.core.somaxconn": 4096},
                              ["qps:max:5"])
        assert_refused_before_anything(hosts, change, "asks listen() for a backlog of 10", "`ss -ltn`",
                                       "tcp-listen-queue", "1024 and 4096")
