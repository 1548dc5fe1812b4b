"""The trial store: one SQLite file per study, crash-safe, with a journal of applied changes.

``data/<study>.sqlite`` holds three tables:

``study``
    one row: name, design hash and text, creation time, tunelab version, git SHA and the target
    spec (so ``tunelab restore`` can rebuild the target after a crash).
``trials``
    one row per attempted trial: planned config, status (``running`` while live, then ``ok``,
    ``flagged``, ``failed`` or ``interrupted``: cut short, or set aside to be repeated because other
    processes were busy), knobs as read back, metrics, per-second series,
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
import re
import sqlite3
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import pandas as pd
import psutil

from tunelab.designs.plan import OPTIONAL_PLAN_COLUMNS, PLAN_COLUMNS
from tunelab.designs.schema import MAX_NAME_LENGTH, NAME_PATTERN
from tunelab.errors import StoreError, quoted
from tunelab.model import (DONE_STATUSES, FINAL_STATUSES, HOSTS, PHASES, KnobId, ParseError, TrialStatus,
                           level_from_json, level_to_json)
from tunelab.version import __version__

#: bookkeeping columns of :meth:`Store.tidy`, in order (Contract 6)
TIDY_COLUMNS = ["study", "trial_id", *PLAN_COLUMNS, "status", "reason", "started_at", "duration_s", "foreign_cpu_s"]

#: ``PRAGMA user_version`` of stores this tunelab writes; 0 is an older store, accepted when its tables match.
#: 2 added the stored search state (``searches``, ``search_batches``), optional for reading
SCHEMA_VERSION = 2
#: version of the JSON a search writes in ``searches.settings`` / ``search_batches.record`` (see
#: :meth:`Store.add_search_batch`); a store with a newer one is refused with a clear line
SEARCH_STATE_VERSION = 1
#: columns of :meth:`Store.searches` and :meth:`Store.search_batches`
SEARCH_COLUMNS = ["search_id", "settings", "state_version", "status", "winner", "created"]
SEARCH_BATCH_COLUMNS = ["search_id", "batch", "stage", "evaluations", "record"]
#: most batches one search may store (a bound on what a shared store can make a report read)
MAX_SEARCH_BATCHES = 100_000
#: the first 16 bytes of every SQLite 3 database file
SQLITE_MAGIC = b"SQLite format 3\x00"
#: tables every tunelab store has, with the columns tunelab reads from them
REQUIRED_COLUMNS = {
    "study": ("name", "design_hash", "design_text", "created", "tunelab_version", "git_sha", "target_spec"),
    "trials": ("trial_id", "run_key", "phase", "config", "plan", "status", "reason", "knobs_read", "metrics", "series",
               "timings", "foreign_cpu_s", "provenance", "started_at", "ended_at"),
    "journal": ("entry_id", "trial_id", "host", "knob_id", "device", "old_text", "new_text", "state", "ts"),
    "runs": ("run_id", "started_at", "pid", "target"),
}
#: seconds to wait for another process's SQLite lock before giving up (``TUNELAB_LOCK_TIMEOUT_S`` overrides)
LOCK_TIMEOUT_S = 10.0
LOCK_TIMEOUT_ENV = "TUNELAB_LOCK_TIMEOUT_S"
#: knob names: catalogue-style dotted lowercase names (``net.core.somaxconn``, ``block.queue.scheduler``)
KNOB_NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*")
KNOB_NAME_MAX = 128
#: devices of block and link knobs (``loop0``, ``veth0``, ``@link``); never ``/`` and never only dots
DEVICE_PATTERN = re.compile(r"[a-z0-9@][a-z0-9@._-]*")
DEVICE_MAX = 64
#: metric names (the load metric schema: ``qps``, ``latency_mean_ms``, ...)
METRIC_NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]*")
METRIC_NAME_MAX = 64
#: longest text level a knob may have (enum choices are short words)
LEVEL_TEXT_MAX = 256

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
    #: ``/etc/machine-id`` and ``/proc/sys/kernel/random/boot_id`` of the host the change was made
    #: on (``None`` when that host could not tell, e.g. the simulator, or an older store)
    machine_id: str | None = None
    boot_id: str | None = None

    @property
    def knob_name(self) -> str:
        """The catalogue name inside the knob id (``link.mtu[veth0]@client`` -> ``link.mtu``)."""
        return KnobId.parse(self.knob_id).name


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


def check_study_name(name: Any, where: str = "study name") -> str:
    """Return ``name`` if it is a valid study name, else raise :class:`StoreError`.

    A study name is what a design's ``name:`` may be (:data:`tunelab.designs.schema.NAME_PATTERN`):
    1 to :data:`~tunelab.designs.schema.MAX_NAME_LENGTH` characters of ``[a-z0-9_-]``, starting with
    a letter or digit. It becomes the file name ``data/<name>.sqlite`` and the report directory, so
    it can never hold ``/``, ``..`` or start with ``-``.

    >>> check_study_name("dns-overload_2")
    'dns-overload_2'
    """
    if not isinstance(name, str) or len(name) > MAX_NAME_LENGTH or not NAME_PATTERN.fullmatch(name):
        raise StoreError(f"{where} {quoted(name)} is not a valid study name: use 1 to {MAX_NAME_LENGTH} characters "
                         "a-z, 0-9, '_' or '-', starting with a letter or digit")
    return name


def check_knob_id(text: Any, where: str = "knob id") -> str:
    """Return ``text`` if it is a well-formed knob id (Contract 1), else raise :class:`StoreError`.

    The text is read by :meth:`tunelab.model.KnobId.parse`; the name must be a catalogue-style dotted
    lowercase name (:data:`KNOB_NAME_PATTERN`, at most :data:`KNOB_NAME_MAX` characters), the host
    one of :data:`tunelab.model.HOSTS`, the device :data:`DEVICE_PATTERN` (at most
    :data:`DEVICE_MAX` characters).

    >>> check_knob_id("link.mtu[@link]@client")
    'link.mtu[@link]@client'
    """
    if not isinstance(text, str) or len(text) > KNOB_NAME_MAX + DEVICE_MAX + 10:
        raise StoreError(f"{where} {quoted(text)} is not a knob id; expected e.g. 'net.core.somaxconn'")
    try:
        knob = KnobId.parse(text)
    except ParseError as exc:
        raise StoreError(f"{where}: {exc}") from None
    name, host, device = knob.name, knob.host, knob.device
    problem = None
    if len(name) > KNOB_NAME_MAX or not KNOB_NAME_PATTERN.fullmatch(name):
        problem = f"its name {quoted(name)} is not a dotted lowercase knob name like net.core.somaxconn"
    elif host not in HOSTS:
        problem = f"its host {quoted(host)} is not one of {', '.join(HOSTS)}"
    elif device is not None and (len(device) > DEVICE_MAX or not DEVICE_PATTERN.fullmatch(device)):
        problem = f"its device {quoted(device)} is not 1 to {DEVICE_MAX} characters a-z, 0-9, '@', '.', '_', '-'"
    if problem:
        raise StoreError(f"{where} {quoted(text)} is not a valid knob id: {problem}")
    return text


def check_metric_name(name: Any, where: str = "metric name") -> str:
    """Return ``name`` if it is a valid metric name (:data:`METRIC_NAME_PATTERN`), else raise :class:`StoreError`."""
    if not isinstance(name, str) or len(name) > METRIC_NAME_MAX or not METRIC_NAME_PATTERN.fullmatch(name):
        raise StoreError(f"{where} {quoted(name)} is not a valid metric name: use 1 to {METRIC_NAME_MAX} characters "
                         "a-z, 0-9 or '_', starting with a letter (e.g. latency_mean_ms)")
    return name


def _check_number(value: Any, where: str) -> float | None:
    """``None`` or a finite int/float (not bool); StoreError otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise StoreError(f"{where} holds {quoted(value)} where a finite number is expected")
    return value


