"""scripts/install.sh as root: a service that was running keeps running, and policy-rc.d is put back exactly.

This machine has no systemd as PID 1: the real ``systemctl is-active`` says every unit is inactive, so
an install.sh that stops services would pass unnoticed. A ``systemctl`` stand-in on PATH therefore
answers as systemd would for the real daemons the tests start (nginx as unit ``nginx``, sshd as unit
``ssh``, both on 127.0.0.1): ``is-active`` from the process's liveness, ``stop`` and ``restart`` kill
it. The install.sh of eb1e379, which stopped ssh, nginx, named, ... on every run, fails these tests.

``dpkg-query`` and ``apt-get`` stand-ins make chosen packages "missing" so the policy-rc.d swap runs
without installing anything: the ``apt-get install`` stand-in records what policy-rc.d answers while
it runs, then succeeds, fails, has install.sh sent SIGTERM or hangs (to be SIGKILLed). Each test
passes TUNELAB_SKIP_PYTHON=1, so the venv is not touched; all but one point TUNELAB_POLICY_RC_D at a
file of their own, and that one checks the machine's own /usr/sbin/policy-rc.d is exactly as before.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tunelab.targets import services as svc

sys.path.insert(0, str(Path(__file__).resolve().parent / "targets"))
from sshd_helper import stop_process, write_sshd_files  # noqa: E402

INSTALL = Path(__file__).resolve().parents[1] / "scripts" / "install.sh"
SYSTEM_POLICY = Path("/usr/sbin/policy-rc.d")

SYSTEMCTL = r"""#!/bin/sh
# systemd's answers for the units whose main PID is in $UNITS/NAME.pid; every call is logged
echo "$*" >> "$UNITS/calls"
verb=$1
for arg; do case $arg in -*) ;; *) unit=${arg%.service} ;; esac; done
pid=$(cat "$UNITS/$unit.pid" 2>/dev/null) || pid=
alive() { [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] && ! grep -q ') Z ' "/proc/$pid/stat"; }
case $verb in
    is-active) alive || exit 3 ;;
    stop|restart) if alive; then kill "$pid"; while alive; do sleep 0.05; done; fi ;;
esac
"""

DPKG_QUERY = r"""#!/bin/sh
# every package is installed except those named in $MISSING
for pkg; do :; done
case " $MISSING " in *" $pkg "*) exit 1 ;; esac
printf 'install ok installed'
"""

APT_GET = r"""#!/bin/sh
# "install": record what policy-rc.d answers for a start now, then do what $APT_OUTCOME says
[ "$1" = install ] || exit 0
status=0; "${TUNELAB_POLICY_RC_D:-/usr/sbin/policy-rc.d}" nginx start || status=$?
echo "$status ${NEEDRESTART_SUSPEND:-unset}" > "$UNITS/during-apt"
case ${APT_OUTCOME:-ok} in
    fail) exit 100 ;;
    term) kill -TERM "$PPID" ;;
    hang) : > "$UNITS/apt-running"; sleep 30 ;;
esac
"""


@pytest.fixture
def stand_ins(tmp_path: Path) -> dict[str, str]:
    """Environment for install.sh with the stand-ins first on PATH and a directory for their records."""
    bin_dir, units = tmp_path / "bin", tmp_path / "units"
    bin_dir.mkdir()
    units.mkdir()
    for name, text in (("systemctl", SYSTEMCTL), ("dpkg-query", DPKG_QUERY), ("apt-get", APT_GET)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "UNITS": str(units),
            "TUNELAB_SKIP_PYTHON": "1", "TUNELAB_POLICY_RC_D": str(tmp_path / "policy-rc.d"), "MISSING": ""}


def run_install(env: dict[str, str], **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(INSTALL)], env={**env, **extra}, capture_output=True, text=True,
                          timeout=60)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def running_unit(env: dict[str, str], unit: str, argv: list[str], ready: Callable[[], bool],
                 workdir: Path) -> Iterator[subprocess.Popen]:
    """Start ``argv`` as systemd's ``unit`` (its PID where the systemctl stand-in reads it); kill it on exit."""
    with open(workdir / f"{unit}.log", "wb") as log:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    try:
        svc.wait_until(ready, 5, unit, proc=proc, log=workdir / f"{unit}.log")
        (Path(env["UNITS"]) / f"{unit}.pid").write_text(str(proc.pid))
        yield proc
    finally:
        stop_process(proc)


@contextmanager
def nginx_unit(env: dict[str, str], workdir: Path) -> Iterator[tuple[subprocess.Popen, int]]:
    port = free_port()
    conf = svc.write_http_files(workdir, "127.0.0.1", port)
    argv = ["nginx", "-p", str(workdir), "-e", str(workdir / "error.log"), "-c", str(conf), "-g", "daemon off;"]
    with running_unit(env, "nginx", argv, lambda: svc.http_status("127.0.0.1", port) == 200, workdir) as proc:
        yield proc, port


@contextmanager
def ssh_unit(env: dict[str, str], workdir: Path) -> Iterator[tuple[subprocess.Popen, int]]:
    port = free_port()
    conf = write_sshd_files(workdir, "127.0.0.1", port)
    Path("/run/sshd").mkdir(exist_ok=True)
    argv = ["/usr/sbin/sshd", "-D", "-e", "-f", str(conf)]
    with running_unit(env, "ssh", argv, lambda: svc.tcp_listening(port, "127.0.0.1"), workdir) as proc:
        yield proc, port


