"""The trial store: one SQLite file per study, crash-safe, with a journal of applied changes.

``data/<study>.sqlite`` holds three tables:

``study``
    one row: name, design hash and text, creation time, tunelab version, git SHA and the target
    spec (so ``tunelab restore`` can rebuild the target after a crash).
``trials``
    one row per attempted trial: planned config, status (``running`` while live, then ``ok``,
    ``flagged``, ``failed`` or ``interrupted``), knobs as read back, metrics, per-second series,
    phase timings, foreign CPU seconds and provenance.
``journal``
    one row per knob change, written (and fsynced) *before* the change is made, marked
    ``restored`` once the old value was written back and verified.

The database runs in WAL mode with ``synchronous=FULL``, so a journal entry survives a crash
of the process or the machine. A trial is recorded atomically by :meth:`Store.finish_trial`; a
trial still ``running`` when its process died is marked ``interrupted`` the next time the store
is opened for writing, and never counts as done. Only one process may hold a store for writing
(an advisory ``flock`` on ``<store>.lock``).

Examples
--------
>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "demo.sqlite"
>>> with Store.open(path, study="demo", design_hash="h1", design_text="name: demo") as store:
...     tid = store.begin_trial("screen:0", "screen", {"net.core.somaxconn": 128})
...     store.finish_trial(tid, "ok", None, {"net.core.somaxconn": 128}, {"qps": 1000.0})
...     sorted(store.completed_run_keys("screen"))
['screen:0']
"""
from __future__ import annotations

import datetime as _dt
import fcntl
import functools
import json
import math
import os
import sqlite3
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import pandas as pd

from tunelab.errors import StoreError

#: statuses a trial can end with; ``running`` is only ever transient
FINAL_STATUSES = ("ok", "flagged", "failed", "interrupted")
#: statuses that count as done for resume (``interrupted`` trials are re-run)
DONE_STATUSES = ("ok", "flagged", "failed")
#: phases a trial belongs to
PHASES = ("screen", "refine", "confirm", "validate")

#: bookkeeping columns of :meth:`Store.tidy`, in order (Contract 6)
TIDY_COLUMNS = [
    "study", "trial_id", "run_id", "config_id", "block", "replicate", "run_order", "is_baseline",
    "varied_knob", "status", "reason", "started_at", "duration_s", "foreign_cpu_s",
]
_PLAN_COLUMNS = ["run_id", "config_id", "block", "replicate", "run_order", "is_baseline", "varied_knob"]

_SCHEMA = """
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
    ended_at TEXT
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
    note TEXT
);
CREATE INDEX IF NOT EXISTS journal_by_state ON journal (state);
CREATE TABLE IF NOT EXISTS runs (
    run_id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at TEXT NOT NULL,
    pid INTEGER NOT NULL,
    target TEXT
);
"""


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

    @property
    def knob_name(self) -> str:
        """The catalogue name inside the knob id (``link.mtu[veth0]@client`` -> ``link.mtu``)."""
        return parse_knob_id(self.knob_id)[0]


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


def knob_id(name: str, host: str = "server", device: str | None = None) -> str:
    """The plan column name of a knob (Contract 1).

    >>> knob_id("net.core.somaxconn")
    'net.core.somaxconn'
    >>> knob_id("link.mtu", "client", "veth0")
    'link.mtu[veth0]@client'
    """
    text = name if device is None else f"{name}[{device}]"
    return text if host == "server" else f"{text}@{host}"


def parse_knob_id(text: str) -> tuple[str, str, str | None]:
    """Split a knob id into ``(name, host, device)``; inverse of :func:`knob_id`.

    >>> parse_knob_id("link.mtu[veth0]@client")
    ('link.mtu', 'client', 'veth0')
    >>> parse_knob_id("net.core.somaxconn")
    ('net.core.somaxconn', 'server', None)
    """
    host = "server"
    base = text
    if "@" in text and not text.endswith("]"):
        head, _, tail = text.rpartition("@")
        if head and "]" not in tail:
            base, host = head, tail
    device = None
    if base.endswith("]") and "[" in base:
        base, _, rest = base.partition("[")
        device = rest[:-1]
    if not base:
        raise StoreError(f"knob id {text!r} has no knob name; expected e.g. 'net.core.somaxconn' or 'link.mtu[veth0]@client'")
    return base, host, device