def _check_level(value: Any, where: str) -> Any:
    """A knob level as stored: a number, a bool, a short text or a list of numbers (triplets)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        if len(value) > LEVEL_TEXT_MAX or not value.isprintable():
            raise StoreError(f"{where} holds the level {quoted(value)}: text levels are at most {LEVEL_TEXT_MAX} "
                             "printable characters")
        return value
    if isinstance(value, list):
        if len(value) > 16:
            raise StoreError(f"{where} holds a list of {len(value)} values; a level has at most 16")
        for item in value:
            _check_number(item, where)
        return value
    return _check_number(value, where)


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


def _dumps(value: Any) -> str | None:
    """The JSON text of a column value (:func:`tunelab.model.level_to_json`; a DataFrame as column -> list)."""
    if value is None:
        return None
    if isinstance(value, pd.DataFrame):
        value = {str(column): value[column].tolist() for column in value.columns}
    return json.dumps(level_to_json(value), allow_nan=False)


def _json_safe(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by ``None`` (JSON has no NaN).

    >>> _json_safe({"a": [1.0, float("nan")], "b": (2, 3)})
    {'a': [1.0, None], 'b': (2, 3)}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_json_safe(v) for v in value)
    return value


def _loads(text: str | None, where: str = "a JSON column") -> Any:
    """Decode a stored JSON column; StoreError naming ``where`` when it is not JSON text."""
    if text is None:
        return None
    try:
        if not isinstance(text, str):
            raise TypeError(f"a {type(text).__name__}, not text")
        return json.loads(text)
    except (ValueError, TypeError, RecursionError) as exc:
        raise StoreError(f"{where} does not hold valid JSON ({str(exc)[:100]}); the store is damaged or was edited "
                         "by hand: use the original file (or rerun the study)") from None


def _mapping(value: Any, where: str) -> dict[str, Any]:
    """``value`` (decoded JSON) as a dict, ``{}`` for None; StoreError when it is not an object."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise StoreError(f"{where} holds {quoted(value)} where a JSON object is expected; the store is damaged or "
                         "was edited by hand: use the original file (or rerun the study)")
    return value


#: types of the plan bookkeeping a trial may carry (Contract 2)
_PLAN_TYPES = {"run_id": int, "config_id": int, "block": int, "replicate": int, "run_order": int, "is_baseline": bool,
               "profile": str, "testbed": str}


def _check_plan(plan: dict[str, Any], where: str) -> dict[str, Any]:
    for key, kind in _PLAN_TYPES.items():
        value = plan.get(key)
        if value is not None and (type(value) is not kind or (kind is int and abs(value) > 2**53)):
            raise StoreError(f"{where} holds {key} = {quoted(value)}; expected a {kind.__name__}")
    if isinstance(plan.get("testbed"), str) and not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,23}", plan["testbed"]):
        raise StoreError(f"{where} holds testbed = {quoted(plan['testbed'])}; expected a testbed name "
                         "(1-24 characters of a-z, 0-9 and '-')")
    if plan.get("varied_knob") is not None:
        check_knob_id(plan["varied_knob"], f"{where} varied_knob")
    return plan