def require(*tools: str) -> None:
    missing = [tool for tool in tools if not any(Path(d, tool).exists() for d in ("/usr/sbin", "/usr/bin"))]
    if missing:
        pytest.skip(f"needs Debian's {', '.join(missing)}")


def systemctl_calls(env: dict[str, str]) -> str:
    calls = Path(env["UNITS"]) / "calls"
    return calls.read_text() if calls.exists() else ""


@pytest.mark.lab
def test_install_leaves_an_already_running_service_running(stand_ins, tmp_path: Path) -> None:
    require("nginx")
    (tmp_path / "www").mkdir()
    with nginx_unit(stand_ins, tmp_path / "www") as (nginx, port):
        result = run_install(stand_ins, MISSING="nginx")        # nginx "missing": apt-get runs too
        calls = systemctl_calls(stand_ins)
        assert nginx.poll() is None, f"install.sh stopped the running nginx; systemctl calls: {calls}"
        assert svc.http_status("127.0.0.1", port) == 200
    assert result.returncode == 0, result.stderr
    assert (Path(stand_ins["UNITS"]) / "during-apt").read_text().split() == ["101", "1"]


@pytest.mark.lab
def test_install_twice_leaves_every_running_service_running(stand_ins, tmp_path: Path) -> None:
    require("nginx", "sshd", "ssh-keygen")
    (tmp_path / "www").mkdir()
    (tmp_path / "ssh").mkdir()
    with nginx_unit(stand_ins, tmp_path / "www") as (nginx, http_port), \
            ssh_unit(stand_ins, tmp_path / "ssh") as (sshd, ssh_port):
        results = [run_install(stand_ins), run_install(stand_ins)]
        calls = systemctl_calls(stand_ins)
        assert (nginx.poll(), sshd.poll()) == (None, None), f"install.sh stopped a service; systemctl calls: {calls}"
        assert svc.http_status("127.0.0.1", http_port) == 200 and svc.tcp_listening(ssh_port, "127.0.0.1")
    assert "ssh" not in calls, calls                                 # ssh is not even asked about
    assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
    assert all(r.stdout == "" and r.stderr == "" for r in results)   # nothing missing: quiet


def snapshot(path: Path) -> tuple | None:
    """What "exactly as before" means: content (or link target), mode, owner, mtime and inode; None if absent."""
    if not os.path.lexists(path):
        return None
    st = path.lstat()
    content = os.readlink(path) if path.is_symlink() else path.read_bytes()
    return content, st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns, st.st_ino


def leftovers(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.glob(f"{path.name}.tunelab-*"))


def prepare_policy(path: Path, kind: str) -> None:
    if kind == "file":
        path.write_text("#!/bin/sh\nexit 0\n")          # an operator's policy that allows everything
        path.chmod(0o750)
    elif kind == "symlink":                             # as update-alternatives manages it
        path.symlink_to("/bin/true")


@pytest.mark.lab
def test_the_machines_policy_rc_d_is_exactly_as_before(stand_ins) -> None:
    before = snapshot(SYSTEM_POLICY)          # here a Docker-style "exit 101" one; absent on most machines
    result = run_install(stand_ins, TUNELAB_POLICY_RC_D=str(SYSTEM_POLICY), MISSING="iperf3")
    assert result.returncode == 0, result.stderr
    assert (Path(stand_ins["UNITS"]) / "during-apt").read_text().split() == ["101", "1"]
    assert snapshot(SYSTEM_POLICY) == before and leftovers(SYSTEM_POLICY) == []


@pytest.mark.lab
@pytest.mark.parametrize("kind, outcome, status", [("absent", "ok", 0), ("file", "fail", 100),
                                                   ("symlink", "term", 143)])
def test_policy_rc_d_is_put_back_after_success_failure_and_interrupt(stand_ins, kind, outcome, status) -> None:
    policy = Path(stand_ins["TUNELAB_POLICY_RC_D"])
    prepare_policy(policy, kind)
    before = snapshot(policy)
    result = run_install(stand_ins, MISSING="nsd knot", APT_OUTCOME=outcome)
    assert result.returncode == status, result.stderr
    assert (Path(stand_ins["UNITS"]) / "during-apt").read_text().split() == ["101", "1"]
    assert snapshot(policy) == before and leftovers(policy) == []


@pytest.mark.lab
def test_the_next_run_puts_back_what_a_killed_run_swapped(stand_ins) -> None:
    policy = Path(stand_ins["TUNELAB_POLICY_RC_D"])
    prepare_policy(policy, "file")
    before = snapshot(policy)
    proc = subprocess.Popen(["bash", str(INSTALL)], env={**stand_ins, "MISSING": "nsd", "APT_OUTCOME": "hang"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        svc.wait_until((Path(stand_ins["UNITS"]) / "apt-running").exists, 10, "apt-get stand-in", proc=proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)          # no trap runs
        proc.wait()
    assert b"exit 101" in policy.read_bytes() and leftovers(policy) == ["policy-rc.d.tunelab-saved"]
    assert run_install(stand_ins).returncode == 0
    assert snapshot(policy) == before and leftovers(policy) == []
