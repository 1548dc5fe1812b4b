"""The pre-flight: before the first trial, can this experiment show its effect at all?

A knob changes a measurement only through its mechanism (:mod:`tunelab.knobs.mechanisms`). Before anything is
applied, ``tunelab validate``, ``tunelab run`` and their ``--plan`` ask, for every knob change and load profile:

- does the load send the traffic the mechanism needs (somaxconn needs TCP connections)?
- is the knob set on the end of the traffic it acts on (the listener, the connector)?
- does the server's own limit cap it below the levels compared (BIND's listen backlog of 10 under somaxconn
  1024 vs 4096)? read from the server with ``ss`` (:mod:`tunelab.preflight.sockets`,
  :mod:`tunelab.preflight.limits`);
- can each metric move at all (qps on a rate-capped profile equals the offered rate)?

A change that cannot act is refused in one line that says why, unless ``--force`` is given
(:class:`Preflight.check`). ``--pilot SECONDS`` then measures whether a mechanism that can act does bind.

>>> from tunelab.knobs import get_knob
>>> change = KnobChange(get_knob("net.core.somaxconn"), "server", (4096, 1024), "net.core.somaxconn")
>>> tcp = Exercise("overload", "dnsperf", frozenset({Traffic.TCP}), None, 53, ("qps",), ("qps",))
>>> udp = Exercise("udp", "dnsperf", frozenset({Traffic.UDP}), None, 53, ("qps",), ("qps",))
>>> preflight([change], [tcp]).refusals, len(preflight([change], [udp]).refusals)
([], 1)
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from tunelab.designs import Design
from tunelab.errors import TunelabError
from tunelab.formatting import shorten
from tunelab.knobs import CATALOGUE
from tunelab.loads import Load
from tunelab.model import Traffic
from tunelab.preflight.checks import Exercise, KnobChange, ServerFacts, assess, mechanism_reason
from tunelab.preflight.findings import FORCE_FLAG, Finding, Preflight, PreflightError, Severity
from tunelab.preflight.limits import RELATED
from tunelab.preflight.sockets import ListeningSocket, listening_sockets
from tunelab.runner.design_access import load_for, target_spec_of
from tunelab.targets import Target, check_target_spec

__all__ = ["FORCE_FLAG", "Exercise", "Finding", "KnobChange", "ListeningSocket", "Preflight", "PreflightError",
           "ServerFacts", "Severity", "Traffic", "design_changes", "design_preflight", "exercises_of", "plan_preflight",
           "preflight", "read_facts"]


def exercises_of(load: Load, profiles: Mapping[str, Mapping[str, Any]], metrics: Sequence[str]) -> list[Exercise]:
    """One :class:`Exercise` per named profile's settings of ``load``."""
    return [Exercise(name, load.name, load.traffic(settings), load.rate_cap(settings), load.service_port(settings),
                     tuple(metrics), tuple(load.rate_metrics), load.runs_on)
            for name, settings in profiles.items()]


def _needs_server(changes: Sequence[KnobChange], exercises: Sequence[Exercise]) -> list[tuple[KnobChange, int]]:
    """The (change, port) pairs whose judgement needs the server's sockets (a server limit the load can reach)."""
    pairs = []
    for change in changes:
        mechanism = change.knob.mechanism
        if mechanism is None or mechanism.server_limit is None or change.host != "server":
            continue
        for exercise in exercises:
            if exercise.port is not None and mechanism_reason(change, exercise) is None:
                pairs.append((change, exercise.port))
    return pairs


def read_facts(target: Target, changes: Sequence[KnobChange], exercises: Sequence[Exercise]) -> ServerFacts:
    """Read what the server-limit rules need (read-only: ``ss`` and ``/proc/sys``); what cannot be read is noted,
    never an error."""
    pairs = _needs_server(changes, exercises)
    sockets: dict[int, tuple[ListeningSocket, ...]] = {}
    current: dict[str, Any] = {}
    related: dict[str, str] = {}
    unread: list[str] = []
    for change, port in pairs:
        try:
            if port not in sockets:
                sockets[port] = tuple(listening_sockets(target, port))
            if change.label not in current:
                current[change.label] = change.knob.read(target, change.host)
            for name in RELATED.get(change.knob.mechanism.server_limit or "", ()):
                related.setdefault(name, target.read_text("server", "/proc/sys/" + name.replace(".", "/")).strip())
        except (TunelabError, OSError) as exc:
            unread.append(f"could not read the server's own limit on {change.label}: {shorten(str(exc))}")
    return ServerFacts(sockets, current, related, tuple(dict.fromkeys(unread)))


def preflight(changes: Sequence[KnobChange], exercises: Sequence[Exercise], target: Target | None = None,
              per_profile: bool = True) -> Preflight:
    """The pre-flight of ``changes`` under ``exercises``; with a ``target`` that is up, the server is read too."""
    facts = read_facts(target, changes, exercises) if target is not None else None
    return Preflight(tuple(assess(changes, exercises, facts, per_profile)), facts is not None)


def design_changes(design: Design) -> list[KnobChange]:
    """One :class:`KnobChange` per knob of a design: its levels, or its range's ends (Latin hypercube, Morris)."""
    changes = []
    for entry in design.knobs:
        knob = CATALOGUE.get(entry.name)
        if knob is None:                    # a knob from another lookup (tests' fakes): no mechanism to check
            continue
        levels = tuple(entry.levels) if entry.levels else tuple(v for v in (entry.low, entry.high) if v is not None)
        changes.append(KnobChange(knob, entry.host, levels, entry.id))
    return changes


def design_preflight(design: Design, load: Load, target: Target | None = None) -> Preflight:
    """The pre-flight of a screening design under its load profile(s). A knob (or metric) is refused only when
    it fails under every profile: with several profiles, the knob x load interaction is a question worth asking."""
    if load.name != design.load.generator:        # a target that measures itself (the simulator): no kernel to ask
        return Preflight()
    names = design.load.profiles or ((design.load.profile,) if design.load.profile else ())
    profiles = {name: load.settings(name, dict(design.load.settings)) for name in names} if names else \
        {"": load.settings(None, dict(design.load.settings))}
    exercises = exercises_of(load, profiles, [metric.name for metric in design.metrics])
    checked = preflight(design_changes(design), exercises, target, per_profile=False)
    return Preflight(tuple(as_control(f) if f.subject in design.controls else f for f in checked.findings),
                     checked.facts)


def plan_preflight(design: Design) -> Preflight:
    """``tunelab plan``'s pre-flight, from the design alone: :func:`design_preflight` under the load the design's own
    target measures with (a target that measures itself, the simulator, has no kernel to ask); no target is reached."""
    spec = target_spec_of(design)
    load, _ = load_for(design, check_target_spec(spec, allow_commands=True), spec["options"])
    return design_preflight(design, load)


def as_control(finding: Finding) -> Finding:
    """A refusal of a knob the design declares a negative control (``preflight: {controls: [...]}``): a note."""
    if finding.severity is not Severity.CANNOT_ACT:
        return finding
    return Finding(Severity.NOTE, finding.subject, finding.profile,
                   f"a declared negative control, as expected: {finding.reason}")