def _entries_check(check_key: Callable[[Any, str], Any], what: str,
                   check_value: Callable[[Any, str], Any]) -> Callable[[dict[str, Any], str], dict[str, Any]]:
    """A check of a decoded JSON object: every key passes ``check_key`` (errors call it ``what``),
    every value ``check_value``; the object is returned unchanged."""
    def check(entries: dict[str, Any], where: str) -> dict[str, Any]:
        for key, value in entries.items():
            check_key(key, f"{where}: {what}")
            check_value(value, f"{where} {key}")
        return entries
    return check


#: knob id -> level (``config``, ``knobs_read``)
_check_levels = _entries_check(check_knob_id, "knob id", _check_level)
#: metric name -> number (``metrics``)
_check_metrics = _entries_check(check_metric_name, "metric name", _check_number)


def _check_timestamp(text: Any, where: str) -> pd.Timestamp | None:
    if text is None:
        return None
    try:
        if not isinstance(text, str) or len(text) > 64:
            raise ValueError("not a short text")
        return pd.Timestamp(text)
    except (ValueError, TypeError, OverflowError):
        raise StoreError(f"{where} holds {quoted(text)} where an ISO 8601 time is expected; the store is damaged "
                         "or was edited by hand") from None


def lock_timeout(seconds: float | None = None) -> float:
    """Seconds to wait for another process's SQLite lock: ``seconds``, else ``$TUNELAB_LOCK_TIMEOUT_S``,
    else :data:`LOCK_TIMEOUT_S`; StoreError unless it is a number from 0 to 3600."""
    text = os.environ.get(LOCK_TIMEOUT_ENV) if seconds is None else seconds
    if text is None or text == "":
        return LOCK_TIMEOUT_S
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = math.nan
    if not 0 <= value <= 3600:
        raise StoreError(f"lock timeout {text!r} (argument or ${LOCK_TIMEOUT_ENV}) must be a number of seconds "
                         "from 0 to 3600")
    return value


def check_store_file(path: Path, empty_ok: bool = False) -> bool:
    """Check that ``path`` can be a tunelab store before SQLite touches it; True when it is a zero-byte file.

    A store is a regular file that starts with the SQLite header. A zero-byte file is accepted only
    when ``empty_ok`` (:meth:`Store.open` creating the study's store); anything else is refused
    with a StoreError naming the path, and is never modified.
    """
    try:
        info = path.stat()
    except FileNotFoundError:
        raise StoreError(f"no trial store at {path}; run `tunelab run DESIGN` first or pass the right store "
                         "path") from None
    except OSError as exc:
        raise StoreError(f"cannot use the store path {path} ({exc.strerror}); check the path") from None
    if not os.path.isfile(path):
        kind = "a directory" if path.is_dir() else "not a regular file"
        raise StoreError(f"{path} is {kind}, not a trial store; pass a .sqlite file written by `tunelab run`")
    if info.st_size == 0:
        if empty_ok:
            return True
        raise StoreError(f"{path} is empty (0 bytes), not a tunelab store: a run killed before it recorded anything, "
                         "or a truncated copy. Delete it and run `tunelab run DESIGN` again, or get the original file")
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise StoreError(f"cannot read the store {path} ({exc.strerror}); check its permissions") from None
    if head != SQLITE_MAGIC or info.st_size < 512:
        raise StoreError(f"{path} is not a tunelab store: it is not an SQLite database (it starts with {head[:8]!r}, "
                         f"{info.st_size} bytes); tunelab left it unchanged. Check the path, or get the original file")
    return False


