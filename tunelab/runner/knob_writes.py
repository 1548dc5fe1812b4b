"""Writing bound knobs back and their write-order side effects: the host identity journalled with each change,
the knobs a write to the same device reset (:func:`reset_by_writes`), and the verified write-back in order
(:func:`write_back`) that a trial's restore and the feasibility probe share."""
from __future__ import annotations

import weakref
from typing import Any, Callable, Mapping, Sequence

from tunelab.designs.constraints import in_write_order
from tunelab.errors import KnobError, TunelabError
from tunelab.journal import host_identity, in_two_passes
from tunelab.knobs import Knob
from tunelab.runner.binding import BoundKnob
from tunelab.store import HostIdentity
from tunelab.targets import Target


def knob_text(knob: Knob, value: Any) -> str:
    """``value`` as the knob writes it, for a message (its ``repr`` when the knob cannot format it)."""
    try:
        return knob.to_text(value)
    except Exception:  # noqa: BLE001 - only for the message
        return repr(value)


#: host identities per live target object (machine and boot ids do not change while it is up)
_IDENTITIES: "weakref.WeakKeyDictionary[Target, dict[str, HostIdentity]]" = weakref.WeakKeyDictionary()


def host_identities(target: Target, hosts: set[str]) -> dict[str, HostIdentity]:
    """The machine/boot identity of each host, read once per target (journalled with each change)."""
    try:
        known = _IDENTITIES.setdefault(target, {})
    except TypeError:                      # a target that cannot be weakly referenced: no cache
        known = {}
    for host in hosts - known.keys():
        known[host] = host_identity(target, host)
    return {host: known[host] for host in hosts}


def reset_by_writes(target: Target, specs: Sequence[BoundKnob], levels: Mapping[str, Any],
                    devices: Mapping[str, str | None], written: Sequence[BoundKnob]) -> list[BoundKnob]:
    """The knobs left out of a write because they already held their level, which a write to the same
    device has since changed (writing the block scheduler resets ``nr_requests`` to the scheduler's
    default), in write order: they must be written too."""
    touched = {devices[spec.id] for spec in written if devices[spec.id]}
    ids = {spec.id for spec in written}
    reset = [spec for spec in specs if spec.id not in ids and devices[spec.id] in touched
             and spec.knob.read(target, spec.host, device=devices[spec.id]) != levels[spec.id]]
    return in_write_order(reset)


def write_back(target: Target, items: Sequence[tuple[int, BoundKnob, str | None, Any]],
               on_each: Callable[[], None] | None = None) -> tuple[list[int], list[str]]:
    """Write each ``(journal entry, knob, device, old value)`` back in the given order and read it back;
    a knob the kernel refuses is tried once more after the others (:func:`tunelab.journal.in_two_passes`:
    ``nr_requests`` is only valid under its old scheduler), and one a later write reset is put back again
    (:func:`_put_back_resets`). Returns the restored entries and one problem line per knob still not back;
    ``on_each`` is called after each restored knob."""
    restored: list[int] = []

    def put_back(item: tuple[int, BoundKnob, str | None, Any]) -> None:
        entry, spec, device, old = item
        _write_verified(target, spec, device, old)
        restored.append(entry)
        if on_each is not None:
            on_each()

    problems = [f"{item[1].id}: {why}" for item, why in in_two_passes(items, put_back)]
    return restored, problems + _put_back_resets(target, items, restored)


def _write_verified(target: Target, spec: BoundKnob, device: str | None, value: Any) -> None:
    """Write ``value`` and read it back; KnobError when the kernel keeps another value."""
    spec.knob.write(target, spec.host, value, device=device)
    got = spec.knob.read(target, spec.host, device=device)
    if got != value:
        raise KnobError(f"wrote back {knob_text(spec.knob, value)!r}, read {knob_text(spec.knob, got)!r}")


def _put_back_resets(target: Target, items: Sequence[tuple[int, BoundKnob, str | None, Any]],
                     restored: list[int]) -> list[str]:
    """Write back, once more, a restored knob that a later write to its device changed (restoring the block
    scheduler resets ``nr_requests``); only knobs sharing a device are read again. Drops the entries still
    wrong from ``restored`` and returns one problem line for each."""
    devices = [device for entry, _, device, _ in items if device and entry in restored]
    problems = []
    for entry, spec, device, old in items:
        if entry not in restored or not device or devices.count(device) < 2:
            continue
        try:
            if spec.knob.read(target, spec.host, device=device) != old:
                _write_verified(target, spec, device, old)
        except TunelabError as exc:
            restored.remove(entry)
            problems.append(f"{spec.id}: {exc}")
    return problems


__all__ = ["host_identities", "knob_text", "reset_by_writes", "write_back"]
