"""Discovery: which catalogue knobs exist on a target host, whether they are writable, their values.

Nothing is written: existence is a read, writability is the target's read-only
``is_writable`` check (``os.access(W_OK)`` semantics).

Examples
--------
>>> from tunelab.targets import get_target
>>> frame = discover(get_target("dry-run")(quiet=True), family="sysctl")   # doctest: +SKIP
>>> frame.loc[frame.name == "net.core.somaxconn", ["exists", "current"]]  # doctest: +SKIP
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import pandas as pd

from tunelab.errors import KnobError, TargetError
from tunelab.knobs.base import Knob
from tunelab.knobs.catalogue import CATALOGUE, get_knob
from tunelab.knobs.families import FAMILIES
from tunelab.model import json_value, level_to_json

if TYPE_CHECKING:
    from tunelab.targets.base import Target

COLUMNS = ["name", "family", "scope", "exists", "writable", "current", "note"]


def _probe(knob: Knob, target: "Target", host: str, device: str | None) -> dict[str, object]:
    row: dict[str, object] = {"name": knob.name, "family": knob.family, "scope": knob.scope,
                              "exists": False, "writable": False, "current": None, "note": ""}
    if knob.needs_device and device is None:
        option = "link_device" if knob.family == "link" else "device"
        row["note"] = f"not checked: a {knob.family} knob needs a device ({option}=... / --{option.replace('_', '-')})"
        return row
    try:
        text = knob.read_text(target, host, device)
    except KnobError as exc:
        row["note"] = f"missing or unreadable: {exc}"
        return row
    row["exists"] = True
    row["current"] = " ".join(text.split())
    try:
        row["writable"] = bool(knob.is_writable(target, host, device))
    except (TargetError, KnobError, OSError) as exc:
        row["note"] = f"writability unknown: {exc}"
    try:
        knob.from_text(text)
    except KnobError as exc:
        row["note"] = f"current value outside the catalogue's range: {exc}"
    return row


def discover(target: "Target", host: str = "server", device: str | None = None, link_device: str | None = None,
             families: Iterable[str] | None = None) -> pd.DataFrame:
    """Probe every catalogue knob on ``host`` of ``target``, read-only.

    Parameters
    ----------
    target : Target
        An entered target (``with get_target(...)() as t``).
    host : str
        ``"server"`` or ``"client"``.
    device : str, optional
        Block device for ``block.*`` knobs (e.g. ``"sda"``, ``"@disk"`` in the lab); without it
        block knobs are listed as not checked.
    link_device : str, optional
        Network interface for ``link.*`` knobs (e.g. ``"lo"``, ``"@link"`` in the lab).
    families : iterable of str, optional
        Only these families (``sysctl``, ``block``, ``link``); default all.

    Returns
    -------
    pandas.DataFrame
        Columns ``name, family, scope, exists, writable, current, note``, one row per knob in
        catalogue order; ``current`` is the kernel's text with whitespace collapsed to single spaces.
    """
    target.check_host(host)
    wanted = set(FAMILIES.names() if families is None else families)
    unknown = wanted - set(FAMILIES.names())
    if unknown:
        raise KnobError(f"unknown knob family {', '.join(sorted(unknown))}; known: {', '.join(FAMILIES.names())}")
    rows = []
    for knob in CATALOGUE.values():
        if knob.family not in wanted:
            continue
        knob_device = None
        if knob.needs_device:
            knob_device = link_device if knob.family == "link" else device
        rows.append(_probe(knob, target, host, knob_device))
    return pd.DataFrame(rows, columns=COLUMNS).astype({"exists": bool, "writable": bool})


# ---- the `tunelab knobs` verbs (tunelab.knob_list, knob_info, knob_check) -------------------------

#: targets :func:`knob_list` can probe, with the link device used when none is given
LIST_TARGETS = {"local": None, "lab": "@link", "dry-run": None}


@dataclass
class KnobList:
    """The catalogue probed read-only on a target: one row per knob (exists, writable, current, note)."""

    target: str
    host: str
    table: pd.DataFrame

    def missing_summary(self) -> str:
        """One line naming the catalogue entries that were checked and not found."""
        frame = self.table
        checked = frame[~frame["note"].str.startswith("not checked")]
        missing = checked.loc[~checked["exists"], "name"].tolist()
        unchecked = len(frame) - len(checked)
        text = f"{int(checked['exists'].sum())} of {len(checked)} checked knobs exist"
        text += f"; missing here: {', '.join(missing)}" if missing else "; none missing"
        if unchecked:
            text += f"; {unchecked} not checked (need --device / --link-device)"
        return text

    def to_json(self) -> list[dict[str, Any]]:
        return [json_value(row) for row in self.table.to_dict(orient="records")]


def knob_list(target: str = "local", *, host: str = "server", families: Sequence[str] | None = None,
              device: str | None = None, link_device: str | None = None) -> KnobList:
    """Probe every catalogue knob on ``target`` (local, lab: a temporary lab, dry-run); nothing is written."""
    if target not in LIST_TARGETS:
        raise TargetError(f"knobs can be listed on {', '.join(sorted(LIST_TARGETS))}, not {target!r}")
    unknown = sorted(set(families or ()) - set(FAMILIES.names()))
    if unknown:
        raise TargetError(f"unknown knob family {', '.join(unknown)}; choose from {', '.join(FAMILIES.names())}")
    from tunelab.targets import get_target   # deferred: the targets (and the lab) only when listing

    options = {"quiet": True} if target == "dry-run" else {}
    with get_target(target)(**options) as live:
        frame = discover(live, host=host, device=device, link_device=link_device or LIST_TARGETS[target],
                         families=list(families) if families else None)
    return KnobList(target, host, frame)


def knob_info(name: str) -> dict[str, Any]:
    """A JSON-ready description of one catalogue knob (type, range, unit, scope, ...)."""
    knob = get_knob(name)
    return {"name": knob.name, "family": knob.family, "type": knob.type, "valid": knob.describe_range(),
            "minimum": knob.minimum, "maximum": knob.maximum, "choices": list(knob.choices or []),
            "unit": knob.unit, "scope": knob.scope, "requires_restart": knob.requires_restart,
            "needs_device": knob.needs_device, "description": knob.description, **mechanism_info(knob)}


def mechanism_info(knob: Any) -> dict[str, Any]:
    """The knob's mechanism as ``knobs show`` lines: what it limits, when it binds, the traffic it needs, its counters."""
    mechanism = knob.mechanism
    if mechanism is None:
        return {}
    return {"limits": mechanism.limits, "binds_when": mechanism.binds_when, "needs": mechanism.needs_text(),
            "acts_on": mechanism.role.value, "counters": ", ".join(mechanism.counters) or "-",
            "server_limit": mechanism.server_limit or "-"}


def knob_check(name: str, words: Sequence[str]) -> dict[str, Any]:
    """Validate a value (several words form a triplet or pair): its canonical form and kernel text."""
    knob = get_knob(name)
    value = knob.validate(" ".join(words) if len(words) > 1 or knob.length else words[0])
    return {"name": knob.name, "canonical": level_to_json(value), "value": value, "text": knob.to_text(value)}
