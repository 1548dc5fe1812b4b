"""Rolling back the journal: what a crash (or a failed restore) left changed is put back.

Every knob change is journalled in the study's store before it is written
(:meth:`tunelab.store.Store.journal_apply_many`), with the identity of the machine and boot it was
made on. :func:`restore_journal` (``tunelab restore``, and the runner before a resumed run) writes
each unrestored entry's old value back, verifies it and marks the entry restored; an entry from
another machine, or a host-global knob without permission, is refused and stays in the journal.
:func:`pending_changes` tells which entries may still be live; :func:`remove_orphan_labs` removes
the labs of dead runs; :func:`remove_private_dirs` the private directories a dead run's load left on its host
(dnsperf's copy of the operator's query file), journalled before anything was copied into them. The rules checked before anything is written live with the runner
(:func:`tunelab.runner.check_trial`).
"""
from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence, TypeVar

from tunelab.errors import KnobError, TargetError, TunelabError
from tunelab.formatting import shorten
from tunelab.knobs import Knob, get_knob
from tunelab.signals import deferred_interrupts
from tunelab.store import HostIdentity, JournalEntry, PrivateDir, Store
from tunelab.targets import Target, build_target, get_target
from tunelab.targets import lab as lab_module

T = TypeVar("T")

KnobLookup = Callable[[str], Knob]


@dataclass
class RestoreReport:
    """What :func:`restore_journal` did with each unrestored entry.

    ``refused`` entries were not replayed on purpose (written on another machine, or a
    host-global knob without permission); like ``failed`` ones they stay in the journal.
    """

    restored: list[str] = field(default_factory=list)
    moot: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    labs_removed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the load's private directories removed (``PATH on the HOST host``)
    files_removed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.refused

    def lines(self) -> list[str]:
        return ([f"removed orphaned lab {name} (its run had died)" for name in self.labs_removed]
                + [f"restored: {line}" for line in self.restored] + [f"nothing to restore: {line}" for line in self.moot]
                + [f"REFUSED: {line}" for line in self.refused] + [f"FAILED: {line}" for line in self.failed]
                + [f"removed the load's private copy: {line}" for line in self.files_removed]
                + [f"note: {line}" for line in self.notes])


# ---- which machine a journal entry belongs to ----------------------------------------------------

MACHINE_ID_PATH = "/etc/machine-id"
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


def host_identity(target: Target, host: str) -> HostIdentity:
    """The machine id and boot id of ``host`` as the target sees it (``None`` parts if unreadable).

    Lab namespaces share this machine's files, so the lab reports this machine; an SSH target
    reports the remote machine; the simulator and test fakes report nothing.
    """
    values = []
    for path in (MACHINE_ID_PATH, BOOT_ID_PATH):
        try:
            values.append(target.read_text(host, path).strip() or None)
        except (TunelabError, OSError):
            values.append(None)
    return HostIdentity(*values)


def _foreign_reason(entry: JournalEntry, here: HostIdentity) -> str | None:
    """Why ``entry`` must not be replayed on ``here`` (another machine, or unknown), else None."""
    if not here.known:
        return None if entry.machine_id is None else (
            f"it was written on machine {entry.machine_id[:12]}, and this target cannot say which machine it is")
    if entry.machine_id is None:
        return ("the journal does not say which machine it was written on (an older tunelab, or an edited store); "
                f"if this is that machine, put {entry.knob_id} back to {entry.old_text!r} by hand")
    if entry.machine_id != here.machine_id:
        return (f"it was written on machine {entry.machine_id[:12]}, this is {here.machine_id[:12]}: a store copied "
                "from elsewhere is never replayed; run `tunelab restore` on the machine that made the change")
    return None


def _rebooted(entry: JournalEntry, here: HostIdentity) -> bool:
    return bool(entry.boot_id and here.boot_id and entry.boot_id != here.boot_id)


#: target types whose per-netns state vanishes with the target (the lab's namespaces are
#: created per run and deleted by down(); after a crash nothing of them survives a restart)
EPHEMERAL_NETNS_TARGETS = frozenset({"lab", "simulator", "dry-run"})


def _namespaces_are_gone(target_type: str | None, target_cls: type[Target] | None) -> bool:
    flag = getattr(target_cls, "ephemeral_netns", None)
    return bool(flag) if flag is not None else target_type in EPHEMERAL_NETNS_TARGETS


