"""The lab's services (a DNS server, an iperf3 server, nginx) and probes that tell when they answer.

Services run in the foreground inside the server namespace, in their own process group, so the
lab can stop them by PID. Readiness is checked from inside a namespace (see
:class:`tunelab.targets.netns.NetnsWorker`): a real DNS query for the served zone's SOA
(:func:`zone_answers`; the servers themselves are :mod:`tunelab.targets.dns_servers`), a LISTEN
socket in ``/proc/thread-self/net/tcp`` for iperf3, a real HTTP GET of ``/`` for nginx.

nginx (service ``http``) serves the fixed files of :data:`HTTP_FILES` from the lab's work
directory on :data:`HTTP_PORT`, with its own configuration (no system config, no access log).
"""
from __future__ import annotations

import os
import random
import socket
import struct
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tunelab.errors import TargetError
from tunelab.targets.netns import kill_pids

DNS_PORT = 53
#: the query type of a zone's SOA record
QTYPE_SOA = 6
IPERF3_PORT = 5201
#: the port nginx listens on in the lab (the ``wrk`` load's default port)
HTTP_PORT = 80
#: the files the lab's nginx serves: URL path -> size in bytes
HTTP_FILES = {"/index.html": 1024, "/64k.bin": 65536}


def http_file_bytes(path: str, size: int) -> bytes:
    """The fixed content of a served file: an HTML page for ``.html``, a byte ramp otherwise.

    >>> len(http_file_bytes("/index.html", 1024)), http_file_bytes("/x.bin", 4)
    (1024, b'\\x00\\x01\\x02\\x03')
    """
    if path.endswith(".html"):
        head, tail = b"<!doctype html><html><body><p>tunelab lab</p><!--", b"--></body></html>\n"
        return head + b"x" * (size - len(head) - len(tail)) + tail
    return (bytes(range(256)) * (size // 256 + 1))[:size]


def nginx_config(workdir: Path, address: str, port: int = HTTP_PORT) -> str:
    """An nginx.conf with every path under ``workdir``: foreground-friendly, no access log.

    Workers keep root's identity (as NSD and iperf3 in the lab do) because the lab's work
    directory is private to root; nginx listens only inside the lab's server namespace.

    >>> "listen 10.77.0.1:80" in nginx_config(Path("/tmp/x"), "10.77.0.1")
    True
    """
    temp = "\n".join(f"    {kind}_temp_path {workdir}/temp/{kind};"
                      for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return f"""user root root;
worker_processes 1;
pid {workdir}/nginx.pid;
error_log {workdir}/error.log warn;
events {{
    worker_connections 8192;
}}
http {{
    access_log off;
    server_tokens off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
    types {{
        text/html html;
        application/octet-stream bin;
    }}
    default_type application/octet-stream;
{temp}
    server {{
        listen {address}:{port} backlog=4096;
        root {workdir}/www;
        index index.html;
    }}
}}
"""


def write_http_files(workdir: Path, address: str, port: int = HTTP_PORT) -> Path:
    """Write nginx.conf and the files of :data:`HTTP_FILES` into ``workdir``; return the config path."""
    for sub in ("www", "temp"):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
    for path, size in HTTP_FILES.items():
        (workdir / "www" / path.lstrip("/")).write_bytes(http_file_bytes(path, size))
    conf = workdir / "nginx.conf"
    conf.write_text(nginx_config(workdir, address, port))
    return conf


def http_status(address: str, port: int = HTTP_PORT, path: str = "/", timeout_s: float = 0.2) -> int | None:
    """The status code of one ``GET path`` to ``address:port``, or None when nothing answered.

    Call it from a thread inside the client namespace so the socket belongs to that namespace.
    """
    request = f"GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n".encode("ascii")
    try:
        with socket.create_connection((address, port), timeout=timeout_s) as sock:
            sock.sendall(request)
            status_line = sock.recv(64).split(b"\r\n", 1)[0].split()
    except OSError:
        return None
    if len(status_line) >= 2 and status_line[0].startswith(b"HTTP/") and status_line[1].isdigit():
        return int(status_line[1])
    return None


def dns_query_packet(name: str, query_id: int, qtype: int = 1) -> bytes:
    """A minimal DNS query (RD unset, one question, class IN) for ``name``.

    >>> dns_query_packet("a.b.", 7)[:2] == b"\\x00\\x07"
    True
    """
    header = struct.pack("!HHHHHH", query_id, 0, 1, 0, 0, 0)
    labels = b"".join(bytes([len(part)]) + part.encode("ascii") for part in name.rstrip(".").split(".") if part)
    return header + labels + b"\x00" + struct.pack("!HH", qtype, 1)


@dataclass(frozen=True)
class DnsAnswer:
    rcode: int
    answer_count: int
    authoritative: bool


def parse_dns_header(packet: bytes) -> tuple[int, DnsAnswer]:
    """(query id, answer summary) from a DNS response's header."""
    if len(packet) < 12:
        raise TargetError(f"DNS response of {len(packet)} bytes is shorter than a header (12 bytes)")
    qid, flags, _qd, ancount, _ns, _ar = struct.unpack("!HHHHHH", packet[:12])
    return qid, DnsAnswer(rcode=flags & 0xF, answer_count=ancount, authoritative=bool(flags & 0x0400))


def dns_query(address: str, name: str, port: int = DNS_PORT, timeout_s: float = 0.2,
              qtype: int = 1) -> DnsAnswer | None:
    """Send one UDP query for ``name`` (type ``qtype``, default A) to ``address``; the answer, or None.

    Call it from a thread inside the client namespace so the socket belongs to that namespace.
    """
    query_id = random.randrange(1 << 16)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout_s)
        try:
            sock.sendto(dns_query_packet(name, query_id, qtype), (address, port))
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                data, _ = sock.recvfrom(4096)
                qid, answer = parse_dns_header(data)
                if qid == query_id:
                    return answer
        except (socket.timeout, ConnectionRefusedError, OSError):
            return None
    return None


def zone_answers(address: str, origin: str, port: int = DNS_PORT, timeout_s: float = 0.2) -> bool:
    """Whether the server at ``address`` answers the SOA of ``origin`` with NOERROR and a record.

    A server that is up but still loading its zone (or failed to load it) answers SERVFAIL or
    REFUSED, so this is true only once the zone is served. Call it from inside the client namespace.
    """
    answer = dns_query(address, origin, port, timeout_s, QTYPE_SOA)
    return answer is not None and answer.rcode == 0 and answer.answer_count > 0


def tcp_listening(port: int, address: str | None = None) -> bool:
    """Whether a TCP socket listens on ``port`` in the calling thread's network namespace."""
    wanted_addr = None
    if address is not None:
        wanted_addr = "%08X" % struct.unpack("<I", socket.inet_aton(address))[0]
    with open("/proc/thread-self/net/tcp") as fh:
        next(fh)
        for line in fh:
            fields = line.split()
            local, state = fields[1], fields[3]
            addr_hex, port_hex = local.split(":")
            if state == "0A" and int(port_hex, 16) == port and wanted_addr in (None, addr_hex, "00000000"):
                return True
    return False


def wait_until(check: Callable[[], bool], timeout_s: float, what: str, proc: subprocess.Popen | None = None,
               log: Path | None = None, interval_s: float = 0.01) -> float:
    """Poll ``check`` until it is true; return the seconds waited, TargetError naming ``what`` otherwise."""
    start = time.monotonic()
    while True:
        if check():
            return time.monotonic() - start
        if proc is not None and proc.poll() is not None:
            detail = _tail(log)
            raise TargetError(f"{what}: the process exited with status {proc.returncode} before it answered"
                              + (f"; log: {detail}" if detail else ""))
        if time.monotonic() - start > timeout_s:
            detail = _tail(log)
            raise TargetError(f"{what}: no answer within {timeout_s} s" + (f"; log: {detail}" if detail else ""))
        time.sleep(interval_s)


def _tail(path: Path | None, lines: int = 5) -> str:
    if path is None or not path.exists():
        return ""
    return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])


def spawn(argv: list[str], log: Path) -> subprocess.Popen:
    """Start a long-running service in its own session with output appended to ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)


def stop(proc: subprocess.Popen | None, pid: int | None = None, grace_s: float = 1.0) -> None:
    """Terminate a service (SIGTERM, then SIGKILL) and reap it when it is our child."""
    if proc is not None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        return
    if pid is not None:
        kill_pids([pid], grace_s=grace_s)


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
