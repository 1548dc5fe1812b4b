"""The pre-flight's judgement, pure: each knob change against each load profile (:func:`assess`).

1. the knob's mechanism needs traffic the profile does not send (somaxconn needs TCP; a UDP load cannot
   exercise it): cannot act;
2. it acts on the other end of the traffic (somaxconn on the host that only opens connections): cannot act;
3. the server's own limit caps it below the levels (:mod:`tunelab.preflight.limits`): cannot act;
4. a throughput metric on a rate-capped profile equals the offered rate whatever the knob does: refused;
5. a mechanism that binds only under pressure, on a rate-capped profile: a note (``--pilot`` shows it).

``per_profile`` (validate: every profile is its own verdict) refuses each profile that fails; otherwise (a
screening design with several profiles: the knob x load interaction is a question worth asking) a knob or
metric is refused only when every profile fails, and noted where some do.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from tunelab.knobs import Knob
from tunelab.model import Role, Traffic
from tunelab.preflight.findings import Finding, Severity
from tunelab.preflight.limits import SERVER_LIMITS, LimitFacts
from tunelab.preflight.sockets import ListeningSocket


@dataclass(frozen=True)
class KnobChange:
    """A knob a study changes: ``label`` as the study names it (``link.mtu[veth0]@client``), the ``host`` it is
    set on, and the distinct ``levels`` compared (baseline first)."""

    knob: Knob
    host: str
    levels: tuple[Any, ...]
    label: str


@dataclass(frozen=True)
class Exercise:
    """One load profile as the pre-flight reads it: the traffic it sends, its rate cap (None: as fast as the
    server lets it), the service's port, the metrics asked for and the load's throughput metrics."""

    profile: str
    load: str
    traffic: frozenset[Traffic]
    rate_cap: str | None
    port: int | None
    metrics: tuple[str, ...]
    rate_metrics: tuple[str, ...]
    runs_on: str = "client"


@dataclass(frozen=True)
class ServerFacts:
    """What was read on the server: the sockets on each service port, each change's value now (by label), the
    related sysctls of :data:`tunelab.preflight.limits.RELATED`, and why anything could not be read."""

    sockets: Mapping[int, tuple[ListeningSocket, ...]] = field(default_factory=dict)
    current: Mapping[str, Any] = field(default_factory=dict)
    related: Mapping[str, str] = field(default_factory=dict)
    unread: tuple[str, ...] = ()


def _traffic_text(traffic: frozenset[Traffic]) -> str:
    return " and ".join(sorted(t.value.upper() if t in (Traffic.TCP, Traffic.UDP) else t.value for t in traffic))


def _transport_hint(change: KnobChange, exercise: Exercise) -> str:
    mechanism = change.knob.mechanism
    assert mechanism is not None
    if exercise.load == "dnsperf" and Traffic.TCP in mechanism.needs:
        return "send the queries over TCP (change file: transport: tcp; dnsperf setting mode: tcp)"
    if exercise.load == "dnsperf" and Traffic.UDP in mechanism.needs:
        return "send the queries over UDP (transport: udp)"
    return f"use a load that sends {mechanism.needs_text()}"


def mechanism_reason(change: KnobChange, exercise: Exercise) -> str | None:
    """Why ``change`` cannot act under ``exercise`` from the knob's mechanism alone, or None."""
    mechanism = change.knob.mechanism
    if mechanism is None or not exercise.traffic:
        return None
    if not mechanism.exercised_by(exercise.traffic):
        return (f"it limits {mechanism.limits}, which needs {mechanism.needs_text()} traffic, and this load sends "
                f"{_traffic_text(exercise.traffic)} only; {_transport_hint(change, exercise)}")
    network = bool(exercise.traffic & {Traffic.TCP, Traffic.UDP})
    if network and exercise.runs_on != change.host:
        if mechanism.role is Role.CONNECTOR and change.host == "server":
            return (f"it limits {mechanism.limits} on the host that opens connections, and the server only "
                    f"accepts them; set it on the client ({change.knob.name}@client)")
    if network and mechanism.role is Role.LISTENER and change.host != "server":
        return (f"it limits {mechanism.limits} on the host that accepts connections (the server), and the "
                f"{change.host} only opens them; set it on the server")
    return None