def pending_changes(store: Store, knob_lookup: KnobLookup | None = None) -> list[JournalEntry]:
    """Unrestored entries that may still hold a changed value on this machine.

    Entries of per-namespace knobs on a target whose namespaces vanish with it (the lab) are
    left out: nothing of them survives the run. Entries of unknown knobs are kept (to be safe).
    """
    knob_lookup = knob_lookup or get_knob
    spec = (store.study.target_spec if store.study else None) or {}
    gone = _namespaces_are_gone(spec.get("type"), _target_class(spec.get("type")))
    pending = []
    for entry in store.unrestored():
        try:
            scope = getattr(knob_lookup(entry.knob_name), "scope", "host")
        except TunelabError:
            scope = "host"
        if not (gone and scope == "netns"):
            pending.append(entry)
    return pending


def _target_class(target_type: str | None) -> type[Target] | None:
    """The registered target class of ``target_type``, or None when there is none (or no type)."""
    if not target_type:
        return None
    try:
        return get_target(target_type)
    except TargetError:
        return None


def remove_orphan_labs() -> list[str]:
    """Remove every lab whose owning run died (a lease: the owner's pid and start time).

    A live lab (its owner still running) and a detached one (``tunelab lab up``) are never
    touched. Returns the names removed; raises TargetError naming a lab that could not be removed.
    """
    removed = []
    for state in lab_module.list_states():
        if state.is_orphan():
            problems = lab_module.destroy(state)
            if problems:
                raise TargetError(f"could not remove the orphaned lab {state.name!r}: {'; '.join(problems)}; "
                                  f"try `tunelab lab down --name {state.name}`")
            removed.append(state.name)
    return removed


def restore_target(spec: Mapping[str, Any] | None) -> Target:
    """Instantiate the target to restore on from a stored spec ``{"type": ..., "options": {...}}``, never
    with the options that carry commands, and with the target's :attr:`~tunelab.targets.base.Target.restore_options`
    (a lab: no services, no operator zone file)."""
    if not spec or "type" not in spec:
        raise TargetError("the store records no target spec, so it cannot rebuild the target for restore; "
                          "pass a target explicitly (restore_journal(store, target=...))")
    # restore only writes knobs back and never starts a service, so a stored spec's command options
    # (e.g. service_commands of a run with --allow-design-commands) are dropped, never run
    cls = get_target(spec["type"])
    commands = set(getattr(cls, "command_options", ()))
    options = {k: v for k, v in dict(spec.get("options") or {}).items() if k not in commands}
    options.update(getattr(cls, "restore_options", {}))
    return build_target({**spec, "options": options}, allow_commands=False)


def restore_journal(
    store: Store,
    target: Target | None = None,
    *,
    knob_lookup: KnobLookup | None = None,
    target_spec: Mapping[str, Any] | None = None,
    allow_host_global: bool = False,
    remove_orphans: bool = True,
) -> RestoreReport:
    """Roll back every unrestored journal entry of ``store``, newest first.

    Each entry's old text is validated by the knob catalogue, written back through the target,
    read back and compared; a match marks the entry restored. An entry is replayed only on the
    machine it was written on (machine id in the journal); one made before the machine last
    rebooted is moot (the kernel reset the runtime value), and a host-global knob is replayed
    only with ``allow_host_global``. On a target whose namespaces are gone (the lab after a
    crash), a per-netns knob has nothing left to restore. Refused and failed entries stay
    ``applied`` and are listed. With ``remove_orphans``, labs of dead runs are removed first.

    ``target`` (already up) is used when given; otherwise one is built from ``target_spec`` or
    the study's stored spec (never with commands), brought up only if some entry needs it.
    """
    report = RestoreReport()
    if remove_orphans:
        report.labs_removed = remove_orphan_labs()
    entries, dirs = store.unrestored(), private_dirs_left(store)
    if not entries and not dirs:
        return report
    spec = dict(target_spec or (store.study.target_spec if store.study else None) or {})
    live = _triage(store, entries, report, knob_lookup or get_knob, target, spec, allow_host_global)
    if target is None and not live and dirs and _namespaces_are_gone(spec.get("type"), _target_class(spec.get("type"))):
        remove_private_dirs(store, None, dirs, report)      # a lab's hosts are namespaces: the files are here
        return report
    if not live and not dirs:
        return report
    owned = target is None
    if owned:
        target = restore_target(spec)
        target.up()
    try:
        _replay(store, target, live, report)
        remove_private_dirs(store, target, dirs, report)
    finally:
        if owned:
            target.down()
    return report