def _is_locked(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def lock_holders(path: Path, include_self: bool = False) -> list[str]:
    """Other processes that hold the store open or its writer lock: ``'pid N (command line)'``.

    Looks at the pid recorded in ``<store>.lock`` and, with psutil, at every process with the store
    (or its ``-wal``/``-shm``) open; the caller's own process only with ``include_self`` (when another
    ``Store`` of this process holds the writer lock).
    """
    me = os.getpid()
    pids: list[int] = []
    try:
        text = path.with_name(path.name + ".lock").read_text(errors="replace").strip()
        if text.isdigit() and ((include_self and int(text) == me) or (int(text) != me and psutil.pid_exists(int(text)))):
            pids.append(int(text))
    except OSError:
        pass
    names = {str(Path(f"{path}{suffix}").resolve()) for suffix in ("", "-wal", "-shm")}
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == me or proc.pid in pids:
            continue
        try:
            if any(f.path in names for f in proc.open_files()):
                pids.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    out = []
    for pid in pids:
        try:
            command = "this process" if pid == me else " ".join(psutil.Process(pid).cmdline())
        except (psutil.Error, OSError):
            command = "?"
        out.append(f"pid {pid} ({command[:200]})")
    return out


def locked_message(path: Path, waited_s: float) -> str:
    """The StoreError text for a store another process kept locked for ``waited_s`` seconds."""
    holders = lock_holders(path)
    who = "; ".join(holders) if holders else "the holder could not be identified"
    return (f"the store {path} is locked by another process ({who}); waited {waited_s:g} s. Wait for it to "
            f"finish or stop it, then retry (${LOCK_TIMEOUT_ENV} sets how long to wait)")


class Store:
    """A study's SQLite store; see the module docstring. Use :meth:`open` to create or check one.

    ``Store(path)`` opens an existing store; ``readonly=True`` (for export and reports) takes no
    lock and changes nothing, otherwise the writer lock is taken and trials left ``running`` by
    a dead process are marked ``interrupted``.
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
            self._take_lock()
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
                    self._initialise()
                    self._add_identity_columns()
                    self._mark_interrupted()
                    self.study = self._read_study()
        except BaseException:
            self.close()
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
        store = cls(path, create=True)
        try:
            with store._transaction() as db:
                row = db.execute("SELECT name, design_hash FROM study").fetchone()
                if row is None:
                    db.execute(
                        "INSERT INTO study (name, design_hash, design_text, created, tunelab_version, git_sha, target_spec)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (study, design_hash, design_text, utc_now(), __version__, git_sha(), _dumps(target_spec)),
                    )
                elif (row[0] != study or row[1] != design_hash) and _holds_nothing(db):
                    # a design that was refused before its first trial left an empty store: the
                    # corrected design takes it over (nothing was recorded, so nothing can mix)
                    db.execute("UPDATE study SET name = ?, design_hash = ?, design_text = ?, created = ?",
                               (study, design_hash, design_text, utc_now()))
                    if target_spec is not None:
                        db.execute("UPDATE study SET target_spec = ?", (_dumps(target_spec),))
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
        """Open the database and check it is a tunelab store BEFORE anything is written to it."""
        uri = f"{self.path.resolve().as_uri()}?mode={'ro' if readonly else 'rw'}"
        try:
            db = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=self.lock_timeout_s)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the store {self.path} ({exc}); check the path and its permissions") from None
        self._db = db
        with self._sql_errors():
            self._check_schema(db)
            db.execute("PRAGMA foreign_keys=ON")
        return db

    def _check_schema(self, db: sqlite3.Connection) -> None:
        """StoreError unless the database has every table and column of :data:`REQUIRED_COLUMNS`
        (a fresh zero-byte file, about to become a store, has none and passes)."""
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(f"{self.path} was written by a newer tunelab (store schema {version}, this tunelab reads "
                             f"up to {SCHEMA_VERSION}); upgrade tunelab to read it")
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables and self._fresh:
            return
        problems = []
        for table, columns in REQUIRED_COLUMNS.items():
            if table not in tables:
                problems.append(f"no {table!r} table")
                continue
            have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
            missing = [c for c in columns if c not in have]
            if missing:
                problems.append(f"table {table!r} lacks {', '.join(missing)}")
        if problems:
            raise StoreError(f"{self.path} is an SQLite database but not a tunelab trial store ({'; '.join(problems[:3])}); "
                             "tunelab left it unchanged. Pass the .sqlite file `tunelab run` wrote (data/STUDY.sqlite)")

    def _initialise(self) -> None:
        """Create what is missing of the schema and stamp :data:`SCHEMA_VERSION` (writable opens only,
        after :meth:`_check_schema` and :meth:`_read_study` accepted the file)."""
        mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode.lower() != "wal":
            raise StoreError(f"{self.path}: SQLite refused WAL mode (got {mode!r}); put the store on a local filesystem")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript("BEGIN IMMEDIATE;\n" + _SCHEMA + f"\nPRAGMA user_version = {SCHEMA_VERSION};\nCOMMIT;")

    @contextmanager
    def _sql_errors(self) -> Iterator[None]:
        """Turn SQLite errors into one StoreError: a lock held too long names its holder, any other
        database error says the file is damaged."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            if _is_locked(exc):
                raise StoreError(locked_message(self.path, self.lock_timeout_s)) from None
            raise StoreError(f"{self.path} cannot be read as a tunelab store ({exc}); it is damaged or not a "
                             "store: use the original file (or rerun the study)") from None
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path} is damaged or not a tunelab store ({exc}); use the original file "
                             "(or rerun the study)") from None

    def _take_lock(self) -> None:
        lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot open the lock file {lock_path} ({exc.strerror}); the store's directory must be "
                             "writable to record trials or restore knobs") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holders = lock_holders(self.path, include_self=True)
            os.close(fd)
            raise StoreError(
                f"the store {self.path} is in use by another tunelab process "
                f"({'; '.join(holders) or 'holder unknown'}); "
                "wait for it to finish or stop it, then retry"
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
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if _is_locked(exc):
                raise StoreError(locked_message(self.path, self.lock_timeout_s)) from None
            raise
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
        """The study row, every field checked as if it came from a design; ``None`` when there is none."""
        row = self._db.execute(
            "SELECT name, design_hash, design_text, created, tunelab_version, git_sha, target_spec FROM study"
        ).fetchone()
        if row is None:
            return None
        where = f"{self.path}: the study row"
        name = check_study_name(row[0], f"{where}: the study name")
        for label, value, limit, required in (("design_hash", row[1], 128, True), ("design_text", row[2], 1 << 20, True),
                                              ("created", row[3], 64, True), ("tunelab_version", row[4], 64, True),
                                              ("git_sha", row[5], 64, False)):
            if not (isinstance(value, str) or (value is None and not required)) or len(value or "") > limit:
                raise StoreError(f"{where} holds {label} = {quoted(value)}; expected text of at most {limit} "
                                 "characters. The store is damaged or was edited by hand: use the original file")
        target_spec = _loads(row[6], f"{where} target_spec")
        if target_spec is not None:
            target_spec = _mapping(target_spec, f"{where} target_spec")
        return StudyInfo(name, *row[1:6], target_spec=target_spec)

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
        if status != TrialStatus.OK and not reason:
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

    def set_aside_trial(self, trial_id: int, reason: str, provenance: Mapping[str, Any], *,
                        include_failed: bool = False) -> None:
        """Keep a recorded ``ok``/``flagged`` trial but take it out of its run: status ``interrupted``
        (never used by the statistics, and its run key counts as not done, so the run is measured
        again, also after a crash), ``reason`` saying why, ``provenance`` merged into its own.

        The runner sets aside a trial during which other processes were busy
        (``noise.repeat_busy_pct``; reason ``repeated: ...``, provenance ``{"repeated": true, ...}``).
        With ``include_failed`` a failed trial may be set aside too (a testbed's failure, measured
        again on another testbed: :mod:`tunelab.cluster`).
        """
        with self._transaction() as db:
            row = db.execute("SELECT provenance, status FROM trials WHERE trial_id = ?", (trial_id,)).fetchone()
            allowed = (TrialStatus.OK, TrialStatus.FLAGGED) + ((TrialStatus.FAILED,) if include_failed else ())
            if row is None or row[1] not in allowed:
                raise StoreError(f"trial {trial_id} in {self.path} is not an ok or flagged trial; only a measurement "
                                 "can be set aside to be repeated")
            merged = {**_mapping(_loads(row[0]), f"{self.path}: trial {trial_id} provenance"), **provenance}
            db.execute("UPDATE trials SET status = ?, reason = ?, provenance = ? WHERE trial_id = ?",
                       (TrialStatus.INTERRUPTED.value, reason, _dumps(merged), trial_id))

    #: the columns of a trial record (:meth:`trial_record`, :meth:`add_trial_record`), JSON ones as text
    RECORD_COLUMNS = ("run_key", "phase", "config", "plan", "status", "reason", "knobs_read", "metrics", "series",
                      "timings", "foreign_cpu_s", "provenance", "started_at", "ended_at")

    def trial_records(self, after_trial_id: int = 0) -> list[dict[str, Any]]:
        """The finished trials with ``trial_id > after_trial_id`` as plain records (JSON columns as
        their stored text), in trial order: what a Dask worker sends back to the study's store
        (:meth:`add_trial_record`). Trials still ``running`` are left out."""
        with self._sql_errors():
            rows = self._db.execute(
                f"SELECT trial_id, {', '.join(self.RECORD_COLUMNS)} FROM trials WHERE trial_id > ? "
                "AND status != 'running' ORDER BY trial_id", (int(after_trial_id),)).fetchall()
        return [dict(zip(("trial_id", *self.RECORD_COLUMNS), row)) for row in rows]

    def last_trial_id(self) -> int:
        """The highest trial id recorded so far (0 for an empty store)."""
        with self._sql_errors():
            return int(self._db.execute("SELECT COALESCE(MAX(trial_id), 0) FROM trials").fetchone()[0])

    def add_trial_record(self, record: Mapping[str, Any], plan: Mapping[str, Any] | None = None) -> int:
        """Insert a finished trial recorded elsewhere (a testbed's own store, :meth:`trial_records`);
        returns its new ``trial_id``. ``plan`` entries (e.g. ``{"testbed": "lab2"}``) are merged into
        the record's plan bookkeeping. Every column is checked as :meth:`trials` checks a stored row,
        so a damaged record raises StoreError and nothing is inserted."""
        values = {name: record.get(name) for name in self.RECORD_COLUMNS}
        if values["status"] not in FINAL_STATUSES:
            raise StoreError(f"a trial record for {quoted(values['run_key'])} has status {quoted(values['status'])}; "
                             f"only finished trials ({', '.join(FINAL_STATUSES)}) can be added")
        if not isinstance(values["run_key"], str) or not values["run_key"]:
            raise StoreError(f"a trial record has run key {quoted(values['run_key'])}; expected text")
        self._check_row(0, values["phase"], values["status"], values["reason"], values["foreign_cpu_s"],
                        values["started_at"], values["ended_at"])
        if values["status"] != TrialStatus.OK and not values["reason"]:
            raise StoreError(f"the {values['status']} trial record {values['run_key']} gives no reason")
        decoded = {col: self._decoded(values["run_key"], col, values[col])
                   for col in ("config", "plan", "knobs_read", "metrics", "series", "timings", "provenance")}
        if plan:
            values["plan"] = _dumps({**(decoded["plan"] or {}), **dict(plan)})
            _check_plan(_loads(values["plan"]), f"trial record {values['run_key']} plan")
        with self._transaction() as db:
            cur = db.execute(f"INSERT INTO trials ({', '.join(self.RECORD_COLUMNS)}) VALUES "
                             f"({', '.join('?' * len(self.RECORD_COLUMNS))})",
                             tuple(values[name] for name in self.RECORD_COLUMNS))
            return int(cur.lastrowid)

    def forget_trials(self, keep_last: int) -> int:
        """Delete all but the newest ``keep_last`` finished trials whose journal entries are all
        restored (a testbed's own store keeps only what crash recovery needs); returns how many went."""
        with self._transaction() as db:
            cut = db.execute("SELECT trial_id FROM trials ORDER BY trial_id DESC LIMIT 1 OFFSET ?",
                             (max(0, int(keep_last)),)).fetchone()
            if cut is None:
                return 0
            keep = "SELECT trial_id FROM journal WHERE state = 'applied' AND trial_id IS NOT NULL"
            db.execute(f"DELETE FROM journal WHERE trial_id <= ? AND state = 'restored' AND trial_id NOT IN ({keep})",
                       (cut[0],))
            cur = db.execute(f"DELETE FROM trials WHERE trial_id <= ? AND status != 'running' "
                             f"AND trial_id NOT IN ({keep})", (cut[0],))
            return int(cur.rowcount)

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
        with self._sql_errors():
            return self._run_keys(phase)

    def _run_keys(self, phase: str) -> set[str]:
        rows = self._db.execute(
            f"SELECT DISTINCT run_key FROM trials WHERE phase = ? AND status IN ({','.join('?' * len(DONE_STATUSES))})",
            (phase, *DONE_STATUSES),
        )
        return {r[0] for r in rows}

    def trials(self, phase: str | None = None) -> pd.DataFrame:
        """Every trial row as stored (JSON columns decoded and checked), in trial order."""
        query = "SELECT * FROM trials" + (" WHERE phase = ?" if phase else "") + " ORDER BY trial_id"
        with self._sql_errors():
            cur = self._db.execute(query, (phase,) if phase else ())
            names = [d[0] for d in cur.description]
            frame = pd.DataFrame(cur.fetchall(), columns=names, dtype=object)
        for row in frame.itertuples(index=False):
            self._check_row(row.trial_id, row.phase, row.status, row.reason, row.foreign_cpu_s, row.started_at,
                            row.ended_at)
        for col in ("config", "plan", "knobs_read", "metrics", "series", "timings", "provenance"):
            frame[col] = [self._decoded(tid, col, v) for tid, v in zip(frame["trial_id"], frame[col])]
        return frame

    #: what each JSON column of ``trials`` must hold once decoded
    _COLUMN_CHECKS = {"config": _check_levels, "knobs_read": _check_levels, "plan": _check_plan,
                      "metrics": _check_metrics}

    def _decoded(self, trial_id: Any, column: str, text: Any) -> Any:
        """A trial's JSON column decoded and checked (knob ids, metric names, numbers, plan types)."""
        where = f"{self.path}: trial {trial_id} column {column}"
        value = _loads(text, where)
        if value is None:
            return None
        if column == "series":
            return self._check_series(_mapping(value, where), where)
        checked = _mapping(value, where)
        check = self._COLUMN_CHECKS.get(column)
        return check(checked, where) if check else checked

    @staticmethod
    def _check_series(series: dict[str, Any], where: str) -> dict[str, Any]:
        for name, values in series.items():
            check_metric_name(name, f"{where}: series column")
            if not isinstance(values, list):
                raise StoreError(f"{where} {name} holds {quoted(values)} where a list of numbers is expected")
            for value in values:
                _check_number(value, f"{where} {name}")
        return series

    def _check_labels(self) -> None:
        """StoreError naming the first trial whose phase or status is not one tunelab writes."""
        statuses = (TrialStatus.RUNNING, *FINAL_STATUSES)
        with self._sql_errors():
            row = self._db.execute(
                f"SELECT trial_id, phase, status FROM trials WHERE phase NOT IN ({','.join('?' * len(PHASES))})"
                f" OR status NOT IN ({','.join('?' * len(statuses))}) OR phase IS NULL OR status IS NULL LIMIT 1",
                (*PHASES, *statuses)).fetchone()
        if row is not None:
            self._check_row(row[0], row[1], row[2], None, None, None, None)

    def _check_row(self, trial_id: Any, phase: Any, status: Any, reason: Any, foreign: Any, started: Any,
                   ended: Any) -> None:
        """The plain columns of a trial row: id, phase, status, reason text, numbers and times."""
        where = f"{self.path}: trial {quoted(trial_id)}"
        if isinstance(trial_id, bool) or not isinstance(trial_id, int):
            raise StoreError(f"{where} has a trial_id that is not an integer; the store is damaged or was edited")
        if phase not in PHASES:
            raise StoreError(f"{where} has phase {quoted(phase)}; expected one of {', '.join(PHASES)}")
        if status not in (TrialStatus.RUNNING, *FINAL_STATUSES):
            raise StoreError(f"{where} has status {quoted(status)}; expected one of running, {', '.join(FINAL_STATUSES)}")
        if reason is not None and not isinstance(reason, str):
            raise StoreError(f"{where} has a reason that is not text: {quoted(reason)}")
        _check_number(foreign, f"{where} foreign_cpu_s")
        _check_timestamp(started, f"{where} started_at")
        _check_timestamp(ended, f"{where} ended_at")

    def series(self, trial_id: int) -> pd.DataFrame:
        """The per-second series of one trial (column ``t_s`` plus metric columns)."""
        with self._sql_errors():
            row = self._db.execute("SELECT series FROM trials WHERE trial_id = ?", (trial_id,)).fetchone()
        if row is None:
            raise StoreError(f"no trial {trial_id} in {self.path}")
        series = self._decoded(trial_id, "series", row[0]) or {}
        if len({len(v) for v in series.values()}) > 1:
            raise StoreError(f"{self.path}: trial {trial_id} column series has columns of different lengths")
        return pd.DataFrame(series)

    def begin_run(self, target_description: Mapping[str, Any]) -> int:
        """Record that a process starts running trials on a target (``target.describe()``)."""
        with self._transaction() as db:
            cur = db.execute("INSERT INTO runs (started_at, pid, target) VALUES (?, ?, ?)",
                             (utc_now(), os.getpid(), _dumps(target_description)))
            return int(cur.lastrowid)

    def run_targets(self) -> list[dict[str, Any]]:
        """The target descriptions of every run so far, oldest first (restore uses them to find labs)."""
        with self._sql_errors():
            rows = self._db.execute("SELECT run_id, target FROM runs ORDER BY run_id").fetchall()
        return [_mapping(_loads(target, f"{self.path}: run {run_id} target"), f"{self.path}: run {run_id} target")
                for run_id, target in rows]

    # ---- journal -------------------------------------------------------------------------------

    def journal_apply(self, trial_id: int | None, host: str, knob_id: str, device: str | None,
                      old_text: str, new_text: str, identity: "HostIdentity | None" = None) -> int:
        """Journal a change BEFORE it is written (durable on return); returns the entry id."""
        return self.journal_apply_many(trial_id, [(host, knob_id, device, old_text, new_text)],
                                       identities={host: identity} if identity else None)[0]

    def journal_apply_many(self, trial_id: int | None,
                           changes: Sequence[tuple[str, str, str | None, str, str]],
                           identities: Mapping[str, "HostIdentity"] | None = None) -> list[int]:
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

    def _has_identity_columns(self) -> bool:
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(journal)")}
        return {"machine_id", "boot_id"} <= columns

    def _add_identity_columns(self) -> None:
        """Stores written before journal entries carried a host identity gain the two columns (NULL)."""
        have = {row[1] for row in self._db.execute("PRAGMA table_info(journal)")}
        missing = [column for column in ("machine_id", "boot_id") if column not in have]
        if missing:
            with self._transaction() as db:
                for column in missing:
                    db.execute(f"ALTER TABLE journal ADD COLUMN {column} TEXT")

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
        identity = "machine_id, boot_id" if self._has_identity_columns() else "NULL, NULL"
        rows = self._db.execute(
            f"SELECT entry_id, trial_id, host, knob_id, device, old_text, new_text, state, ts, {identity}"
            " FROM journal WHERE state = 'applied' ORDER BY entry_id DESC"
        )
        return [JournalEntry(*row) for row in rows]

    # ---- stored search state (refinement) ------------------------------------------------------

    def begin_search(self, search_id: str, settings: Mapping[str, Any]) -> None:
        """Record that search ``search_id`` starts with ``settings``, or check that a stored one has the same.

        Raises
        ------
        StoreError
            When the store holds a search of that id with other settings (resuming it with other
            settings would mix two searches).
        """
        settings = _json_safe(dict(settings))
        with self._transaction() as db:
            row = db.execute("SELECT settings FROM searches WHERE search_id = ?", (search_id,)).fetchone()
            if row is None:
                db.execute("INSERT INTO searches (search_id, settings, state_version, status, created)"
                           " VALUES (?, ?, ?, 'running', ?)",
                           (search_id, _dumps(settings), SEARCH_STATE_VERSION, utc_now()))
                return
        stored = _mapping(_loads(row[0], f"{self.path}: search {search_id} settings"), f"{self.path}: search settings")
        wanted = json.loads(_dumps(settings))          # as JSON reads it back: tuples become lists
        if stored != wanted:
            changed = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k))
            raise StoreError(f"{self.path} holds search {search_id!r} with other settings ({', '.join(changed)} "
                             "differ); rerun with the original settings to resume it, or pass a new --store")

    def add_search_batch(self, search_id: str, batch: int, record: Mapping[str, Any]) -> None:
        """Store one batch of search ``search_id`` (its ``stage`` and ``evaluations`` are read from
        ``record``); a batch stored twice is an error (the driver resumes after the last one)."""
        record = _json_safe(dict(record))
        with self._transaction() as db:
            db.execute("INSERT INTO search_batches (search_id, batch, stage, evaluations, record, ts)"
                       " VALUES (?, ?, ?, ?, ?, ?)",
                       (search_id, int(batch), record["stage"], int(record["evaluations"]), _dumps(record), utc_now()))

    def finish_search(self, search_id: str, winner: Mapping[str, Any]) -> None:
        """Mark search ``search_id`` done with its ``winner`` record."""
        with self._transaction() as db:
            db.execute("UPDATE searches SET status = 'done', winner = ? WHERE search_id = ?",
                       (_dumps(_json_safe(dict(winner))), search_id))

    def _has_table(self, name: str) -> bool:
        return self._db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() \
            is not None

    def searches(self) -> pd.DataFrame:
        """Every stored search: ``search_id, settings (dict), state_version, status, winner (dict or None),
        created``; empty for a store written before searches were stored."""
        with self._sql_errors():
            if not self._has_table("searches"):
                return pd.DataFrame(columns=SEARCH_COLUMNS)
            rows = self._db.execute(f"SELECT {', '.join(SEARCH_COLUMNS)} FROM searches ORDER BY created, search_id"
                                    ).fetchall()
        out = []
        for search_id, settings, version, status, winner, created in rows:
            where = f"{self.path}: search {quoted(search_id)}"
            if not isinstance(search_id, str) or not isinstance(version, int) or status not in ("running", "done"):
                raise StoreError(f"{where} has a malformed row (id, state_version or status); the store is damaged "
                                 "or was edited by hand: use the original file")
            if version > SEARCH_STATE_VERSION:
                raise StoreError(f"{where} was stored by a newer tunelab (search state {version}, this tunelab reads "
                                 f"up to {SEARCH_STATE_VERSION}); upgrade tunelab to read it")
            out.append({"search_id": search_id, "settings": _mapping(_loads(settings, f"{where} settings"), where),
                        "state_version": version, "status": status,
                        "winner": None if winner is None else _mapping(_loads(winner, f"{where} winner"), where),
                        "created": created})
        return pd.DataFrame(out, columns=SEARCH_COLUMNS)

    def search_batches(self, search_id: str | None = None) -> pd.DataFrame:
        """The stored batches of one search (or of all), in order: ``search_id, batch, stage,
        evaluations, record (dict)``; empty for a store written before searches were stored."""
        with self._sql_errors():
            if not self._has_table("search_batches"):
                return pd.DataFrame(columns=SEARCH_BATCH_COLUMNS)
            query = "SELECT search_id, batch, stage, evaluations, record FROM search_batches"
            query += (" WHERE search_id = ?" if search_id is not None else "") + " ORDER BY search_id, batch"
            rows = self._db.execute(query + f" LIMIT {MAX_SEARCH_BATCHES + 1}",
                                    (search_id,) if search_id is not None else ()).fetchall()
        if len(rows) > MAX_SEARCH_BATCHES:
            raise StoreError(f"{self.path} holds more than {MAX_SEARCH_BATCHES} search batches; the store is damaged "
                             "or was edited by hand: use the original file")
        out = []
        for sid, batch, stage, evaluations, record in rows:
            where = f"{self.path}: search {quoted(sid)} batch {quoted(batch)}"
            if not isinstance(batch, int) or not isinstance(evaluations, int) or stage not in ("search", "race"):
                raise StoreError(f"{where} has a malformed row (batch, stage or evaluations); the store is damaged "
                                 "or was edited by hand: use the original file")
            out.append({"search_id": sid, "batch": batch, "stage": stage, "evaluations": evaluations,
                        "record": _mapping(_loads(record, f"{where} record"), where)})
        return pd.DataFrame(out, columns=SEARCH_BATCH_COLUMNS)

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
        if phase not in PHASES:
            raise StoreError(f"unknown phase {phase!r}; use one of {', '.join(PHASES)}")
        self._check_labels()
        statuses = ((TrialStatus.OK,) + ((TrialStatus.FLAGGED,) if include_flagged else ())
                    + ((TrialStatus.FAILED,) if include_failed else ()))
        with self._sql_errors():
            rows = self._db.execute(
                "SELECT trial_id, config, plan, status, reason, knobs_read, metrics, foreign_cpu_s, started_at, ended_at"
                f" FROM trials WHERE phase = ? AND status IN ({','.join('?' * len(statuses))}) ORDER BY trial_id",
                (phase, *statuses),
            ).fetchall()
        study = self.study.name if self.study else self.path.stem
        knob_cols: dict[str, None] = {}
        metric_cols: dict[str, None] = {}
        optional: dict[str, None] = {}       # optional plan columns some trial has (round, ...)
        records = []
        for trial_id, config, plan, status, reason, knobs_read, metrics, foreign, started, ended in rows:
            self._check_row(trial_id, phase, status, reason, foreign, started, ended)
            config = self._decoded(trial_id, "config", config) or {}
            plan = self._decoded(trial_id, "plan", plan) or {}
            knobs_read = self._decoded(trial_id, "knobs_read", knobs_read) or {}
            metrics = self._decoded(trial_id, "metrics", metrics) or {}
            knob_cols.update(dict.fromkeys(config))
            knob_cols.update(dict.fromkeys(knobs_read))
            metric_cols.update(dict.fromkeys(metrics))
            start = pd.Timestamp(started)
            record = {"study": study, "trial_id": trial_id}
            record.update({col: plan.get(col) for col in PLAN_COLUMNS})
            optional.update(dict.fromkeys(col for col in OPTIONAL_PLAN_COLUMNS if col in plan))
            record.update({col: plan[col] for col in OPTIONAL_PLAN_COLUMNS if col in plan})
            record.update({
                "status": status, "reason": reason, "started_at": start,
                "duration_s": (pd.Timestamp(ended) - start).total_seconds() if ended else None,
                "foreign_cpu_s": foreign,
            })
            record.update({f"knob:{k}": level_from_json(v) for k, v in knobs_read.items()})
            record.update({f"metric:{k}": (math.nan if v is None else float(v)) for k, v in metrics.items()})
            records.append(record)
        clash = set(knob_cols) & (set(metric_cols) | set(TIDY_COLUMNS))
        if clash:
            raise StoreError(f"{self.path}: knob ids {sorted(clash)[:5]} clash with metric or bookkeeping column names; "
                             "rename them")
        bookkeeping = TIDY_COLUMNS + [col for col in OPTIONAL_PLAN_COLUMNS if col in optional]
        columns = bookkeeping + list(knob_cols) + list(metric_cols)
        frame = pd.DataFrame.from_records(
            [{**{c: r.get(c) for c in bookkeeping},
              **{k: r.get(f"knob:{k}") for k in knob_cols},
              **{m: r.get(f"metric:{m}", math.nan) for m in metric_cols}} for r in records],
            columns=columns,
        )
        for col in ("trial_id", "run_id", "config_id", "block", "replicate", "run_order", "round"):
            if col in frame.columns and frame[col].notna().all():
                frame[col] = frame[col].astype("int64")
        if frame["is_baseline"].notna().all():
            frame["is_baseline"] = frame["is_baseline"].astype(bool)
        for col in ("duration_s", "foreign_cpu_s", *metric_cols):
            frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
        frame["started_at"] = pd.to_datetime(frame["started_at"], utc=True)
        return frame


def _holds_nothing(db: sqlite3.Connection) -> bool:
    """True when no trial, run or journal entry was ever recorded in the store."""
    return all(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0 for table in ("trials", "journal"))


def default_store_path(study: str, data_dir: str | os.PathLike[str] = "data") -> Path:
    """``data/<study>.sqlite`` (relative to the working directory unless ``data_dir`` is absolute);
    StoreError unless ``study`` is a valid study name (:func:`check_study_name`), so the path never
    leaves ``data_dir``."""
    return Path(data_dir) / f"{check_study_name(study, 'study')}.sqlite"


def store_path_for(study: str | os.PathLike[str], data_dir: str | os.PathLike[str] = "data") -> Path:
    """What a user means by STUDY: an existing path or any ``*.sqlite`` path as is, else
    ``data_dir/<study>.sqlite`` (:func:`default_store_path`)."""
    text = os.fspath(study)
    candidate = Path(text)
    if candidate.suffix == ".sqlite" or os.sep in text:
        return candidate
    try:
        if candidate.exists():
            return candidate
    except OSError:   # e.g. a name too long for the filesystem: then it must be a valid study name
        pass
    return default_store_path(text, data_dir)
