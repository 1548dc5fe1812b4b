"""An operator's two machines in network namespaces, for the end-to-end tests of ``tunelab validate CHANGE.yaml``.

A routed lab (:class:`tunelab.targets.lab.LabTarget` with a router namespace, no lab services) gives three
namespaces joined by veth links:

- ``server`` ("production", 10.77.0.1): a real sshd and a DNS server (Unbound as an auth-zone by default; BIND 9 or
  Knot DNS with ``software=``) serving the operator's zone, started and restarted by its own service command (a shell
  script standing in for ``systemctl restart unbound``); BIND 9 may be given its ``tcp-listen-queue``;
- ``client`` (the load host, 10.77.0.129): a real sshd; dnsperf runs there over ssh;
- ``router`` (the operator's workstation): ``tunelab`` itself runs there (``ip netns exec``), and reaches
  both machines through ssh only.

Everything (sshds, the DNS server, namespaces, the query file's copies on the load host) is removed on exit,
pass or fail.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import psutil
import yaml
from dns_helpers import ORIGIN, QUERIES, ZONE, operator_files

from tunelab.targets import dns_servers, netns
from tunelab.targets.lab import LabTarget

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "targets"))
from sshd_helper import PORT, running_sshd  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOMAXCONN = "/proc/sys/net/core/somaxconn"
#: production's somaxconn before any test: the pre-5.4 kernel default (a new namespace starts at 4096,
#: the candidate, and a candidate equal to the baseline is refused)
ORIGINAL_SOMAXCONN = "1024"
#: the restart command's script: stop the running server (its pid file), start a new one in the background,
#: wait until it listens on port 53; what ``systemctl restart unbound`` does on a real server
RESTART_SCRIPT = """#!/bin/sh
set -e
W={workdir}
if [ -s "$W/{pidfile}" ]; then
    pid=$(cat "$W/{pidfile}")
    kill "$pid" 2>/dev/null || true
    # gone, or a zombie (exited: only its parent's reaping is left)
    i=0; while s=$(awk '{{print $3}}' "/proc/$pid/stat" 2>/dev/null) && [ "$s" != Z ]; do
        i=$((i+1)); [ $i -lt 200 ] || exit 1; sleep 0.02
    done
fi
{start}
echo restarted >> "$W/restarts"
i=0; until ss -Hlun 'sport = :53' | grep -q {address}; do i=$((i+1)); [ $i -lt 200 ] || exit 1; sleep 0.02; done
"""
#: production's DNS software by default: a registry name (:data:`tunelab.targets.dns_servers.DNS_SERVERS`)
SOFTWARE = "unbound"
#: how each software starts as a daemon (it forks and writes its pid file in the work directory)
DAEMON = {"bind9": ("named -4 -c", "named.pid"), "knot": ("knotd -d -c", "knot.pid"),
          "unbound": ("unbound -c", "unbound.pid")}


@dataclass
class OperatorHosts:
    """The running machines and the operator's files: what a CHANGE.yaml names."""

    lab: LabTarget
    server: str            # user@host:port of production's sshd
    load_host: str         # user@host:port of the load host's sshd
    server_address: str    # where the DNS load is sent
    key: Path
    known_hosts: Path
    restart: str           # the DNS software's restart command, as an operator writes it
    zone_file: Path
    query_file: Path
    workdir: Path
    software: str = SOFTWARE

    def somaxconn(self) -> str:
        """Production's net.core.somaxconn now."""
        return self.lab.read_text("server", SOMAXCONN).strip()

    def tunelab(self, *argv: str) -> list[str]:
        """The argv running ``tunelab ARGV`` on the operator's workstation (the router namespace)."""
        return netns.exec_argv(self.lab.namespace("router"), [
            "env", f"PYTHONPATH={ROOT}", sys.executable, "-m", "tunelab", *argv])

    def run_tunelab(self, *argv: str, timeout_s: float = 240) -> subprocess.CompletedProcess:
        return subprocess.run(self.tunelab(*argv), capture_output=True, text=True, timeout=timeout_s,
                              cwd=self.workdir, check=False)


def with_tcp_listen_queue(named_conf: Path, backlog: int) -> None:
    """Raise BIND 9's own listen() backlog (``tcp-listen-queue``, default 10) in ``named_conf``'s options, as
    docs/operators.md tells an operator to."""
    text = named_conf.read_text()
    assert text.startswith("options {\n"), text[:200]
    named_conf.write_text(text.replace("options {\n", f"options {{\n    tcp-listen-queue {int(backlog)};\n", 1))


def _server_files(workdir: Path, address: str, software: str, tcp_listen_queue: int | None) -> Path:
    """The DNS server's config and the operator's zone under ``workdir``, and the restart script; returns the script."""
    server = dns_servers.get_dns_server(software)
    conf = dns_servers.write_server_files(server, workdir, address, dns_servers.Zone(ORIGIN, ZONE),
                                          workdir / "dns.log")
    if tcp_listen_queue is not None:
        assert software == "bind9", "tcp-listen-queue is BIND 9's option"
        with_tcp_listen_queue(conf, tcp_listen_queue)
    start, pidfile = DAEMON[software]
    script = workdir / f"restart-{software}"
    script.write_text(RESTART_SCRIPT.format(workdir=workdir, address=address, pidfile=pidfile, start=f"{start} {conf}"))
    script.chmod(0o700)
    return script


