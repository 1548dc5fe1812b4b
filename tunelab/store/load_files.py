"""The load's private directories on its host, journalled BEFORE anything is copied into them.

A load that copies an operator's file to the load host (dnsperf's query file: personal data) makes a private
directory there (``mktemp -d``); :meth:`LoadFileRecords.private_dir_made` records it, with the host's
identity, before the copy, and :meth:`LoadFileRecords.private_dir_removed` once it is gone (the normal end of a
run, or ``tunelab restore`` after a crash: :func:`tunelab.journal.remove_private_dirs`). Only a path and a host
are stored, never the content.
"""
from __future__ import annotations

from dataclasses import dataclass

from tunelab.errors import StoreError
from tunelab.store.connection import StoreConnection
from tunelab.store.journal_entries import HostIdentity
from tunelab.store.schema import has_table
from tunelab.store.values import utc_now


@dataclass(frozen=True)
class PrivateDir:
    """A private directory a load made on one of the target's hosts, not yet removed."""

    dir_id: int
    host: str
    path: str
    ts: str
    machine_id: str | None = None
    boot_id: str | None = None

    @property
    def identity(self) -> HostIdentity:
        return HostIdentity(self.machine_id, self.boot_id)


class LoadFileRecords(StoreConnection):
    """The ``load_files`` table of a store (schema 4; an older store opened read-only has none: nothing left)."""

    def private_dir_made(self, host: str, path: str, identity: HostIdentity | None = None) -> int:
        """Record (durably, on return) that a load made ``path`` on ``host``; returns its id."""
        identity = identity or HostIdentity(None, None)
        with self._transaction() as db:
            cur = db.execute("INSERT INTO load_files (host, path, state, ts, machine_id, boot_id) "
                             "VALUES (?, ?, 'made', ?, ?, ?)",
                             (host, path, utc_now(), identity.machine_id, identity.boot_id))
            return int(cur.lastrowid)

    def private_dir_removed(self, dir_id: int, note: str | None = None) -> None:
        """Mark a private directory removed (or moot: ``note`` says why)."""
        with self._transaction() as db:
            cur = db.execute("UPDATE load_files SET state = 'removed', ts = ?, note = ? WHERE dir_id = ?",
                             (utc_now(), note, int(dir_id)))
            if cur.rowcount != 1:
                raise StoreError(f"no load file entry {dir_id} in {self.path}")

    def private_dirs_left(self) -> list[PrivateDir]:
        """The private directories not known to be removed, newest first."""
        with self._sql_errors():
            if not has_table(self._db, "load_files"):
                return []
            rows = self._db.execute("SELECT dir_id, host, path, ts, machine_id, boot_id FROM load_files "
                                    "WHERE state = 'made' ORDER BY dir_id DESC").fetchall()
        return [PrivateDir(*row) for row in rows]