def limit_judgement(change: KnobChange, exercise: Exercise, facts: ServerFacts | None) -> Finding | None:
    """The server's own limit on ``change`` (a rule of :data:`SERVER_LIMITS`), read from ``facts``."""
    mechanism = change.knob.mechanism
    if facts is None or mechanism is None or mechanism.server_limit is None or exercise.port is None:
        return None
    if exercise.port not in facts.sockets or change.host != "server":
        return None
    rule = SERVER_LIMITS.get(mechanism.server_limit)
    judged = rule(LimitFacts(change.knob.name, change.levels, facts.current.get(change.label), exercise.port,
                             facts.sockets[exercise.port], facts.related))
    if judged is None:
        return None
    return Finding(Severity.CANNOT_ACT if judged.cannot_act else Severity.NOTE, change.label, exercise.profile,
                   judged.reason)


def metric_findings(exercise: Exercise) -> list[Finding]:
    """A throughput metric on a rate-capped profile: it equals the offered rate whatever a knob does."""
    if exercise.rate_cap is None:
        return []
    blind = [m for m in exercise.metrics if m in exercise.rate_metrics]
    latency = next((m for m in exercise.metrics if "latency" in m or "lat_" in m), None)
    instead = f"measure {latency} alone there" if latency else "measure a latency metric there (latency_mean_ms)"
    return [Finding(Severity.BLIND_METRIC, f"metric {metric}", exercise.profile,
                    f"the profile is capped ({exercise.rate_cap}), so {metric} equals the offered rate whatever "
                    f"the knob does; {instead}, or use a profile without a rate cap") for metric in blind]


def pressure_note(change: KnobChange, exercise: Exercise) -> Finding | None:
    """A rate-capped profile may never fill the server's queues a listener-side mechanism binds on."""
    mechanism = change.knob.mechanism
    if exercise.rate_cap is None or mechanism is None or not mechanism.counters or mechanism.role is not Role.LISTENER:
        return None
    return Finding(Severity.NOTE, change.label, exercise.profile,
                   f"the profile is capped ({exercise.rate_cap}); it binds only when {mechanism.binds_when} "
                   f"({', '.join(mechanism.counters)} then move): `--pilot SECONDS` shows whether they do")


def _profile_findings(change: KnobChange, exercise: Exercise, facts: ServerFacts | None) -> list[Finding]:
    reason = mechanism_reason(change, exercise)
    if reason is not None:
        return [Finding(Severity.CANNOT_ACT, change.label, exercise.profile, reason)]
    found = [f for f in (limit_judgement(change, exercise, facts), pressure_note(change, exercise)) if f]
    return found


def _merge(per_profile: list[Finding], profiles: int) -> list[Finding]:
    """Across a screening design's profiles: a subject refused under every profile stays refused (one line),
    one refused under some only becomes a note per profile."""
    refused: dict[str, list[Finding]] = defaultdict(list)
    for finding in per_profile:
        if finding.severity.refuses:
            refused[finding.subject].append(finding)
    out = []
    for finding in per_profile:
        if not finding.severity.refuses:
            out.append(finding)
        elif len({f.profile for f in refused[finding.subject]}) == profiles:
            if finding is refused[finding.subject][0]:
                out.append(Finding(finding.severity, finding.subject, None if profiles > 1 else finding.profile,
                                   finding.reason))
        else:
            out.append(Finding(Severity.NOTE, finding.subject, finding.profile,
                               f"under this profile only: {finding.reason}"))
    return out


def assess(changes: Sequence[KnobChange], exercises: Sequence[Exercise], facts: ServerFacts | None = None,
           per_profile: bool = True) -> list[Finding]:
    """Every finding of ``changes`` under ``exercises`` (the module docstring lists the rules).

    >>> from tunelab.knobs import get_knob
    >>> somaxconn = KnobChange(get_knob("net.core.somaxconn"), "server", (4096, 1024), "net.core.somaxconn")
    >>> udp = Exercise("normal", "dnsperf", frozenset({Traffic.UDP}), "rate 2000 queries/s", 53, ("qps",), ("qps",))
    >>> [f.severity.value for f in assess([somaxconn], [udp])]
    ['cannot act', 'blind metric']
    """
    found: list[Finding] = []
    for exercise in exercises:
        for change in changes:
            found += _profile_findings(change, exercise, facts)
        found += metric_findings(exercise)
    if facts is not None:
        found += [Finding(Severity.NOTE, "server", None, text) for text in facts.unread]
    return found if per_profile else _merge(found, len({e.profile for e in exercises}))
