"""The service's own limits that cap a knob: rules that read the server's sockets and say when the levels
compared cannot differ there.

Each rule of :data:`SERVER_LIMITS` is named by a knob's mechanism (``Mechanism.server_limit``) and takes a
:class:`LimitFacts`: the knob's levels, its current value on the server and the service's sockets. It returns
None (the levels can differ, or nothing is known) or a :class:`Judgement`.

>>> from tunelab.preflight.sockets import ListeningSocket
>>> facts = LimitFacts("net.core.somaxconn", (1024, 4096), 4096, 53, (ListeningSocket("tcp", "10.0.0.1:53", 10),))
>>> SERVER_LIMITS.get("listen_backlog")(facts).cannot_act
True
>>> facts = LimitFacts("net.core.somaxconn", (8, 4096), 4096, 53, (ListeningSocket("tcp", "10.0.0.1:53", 10),))
>>> SERVER_LIMITS.get("listen_backlog")(facts) is None
True
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from tunelab.preflight.sockets import ListeningSocket
from tunelab.registry import Registry


@dataclass(frozen=True)
class LimitFacts:
    """What a rule reads: the knob, the levels compared, its value on the server now (None: unread), the
    service's port and its sockets there."""

    knob: str
    levels: tuple[Any, ...]
    current: Any
    port: int
    sockets: tuple[ListeningSocket, ...]
    #: other settings the rule reads (:data:`RELATED`), by sysctl name, as read on the server
    related: Mapping[str, Any] = field(default_factory=dict)

    def of(self, transport: str) -> list[ListeningSocket]:
        return [s for s in self.sockets if s.transport == transport]


@dataclass(frozen=True)
class Judgement:
    """A rule's answer: the levels cannot differ on this server (``cannot_act``), or may not (a note)."""

    cannot_act: bool
    reason: str


LimitRule = Callable[[LimitFacts], "Judgement | None"]
#: rule -> the other sysctls it reads on the server (their /proc/sys values, as text)
RELATED: dict[str, tuple[str, ...]] = {"udp_rcvbuf": ("net.core.rmem_default",)}
#: mechanism ``server_limit`` name -> the rule that reads it
SERVER_LIMITS: Registry[LimitRule] = Registry("server limit rule")


def _levels_text(levels: Sequence[Any]) -> str:
    return " and ".join(str(level) for level in levels)


@SERVER_LIMITS.register("listen_backlog")
def listen_backlog(facts: LimitFacts) -> Judgement | None:
    """somaxconn: a listener's accept queue is min(the server's own listen() backlog, somaxconn).

    ``ss`` shows min(backlog, somaxconn when the server called listen()); below today's somaxconn it is the
    server's own backlog exactly, so every level at or above it gives the same queue.
    """
    listeners = facts.of("tcp")
    if not listeners:
        return Judgement(False, f"nothing listens on TCP port {facts.port} on the server now, so its own "
                                "backlog could not be read")
    shown = max(s.backlog for s in listeners)
    levels = [int(level) for level in facts.levels]
    if facts.current is not None and shown < int(facts.current):
        if all(level >= shown for level in levels):
            return Judgement(True, f"the server's TCP listener on port {facts.port} asks listen() for a backlog "
                                   f"of {shown} (`ss -ltn` shows it), below both {_levels_text(levels)}, so its "
                                   "accept queue is the same at every level; raise the server's own backlog first "
                                   "(BIND 9: tcp-listen-queue; then restart it), or compare levels below "
                                   f"{shown} (if the server started before somaxconn was last raised, restart it "
                                   "and look again)")
        return None
    if facts.current is not None and all(level <= int(facts.current) for level in levels):
        return None
    return Judgement(False, f"the server's TCP listener on port {facts.port} asks for a backlog of at least "
                            f"{shown}; levels above that act only if it asks for more")


@SERVER_LIMITS.register("udp_rcvbuf")
def udp_rcvbuf(facts: LimitFacts) -> Judgement | None:
    """rmem_max caps what SO_RCVBUF may ask (the kernel keeps twice the granted size); SO_RCVBUFFORCE and
    sockets that never ask ignore it. A UDP socket whose buffer is twice a value below today's rmem_max asked
    for exactly that, and every level at or above it grants the same buffer."""
    sockets = [s for s in facts.of("udp") if s.rcvbuf]
    if not sockets or facts.current is None:
        return None
    buffer = max(s.rcvbuf or 0 for s in sockets)
    default = facts.related.get("net.core.rmem_default")
    if default is not None and str(default).strip() == str(buffer):
        return Judgement(True, f"the server's UDP socket on port {facts.port} keeps the default receive buffer "
                               f"(rb{buffer} = net.core.rmem_default): it never asks with SO_RCVBUF, so rmem_max "
                               "does not cap it (rmem_default does)")
    granted = buffer // 2
    levels = [int(level) for level in facts.levels]
    if granted > int(facts.current):
        return Judgement(True, f"the server's UDP socket on port {facts.port} has a {2 * granted}-byte receive "
                               f"buffer, above net.core.rmem_max {facts.current}: the server forces its buffer "
                               "(SO_RCVBUFFORCE), which rmem_max does not cap")
    if granted < int(facts.current) and all(level >= granted for level in levels):
        return Judgement(True, f"the server's UDP socket on port {facts.port} asks for a {granted}-byte receive "
                               f"buffer (`ss -ulm` shows rb{2 * granted}), below both {_levels_text(levels)}, so "
                               "it gets the same buffer at every level; raise the server's own buffer setting")
    return None