def _kill_server(workdir: Path, software: str) -> None:
    """Kill every DNS server running with this workdir's config (only ours: matched by its config path)."""
    conf = str(workdir / dns_servers.get_dns_server(software).config_name)
    for proc in psutil.process_iter(["cmdline"]):
        if conf in (proc.info["cmdline"] or []):
            proc.kill()
            proc.wait(5)


@contextmanager
def operator_hosts(tmp_path: Path, software: str = SOFTWARE, tcp_listen_queue: int | None = None, sftp: bool = True,
                   user: str = "root") -> Iterator[OperatorHosts]:
    """Bring up production (sshd + the DNS server ``software`` with the operator's zone; BIND 9 with its own
    ``tcp-listen-queue`` when given) and the load host (sshd); remove all on exit.

    ``sftp=False``: the sshds offer no SFTP; ``user``: both logins (a ``sshd_helper.login_user``), else root.
    """
    lab = LabTarget(name=f"op{os.getpid() % 100000}", bottleneck_mbit=10_000, services=(), pin_cpus=False,
                    disk_mb=None)
    # short: a control socket's path must stay under 108 bytes
    workdir = Path(tempfile.mkdtemp(prefix="tl-dns."))
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, workdir, True)
        lab.up()
        stack.callback(lab.down)
        lab.write_text("server", SOMAXCONN, ORIGINAL_SOMAXCONN)
        key = tmp_path / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        sshds = []
        for host in ("server", "client"):
            directory = tmp_path / f"sshd-{host}"
            directory.mkdir()
            sshds.append(stack.enter_context(running_sshd(lab, directory, PORT, host=host, client_key=key, sftp=sftp,
                                                          user=user)))
        known_hosts = tmp_path / "known_hosts"
        known_hosts.write_text("".join((s["dir"] / "known_hosts").read_text() for s in sshds))
        script = _server_files(workdir, lab.address("server"), software, tcp_listen_queue)
        stack.callback(_kill_server, workdir, software)
        started = subprocess.run(netns.exec_argv(lab.namespace("server"), [str(script)]), capture_output=True,
                                 text=True, timeout=30, check=False)
        assert started.returncode == 0, started.stderr
        # the query file's last line names this run: its copies on the load host are found by it (remove_copies)
        zone_file, query_file = operator_files(tmp_path, queries=f"{QUERIES}; {workdir.name}\n")
        hosts = OperatorHosts(lab, f"{user}@{lab.address('server')}:{PORT}", f"{user}@{lab.address('client')}:{PORT}",
                              lab.address("server"), key, known_hosts, str(script), zone_file, query_file, tmp_path,
                              software)
        stack.callback(remove_copies, hosts)
        yield hosts


def query_copies(hosts: OperatorHosts) -> list[Path]:
    """The copies of this run's query file on the load host (this machine's /tmp): tunelab's ``mktemp``
    directories whose ``queries`` is this run's file (its last line names the run)."""
    text = hosts.query_file.read_text()
    found = []
    for copy in Path(tempfile.gettempdir()).glob("tunelab-dnsperf.*/queries"):
        try:
            if copy.read_text() == text:
                found.append(copy)
        except OSError:
            continue
    return found


def remove_copies(hosts: OperatorHosts) -> None:
    """Remove the private directories holding this run's query file on the load host (:func:`query_copies`):
    what a killed validation could not clean up."""
    for copy in query_copies(hosts):
        shutil.rmtree(copy.parent, ignore_errors=True)


def change_file(hosts: OperatorHosts, name: str, *, profiles: dict[str, Any], baseline: object, candidate: object,
                transport: str = "tcp", metrics: Sequence[str] = ("qps:max:5",), blocks: int = 2) -> Path:
    """CHANGE.yaml in the shape docs/operators.md shows, for these hosts (0.5 s warm-up, 2 s measured)."""
    change = {
        "name": name,
        "server": {"ssh": hosts.server, "key": str(hosts.key), "known_hosts": str(hosts.known_hosts),
                   "restart": hosts.restart, "software": hosts.software},
        "load_host": {"ssh": hosts.load_host, "key": str(hosts.key)},
        "load": {"generator": "dnsperf", "query_file": hosts.query_file.name, "server_address": hosts.server_address,
                 "transport": transport, "profiles": profiles},
        "baseline": baseline, "candidate": candidate, "metrics": list(metrics), "blocks": blocks,
        "warmup_s": 0.5, "measure_s": 2,
    }
    path = hosts.workdir / "CHANGE.yaml"
    path.write_text(yaml.safe_dump(change, sort_keys=False))
    return path


def restarts(hosts: OperatorHosts) -> int:
    """How often the DNS server was (re)started by its restart command (the first start included)."""
    log = Path(hosts.restart).parent / "restarts"
    return len(log.read_text().splitlines()) if log.exists() else 0


def wait_for(predicate, timeout_s: float, what: str) -> None:
    """Poll ``predicate`` every 0.1 s until true; AssertionError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.1)