def utc_now() -> str:
    """The current time as an ISO 8601 UTC string with microseconds."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


@functools.lru_cache(maxsize=1)
def git_sha() -> str | None:
    """The commit of the tunelab checkout, or ``None`` when not in a git work tree."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _to_jsonable(value: Any) -> Any:
    """Convert numpy scalars, tuples and DataFrames to plain JSON types."""
    if isinstance(value, pd.DataFrame):
        return {str(col): [_to_jsonable(v) for v in value[col].tolist()] for col in value.columns}
    if isinstance(value, Mapping):
        return {str(k): _to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _dumps(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(_to_jsonable(value), allow_nan=False)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _as_level(value: Any) -> Any:
    """JSON turns tuples (triplet knobs) into lists; turn them back so levels stay hashable."""
    return tuple(value) if isinstance(value, list) else value


class Store:
    """A study's SQLite store; see the module docstring. Use :meth:`open` to create or check one.

    ``Store(path)`` opens an existing store; ``readonly=True`` (for export and reports) takes no
    lock and changes nothing, otherwise the writer lock is taken and trials left ``running`` by
    a dead process are marked ``interrupted``.
    """

    def __init__(self, path: str | os.PathLike[str], *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        if not self.path.exists():
            raise StoreError(f"no trial store at {self.path}; run `tunelab run DESIGN` first or pass the right --store")
        self._lock_fd: int | None = None
        if not readonly:
            self._take_lock()
        try:
            self._db = self._connect(readonly)
            if not readonly:
                self._db.executescript(_SCHEMA)
                self._mark_interrupted()
            self.study = self._read_study()
        except BaseException:
            self._release_lock()
            raise

    # ---- opening -------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        study: str,
        design_hash: str,
        design_text: str,
        target_spec: Mapping[str, Any] | None = None,
    ) -> "Store":
        """Create the store for ``study`` or reopen it; StoreError if it belongs to another design.

        ``target_spec`` (``{"type": ..., "options": {...}}``) is kept so ``tunelab restore`` can
        rebuild the target; reopening replaces it with the latest one.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            # create the file under the lock so two first runs cannot race
            path.touch()
        store = cls(path)
        try:
            with store._transaction() as db:
                row = db.execute("SELECT name, design_hash FROM study").fetchone()
                if row is None:
                    db.execute(
                        "INSERT INTO study (name, design_hash, design_text, created, tunelab_version, git_sha, target_spec)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (study, design_hash, design_text, utc_now(), _tunelab_version(), git_sha(), _dumps(target_spec)),
                    )
                else:
                    if row[0] != study or row[1] != design_hash:
                        raise StoreError(
                            f"the store {path} belongs to study {row[0]!r} with design hash {row[1][:12]}, but this "
                            f"design is study {study!r} with hash {design_hash[:12]}; the design changed since the "
                            "trials were recorded, so mixing them would be wrong. Rename the study (its `name:`) "
                            f"or delete {path} to start over"
                        )
                    if target_spec is not None:
                        db.execute("UPDATE study SET target_spec = ?", (_dumps(target_spec),))
            store.study = store._read_study()
        except BaseException:
            store.close()
            raise
        return store

    def _connect(self, readonly: bool) -> sqlite3.Connection:
        try:
            if readonly:
                db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, isolation_level=None, timeout=10)
            else:
                db = sqlite3.connect(self.path, isolation_level=None, timeout=10)
                mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if mode.lower() != "wal":
                    raise StoreError(f"{self.path}: SQLite refused WAL mode (got {mode!r}); put the store on a local filesystem")
                db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA foreign_keys=ON")
            return db
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path} is not a readable tunelab store ({exc}); move it away or pass another --store") from None

    def _take_lock(self) -> None:
        lock_path = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StoreError(
                f"the store {self.path} is in use by another tunelab process (pid {holder}); wait for it to finish "
                "or stop it, then retry"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def close(self) -> None:
        """Close the database and release the writer lock; safe to call twice."""
        db = getattr(self, "_db", None)
        if db is not None:
            db.close()
            self._db = None  # type: ignore[assignment]
        self._release_lock()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        if self.readonly:
            raise StoreError(f"{self.path} was opened read-only; open it with Store(path) to record trials")
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _mark_interrupted(self) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE trials SET status = 'interrupted', ended_at = COALESCE(ended_at, ?),"
                " reason = COALESCE(reason, 'the process running this trial died before recording it')"
                " WHERE status = 'running'",
                (utc_now(),),
            )

    def _read_study(self) -> StudyInfo | None:
        try:
            row = self._db.execute(
                "SELECT name, design_hash, design_text, created, tunelab_version, git_sha, target_spec FROM study"
            ).fetchone()
        except sqlite3.OperationalError:
            return None
        if row is None:
            return None
        return StudyInfo(*row[:6], target_spec=_loads(row[6]))

    # ---- trials --------------------------------------------------------------------------------

    def begin_trial(self, run_key: str, phase: str, config: Mapping[str, Any],
                    plan: Mapping[str, Any] | None = None) -> int:
        """Record that a trial starts (status ``running``) and return its ``trial_id``.

        ``config`` maps knob id -> planned level; ``plan`` optionally carries the plan row's
        bookkeeping (``run_id``, ``config_id``, ``block``, ...) that :meth:`tidy` reports.
        """
        if phase not in PHASES:
            raise StoreError(f"unknown phase {phase!r}; use one of {', '.join(PHASES)}")
        with self._transaction() as db:
            cur = db.execute(
                "INSERT INTO trials (run_key, phase, config, plan, status, started_at) VALUES (?, ?, ?, ?, 'running', ?)",
                (run_key, phase, _dumps(dict(config)), _dumps(plan), utc_now()),
            )
            return int(cur.lastrowid)

    def finish_trial(
        self,
        trial_id: int,
        status: str,
        reason: str | None,
        knobs_read: Mapping[str, Any] | None,
        metrics: Mapping[str, float] | None,
        series: pd.DataFrame | Mapping[str, Any] | None = None,
        timings: Mapping[str, float] | None = None,
        foreign_cpu_s: float | None = None,
        provenance: Mapping[str, Any] | None = None,
    ) -> None:
        """Record a trial's outcome in one transaction (all of it or nothing)."""
        if status not in FINAL_STATUSES:
            raise StoreError(f"trial {trial_id}: status {status!r} is not one of {', '.join(FINAL_STATUSES)}")
        if status != "ok" and not reason:
            raise StoreError(f"trial {trial_id}: a {status!r} trial needs a reason saying why")
        with self._transaction() as db:
            cur = db.execute(
                "UPDATE trials SET status = ?, reason = ?, knobs_read = ?, metrics = ?, series = ?, timings = ?,"
                " foreign_cpu_s = ?, provenance = ?, ended_at = ? WHERE trial_id = ? AND status = 'running'",
                (status, reason, _dumps(knobs_read), _dumps(metrics), _dumps(series), _dumps(timings),
                 foreign_cpu_s, _dumps(provenance), utc_now(), trial_id),
            )
            if cur.rowcount != 1:
                raise StoreError(f"trial {trial_id} is not running in {self.path}; it was finished already or never begun")

    def add_timings(self, trial_id: int, timings: Mapping[str, float]) -> None:
        """Merge durations measured after the trial was recorded (restore) into its timings."""
        with self._transaction() as db:
            row = db.execute("SELECT timings FROM trials WHERE trial_id = ?", (trial_id,)).fetchone()
            if row is None:
                raise StoreError(f"no trial {trial_id} in {self.path}")
            merged = dict(_loads(row[0]) or {})
            merged.update(timings)
            db.execute("UPDATE trials SET timings = ? WHERE trial_id = ?", (_dumps(merged), trial_id))

    def completed_run_keys(self, phase: str) -> set[str]:
        """Run keys of ``phase`` that have a recorded outcome (ok, flagged or failed): skip them on resume."""
        rows = self._db.execute(
            f"SELECT DISTINCT run_key FROM trials WHERE phase = ? AND status IN ({','.join('?' * len(DONE_STATUSES))})",
            (phase, *DONE_STATUSES),
        )
        return {r[0] for r in rows}

    def trials(self, phase: str | None = None) -> pd.DataFrame:
        """Every trial row as stored (JSON columns decoded), in trial order."""
        query = "SELECT * FROM trials" + (" WHERE phase = ?" if phase else "") + " ORDER BY trial_id"
        cur = self._db.execute(query, (phase,) if phase else ())
        names = [d[0] for d in cur.description]
        frame = pd.DataFrame(cur.fetchall(), columns=names, dtype=object)
        for col in ("config", "plan", "knobs_read", "metrics", "series", "timings", "provenance"):
            frame[col] = [_loads(v) for v in frame[col]]
        return frame

    def series(self, trial_id: int) -> pd.DataFrame:
        """The per-second series of one trial (column ``t_s`` plus metric columns)."""
        row = self._db.execute("SELECT series FROM trials WHERE trial_id = ?", (trial_id,)).fetchone()
        if row is None:
            raise StoreError(f"no trial {trial_id} in {self.path}")
        return pd.DataFrame(_loads(row[0]) or {})

    def begin_run(self, target_description: Mapping[str, Any]) -> int:
        """Record that a process starts running trials on a target (``target.describe()``)."""
        with self._transaction() as db:
            cur = db.execute("INSERT INTO runs (started_at, pid, target) VALUES (?, ?, ?)",
                             (utc_now(), os.getpid(), _dumps(target_description)))
            return int(cur.lastrowid)

    def run_targets(self) -> list[dict[str, Any]]:
        """The target descriptions of every run so far, oldest first (restore uses them to find labs)."""
        return [_loads(row[0]) or {} for row in self._db.execute("SELECT target FROM runs ORDER BY run_id")]

    # ---- journal -------------------------------------------------------------------------------

    def journal_apply(self, trial_id: int | None, host: str, knob_id: str, device: str | None,
                      old_text: str, new_text: str) -> int:
        """Journal a change BEFORE it is written (durable on return); returns the entry id."""
        with self._transaction() as db:
            cur = db.execute(
                "INSERT INTO journal (trial_id, host, knob_id, device, old_text, new_text, state, ts)"
                " VALUES (?, ?, ?, ?, ?, ?, 'applied', ?)",
                (trial_id, host, knob_id, device, old_text, new_text, utc_now()),
            )
            return int(cur.lastrowid)

    def journal_apply_many(self, trial_id: int | None,
                           changes: Sequence[tuple[str, str, str | None, str, str]]) -> list[int]:
        """Journal several changes ``(host, knob_id, device, old_text, new_text)`` in ONE durable
        transaction, before any of them is written; returns their entry ids in order.

        Journalling an intent that a crash then leaves unwritten is harmless: restoring writes the
        old value, which the knob still holds.
        """
        with self._transaction() as db:
            ids = []
            for host, knob_id, device, old_text, new_text in changes:
                cur = db.execute(
                    "INSERT INTO journal (trial_id, host, knob_id, device, old_text, new_text, state, ts)"
                    " VALUES (?, ?, ?, ?, ?, ?, 'applied', ?)",
                    (trial_id, host, knob_id, device, old_text, new_text, utc_now()),
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
        rows = self._db.execute(
            "SELECT entry_id, trial_id, host, knob_id, device, old_text, new_text, state, ts FROM journal"
            " WHERE state = 'applied' ORDER BY entry_id DESC"
        )
        return [JournalEntry(*row) for row in rows]

    def journal(self) -> pd.DataFrame:
        """The whole journal as a DataFrame, in entry order."""
        cur = self._db.execute("SELECT * FROM journal ORDER BY entry_id")
        return pd.DataFrame(cur.fetchall(), columns=[d[0] for d in cur.description])

    # ---- tidy export ---------------------------------------------------------------------------

    def tidy(self, phase: str = "screen", include_flagged: bool = False, include_failed: bool = False) -> pd.DataFrame:
        """One row per usable trial of ``phase`` (Contract 6).

        Columns: ``study, trial_id, run_id, config_id, block, replicate, run_order, is_baseline,
        varied_knob, status, reason, started_at, duration_s, foreign_cpu_s``, then one column per
        knob id holding the value **as read back** (triplets as tuples), then one per metric.
        Only ``ok`` trials are included, plus ``flagged`` ones when ``include_flagged`` and
        ``failed`` ones (metrics NaN, ``reason`` says why) when ``include_failed``; statistics use
        failed rows only to explain why a level could not be tested.

        Examples
        --------
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.sqlite"
        >>> with Store.open(path, study="t", design_hash="h", design_text="") as s:
        ...     tid = s.begin_trial("screen:0", "screen", {"k": 1}, plan={"run_id": 0})
        ...     s.finish_trial(tid, "ok", None, {"k": 1}, {"qps": 5.0})
        ...     s.tidy()[["run_id", "k", "qps"]].to_dict("records")
        [{'run_id': 0, 'k': 1, 'qps': 5.0}]
        """
        statuses = ("ok",) + (("flagged",) if include_flagged else ()) + (("failed",) if include_failed else ())
        rows = self._db.execute(
            "SELECT trial_id, config, plan, status, reason, knobs_read, metrics, foreign_cpu_s, started_at, ended_at"
            f" FROM trials WHERE phase = ? AND status IN ({','.join('?' * len(statuses))}) ORDER BY trial_id",
            (phase, *statuses),
        ).fetchall()
        study = self.study.name if self.study else self.path.stem
        knob_cols: dict[str, None] = {}
        metric_cols: dict[str, None] = {}
        records = []
        for trial_id, config, plan, status, reason, knobs_read, metrics, foreign, started, ended in rows:
            config, plan = _loads(config) or {}, _loads(plan) or {}
            knobs_read, metrics = _loads(knobs_read) or {}, _loads(metrics) or {}
            knob_cols.update(dict.fromkeys(config))
            knob_cols.update(dict.fromkeys(knobs_read))
            metric_cols.update(dict.fromkeys(metrics))
            start = pd.Timestamp(started)
            record = {"study": study, "trial_id": trial_id}
            record.update({col: plan.get(col) for col in _PLAN_COLUMNS})
            record.update({
                "status": status, "reason": reason, "started_at": start,
                "duration_s": (pd.Timestamp(ended) - start).total_seconds() if ended else None,
                "foreign_cpu_s": foreign,
            })
            record.update({f"knob:{k}": _as_level(v) for k, v in knobs_read.items()})
            record.update({f"metric:{k}": (math.nan if v is None else float(v)) for k, v in metrics.items()})
            records.append(record)
        clash = set(knob_cols) & (set(metric_cols) | set(TIDY_COLUMNS))
        if clash:
            raise StoreError(f"knob ids {sorted(clash)} clash with metric or bookkeeping column names; rename them")
        columns = TIDY_COLUMNS + list(knob_cols) + list(metric_cols)
        frame = pd.DataFrame.from_records(
            [{**{c: r.get(c) for c in TIDY_COLUMNS},
              **{k: r.get(f"knob:{k}") for k in knob_cols},
              **{m: r.get(f"metric:{m}", math.nan) for m in metric_cols}} for r in records],
            columns=columns,
        )
        for col in ("trial_id", "run_id", "config_id", "block", "replicate", "run_order"):
            if frame[col].notna().all():
                frame[col] = frame[col].astype("int64")
        if frame["is_baseline"].notna().all():
            frame["is_baseline"] = frame["is_baseline"].astype(bool)
        for col in ("duration_s", "foreign_cpu_s", *metric_cols):
            frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
        frame["started_at"] = pd.to_datetime(frame["started_at"], utc=True)
        return frame


def _tunelab_version() -> str:
    from tunelab import __version__

    return __version__


def default_store_path(study: str, data_dir: str | os.PathLike[str] = "data") -> Path:
    """``data/<study>.sqlite`` (relative to the working directory unless ``data_dir`` is absolute)."""
    return Path(data_dir) / f"{study}.sqlite"


def store_path_for(study: str | os.PathLike[str], data_dir: str | os.PathLike[str] = "data") -> Path:
    """What a user means by STUDY: an existing path or any ``*.sqlite`` path as is, else
    ``data_dir/<study>.sqlite`` (:func:`default_store_path`)."""
    candidate = Path(study)
    if candidate.suffix == ".sqlite" or candidate.exists():
        return candidate
    return default_store_path(str(study), data_dir)
