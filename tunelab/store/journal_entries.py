"""The journal of knob changes: one entry per change, durable BEFORE the change is made.

An entry is ``applied`` from :meth:`JournalRecords.journal_apply_many` (fsynced: WAL with
``synchronous=FULL``) until the old value was written back and verified
(:meth:`JournalRecords.journal_restored`). Rolling back what a crash left applied is
:mod:`tunelab.journal`'s job; this module only records.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import pandas as pd

from tunelab.errors import StoreError
from tunelab.model import KnobId
from tunelab.store.connection import StoreConnection
from tunelab.store.schema import has_identity_columns
from tunelab.store.values import utc_now


@dataclass(frozen=True)
class JournalEntry:
    """One knob change as journalled: enough to write the old value back."""

    entry_id: int
    trial_id: int | None
    host: str
    knob_id: str
    device: str | None
    old_text: str
    new_text: str
    state: str
    ts: str
    #: ``/etc/machine-id`` and ``/proc/sys/kernel/random/boot_id`` of the host the change was made
    #: on (``None`` when that host could not tell, e.g. the simulator, or an older store)
    machine_id: str | None = None
    boot_id: str | None = None

    @property
    def knob_name(self) -> str:
        """The catalogue name inside the knob id (``link.mtu[veth0]@client`` -> ``link.mtu``)."""
        return KnobId.parse(self.knob_id).name


@dataclass(frozen=True)
class HostIdentity:
    """Which machine, and which boot of it, a host is: ``/etc/machine-id`` and the kernel's boot id.

    A journal entry carries the identity of the host it changed, so a store copied to another
    machine (or a journal older than the last reboot) is never replayed blindly.
    """

    machine_id: str | None
    boot_id: str | None

    @property
    def known(self) -> bool:
        return bool(self.machine_id)


class JournalRecords(StoreConnection):
    """The ``journal`` table of a store."""

    def journal_apply(self, trial_id: int | None, host: str, knob_id: str, device: str | None,
                      old_text: str, new_text: str, identity: HostIdentity | None = None) -> int:
        """Journal a change BEFORE it is written (durable on return); returns the entry id."""
        return self.journal_apply_many(trial_id, [(host, knob_id, device, old_text, new_text)],
                                       identities={host: identity} if identity else None)[0]

    def journal_apply_many(self, trial_id: int | None,
                           changes: Sequence[tuple[str, str, str | None, str, str]],
                           identities: Mapping[str, HostIdentity] | None = None) -> list[int]:
        """Journal several changes ``(host, knob_id, device, old_text, new_text)`` in ONE durable
        transaction, before any of them is written; returns their entry ids in order.

        ``identities`` maps a host role to the machine and boot it is (:class:`HostIdentity`), so
        ``tunelab restore`` replays an entry only on the machine, and in the boot, it was made in.
        Journalling an intent that a crash then leaves unwritten is harmless: restoring writes the
        old value, which the knob still holds.
        """
        identities = identities or {}
        with self._transaction() as db:
            ids = []
            for host, knob_id, device, old_text, new_text in changes:
                identity = identities.get(host) or HostIdentity(None, None)
                cur = db.execute(
                    "INSERT INTO journal (trial_id, host, knob_id, device, old_text, new_text, state, ts,"
                    " machine_id, boot_id) VALUES (?, ?, ?, ?, ?, ?, 'applied', ?, ?, ?)",
                    (trial_id, host, knob_id, device, old_text, new_text, utc_now(),
                     identity.machine_id, identity.boot_id),
                )
                ids.append(int(cur.lastrowid))
            return ids

    def journal_restored_many(self, entry_ids: Sequence[int]) -> None:
        """Mark several entries restored in one transaction (after all were written back and verified)."""
        with self._transaction() as db:
            now = utc_now()
            for entry_id in entry_ids:
                cur = db.execute("UPDATE journal SET state = 'restored', ts = ?, note = NULL WHERE entry_id = ?",
                                 (now, entry_id))
                if cur.rowcount != 1:
                    raise StoreError(f"no journal entry {entry_id} in {self.path}")

    def journal_restored(self, entry_id: int, note: str | None = None) -> None:
        """Mark a journal entry restored (the old value was written back and verified, or is moot)."""
        with self._transaction() as db:
            cur = db.execute("UPDATE journal SET state = 'restored', ts = ?, note = ? WHERE entry_id = ?",
                             (utc_now(), note, entry_id))
            if cur.rowcount != 1:
                raise StoreError(f"no journal entry {entry_id} in {self.path}")

    def unrestored(self) -> list[JournalEntry]:
        """Journal entries still ``applied``, newest first (the order to roll them back in)."""
        identity = "machine_id, boot_id" if has_identity_columns(self._db) else "NULL, NULL"
        rows = self._db.execute(
            f"SELECT entry_id, trial_id, host, knob_id, device, old_text, new_text, state, ts, {identity}"
            " FROM journal WHERE state = 'applied' ORDER BY entry_id DESC"
        )
        return [JournalEntry(*row) for row in rows]

    def journal(self) -> pd.DataFrame:
        """The whole journal as a DataFrame, in entry order."""
        cur = self._db.execute("SELECT * FROM journal ORDER BY entry_id")
        return pd.DataFrame(cur.fetchall(), columns=[d[0] for d in cur.description])