#: a private directory tunelab's loads make (``mktemp -d -t tunelab-NAME.XXXXXXXXXX``): the only paths restore removes
PRIVATE_DIR_RE = re.compile(r"(?:/[A-Za-z0-9_][A-Za-z0-9._-]*)*/tunelab-[a-z0-9]+\.[A-Za-z0-9]{10}")


def private_dirs_left(store: Store) -> list[PrivateDir]:
    """The load's private directories ``store`` journalled and did not see removed (none for a store wrapper
    without them, e.g. a duet side's journal)."""
    left = getattr(store, "private_dirs_left", None)
    return list(left()) if left is not None else []


def remove_private_dirs(store: Store, target: Target | None, dirs: Sequence[PrivateDir], report: RestoreReport) -> None:
    """Remove each private directory a dead run's load left (``rm -rf`` on its host through ``target``; without a
    target, a lab's, on this machine) and mark it removed. Only a path of tunelab's ``mktemp`` pattern
    (:data:`PRIVATE_DIR_RE`) on the machine it was made on is touched; anything else is a note, left in place."""
    for item in dirs:
        where = f"{item.path} on the {item.host} host"
        if not PRIVATE_DIR_RE.fullmatch(item.path):
            report.notes.append(f"left {where}: not a directory tunelab's mktemp makes; check it by hand")
            continue
        here = host_identity(target, item.host) if target is not None else _this_machine()
        if item.machine_id and item.machine_id != here.machine_id:
            report.notes.append(f"left {where}: it was made on machine {item.machine_id[:12]}, this is "
                                f"{(here.machine_id or 'unknown')[:12]}; run `tunelab restore` where it was made")
            continue
        problem = _remove_dir(target, item)
        if problem:
            report.notes.append(f"could not remove {where} ({problem}); remove it by hand: rm -rf -- {item.path}")
            continue
        store.private_dir_removed(item.dir_id)
        report.files_removed.append(where)


