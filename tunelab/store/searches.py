"""A refinement's stored search state: its settings, one JSON record per batch, its winner.

The records are plain JSON (never pickle: stores are untrusted); their format is
:data:`SEARCH_STATE_VERSION`, and a store with a newer one is refused with one line. Stores
written before searches were stored (schema 1) read as having none.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

import pandas as pd

from tunelab.errors import StoreError, quoted
from tunelab.store.connection import StoreConnection
from tunelab.store.schema import has_table
from tunelab.store.values import as_mapping, dumps, json_safe, loads, utc_now

#: version of the JSON a search writes in ``searches.settings`` / ``search_batches.record`` (see
#: :meth:`SearchRecords.add_search_batch`); a store with a newer one is refused with a clear line
SEARCH_STATE_VERSION = 1
#: columns of :meth:`SearchRecords.searches` and :meth:`SearchRecords.search_batches`
SEARCH_COLUMNS = ["search_id", "settings", "state_version", "status", "winner", "created"]
SEARCH_BATCH_COLUMNS = ["search_id", "batch", "stage", "evaluations", "record"]
#: most batches one search may store (a bound on what a shared store can make a report read)
MAX_SEARCH_BATCHES = 100_000


def continued_budgets(stored: Mapping[str, Any], wanted: Mapping[str, Any], where: str) -> list[int]:
    """The budgets a stored search ran with before (``stored["continued_from"]``), plus its own when
    ``wanted`` raises the budget (and changes nothing else): a finished search continues with more.

    >>> continued_budgets({"budget": 20, "seed": 0}, {"budget": 30, "seed": 0}, "store")
    [20]
    >>> continued_budgets({"budget": 20, "seed": 0}, {"budget": 20, "seed": 1}, "store")
    Traceback (most recent call last):
    ...
    tunelab.errors.StoreError: store with other settings (seed: 0 stored, 1 now); only the budget may change, and only upward, to continue a search: rerun with the original settings to resume it (or a larger --budget to continue it), or pass a new --store
    """
    before = list(stored.get("continued_from") or [])
    stored = {k: v for k, v in stored.items() if k != "continued_from"}
    wanted = {k: v for k, v in wanted.items() if k != "continued_from"}
    changed = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k))
    raised = changed == ["budget"] and isinstance(stored.get("budget"), int) and isinstance(wanted.get("budget"), int) \
        and wanted["budget"] > stored["budget"]
    if not changed or raised:
        return before + [stored["budget"]] if raised else before
    differences = ", ".join(f"{k}: {stored.get(k)!r} stored, {wanted.get(k)!r} now" for k in changed)
    raise StoreError(f"{where} with other settings ({differences}); only the budget may change, and only upward, to "
                     "continue a search: rerun with the original settings to resume it (or a larger --budget to "
                     "continue it), or pass a new --store")


class SearchRecords(StoreConnection):
    """The ``searches`` and ``search_batches`` tables of a store."""

    def begin_search(self, search_id: str, settings: Mapping[str, Any]) -> list[int]:
        """Record that search ``search_id`` starts with ``settings``, or check that a stored one has the same.

        Only a larger ``budget`` may differ: the stored search is then continued (status ``running``
        again) and ``settings["continued_from"]`` lists the budgets it ran with before
        (:func:`continued_budgets`). Returns that list (empty for a search never continued).

        Raises
        ------
        StoreError
            When the store holds a search of that id with any other setting changed (resuming it would
            mix two searches), naming each.
        """
        settings = json_safe(dict(settings))
        with self._transaction() as db:
            row = db.execute("SELECT settings FROM searches WHERE search_id = ?", (search_id,)).fetchone()
            if row is None:
                db.execute("INSERT INTO searches (search_id, settings, state_version, status, created)"
                           " VALUES (?, ?, ?, 'running', ?)",
                           (search_id, dumps(settings), SEARCH_STATE_VERSION, utc_now()))
                return []
            stored = as_mapping(loads(row[0], f"{self.path}: search {search_id} settings"),
                                f"{self.path}: search settings")
            wanted = json.loads(dumps(settings))          # as JSON reads it back: tuples become lists
            budgets = continued_budgets(stored, wanted, f"{self.path} holds search {search_id!r}")
            if budgets != list(stored.get("continued_from") or []):
                db.execute("UPDATE searches SET settings = ?, status = 'running', winner = NULL WHERE search_id = ?",
                           (dumps({**wanted, "continued_from": budgets}), search_id))
            return budgets

    def add_search_batch(self, search_id: str, batch: int, record: Mapping[str, Any]) -> None:
        """Store one batch of search ``search_id`` (its ``stage`` and ``evaluations`` are read from
        ``record``); a batch stored twice is an error (the driver resumes after the last one)."""
        record = json_safe(dict(record))
        with self._transaction() as db:
            db.execute("INSERT INTO search_batches (search_id, batch, stage, evaluations, record, ts)"
                       " VALUES (?, ?, ?, ?, ?, ?)",
                       (search_id, int(batch), record["stage"], int(record["evaluations"]), dumps(record), utc_now()))

    def finish_search(self, search_id: str, winner: Mapping[str, Any]) -> None:
        """Mark search ``search_id`` done with its ``winner`` record."""
        with self._transaction() as db:
            db.execute("UPDATE searches SET status = 'done', winner = ? WHERE search_id = ?",
                       (dumps(json_safe(dict(winner))), search_id))

    def searches(self) -> pd.DataFrame:
        """Every stored search: ``search_id, settings (dict), state_version, status, winner (dict or None),
        created``; empty for a store written before searches were stored."""
        with self._sql_errors():
            if not has_table(self._db, "searches"):
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
            out.append({"search_id": search_id, "settings": as_mapping(loads(settings, f"{where} settings"), where),
                        "state_version": version, "status": status,
                        "winner": None if winner is None else as_mapping(loads(winner, f"{where} winner"), where),
                        "created": created})
        return pd.DataFrame(out, columns=SEARCH_COLUMNS)

    def search_batches(self, search_id: str | None = None) -> pd.DataFrame:
        """The stored batches of one search (or of all), in order: ``search_id, batch, stage,
        evaluations, record (dict)``; empty for a store written before searches were stored."""
        with self._sql_errors():
            if not has_table(self._db, "search_batches"):
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
                        "record": as_mapping(loads(record, f"{where} record"), where)})
        return pd.DataFrame(out, columns=SEARCH_BATCH_COLUMNS)
