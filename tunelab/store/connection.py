"""Opening a store: the file and schema checks, the writer lock, WAL, migrations and crash checks.

:class:`StoreConnection` is the base every concern of :class:`tunelab.store.Store` builds on
(trials, journal, searches, the tidy frame): it owns the SQLite connection, the writer lock and
the study row, and gives them :meth:`~StoreConnection._transaction` and
:meth:`~StoreConnection._sql_errors`. Opening for writing checks everything before the first
write: the file (:func:`~tunelab.store.files.check_store_file`), the schema, the study row; then
it creates what is missing, migrates (:func:`~tunelab.store.schema.migrate`), and marks trials a dead process left ``running`` as
``interrupted``.
"""
from __future__ import annotations

import os
import sqlite3
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Self

from tunelab.errors import StoreError, quoted
from tunelab.store.files import check_store_file, read_only_query
from tunelab.store.locking import (lock_timeout, refuse_full_disk, release_writer_lock, sql_errors, take_writer_lock,
                                   transaction)
from tunelab.store.schema import check_integrity, check_schema, holds_nothing, initialise, migrate, needs_migration
from tunelab.store.values import as_mapping, check_study_name, dumps, git_sha, loads, utc_now
from tunelab.version import __version__


@dataclass(frozen=True)
class StudyInfo:
    """The study row: what design the store belongs to and how to rebuild its target."""

    name: str
    design_hash: str
    design_text: str
    created: str
    tunelab_version: str
    git_sha: str | None
    target_spec: dict[str, Any] | None


