"""Loopback servers for the live load tests: NSD, iperf3 and python's http.server on 127.0.0.1.

Every server is bounded in time (``timeout``) and killed (its whole process group) in ``finally``.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from tunelab.targets import dns_servers, services

SERVER_LIFETIME_S = 60


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_listen(port: int, proc: subprocess.Popen, timeout_s: float = 5.0) -> None:
    """Wait for a LISTEN socket on the port without connecting (a one-shot iperf3 would take it as the test)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited early with status {proc.returncode}")
        if services.tcp_listening(port, "127.0.0.1"):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


def require(*tools: str) -> None:
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (Debian package)")


def _serve(argv: list[str], port: int, cwd: Path | None = None) -> Iterator[int]:
    proc = subprocess.Popen(["timeout", str(SERVER_LIFETIME_S), *argv], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_listen(port, proc)
        yield port
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=5)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


@pytest.fixture
def nsd_port(tmp_path: Path) -> Iterator[int]:
    """An NSD serving the tunelab zone on 127.0.0.1:<free port>."""
    require("nsd")
    port = free_port()
    nsd = dns_servers.get_dns_server("nsd")
    conf = dns_servers.write_server_files(nsd, tmp_path / "nsd", "127.0.0.1", dns_servers.LAB_ZONE, tmp_path / "nsd.log",
                                          port=port)
    yield from _serve(nsd.argv(conf), port)


@pytest.fixture
def iperf3_port() -> Iterator[int]:
    """A one-shot iperf3 server on 127.0.0.1:<free port>."""
    require("iperf3")
    port = free_port()
    yield from _serve(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(port)], port)


@pytest.fixture
def http_port(tmp_path: Path) -> Iterator[int]:
    """python -m http.server on 127.0.0.1:<free port> serving an index.html of 4 KiB."""
    (tmp_path / "index.html").write_text("x" * 4096)
    port = free_port()
    yield from _serve([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)], port, cwd=tmp_path)
