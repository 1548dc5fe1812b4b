"""The trial store: one SQLite file per study, crash-safe, with a journal of applied changes.

``data/<study>.sqlite`` holds these tables (:mod:`tunelab.store.schema`):

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
``load_files``
    one row per private directory a load made on its host (dnsperf's copy of the query file), written
    *before* anything is copied there, marked ``removed`` at the end of the run or by ``tunelab restore``.
``runs``, ``searches``, ``search_batches``
    one row per process that ran trials; a refinement's stored search state.

The database runs in WAL mode with ``synchronous=FULL``, so a journal entry survives a crash
of the process or the machine. A trial is recorded atomically by :meth:`Store.finish_trial`; a
trial still ``running`` when its process died is marked ``interrupted`` the next time the store
is opened for writing, and never counts as done. Only one process may hold a store for writing
(an advisory ``flock`` on ``<store>.lock``).

:class:`Store` is one facade over the store's concerns, one module each (as Optuna's storages
keep schema, migrations, locking and the storage apart):

=====================  ======================================================================
``files``              where a store lives; what its file must be before SQLite touches it; how readers open it
``schema``             tables, schema version, WAL, migrations, the integrity check
``locking``            writer lock, lock timeout, transactions, SQLite errors, full disk
``connection``         opening: checks before any write, the study row, crash checks
``values``, ``rows``   what a store may hold (names, levels, JSON), a trial row checked
``trials``             trials and runs
``journal_entries``    the journal of knob changes
``load_files``         the load's private directories on its host
``searches``           a refinement's stored search state
``tidy_frame``         the tidy frame (Contract 6)
=====================  ======================================================================

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

from tunelab.store.connection import StoreConnection, StudyInfo
from tunelab.store.files import SQLITE_MAGIC, check_store_file, default_store_path, store_path_for
from tunelab.store.journal_entries import HostIdentity, JournalEntry, JournalRecords
from tunelab.store.load_files import LoadFileRecords, PrivateDir
from tunelab.store.locking import LOCK_TIMEOUT_ENV, LOCK_TIMEOUT_S, lock_holders, lock_timeout, locked_message
from tunelab.store.schema import REQUIRED_COLUMNS, SCHEMA_VERSION
from tunelab.store.searches import (MAX_SEARCH_BATCHES, SEARCH_BATCH_COLUMNS, SEARCH_COLUMNS, SEARCH_STATE_VERSION,
                                    SearchRecords, continued_budgets)
from tunelab.store.tidy_frame import TIDY_COLUMNS, TidyExport
from tunelab.store.trials import TrialRecords
from tunelab.store.values import (DEVICE_MAX, DEVICE_PATTERN, KNOB_NAME_MAX, KNOB_NAME_PATTERN, LEVEL_TEXT_MAX,
                                  METRIC_NAME_MAX, METRIC_NAME_PATTERN, check_knob_id, check_metric_name,
                                  check_study_name, git_sha, utc_now)

__all__ = [
    "DEVICE_MAX", "DEVICE_PATTERN", "KNOB_NAME_MAX", "KNOB_NAME_PATTERN", "LEVEL_TEXT_MAX", "LOCK_TIMEOUT_ENV",
    "LOCK_TIMEOUT_S", "MAX_SEARCH_BATCHES", "METRIC_NAME_MAX", "METRIC_NAME_PATTERN", "REQUIRED_COLUMNS",
    "SCHEMA_VERSION", "SEARCH_BATCH_COLUMNS", "SEARCH_COLUMNS", "SEARCH_STATE_VERSION", "SQLITE_MAGIC",
    "TIDY_COLUMNS", "HostIdentity", "JournalEntry", "PrivateDir", "Store", "StoreConnection", "StudyInfo", "check_knob_id",
    "check_metric_name", "check_store_file", "check_study_name", "continued_budgets", "default_store_path", "git_sha", "lock_holders",
    "lock_timeout", "locked_message", "store_path_for", "utc_now",
]


class Store(TrialRecords, JournalRecords, LoadFileRecords, SearchRecords, TidyExport):
    """A study's SQLite store; see the module docstring. Use :meth:`open` to create or check one.

    ``Store(path)`` opens an existing store; ``readonly=True`` (for export and reports) takes no
    lock, changes nothing and leaves no file beside the store (also on a read-only mount), otherwise the writer lock is taken and trials left ``running`` by
    a dead process are marked ``interrupted``.
    """
