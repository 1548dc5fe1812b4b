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

from typing import TYPE_CHECKING, Iterable

import pandas as pd

from tunelab.errors import KnobError, TargetError
from tunelab.knobs.base import Knob
from tunelab.knobs.catalogue import CATALOGUE
from tunelab.knobs.families import FAMILIES

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
