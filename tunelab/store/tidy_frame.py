"""The tidy frame (Contract 6): one row per usable trial, knob levels as read back, one column per metric,
then one per kernel counter that moved (``counter.<Group>.<Name>``, per second; :mod:`tunelab.counters`).

This is the store's one export; :mod:`tunelab.study_data` turns it (or a CSV) into a screen's inputs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from tunelab.counters import counter_column, drop_still_counters
from tunelab.designs.plan import OPTIONAL_PLAN_COLUMNS, PLAN_COLUMNS
from tunelab.errors import StoreError
from tunelab.model import PHASES, TrialStatus, level_from_json
from tunelab.store.connection import StoreConnection
from tunelab.store.rows import check_labels, check_row, decode_column
from tunelab.store.schema import table_columns

#: bookkeeping columns of :meth:`TidyExport.tidy`, in order (Contract 6)
TIDY_COLUMNS = ["study", "trial_id", *PLAN_COLUMNS, "status", "reason", "started_at", "duration_s", "foreign_cpu_s"]
#: the columns of ``trials`` a tidy row is made from, in :func:`tidy_row`'s order (``counters``: NULL in a store
#: older than schema 3 opened read-only)
TIDY_SOURCE_COLUMNS = ("trial_id", "config", "plan", "status", "reason", "knobs_read", "metrics", "foreign_cpu_s",
                       "started_at", "ended_at", "counters")
#: integer columns of the tidy frame (stored as JSON numbers, cast when no row lacks them)
INTEGER_COLUMNS = ("trial_id", "run_id", "config_id", "block", "replicate", "run_order", "round")


@dataclass(frozen=True)
class TidyRow:
    """One usable trial, checked and flattened: bookkeeping, knob columns it names, levels read back, metrics."""

    bookkeeping: dict[str, Any]
    knob_ids: list[str]
    knobs: dict[str, Any]
    metrics: dict[str, float]
    #: counter column -> rate per second of the measured window
    counters: dict[str, float]


def tidy_row(path: Path, study: str, phase: str, row: Sequence[Any]) -> TidyRow:
    """A stored trial row (:data:`TIDY_SOURCE_COLUMNS`) checked (:mod:`tunelab.store.rows`) and flattened.

    Knob columns are the planned ones then those read back; a planned knob not read back is ``None``.
    """
    trial_id, config, plan, status, reason, knobs_read, metrics, foreign, started, ended, counters = row
    check_row(path, trial_id, phase, status, reason, foreign, started, ended)
    config = decode_column(path, trial_id, "config", config) or {}
    plan = decode_column(path, trial_id, "plan", plan) or {}
    knobs_read = decode_column(path, trial_id, "knobs_read", knobs_read) or {}
    metrics = decode_column(path, trial_id, "metrics", metrics) or {}
    counters = decode_column(path, trial_id, "counters", counters) or {}
    start = pd.Timestamp(started)
    bookkeeping = {"study": study, "trial_id": trial_id, **{col: plan.get(col) for col in PLAN_COLUMNS},
                   **{col: plan[col] for col in OPTIONAL_PLAN_COLUMNS if col in plan},
                   "status": status, "reason": reason, "started_at": start,
                   "duration_s": (pd.Timestamp(ended) - start).total_seconds() if ended else None,
                   "foreign_cpu_s": foreign}
    return TidyRow(bookkeeping, list(dict.fromkeys([*config, *knobs_read])),
                   {k: level_from_json(v) for k, v in knobs_read.items()},
                   {k: (math.nan if v is None else float(v)) for k, v in metrics.items()},
                   {counter_column(name): float(delta) / counters["window_s"]
                    for name, delta in (counters.get("deltas") or {}).items()})


def tidy_table(path: Path, rows: Sequence[TidyRow]) -> pd.DataFrame:
    """The tidy frame of ``rows``: bookkeeping (:data:`TIDY_COLUMNS`, then the optional plan columns
    some row has), knob columns, metric columns; typed (integers, bools, floats, UTC times)."""
    knob_cols = list(dict.fromkeys(k for row in rows for k in row.knob_ids))
    metric_cols = list(dict.fromkeys(m for row in rows for m in row.metrics))
    counter_cols = sorted({c for row in rows for c in row.counters})
    clash = set(knob_cols) & (set(metric_cols) | set(TIDY_COLUMNS))
    if clash:
        raise StoreError(f"{path}: knob ids {sorted(clash)[:5]} clash with metric or bookkeeping column names; "
                         "rename them")
    bookkeeping = TIDY_COLUMNS + [col for col in OPTIONAL_PLAN_COLUMNS if any(col in r.bookkeeping for r in rows)]
    frame = pd.DataFrame.from_records(
        [{**{c: r.bookkeeping.get(c) for c in bookkeeping},
          **{k: r.knobs.get(k) for k in knob_cols},
          **{m: r.metrics.get(m, math.nan) for m in metric_cols},
          **{c: r.counters.get(c, math.nan) for c in counter_cols}} for r in rows],
        columns=bookkeeping + knob_cols + metric_cols + counter_cols,
    )
    for col in INTEGER_COLUMNS:
        if col in frame.columns and frame[col].notna().all():
            frame[col] = frame[col].astype("int64")
    if frame["is_baseline"].notna().all():
        frame["is_baseline"] = frame["is_baseline"].astype(bool)
    for col in ("duration_s", "foreign_cpu_s", *metric_cols, *counter_cols):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
    frame["started_at"] = pd.to_datetime(frame["started_at"], utc=True)
    return frame


class TidyExport(StoreConnection):
    """The tidy frame of a store's trials."""

    def tidy(self, phase: str = "screen", include_flagged: bool = False, include_failed: bool = False) -> pd.DataFrame:
        """One row per usable trial of ``phase`` (Contract 6).

        Columns: ``study, trial_id, run_id, config_id, block, replicate, run_order, is_baseline,
        varied_knob, status, reason, started_at, duration_s, foreign_cpu_s``, then one column per
        knob id holding the value **as read back** (triplets as tuples), then one per metric, then
        one per kernel counter that moved in some row (``counter.<Group>.<Name>``, per second;
        :func:`tunelab.counters.drop_still_counters`; NaN where a trial recorded no counters).
        Only ``ok`` trials are included, plus ``flagged`` ones when ``include_flagged`` and
        ``failed`` ones (metrics NaN, ``reason`` says why) when ``include_failed``; statistics use
        failed rows only to explain why a level could not be tested.

        Examples
        --------
        >>> import tempfile, pathlib
        >>> from tunelab.store import Store
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.sqlite"
        >>> with Store.open(path, study="t", design_hash="h", design_text="") as s:
        ...     tid = s.begin_trial("screen:0", "screen", {"k": 1}, plan={"run_id": 0})
        ...     s.finish_trial(tid, "ok", None, {"k": 1}, {"qps": 5.0})
        ...     s.tidy()[["run_id", "k", "qps"]].to_dict("records")
        [{'run_id': 0, 'k': 1, 'qps': 5.0}]
        """
        if phase not in PHASES:
            raise StoreError(f"unknown phase {phase!r}; use one of {', '.join(PHASES)}")
        statuses = ((TrialStatus.OK,) + ((TrialStatus.FLAGGED,) if include_flagged else ())
                    + ((TrialStatus.FAILED,) if include_failed else ()))
        with self._sql_errors():
            check_labels(self._db, self.path)
            have = table_columns(self._db, "trials")
            columns = ", ".join(c if c in have else f"NULL AS {c}" for c in TIDY_SOURCE_COLUMNS)
            rows = self._db.execute(
                f"SELECT {columns} FROM trials WHERE phase = ?"
                f" AND status IN ({','.join('?' * len(statuses))}) ORDER BY trial_id",
                (phase, *statuses),
            ).fetchall()
        study = self.study.name if self.study else self.path.stem
        return drop_still_counters(tidy_table(self.path, [tidy_row(self.path, study, phase, row) for row in rows]))
