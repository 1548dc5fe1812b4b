"""The restore verb's sequence (``tunelab restore``): orphaned labs removed, then each store's journal rolled back on
this machine (:func:`tunelab.journal.restore_journal`; a damaged store is read, never written), then the leases of
dead runs swept. The result, :class:`RestoreResult`, says what is back and what is not."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from tunelab import journal, leases
from tunelab.errors import StoreDamagedError, TunelabError
from tunelab.store import Store


@dataclass
class StoreRestore:
    """One store's restore: the report's lines, whether all is back, or the error that stopped it."""

    path: Path
    lines: list[str]
    ok: bool
    error: str | None = None


@dataclass
class RestoreResult:
    """What :func:`tunelab.restore` did: orphaned labs removed, then each store's restore."""

    labs_removed: list[str]
    stores: list[StoreRestore]

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.stores)

    @property
    def exit_status(self) -> int:
        """0 when everything is back, 1 when some entry was refused or failed."""
        return 0 if self.ok else 1

    def to_json(self) -> dict[str, Any]:
        return {"labs_removed": list(self.labs_removed), "ok": self.ok,
                "stores": [{"path": str(s.path), "lines": list(s.lines), "ok": s.ok, "error": s.error}
                           for s in self.stores]}


def restore_store(path: Path, allow_host_global: bool) -> journal.RestoreReport:
    """Restore one store's journal; a damaged store (its integrity check failed) is read, never written."""
    try:
        with Store(path) as opened:
            return journal.restore_journal(opened, allow_host_global=allow_host_global, remove_orphans=False)
    except StoreDamagedError:
        return journal.restore_damaged(path, allow_host_global=allow_host_global)


def restore_stores(paths: Sequence[Path], *, allow_host_global: bool = False,
                   keep_going: bool = False) -> RestoreResult:
    """Remove orphaned labs, then restore each store in ``paths``; the leases of dead runs whose stores are now
    clean are swept after. With ``keep_going`` one bad store does not stop the others (its error is recorded);
    otherwise the first error is raised."""
    removed = journal.remove_orphan_labs()
    if not paths:
        return RestoreResult(removed, [])
    done = []
    for path in paths:
        try:
            result = restore_store(path, allow_host_global)
            done.append(StoreRestore(path, result.lines(), result.ok))
        except TunelabError as exc:
            if not keep_going:
                raise
            done.append(StoreRestore(path, [], False, str(exc)))   # one bad store must not stop the others
    leases.sweep()                                                  # leases of dead runs whose stores are now clean
    return RestoreResult(removed, done)


__all__ = ["RestoreResult", "StoreRestore", "restore_store", "restore_stores"]