def _remove_dir(target: Target | None, item: PrivateDir) -> str | None:
    """``rm -rf`` the directory on its host (through ``target``, else here); the problem, or None."""
    if target is None:
        try:
            shutil.rmtree(item.path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return exc.strerror or type(exc).__name__
        return None
    try:
        result = target.run(item.host, ["rm", "-rf", "--", item.path], timeout_s=30)
    except TunelabError as exc:
        return shorten(exc)
    return None if result.ok else shorten(result.stderr.strip() or f"rm exited with status {result.returncode}")


def _this_machine() -> HostIdentity:
    """This machine's identity (the lab's namespaces share it)."""
    values = []
    for path in (MACHINE_ID_PATH, BOOT_ID_PATH):
        try:
            with open(path, encoding="utf-8") as fh:
                values.append(fh.read().strip() or None)
        except OSError:
            values.append(None)
    return HostIdentity(*values)


class UnmarkedJournal:
    """The journal of a damaged store, opened read-only: its entries are put back on the machine, but
    nothing can be written to the store, so marking an entry restored does nothing (the store keeps
    saying ``applied``; a copy repaired with ``sqlite3 .recover`` can be restored again, harmlessly:
    each entry's old value is written once more)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @property
    def study(self) -> Any:
        return self._store.study

    def unrestored(self) -> list[JournalEntry]:
        return self._store.unrestored()

    def journal_restored(self, entry_id: int, note: str | None = None) -> None:
        """Nothing to do: a damaged store is never written."""

    def private_dirs_left(self) -> list[PrivateDir]:
        return private_dirs_left(self._store)

    def private_dir_removed(self, dir_id: int, note: str | None = None) -> None:
        """Nothing to do: a damaged store is never written."""


def restore_damaged(path: Any, *, allow_host_global: bool = False) -> RestoreReport:
    """:func:`restore_journal` for a store whose integrity check failed: read its journal read-only
    and put every knob back, without writing to the store; the report says the store stays unmarked.
    The knobs come first: a damaged store must not leave the machine mis-configured."""
    with Store(path, readonly=True) as damaged:
        report = restore_journal(UnmarkedJournal(damaged), allow_host_global=allow_host_global,  # type: ignore[arg-type]
                                 remove_orphans=False)
    report.notes.append("the store is damaged, so it was only read: the entries above are not marked restored "
                        "in it; keep a copy for the record and rerun the study into a new store (--store)")
    return report


def _triage(store: Store, entries: list[JournalEntry], report: RestoreReport, knob_lookup: KnobLookup,
            target: Target | None, spec: Mapping[str, Any], allow_host_global: bool) -> list[tuple[JournalEntry, Knob]]:
    """Sort the entries before any target is touched: an unknown knob or old value fails, a per-netns
    knob of a target whose namespaces are gone is moot (marked restored), a host-global knob without
    permission is refused; the rest are returned with their knob, to be replayed."""
    target_type = spec.get("type") if target is None else getattr(target, "name", None)
    target_cls = type(target) if target is not None else _target_class(spec.get("type"))
    netns_gone = _namespaces_are_gone(target_type, target_cls)
    gone_note = (f"per-namespace knob of the {target_type} target: the host was never changed, nothing to restore"
                 + (f" (orphaned lab {', '.join(report.labs_removed)} removed)" if report.labs_removed else ""))
    live: list[tuple[JournalEntry, Knob]] = []
    for entry in entries:
        try:
            knob = knob_lookup(entry.knob_name)
            knob.validate(knob.from_text(entry.old_text))    # a value the catalogue accepts, or a KnobError
        except TunelabError as exc:
            report.failed.append(f"{_describe(entry)}: {exc}")
            continue
        if netns_gone and getattr(knob, "scope", "host") == "netns":
            store.journal_restored(entry.entry_id, note=gone_note)
            report.moot.append(f"{_describe(entry)}: {gone_note}")
        elif getattr(knob, "scope", "host") == "host" and not allow_host_global:
            report.refused.append(f"{_describe(entry)}: a host-global knob (it changes the whole machine); to put it "
                                  f"back to {entry.old_text.strip()!r}, run restore again with --allow-host-global")
        else:
            live.append((entry, knob))
    return live


def _replay(store: Store, target: Target, live: list[tuple[JournalEntry, Knob]], report: RestoreReport) -> None:
    """Put each entry back on the machine it was made on: another machine's entry is refused, one from
    before the last reboot is moot, the others are written back and verified (Ctrl-C held meanwhile).
    An entry the kernel refuses is tried once more after the others (:func:`in_two_passes`, as the
    runner's :func:`tunelab.runner.write_back`: ``nr_requests`` is only valid under its old scheduler)."""
    identities = {host: host_identity(target, host) for host in {entry.host for entry, _ in live}}
    with deferred_interrupts():
        replay: list[tuple[JournalEntry, Knob]] = []
        for entry, knob in live:
            here = identities[entry.host]
            foreign = _foreign_reason(entry, here)
            if foreign:
                report.refused.append(f"{_describe(entry)}: {foreign}")
            elif _rebooted(entry, here):
                note = ("the machine rebooted since this change, so the kernel's runtime value went back to "
                        "its boot default; nothing to restore")
                store.journal_restored(entry.entry_id, note=note)
                report.moot.append(f"{_describe(entry)}: {note}")
            else:
                replay.append((entry, knob))

        def put_back(item: tuple[JournalEntry, Knob]) -> None:
            entry, knob = item
            restore_entry(store, target, knob, entry)
            report.restored.append(f"{_describe(entry)} back to {entry.old_text!r}")

        report.failed.extend(f"{_describe(entry)}: {why}" for (entry, _), why in in_two_passes(replay, put_back))


def in_two_passes(items: Sequence[T], put_back: Callable[[T], None]) -> list[tuple[T, str]]:
    """Call ``put_back`` on each item in order; those it refuses (a :class:`TunelabError`) are tried once
    more after the others, when the others changed something (coupled knobs: ``nr_requests`` is only
    valid under its old scheduler). Returns the items still refused, each with the error's text."""
    pending, failed = list(items), []
    for _ in range(2):
        failed = []
        for item in pending:
            try:
                put_back(item)
            except TunelabError as exc:
                failed.append((item, str(exc)))
        if not failed or len(failed) == len(pending):
            break
        pending = [item for item, _ in failed]
    return failed


def restore_entry(store: Store, target: Target, knob: Knob, entry: JournalEntry) -> None:
    """Write one entry's old value back, verify it, and mark the entry restored."""
    wanted = knob.from_text(entry.old_text)
    knob.write(target, entry.host, wanted, device=entry.device)
    got = knob.read(target, entry.host, device=entry.device)
    if got != wanted:
        raise KnobError(f"{entry.knob_id} on {entry.host}: wrote back {knob.to_text(wanted)!r} but read "
                        f"{knob.to_text(got)!r}; fix it by hand (e.g. sysctl -w) and run `tunelab restore` again")
    store.journal_restored(entry.entry_id)


def _describe(entry: JournalEntry) -> str:
    where = f" on {entry.host}" if entry.host != "server" else ""
    device = f" ({entry.device})" if entry.device else ""
    return f"{entry.knob_id}{device}{where} [trial {entry.trial_id}, entry {entry.entry_id}]"
