"""The store's tables, its schema version, WAL mode and migrations.

A writable open checks the file (:func:`check_schema`) BEFORE anything is written, then creates
what is missing (:func:`initialise`) and migrates older stores (:func:`migrate`: the journal's host
identity, the trials' counters). A read-only open changes nothing, so readers take a missing
optional column as empty (:func:`table_columns`).
``PRAGMA user_version`` is :data:`SCHEMA_VERSION`; a store from a newer tunelab is refused.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

from tunelab.errors import StoreDamagedError, StoreError

#: ``PRAGMA user_version`` of stores this tunelab writes; 0 is an older store, accepted when its tables match.
#: 2 added the stored search state (``searches``, ``search_batches``), optional for reading;
#: 3 added each trial's kernel counters (``trials.counters``, :mod:`tunelab.counters`), optional for reading.
#: The ``load_files`` table (:mod:`tunelab.store.load_files`) came later without a new version: every writable open
#: creates it, an older tunelab ignores it, and a reader takes a store without it as having none
SCHEMA_VERSION = 3
#: tables every tunelab store has, with the columns tunelab reads from them
REQUIRED_COLUMNS = {
    "study": ("name", "design_hash", "design_text", "created", "tunelab_version", "git_sha", "target_spec"),
    "trials": ("trial_id", "run_key", "phase", "config", "plan", "status", "reason", "knobs_read", "metrics", "series",
               "timings", "foreign_cpu_s", "provenance", "started_at", "ended_at"),
    "journal": ("entry_id", "trial_id", "host", "knob_id", "device", "old_text", "new_text", "state", "ts"),
    "runs": ("run_id", "started_at", "pid", "target"),
}
#: columns journal entries gained after the first stores (the host identity), added by :func:`migrate`
IDENTITY_COLUMNS = ("machine_id", "boot_id")
#: columns trials gained after the first stores, added by :func:`migrate`: the measured window's counters (JSON)
TRIAL_COLUMNS_ADDED = ("counters",)

#: the whole schema; every statement is idempotent
SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS study (
    name TEXT PRIMARY KEY,
    design_hash TEXT NOT NULL,
    design_text TEXT NOT NULL,
    created TEXT NOT NULL,
    tunelab_version TEXT NOT NULL,
    git_sha TEXT,
    target_spec TEXT
);
CREATE TABLE IF NOT EXISTS trials (
    trial_id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_key TEXT NOT NULL,
    phase TEXT NOT NULL,
    config TEXT NOT NULL,
    plan TEXT,
    status TEXT NOT NULL CHECK (status IN ('running', 'ok', 'flagged', 'failed', 'interrupted')),
    reason TEXT,
    knobs_read TEXT,
    metrics TEXT,
    series TEXT,
    timings TEXT,
    foreign_cpu_s REAL,
    provenance TEXT,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    counters TEXT
);
CREATE INDEX IF NOT EXISTS trials_by_key ON trials (phase, run_key, status);
CREATE TABLE IF NOT EXISTS journal (
    entry_id INTEGER PRIMARY KEY AUTOINCREMENT,
    trial_id INTEGER REFERENCES trials (trial_id),
    host TEXT NOT NULL,
    knob_id TEXT NOT NULL,
    device TEXT,
    old_text TEXT NOT NULL,
    new_text TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('applied', 'restored')),
    ts TEXT NOT NULL,
    note TEXT,
    machine_id TEXT,
    boot_id TEXT
);
CREATE INDEX IF NOT EXISTS journal_by_state ON journal (state);
CREATE TABLE IF NOT EXISTS searches (
    search_id TEXT PRIMARY KEY,
    settings TEXT NOT NULL,
    state_version INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'done')),
    winner TEXT,
    created TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS search_batches (
    search_id TEXT NOT NULL REFERENCES searches (search_id),
    batch INTEGER NOT NULL,
    stage TEXT NOT NULL CHECK (stage IN ('search', 'race')),
    evaluations INTEGER NOT NULL,
    record TEXT NOT NULL,
    ts TEXT NOT NULL,
    PRIMARY KEY (search_id, batch)
);
CREATE TABLE IF NOT EXISTS load_files (
    dir_id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL,
    path TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('made', 'removed')),
    ts TEXT NOT NULL,
    machine_id TEXT,
    boot_id TEXT,
    note TEXT
);
CREATE TABLE IF NOT EXISTS runs (
    run_id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at TEXT NOT NULL,
    pid INTEGER NOT NULL,
    target TEXT
);
"""


