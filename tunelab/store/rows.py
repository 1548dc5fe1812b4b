"""A stored trial row, checked as it is read: plain columns, plan bookkeeping and JSON columns.

Used wherever trials leave the store (:mod:`tunelab.store.trials`, :mod:`tunelab.store.tidy_frame`)
and where a trial recorded elsewhere enters it (:meth:`tunelab.store.Store.add_trial_record`).
"""
from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any, Callable

from tunelab.counters import check_counter_name
from tunelab.errors import StoreError, quoted
from tunelab.model import FINAL_STATUSES, PHASES, TrialStatus
from tunelab.store.values import (as_mapping, check_knob_id, check_level, check_metric_name, check_number,
                                  check_timestamp, loads)

#: types of the plan bookkeeping a trial may carry (Contract 2)
PLAN_TYPES = {"run_id": int, "config_id": int, "block": int, "replicate": int, "run_order": int, "is_baseline": bool,
              "profile": str, "testbed": str}


def check_plan(plan: dict[str, Any], where: str) -> dict[str, Any]:
    """A trial's plan bookkeeping (:data:`PLAN_TYPES`, a testbed name, the varied knob id), unchanged."""
    for key, kind in PLAN_TYPES.items():
        value = plan.get(key)
        if value is not None and (type(value) is not kind or (kind is int and abs(value) > 2**53)):
            raise StoreError(f"{where} holds {key} = {quoted(value)}; expected a {kind.__name__}")
    if isinstance(plan.get("testbed"), str) and not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,23}", plan["testbed"]):
        raise StoreError(f"{where} holds testbed = {quoted(plan['testbed'])}; expected a testbed name "
                         "(1-24 characters of a-z, 0-9 and '-')")
    if plan.get("varied_knob") is not None:
        check_knob_id(plan["varied_knob"], f"{where} varied_knob")
    return plan


def entries_check(check_key: Callable[[Any, str], Any], what: str,
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
check_levels = entries_check(check_knob_id, "knob id", check_level)
#: metric name -> number (``metrics``)
check_metrics = entries_check(check_metric_name, "metric name", check_number)


def check_series(series: dict[str, Any], where: str) -> dict[str, Any]:
    """A per-second series: metric name -> list of numbers, unchanged."""
    for name, values in series.items():
        check_metric_name(name, f"{where}: series column")
        if not isinstance(values, list):
            raise StoreError(f"{where} {name} holds {quoted(values)} where a list of numbers is expected")
        for value in values:
            check_number(value, f"{where} {name}")
    return series


def check_counters(counters: dict[str, Any], where: str) -> dict[str, Any]:
    """A trial's counters (:meth:`tunelab.counters.CounterRecord.to_json`): a window of positive seconds,
    counter name -> non-negative difference, and problem lines; unchanged."""
    window = check_number(counters.get("window_s"), f"{where} window_s")
    if window is None or window <= 0:
        raise StoreError(f"{where} holds window_s = {quoted(window)}; expected the measured window's seconds (> 0)")
    for name, delta in as_mapping(counters.get("deltas"), f"{where} deltas").items():
        check_counter_name(name, f"{where}: counter name")
        if check_number(delta, f"{where} {name}") is None or delta < 0:
            raise StoreError(f"{where} {name} holds {quoted(delta)}; expected a counter's increase (>= 0)")
    problems = counters.get("problems", [])
    if not isinstance(problems, list) or not all(isinstance(line, str) for line in problems):
        raise StoreError(f"{where} problems holds {quoted(problems)}; expected a list of texts")
    return counters


#: what each JSON column of ``trials`` must hold once decoded
COLUMN_CHECKS = {"config": check_levels, "knobs_read": check_levels, "plan": check_plan, "metrics": check_metrics,
                 "series": check_series, "counters": check_counters}


def decode_column(path: Path, trial_id: Any, column: str, text: Any) -> Any:
    """A trial's JSON column decoded and checked (knob ids, metric names, numbers, plan types)."""
    where = f"{path}: trial {trial_id} column {column}"
    value = loads(text, where)
    if value is None:
        return None
    checked = as_mapping(value, where)
    check = COLUMN_CHECKS.get(column)
    return check(checked, where) if check else checked


def check_row(path: Path, trial_id: Any, phase: Any, status: Any, reason: Any, foreign: Any, started: Any,
              ended: Any) -> None:
    """The plain columns of a trial row: id, phase, status, reason text, numbers and times."""
    where = f"{path}: trial {quoted(trial_id)}"
    if isinstance(trial_id, bool) or not isinstance(trial_id, int):
        raise StoreError(f"{where} has a trial_id that is not an integer; the store is damaged or was edited")
    if phase not in PHASES:
        raise StoreError(f"{where} has phase {quoted(phase)}; expected one of {', '.join(PHASES)}")
    if status not in (TrialStatus.RUNNING, *FINAL_STATUSES):
        raise StoreError(f"{where} has status {quoted(status)}; expected one of running, {', '.join(FINAL_STATUSES)}")
    if reason is not None and not isinstance(reason, str):
        raise StoreError(f"{where} has a reason that is not text: {quoted(reason)}")
    check_number(foreign, f"{where} foreign_cpu_s")
    check_timestamp(started, f"{where} started_at")
    check_timestamp(ended, f"{where} ended_at")


def check_labels(db: sqlite3.Connection, path: Path) -> None:
    """StoreError naming the first trial whose phase or status is not one tunelab writes."""
    statuses = (TrialStatus.RUNNING, *FINAL_STATUSES)
    row = db.execute(
        f"SELECT trial_id, phase, status FROM trials WHERE phase NOT IN ({','.join('?' * len(PHASES))})"
        f" OR status NOT IN ({','.join('?' * len(statuses))}) OR phase IS NULL OR status IS NULL LIMIT 1",
        (*PHASES, *statuses)).fetchone()
    if row is not None:
        check_row(path, row[0], row[1], row[2], None, None, None, None)
