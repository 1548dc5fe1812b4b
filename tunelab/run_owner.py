"""One owner for every run: the safety sequence that ``run``, ``refine``, ``validate`` (and ``tune``) each enter once.

:func:`owned_run` is the frame of everything that may apply a knob:

1. SIGTERM behaves as Ctrl-C (:func:`tunelab.signals.sigterm_interrupts`) and the run lease is taken
   (:func:`tunelab.leases.lease`);
2. orphaned labs of dead runs are removed (each named on stderr) and a crashed run of another study that left
   knobs changed stops the run (:func:`tunelab.leases.check_crashed_runs`), before anything is read or applied;
3. the verb checks what it must on the target (its pre-flight) and then opens the study's store once
   (:meth:`RunOwner.open_store`): the pre-flight refuses before any store exists;
4. the verb measures; the runner restores every trial's knobs, and the load's private directories go with
   :func:`tunelab.runner.cleanup_load` while the target is up;
5. on the way out, whatever this run's load still left journalled on this machine is removed
   (:func:`tunelab.journal.remove_private_dirs`, its ``load_files`` rows marked removed), the store closes and the
   leases of dead runs whose stores are clean again are swept;
6. interrupted (Ctrl-C or SIGTERM), it raises :class:`tunelab.signals.RunInterrupted`, whose one line says what was
   put back (``interrupted: restored net.core.somaxconn on server``): the CLI prints it and exits 130.
"""
from __future__ import annotations

import sys
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from tunelab import journal, leases
from tunelab.errors import StoreError, TunelabError
from tunelab.model import KnobId
from tunelab.signals import RunInterrupted, sigterm_interrupts
from tunelab.store import Store


@dataclass
class RunOwner:
    """The run :func:`owned_run` holds: its store path, the orphaned labs it removed, and (once
    :meth:`open_store` was called) its store."""

    path: Path
    labs_removed: list[str] = field(default_factory=list)
    store: Store | None = None
    _stack: ExitStack = field(default_factory=ExitStack)
    #: the journal entry and load-file ids already in the store when it opened (not this run's)
    _first_entry: int = 0
    _dirs_before: frozenset[int] = frozenset()

    def open_store(self, *, study: str, design_hash: str, design_text: str,
                   target_spec: Mapping[str, Any]) -> Store:
        """The run's store, opened once (closed when the run ends); call it after the verb's pre-flight."""
        if self.store is not None:
            raise StoreError(f"{self.path} is already open for this run: a run opens its store once")
        spec = {"type": target_spec["type"], "options": target_spec.get("options") or {}}
        self.store = self._stack.enter_context(Store.open(self.path, study=study, design_hash=design_hash,
                                                          design_text=design_text, target_spec=spec))
        entries = self.store.journal()
        self._first_entry = int(entries["entry_id"].max()) if len(entries) else 0
        self._dirs_before = frozenset(item.dir_id for item in journal.private_dirs_left(self.store))
        return self.store

    def remove_left_dirs(self) -> None:
        """Remove the load's private directories this run journalled on this machine (a lab's or the local host's)
        and did not see removed (a run cut short before :func:`tunelab.runner.cleanup_load`), marking them removed;
        one on another machine (ssh), or on a host that could not say which machine it is, stays journalled for
        ``tunelab restore``. A problem is a warning, never the run's outcome."""
        if self.store is None:
            return
        try:
            here = _this_machine_id()
            left = [item for item in journal.private_dirs_left(self.store) if item.dir_id not in self._dirs_before
                    and here is not None and item.machine_id == here]
            report = journal.RestoreReport()
            journal.remove_private_dirs(self.store, None, left, report)
        except TunelabError as exc:
            report = journal.RestoreReport(notes=[f"the load's private directories were not checked: {exc}"])
        for note in report.notes:
            print(f"warning: {note}", file=sys.stderr)

    def interrupted_line(self) -> str:
        """One line: what this run put back after the interrupt, and what it could not (``tunelab restore``)."""
        if self.store is None:
            return "interrupted before the store opened: nothing was changed"
        try:
            entries = self.store.journal()
        except StoreError:                       # closed already: the journal says, `tunelab restore` reads it
            return f"interrupted; `tunelab restore {self.path}` puts back anything left changed"
        mine = entries[entries["entry_id"] > self._first_entry]
        if mine.empty:
            return "interrupted: no knob had been changed"
        restored = _knobs_of(mine[mine["state"] == "restored"])
        left = _knobs_of(mine[mine["state"] != "restored"])
        parts = [f"restored {', '.join(restored)}"] if restored else []
        if left:
            parts.append(f"NOT restored {', '.join(left)}: run `tunelab restore {self.path}`")
        return "interrupted: " + "; ".join(parts)


def _knobs_of(entries: Any) -> list[str]:
    """``name[device] on host`` of each distinct knob in journal rows, in entry order."""
    found = []
    for row in entries.itertuples(index=False):
        parsed = KnobId.parse(str(row.knob_id))
        name = parsed.name + (f"[{row.device or parsed.device}]" if (row.device or parsed.device) else "")
        found.append(f"{name} on {row.host}")
    return list(dict.fromkeys(found))


def _this_machine_id() -> str | None:
    """``/etc/machine-id`` of this machine (None when it cannot be read)."""
    try:
        return Path(journal.MACHINE_ID_PATH).read_text().strip() or None
    except OSError:
        return None


@contextmanager
def owned_run(path: Path | str, *, check_crashed: bool = True) -> Iterator[RunOwner]:
    """Steps 1-6 of the module docstring around a verb's run recording into the store at ``path``.

    ``check_crashed`` False (a dry run's throw-away store) skips the crashed-run check. Yields the
    :class:`RunOwner`; the verb calls :meth:`RunOwner.open_store` once its pre-flight passed.

    Raises
    ------
    SafetyError
        a crashed run left knobs changed on this machine (nothing was read or applied).
    RunInterrupted
        Ctrl-C or SIGTERM: the run's knobs were put back; its one line says which.
    """
    owner = RunOwner(Path(path))
    with sigterm_interrupts(), leases.lease(owner.path):
        try:
            with owner._stack:
                _housekeeping(owner, check_crashed)
                try:
                    yield owner
                except KeyboardInterrupt as exc:
                    raise exc if isinstance(exc, RunInterrupted) else RunInterrupted(owner.interrupted_line()) from None
                finally:
                    owner.remove_left_dirs()
        except KeyboardInterrupt as exc:          # before the verb started, or while the store closed
            raise exc if isinstance(exc, RunInterrupted) else RunInterrupted(owner.interrupted_line()) from None
        leases.sweep()              # a crashed run of this study, now recovered, leaves no lease


def _housekeeping(owner: RunOwner, check_crashed: bool) -> None:
    """Step 2: orphaned labs removed (named on stderr), crashed runs of other studies checked."""
    owner.labs_removed = journal.remove_orphan_labs()
    for name in owner.labs_removed:
        print(f"removed orphaned lab {name} (its run had died)", file=sys.stderr)
    if check_crashed:
        leases.check_crashed_runs(own_store=owner.path)


__all__ = ["RunOwner", "owned_run"]