def table_columns(db: sqlite3.Connection, table: str) -> set[str]:
    """The column names of ``table`` (empty when there is no such table)."""
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}


def has_table(db: sqlite3.Connection, name: str) -> bool:
    """True when the database has a table ``name``."""
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def check_schema(db: sqlite3.Connection, path: Path, fresh: bool) -> None:
    """StoreError unless the database has every table and column of :data:`REQUIRED_COLUMNS`
    (a ``fresh`` zero-byte file, about to become a store, has none and passes)."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise StoreError(f"{path} was written by a newer tunelab (store schema {version}, this tunelab reads "
                         f"up to {SCHEMA_VERSION}); upgrade tunelab to read it")
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables and fresh:
        return
    problems = []
    for table, columns in REQUIRED_COLUMNS.items():
        if table not in tables:
            problems.append(f"no {table!r} table")
            continue
        missing = [c for c in columns if c not in table_columns(db, table)]
        if missing:
            problems.append(f"table {table!r} lacks {', '.join(missing)}")
    if problems:
        raise StoreError(f"{path} is an SQLite database but not a tunelab trial store ({'; '.join(problems[:3])}); "
                         "tunelab left it unchanged. Pass the .sqlite file `tunelab run` wrote (data/STUDY.sqlite)")


def check_integrity(db: sqlite3.Connection, path: Path) -> None:
    """StoreError unless SQLite's ``PRAGMA quick_check`` finds the database intact.

    Run on every open for writing, before the first write, so a store damaged in the middle is
    refused unchanged instead of being written to. It reads every page once (a few ms per MiB:
    0.1-0.9 ms on the example stores, 36-58 ms on a 15 MiB one; ``benchmarks/bench_store_check.py``)
    and leaves out the index cross-checks of ``integrity_check``.
    A page SQLite cannot read at all raises :class:`sqlite3.DatabaseError`, which the caller's
    :func:`~tunelab.store.locking.sql_errors` turns into the same kind of line.
    """
    problems = [" ".join(str(row[0]).replace("*** in database main ***", "").split())
                for row in db.execute("PRAGMA quick_check(3)") if row[0] != "ok"]
    if problems:
        raise StoreDamagedError(f"{path} is damaged (SQLite's quick_check: {'; '.join(p[:120] for p in problems)}); tunelab "
                         "wrote nothing to it. Use the original file or a copy of it, or rerun the study into a new "
                         "store (--store)")


def initialise(db: sqlite3.Connection, path: Path) -> None:
    """WAL mode with ``synchronous=FULL``, what is missing of the schema and :data:`SCHEMA_VERSION`
    (writable opens only, after :func:`check_schema` and the study row accepted the file)."""
    mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if mode.lower() != "wal":
        raise StoreError(f"{path}: SQLite refused WAL mode (got {mode!r}); put the store on a local filesystem")
    db.execute("PRAGMA synchronous=FULL")
    db.executescript("BEGIN IMMEDIATE;\n" + SCHEMA_SQL + f"\nPRAGMA user_version = {SCHEMA_VERSION};\nCOMMIT;")


#: table -> the columns :func:`migrate` adds to older stores (as TEXT, NULL in the rows already there)
ADDED_COLUMNS = {"journal": IDENTITY_COLUMNS, "trials": TRIAL_COLUMNS_ADDED}


def has_identity_columns(db: sqlite3.Connection) -> bool:
    """True when journal entries carry the host identity (:data:`IDENTITY_COLUMNS`)."""
    return set(IDENTITY_COLUMNS) <= table_columns(db, "journal")


def needs_migration(db: sqlite3.Connection) -> bool:
    """True when a table lacks a column of :data:`ADDED_COLUMNS` (a store older than this tunelab)."""
    return any(not set(columns) <= table_columns(db, table) for table, columns in ADDED_COLUMNS.items())


def migrate(db: sqlite3.Connection) -> None:
    """Migration: older stores gain the columns of :data:`ADDED_COLUMNS` (NULL: journal entries written
    before they carried a host identity, trials recorded before counters), in one transaction the caller
    opened."""
    for table, columns in ADDED_COLUMNS.items():
        have = table_columns(db, table)
        for column in columns:
            if column not in have:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")


def holds_nothing(db: sqlite3.Connection) -> bool:
    """True when no trial or journal entry was ever recorded in the store."""
    return all(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0 for table in ("trials", "journal"))
