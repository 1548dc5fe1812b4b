"""Trials in the store: begun, finished, set aside, copied between stores, read back; and the runs.

A trial is ``running`` from :meth:`TrialRecords.begin_trial` until :meth:`TrialRecords.finish_trial`
records its outcome in one transaction; every row read back is checked
(:mod:`tunelab.store.rows`).
"""
from __future__ import annotations

import os
from typing import Any, Mapping

import pandas as pd

from tunelab.errors import StoreError, quoted
from tunelab.model import DONE_STATUSES, FINAL_STATUSES, PHASES, TrialStatus
from tunelab.store.connection import StoreConnection
from tunelab.store.rows import check_counters, check_plan, check_row, decode_column
from tunelab.store.values import as_mapping, dumps, loads, utc_now

#: the JSON columns of a trial row (``counters`` since schema 3: absent from an older store opened read-only)
JSON_COLUMNS = ("config", "plan", "knobs_read", "metrics", "series", "timings", "provenance", "counters")


class TrialRecords(StoreConnection):
    """The ``trials`` and ``runs`` tables of a store."""

    #: the columns of a trial record (:meth:`trial_records`, :meth:`add_trial_record`), JSON ones as text
    RECORD_COLUMNS = ("run_key", "phase", "config", "plan", "status", "reason", "knobs_read", "metrics", "series",
                      "timings", "foreign_cpu_s", "provenance", "started_at", "ended_at", "counters")

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
                (run_key, phase, dumps(dict(config)), dumps(plan), utc_now()),
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
        *,
        counters: Mapping[str, Any] | None = None,
    ) -> None:
        """Record a trial's outcome in one transaction (all of it or nothing); ``counters`` are the measured
        window's kernel counters (:meth:`tunelab.counters.CounterRecord.to_json`), checked as they are read."""
        if status not in FINAL_STATUSES:
            raise StoreError(f"trial {trial_id}: status {status!r} is not one of {', '.join(FINAL_STATUSES)}")
        if status != TrialStatus.OK and not reason:
            raise StoreError(f"trial {trial_id}: a {status!r} trial needs a reason saying why")
        if counters is not None:
            check_counters(dict(counters), f"trial {trial_id} counters")
        with self._transaction() as db:
            cur = db.execute(
                "UPDATE trials SET status = ?, reason = ?, knobs_read = ?, metrics = ?, series = ?, timings = ?,"
                " foreign_cpu_s = ?, provenance = ?, ended_at = ?, counters = ?"
                " WHERE trial_id = ? AND status = 'running'",
                (status, reason, dumps(knobs_read), dumps(metrics), dumps(series), dumps(timings),
                 foreign_cpu_s, dumps(provenance), utc_now(), dumps(counters), trial_id),
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
            merged = {**as_mapping(loads(row[0]), f"{self.path}: trial {trial_id} provenance"), **provenance}
            db.execute("UPDATE trials SET status = ?, reason = ?, provenance = ? WHERE trial_id = ?",
                       (TrialStatus.INTERRUPTED.value, reason, dumps(merged), trial_id))

    def supersede_failed(self, phase: str, run_key: str, trial_id: int) -> int:
        """Set aside the failed trials of ``run_key`` (in ``phase``) recorded before trial ``trial_id``, which measured
        the run again (``--retry-failed``): status ``interrupted`` (so no reader counts them), reason ``superseded:
        ...``, provenance ``superseded_by``; the rows stay. Returns how many were set aside."""
        with self._transaction() as db:
            rows = db.execute("SELECT trial_id, provenance FROM trials WHERE phase = ? AND run_key = ? AND status = ?"
                              " AND trial_id < ?", (phase, run_key, TrialStatus.FAILED.value, int(trial_id))).fetchall()
            for old_id, provenance in rows:
                merged = {**as_mapping(loads(provenance), f"{self.path}: trial {old_id} provenance"),
                          "superseded_by": int(trial_id)}
                db.execute("UPDATE trials SET status = ?, reason = 'superseded: ' || COALESCE(reason, 'failed') || ?,"
                           " provenance = ? WHERE trial_id = ?",
                           (TrialStatus.INTERRUPTED.value, f" (measured again as trial {trial_id})", dumps(merged),
                            old_id))
            return len(rows)

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
        check_row(self.path, 0, values["phase"], values["status"], values["reason"], values["foreign_cpu_s"],
                  values["started_at"], values["ended_at"])
        if values["status"] != TrialStatus.OK and not values["reason"]:
            raise StoreError(f"the {values['status']} trial record {values['run_key']} gives no reason")
        decoded = {col: decode_column(self.path, values["run_key"], col, values[col]) for col in JSON_COLUMNS}
        if plan:
            values["plan"] = dumps({**(decoded["plan"] or {}), **dict(plan)})
            check_plan(loads(values["plan"]), f"trial record {values['run_key']} plan")
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
            merged = dict(loads(row[0]) or {})
            merged.update(timings)
            db.execute("UPDATE trials SET timings = ? WHERE trial_id = ?", (dumps(merged), trial_id))

    def completed_run_keys(self, phase: str) -> set[str]:
        """Run keys of ``phase`` that have a recorded outcome (ok, flagged or failed): skip them on resume."""
        with self._sql_errors():
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
            check_row(self.path, row.trial_id, row.phase, row.status, row.reason, row.foreign_cpu_s, row.started_at,
                      row.ended_at)
        for col in JSON_COLUMNS:
            values = frame[col] if col in frame.columns else [None] * len(frame)
            frame[col] = [decode_column(self.path, tid, col, v) for tid, v in zip(frame["trial_id"], values)]
        return frame

    def series(self, trial_id: int) -> pd.DataFrame:
        """The per-second series of one trial (column ``t_s`` plus metric columns)."""
        with self._sql_errors():
            row = self._db.execute("SELECT series FROM trials WHERE trial_id = ?", (trial_id,)).fetchone()
        if row is None:
            raise StoreError(f"no trial {trial_id} in {self.path}")
        series = decode_column(self.path, trial_id, "series", row[0]) or {}
        if len({len(v) for v in series.values()}) > 1:
            raise StoreError(f"{self.path}: trial {trial_id} column series has columns of different lengths")
        return pd.DataFrame(series)

    def begin_run(self, target_description: Mapping[str, Any]) -> int:
        """Record that a process starts running trials on a target (``target.describe()``)."""
        with self._transaction() as db:
            cur = db.execute("INSERT INTO runs (started_at, pid, target) VALUES (?, ?, ?)",
                             (utc_now(), os.getpid(), dumps(target_description)))
            return int(cur.lastrowid)

    def run_targets(self) -> list[dict[str, Any]]:
        """The target descriptions of every run so far, oldest first (restore uses them to find labs)."""
        with self._sql_errors():
            rows = self._db.execute("SELECT run_id, target FROM runs ORDER BY run_id").fetchall()
        return [as_mapping(loads(target, f"{self.path}: run {run_id} target"), f"{self.path}: run {run_id} target")
                for run_id, target in rows]
