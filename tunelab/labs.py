"""Detached network-namespace labs, the ``tunelab lab up|status|down`` verbs (:func:`tunelab.lab_up` ...).

A lab made here stays up after its process exits (:meth:`tunelab.targets.lab.LabTarget.detach`);
:func:`lab_status` reads every lab's state file, :func:`lab_down` removes labs and always the
orphans of crashed runs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tunelab.errors import TargetError
from tunelab.targets import lab as lab_target
from tunelab.targets import dns_servers, netns, services


@dataclass
class LabUp:
    """A detached lab :func:`lab_up` created: its namespaces, addresses, disk and bring-up time."""

    name: str
    namespaces: dict[str, str]
    addresses: dict[str, str]
    disk: str | None
    up_s: float
    #: the DNS server the lab runs (a name of :data:`tunelab.targets.dns_servers.DNS_SERVERS`) and its zone's origin
    dns_server: str = "nsd"
    zone: str = dns_servers.LAB_ZONE.origin

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "namespaces": dict(self.namespaces), "addresses": dict(self.addresses),
                "disk": self.disk, "up_s": self.up_s, "dns_server": self.dns_server, "zone": self.zone}


def lab_up(name: str | None = None, *, bottleneck_mbit: float | None = None, queue_limit_bytes: int | None = None,
           disk_mb: int | None = None, records: int = 1000, pin: bool = True, dns_server: str = "nsd",
           zone: str | None = None, zone_file: str | None = None) -> LabUp:
    """Create a lab that stays up after this process exits (remove it with :func:`lab_down`).

    Its DNS server is ``dns_server``, serving the lab's own zone or, with ``zone_file`` and ``zone``, the
    operator's zone (checked by the server's own checker first; the lab keeps a private copy).
    """
    lab = lab_target.LabTarget(name=name, bottleneck_mbit=bottleneck_mbit, queue_limit_bytes=queue_limit_bytes,
                               records=records, disk_mb=disk_mb, pin_cpus="auto" if pin else False,
                               dns_server=dns_server, zone=zone, zone_file=zone_file)
    lab.up()
    disk = lab.resolve_device("@disk") if disk_mb else None
    lab.detach()
    return LabUp(lab.lab_name, dict(lab.namespaces), dict(lab.addresses), disk, lab.timings.get("up_s", 0.0),
                 lab.dns_server.name, lab.zone.origin)


@dataclass
class LabStatus:
    """Every lab (namespaces, service liveness, disk, owner, orphan or not) and namespaces without a lab."""

    labs: list[dict[str, Any]]
    orphan_namespaces: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"labs": self.labs, "orphan_namespaces": list(self.orphan_namespaces)}


def lab_status() -> LabStatus:
    """The labs on this machine, read from their state files (any process's labs)."""
    labs = []
    for state in lab_target.list_states():
        labs.append({
            "name": state.name,
            "namespaces": {role: {"name": ns, "exists": netns.namespace_exists(ns)}
                           for role, ns in state.namespaces.items()},
            "addresses": state.addresses,
            "services": {name: {"pid": pid, "alive": services.pid_alive(pid) and lab_target.pid_in_lab(pid, state)}
                         for name, pid in state.services.items()},
            "disk": state.disk_device,
            "detached": state.detached,
            "owner_pid": state.owner_pid,
            "orphan": state.is_orphan(),
            "options": state.options,
        })
    return LabStatus(labs, lab_target.orphan_namespaces(min_age_s=0.0))


@dataclass
class LabDown:
    """What :func:`lab_down` removed (labs and namespaces) and what it could not remove (``problems``)."""

    removed: list[str]
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"removed": list(self.removed), "problems": list(self.problems)}


def lab_down(name: str | None = None, *, all_labs: bool = False) -> LabDown:
    """Remove the lab ``name`` (or every lab and ``tl-*`` namespace), and always the orphans of crashed runs.

    What could not be removed is listed in ``problems`` (the rest is removed regardless).
    """
    problems: list[str] = []
    removed: list[str] = []
    if name is not None:
        state = lab_target.load_state(name)          # validates the name before it becomes a path
        problems += lab_target.destroy(state)
        removed.append(state.name)
    for state in lab_target.list_states() if all_labs else [s for s in lab_target.list_states() if s.is_orphan()]:
        problems += lab_target.destroy(state)
        removed.append(state.name)
    for ns in netns.list_namespaces(lab_target.NS_PREFIX) if all_labs else lab_target.orphan_namespaces():
        try:
            netns.delete_namespace(ns)
            removed.append(ns)
        except TargetError as exc:
            problems.append(str(exc))
    return LabDown(removed, problems)


__all__ = ["LabDown", "LabStatus", "LabUp", "lab_down", "lab_status", "lab_up"]
