"""The sockets a service listens on, as ``ss`` shows them on the server: their backlog and buffers.

``ss -Hltnm 'sport = :PORT'`` prints one line per TCP listener (``LISTEN RECV-Q SEND-Q LOCAL PEER``, where a
listener's Send-Q is its accept-queue limit: min(the backlog passed to listen(), somaxconn at that moment))
followed by a ``skmem:(r..,rb..,t..,tb..,...)`` line; ``ss -Hulnm`` prints the UDP sockets the same way
(Send-Q 0). The reads are plain ``ss`` (iproute2), as any user, nothing changes.

>>> text = '''LISTEN 0      10     10.77.0.1:53 0.0.0.0:*
... \\t skmem:(r0,rb131072,t0,tb46080,f0,w0,o0,bl0,d0)'''
>>> parse_ss(text, "tcp")
[ListeningSocket(transport='tcp', local='10.77.0.1:53', backlog=10, rcvbuf=131072, sndbuf=46080)]
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from tunelab.errors import TargetError
from tunelab.targets.base import Target

_SKMEM = re.compile(r"skmem:\((?P<fields>[^)]*)\)")
_STATES = ("LISTEN", "UNCONN")


@dataclass(frozen=True)
class ListeningSocket:
    """One socket of the service: ``backlog`` (a TCP listener's accept-queue limit; 0 for UDP) and the
    ``rcvbuf``/``sndbuf`` the kernel gives it (``skmem`` rb/tb, bytes; None when ``ss`` printed none)."""

    transport: str
    local: str
    backlog: int
    rcvbuf: int | None = None
    sndbuf: int | None = None


def _skmem(line: str) -> dict[str, int]:
    match = _SKMEM.search(line)
    if not match:
        return {}
    fields = {}
    for item in match.group("fields").split(","):
        name = item.rstrip("0123456789")
        if name and item[len(name):].isdigit():
            fields[name] = int(item[len(name):])
    return fields


def parse_ss(text: str, transport: str) -> list[ListeningSocket]:
    """The sockets of ``ss -H -l -m`` output (one socket line, then its ``skmem`` line)."""
    sockets: list[ListeningSocket] = []
    for line in text.splitlines():
        words = line.split()
        if words and words[0] in _STATES and len(words) >= 4 and words[2].isdigit():
            sockets.append(ListeningSocket(transport, words[3], int(words[2])))
        elif sockets and "skmem:" in line:
            mem = _skmem(line)
            last = sockets[-1]
            sockets[-1] = ListeningSocket(last.transport, last.local, last.backlog, mem.get("rb"), mem.get("tb"))
    return sockets


def listening_sockets(target: Target, port: int, host: str = "server") -> list[ListeningSocket]:
    """The TCP listeners and UDP sockets bound to ``port`` on ``host`` (read with ``ss``).

    Raises
    ------
    TargetError
        When ``ss`` cannot run there (not installed, no connection); the message says which.
    """
    found: list[ListeningSocket] = []
    for transport, flag in (("tcp", "-Hltnm"), ("udp", "-Hulnm")):
        result = target.run(host, ["ss", flag, f"sport = :{int(port)}"], timeout_s=15)
        if not result.ok:
            raise TargetError(f"could not list the {host}'s sockets on port {port} with `ss` (exit "
                              f"{result.returncode}); install iproute2 there")
        found += parse_ss(result.stdout, transport)
    return found