class StoreConnection:
    """An open store: its path, SQLite connection, writer lock and study row.

    ``StoreConnection(path)`` opens an existing store; ``readonly=True`` (for export and reports)
    takes no lock, changes nothing, leaves no file beside the store and reads one on a read-only
    file system (:func:`~tunelab.store.files.read_only_query`), otherwise the writer lock is taken and trials left
    ``running`` by a dead process are marked ``interrupted``.
    """

    def __init__(self, path: str | os.PathLike[str], *, readonly: bool = False, create: bool = False,
                 lock_timeout_s: float | None = None) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self.lock_timeout_s = lock_timeout(lock_timeout_s)
        # only a zero-byte file that Store.open is about to make a store may lack the schema
        self._fresh = check_store_file(self.path, empty_ok=create and not readonly)
        self._lock_fd: int | None = None
        self._db: sqlite3.Connection | None = None
        self.study: StudyInfo | None = None
        if not readonly:
            self._lock_fd = take_writer_lock(self.path)
        try:
            self._db = self._connect(readonly)
            with self._sql_errors():
                # read and check the study row BEFORE anything is written (a crafted store stays unchanged)
                self.study = None if self._fresh else self._read_study()
                if self.study is None and not create:
                    raise StoreError(f"{self.path} is a tunelab store without its study row (its run was killed before "
                                     "it recorded anything, or the file was edited): nothing to read. Delete it and "
                                     "run `tunelab run DESIGN` again")
                if not readonly:
                    self._prepare_for_writing()
        except BaseException:
            self.close()
            raise

    def _prepare_for_writing(self) -> None:
        """Schema, migrations and crash checks of a writable open, after the file, the schema, the study
        row and (for a store that holds data) SQLite's ``quick_check`` found nothing wrong."""
        if not self._fresh:
            check_integrity(self._db, self.path)
        initialise(self._db, self.path)
        if needs_migration(self._db):
            with self._transaction() as db:
                migrate(db)
        self._mark_interrupted()
        self.study = self._read_study()

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        study: str,
        design_hash: str,
        design_text: str,
        target_spec: Mapping[str, Any] | None = None,
    ) -> Self:
        """Create the store for ``study`` or reopen it; StoreError if it belongs to another design.

        ``target_spec`` (``{"type": ..., "options": {...}}``) is kept so ``tunelab restore`` can
        rebuild the target; reopening replaces it with the latest one.
        """
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                # create the file under the lock so two first runs cannot race
                path.touch()
        except OSError as exc:
            refuse_full_disk(path, exc)
            raise
        store = cls(path, create=True)
        try:
            with store._transaction() as db:
                store._claim_study(db, study, design_hash, design_text, target_spec)
            store.study = store._read_study()
        except BaseException:
            store.close()
            raise
        return store

    def _claim_study(self, db: sqlite3.Connection, study: str, design_hash: str, design_text: str,
                     target_spec: Mapping[str, Any] | None) -> None:
        """Write the study row of a new store, or check that the store belongs to this design."""
        row = db.execute("SELECT name, design_hash FROM study").fetchone()
        if row is None:
            db.execute(
                "INSERT INTO study (name, design_hash, design_text, created, tunelab_version, git_sha, target_spec)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (study, design_hash, design_text, utc_now(), __version__, git_sha(), dumps(target_spec)),
            )
            return
        if (row[0] != study or row[1] != design_hash) and holds_nothing(db):
            # a design that was refused before its first trial left an empty store: the
            # corrected design takes it over (nothing was recorded, so nothing can mix)
            db.execute("UPDATE study SET name = ?, design_hash = ?, design_text = ?, created = ?",
                       (study, design_hash, design_text, utc_now()))
        elif row[0] != study or row[1] != design_hash:
            raise StoreError(
                f"the store {self.path} belongs to study {row[0]!r} with design hash {row[1][:12]}, but this "
                f"design is study {study!r} with hash {design_hash[:12]}; the design changed since the "
                "trials were recorded, so mixing them would be wrong. Rename the study (its `name:`) "
                f"or delete {self.path} to start over"
            )
        if target_spec is not None:
            db.execute("UPDATE study SET target_spec = ?", (dumps(target_spec),))

    def _connect(self, readonly: bool) -> sqlite3.Connection:
        """Open the database and check it is a tunelab store BEFORE anything is written to it."""
        # a reader leaves no file beside the store and reads it on a read-only mount (read_only_query)
        query = read_only_query(self.path) if readonly else "mode=rw"
        uri = f"{self.path.resolve().as_uri()}?{query}"
        try:
            # check_same_thread=False: a duet's two sides record through one lock (tunelab.duet.SerializedStore)
            db = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=self.lock_timeout_s,
                                 check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the store {self.path} ({exc}); check the path and its permissions") from None
        self._db = db
        with self._sql_errors():
            check_schema(db, self.path, self._fresh)
            db.execute("PRAGMA foreign_keys=ON")
        return db

    def _sql_errors(self) -> AbstractContextManager[None]:
        """A context in which SQLite errors become one StoreError (:func:`tunelab.store.locking.sql_errors`)."""
        return sql_errors(self.path, self.lock_timeout_s)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (:func:`tunelab.store.locking.transaction`); StoreError when read-only."""
        if self.readonly:
            raise StoreError(f"{self.path} was opened read-only; open it with Store(path) to record trials")
        with transaction(self._db, self.path, self.lock_timeout_s) as db:
            yield db

    def close(self) -> None:
        """Close the database and release the writer lock; safe to call twice."""
        db = getattr(self, "_db", None)
        if db is not None:
            db.close()
            self._db = None  # type: ignore[assignment]
        release_writer_lock(getattr(self, "_lock_fd", None))
        self._lock_fd = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _mark_interrupted(self) -> None:
        """Crash check: trials a dead process left ``running`` become ``interrupted`` (never done)."""
        with self._transaction() as db:
            db.execute(
                "UPDATE trials SET status = 'interrupted', ended_at = COALESCE(ended_at, ?),"
                " reason = COALESCE(reason, 'the process running this trial died before recording it')"
                " WHERE status = 'running'",
                (utc_now(),),
            )

    def _read_study(self) -> StudyInfo | None:
        """The study row, every field checked as if it came from a design; ``None`` when there is none."""
        row = self._db.execute(
            "SELECT name, design_hash, design_text, created, tunelab_version, git_sha, target_spec FROM study"
        ).fetchone()
        if row is None:
            return None
        where = f"{self.path}: the study row"
        check_study_name(row[0], f"{where}: the study name")
        for label, value, limit, required in (("design_hash", row[1], 128, True), ("design_text", row[2], 1 << 20, True),
                                              ("created", row[3], 64, True), ("tunelab_version", row[4], 64, True),
                                              ("git_sha", row[5], 64, False)):
            if not (isinstance(value, str) or (value is None and not required)) or len(value or "") > limit:
                raise StoreError(f"{where} holds {label} = {quoted(value)}; expected text of at most {limit} "
                                 "characters. The store is damaged or was edited by hand: use the original file")
        target_spec = loads(row[6], f"{where} target_spec")
        if target_spec is not None:
            target_spec = as_mapping(target_spec, f"{where} target_spec")
        return StudyInfo(*row[:6], target_spec=target_spec)
