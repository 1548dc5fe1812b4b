"""Replicates in rounds (adaptive): screen after every round, stop each knob once its verdicts are final.

A study with ``replicates: {min, max, step, until: decided}`` runs ``min`` replicates of every
level, screens, and then runs ``step`` more replicates (plus fresh baseline runs) only of the
knobs with an ``inconclusive`` verdict, until every verdict is final or ``max`` is reached. Every
trial carries its ``round`` (1, 2, ...). Looking at the data after every round and stopping early
would inflate the error rates if every look used the full ``alpha``; here each look ``r`` uses the
increment of an alpha-spending function, ``alpha_r = spent(t_r) - spent(t_{r-1})``, at the
information fraction ``t_r`` (replicates so far / ``max``), so the looks together spend at most
``alpha`` (the union bound; see docs/stats-notes.md, "Sequential replicates"). Within a look the
knob × metric rows form one Holm family; a row rejected (``matters``) at an earlier look leaves the
families of later looks (alpha recycling, the group-sequential Holm procedure of Ye, Li, Jiang &
Wang 2013), while rows frozen with any other verdict stay in them with p = 1; the look itself adjusts
this padded family (:func:`tunelab.stats.look.screen_look`'s ``settled``), so each row's verdict is
stated once, by the screen's own rule, and a frozen row is the row of the look that decided it. The
first false ``matters`` at look ``r`` needs, as in Holm's own proof, some true null with ``p <= alpha_r / m0``
(every true null is still in the family then), which has probability at most ``alpha_r``; summing
over the looks gives a family-wise error at most ``alpha``.

:func:`screen_in_rounds` replays the looks from the data alone, so the run loop and a report that
re-screens the stored study get the same verdicts. :func:`pending_levels` says which levels need
more replicates.

Examples
--------
>>> round(spent_alpha(0.5, 0.05, "obrien-fleming"), 4)
0.0056
>>> [round(a, 4) for a in look_alphas([0.5, 1.0], 0.05, "linear")]
[0.025, 0.025]

Validity
--------
Validity (docs/stats-notes.md, "Sequential replicates"): a row still open at look ``r`` is
analysed on exactly the runs it would have had if every knob had kept running, provided the
run loop gives every pending level ``step`` more runs per round and adds the same number of
baseline runs every round. Before the first false ``matters`` only false nulls have left the
family, so at the look ``r`` where it happens all ``m0`` true nulls are in it (open, or frozen
with p = 1) and Holm's step-down reaches the first true null at a threshold
``<= alpha_r / m0``; that event has probability ``<= alpha_r`` and, summed over looks, the
chance of any false ``matters`` is at most ``sum(alpha_r) <= alpha``. Rows frozen as
equivalent must stay: dropping them would let a data-dependent, smaller ``m0`` set the
threshold. A false ``no effect (equivalent)`` for one row also has probability at most
``sum(alpha_r)`` (TOST at ``alpha_r`` per look). benchmarks/bench_sequential.py (4,000 studies
per row, CV 6 %, SESOI 5 %, 4 knobs, min 3, step 3, max 20, linear): FWER 3.8 % (all null),
2.7 % (half null), false equivalence 1.5 % of rows, and at 2×SESOI 50.7 trials with 99.6 %
power against 93 trials for the fixed design of the same power (46 % fewer).
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as ss

from tunelab.errors import DataError
from tunelab.model import DONE_STATUSES, USABLE_STATUSES, AnalysisKind, Metric, Verdict
from tunelab.registry import Registry
from tunelab.stats._validate import level_matches, sorted_levels
from tunelab.stats.look import screen_look
from tunelab.stats.screen_common import ROUND_COLUMNS, VERDICT_COLUMNS, rows_per_knob
from tunelab.stats.screen_data import check_alpha, design_kind
from tunelab.stats.screen_design import ScreenDesign, as_screen_design
from tunelab.stats.screen_result import ScreenResult

#: an alpha-spending function: ``(information fraction in [0, 1], alpha) -> alpha spent so far``
SpendingFunction = Callable[[float, float], float]

SPENDING: Registry[SpendingFunction] = Registry("alpha-spending function", error=DataError)


@SPENDING.register("obrien-fleming")
def obrien_fleming(fraction: float, alpha: float) -> float:
    """Lan–DeMets O'Brien–Fleming type: ``2 - 2 Phi(z_{1-alpha/2} / sqrt(t))`` (spends little early)."""
    if fraction <= 0:
        return 0.0
    return float(2.0 * ss.norm.sf(ss.norm.isf(alpha / 2.0) / math.sqrt(fraction)))


@SPENDING.register("pocock")
def pocock(fraction: float, alpha: float) -> float:
    """Lan–DeMets Pocock type: ``alpha ln(1 + (e - 1) t)`` (spends much early)."""
    return float(alpha * math.log1p((math.e - 1.0) * fraction))


@SPENDING.register("linear")
def linear(fraction: float, alpha: float) -> float:
    """``alpha t``: the same share of alpha per share of the replicates."""
    return float(alpha * fraction)


#: how the screen's between-testbed note begins (each look has its own; the last look's is kept)
TESTBED_NOTE = "testbed is a blocking factor"
#: chosen by benchmarks/bench_sequential.py (docs/stats-notes.md, "Sequential replicates")
DEFAULT_SPENDING = "linear"

#: the verdict table of a sequential screen: the screen's columns plus the look that decided each row
SEQUENTIAL_VERDICT_COLUMNS = [*VERDICT_COLUMNS, "round", "alpha_nominal"]


def spent_alpha(fraction: float, alpha: float, spending: str = DEFAULT_SPENDING) -> float:
    """The alpha spent up to information fraction ``fraction`` by the spending function ``spending``.

    Parameters
    ----------
    fraction : float
        Information fraction in [0, 1] (replicates so far / the most replicates the study runs).
    alpha : float
        The family-wise level of the whole study (all looks).
    spending : str
        A name in :data:`SPENDING`: ``'obrien-fleming'``, ``'pocock'`` or ``'linear'``.

    Returns
    -------
    float
        Cumulative alpha, 0 at fraction 0 and ``alpha`` at fraction 1.
    """
    function = SPENDING.get(spending)
    check_alpha(alpha)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float, np.floating, np.integer)) \
            or not 0 <= fraction <= 1:
        raise DataError(f"an information fraction must lie in [0, 1], got {fraction!r}")
    if fraction == 1:
        return float(alpha)
    return min(float(alpha), function(float(fraction), float(alpha)))


def look_alphas(fractions: Sequence[float], alpha: float, spending: str = DEFAULT_SPENDING) -> list[float]:
    """The nominal level of every look: the alpha spent since the previous look.

    ``alpha_k = spent(t_k) - spent(t_{k-1})``; by the union bound the looks together make a false
    decision with probability at most ``sum(alpha_k) = spent(t_last) <= alpha`` whatever the
    dependence between looks. A look at fraction 1 spends all that is left; looks after it get 0.

    Parameters
    ----------
    fractions : sequence of float
        Non-decreasing information fractions in [0, 1], one per look.
    alpha, spending
        As in :func:`spent_alpha`.
    """
    values = [float(f) for f in fractions]
    if any(b < a for a, b in zip(values, values[1:])):
        raise DataError(f"information fractions must not decrease from look to look, got {values}")
    spent = [spent_alpha(f, alpha, spending) for f in values]
    return [max(0.0, now - before) for before, now in zip([0.0, *spent], spent)]


def pending_levels(result_or_verdicts: ScreenResult | pd.DataFrame, data: pd.DataFrame, knobs: Sequence[str],
                   baseline: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The levels that need more replicates: knob -> its non-baseline levels in ``data``, for every knob
    with an ``inconclusive`` verdict (any metric). Knobs whose verdicts are all final are left out.

    Parameters
    ----------
    result_or_verdicts : ScreenResult or DataFrame
        A (sequential) screen result or its ``verdicts`` table (columns ``knob``, ``verdict``).
    data : DataFrame
        The study's runs (one column per knob).
    knobs : list of str
        Knob columns, in the order of the answer.
    baseline : dict
        Knob -> baseline level.
    """
    verdicts = result_or_verdicts.verdicts if isinstance(result_or_verdicts, ScreenResult) else result_or_verdicts
    if not isinstance(verdicts, pd.DataFrame) or not {"knob", "verdict"} <= set(verdicts.columns):
        raise DataError("pending_levels needs a ScreenResult or a verdicts table with columns 'knob' and 'verdict'")
    undecided = set(verdicts.loc[verdicts["verdict"] == Verdict.INCONCLUSIVE.value, "knob"])
    out: dict[str, list[Any]] = {}
    for knob in knobs:
        if knob not in undecided:
            continue
        if knob not in data.columns or knob not in baseline:
            raise DataError(f"knob {knob!r} needs a column in the data and a baseline level")
        levels = sorted_levels(data[knob].dropna())
        out[knob] = [level for level in levels if not level_matches(pd.Series([level], dtype=object), baseline[knob])[0]]
    return out


def screen_in_rounds(data: pd.DataFrame, metrics: Sequence[Metric | dict[str, Any]], knobs: list[str],
                      baseline: dict[str, Any], *, max_replicates: int, alpha: float = 0.05, correction: str = "holm",
                      spending: str = DEFAULT_SPENDING, round_column: str = "round", n_boot: int = 1000, seed: int = 0,
                      design: ScreenDesign | Mapping[str, Any] | None = None, guards: Mapping[str, Any] | None = None,
                      previous: ScreenResult | None = None, recycle: bool = True) -> ScreenResult:
    """Screen a study run in rounds, replaying the looks so that early stopping keeps the error rates.

    For every round ``r`` (the distinct values of ``round_column``) the rows with round <= ``r`` are
    screened at the nominal level ``alpha_r`` (:func:`look_alphas` at the information fraction of
    that look): the tests (``p_adj < alpha_r``) and the TOST equivalence tests both use it. A
    knob × metric verdict other than ``inconclusive`` is final: it is frozen with the row (and the
    effects, equivalence, omnibus, post-hoc and assumption rows) of the look that decided it. In
    later looks' multiplicity family a frozen ``matters`` row (a rejected null) is left out when
    ``recycle`` is True, and every other frozen row counts with p = 1 (so it can never help another
    row to significance). Later looks screen only the knobs that still have an inconclusive verdict.

    Parameters
    ----------
    data, metrics, knobs, baseline, correction, n_boot, seed, design, guards
        As in :func:`tunelab.stats.screen`; ``data`` must be one-at-a-time when it has several rounds.
    max_replicates : int
        The replicates per level at which the study stops (the design's ``replicates.max``; the
        last round should bring the pending levels to exactly this many runs, so the last look
        spends all of ``alpha``).
    alpha : float
        Family-wise level of the whole study, over all looks.
    spending : str
        Alpha-spending function, a name in :data:`SPENDING`.
    round_column : str
        The plan column with each trial's round (whole numbers >= 1). Without it the data are one
        look at ``alpha``: exactly :func:`tunelab.stats.screen`.
    previous : ScreenResult, optional
        The result of this function on the same study up to an earlier round (same settings);
        only the later rounds are screened. The answer equals a full replay.
    recycle : bool
        Alpha recycling (default True): rows decided ``matters`` leave the Holm family of later
        looks. False keeps them in with p = 1 (the more conservative rule).

    Returns
    -------
    ScreenResult
        The last look's result whose ``verdicts`` hold the frozen rows, with two more columns:
        ``round`` (the look that decided the row, or the last look) and ``alpha_nominal`` (that
        look's level; ``significant`` means ``p_adj < alpha_nominal``); every other table with
        ``knob`` and ``metric`` columns holds each row's data from that same look. ``rounds``
        has one row per look: ``round``, ``runs`` (runs in the look, all rounds so far),
        ``replicates`` (runs of the least-replicated level among the knobs the look screened),
        ``information_fraction`` (replicates / max_replicates, at most 1), ``alpha_spent``
        (cumulative), ``alpha_nominal``, ``decided`` and ``inconclusive`` (knob × metric rows
        final / still inconclusive after the look). ``settings['sequential']`` records the
        sequential settings.

    Notes
    -----
    Why the replay keeps the error rates, and the benchmark behind the default spending: the
    module docstring, "Validity".
    """
    options = _options(data, alpha, spending, max_replicates, round_column, recycle)
    knobs = list(knobs) if not isinstance(knobs, str) else knobs
    # each look is one screen_look, which reads no `looks` of the design: the looks are made here
    screen_args = {"metrics": metrics, "correction": correction, "n_boot": n_boot, "seed": seed,
                   "design": as_screen_design(design),
                   **({"guards": guards} if guards is not None else {})}
    if round_column not in data.columns:
        return _single_look(data, knobs, baseline, alpha, options, screen_args)

    return _replay(data, knobs, baseline, alpha, options, screen_args, previous)


# ---- helpers --------------------------------------------------------------------------------------

def _options(data: pd.DataFrame, alpha: float, spending: str, max_replicates: int, round_column: str,
             recycle: bool) -> dict[str, Any]:
    """The sequential settings, checked (``settings['sequential']`` of the result)."""
    if not isinstance(data, pd.DataFrame):
        raise DataError(f"data must be a pandas DataFrame, got {type(data).__name__}")
    check_alpha(alpha)
    SPENDING.get(spending)
    if isinstance(max_replicates, bool) or not isinstance(max_replicates, (int, np.integer)) or max_replicates < 1:
        raise DataError(f"max_replicates must be a whole number >= 1 (the design's replicates.max), "
                        f"got {max_replicates!r}")
    if not isinstance(recycle, bool):
        raise DataError(f"recycle must be True or False, got {recycle!r}")
    return {"max_replicates": int(max_replicates), "spending": spending, "round_column": round_column,
            "recycle": recycle}


def _single_look(data: pd.DataFrame, knobs: list[str], baseline: dict[str, Any], alpha: float,
                 options: dict[str, Any], screen_args: dict[str, Any]) -> ScreenResult:
    """Data without rounds: one look at the full ``alpha``, in the sequential result's shape."""
    result = screen_look(data, knobs=knobs, baseline=baseline, alpha=alpha, **screen_args)
    replicates = _least_replicated(data, knobs, baseline)
    rounds = [_round_row(1, len(data), replicates, 1.0, alpha, alpha, result.verdicts)]
    looks = {key: (result, 1, alpha) for key in _keys(result.verdicts)}
    return _assemble(result, looks, rounds, {**options, "looks": 1}, alpha, data)


def _replay(data: pd.DataFrame, knobs: list[str], baseline: dict[str, Any], alpha: float, options: dict[str, Any],
            screen_args: dict[str, Any], previous: ScreenResult | None) -> ScreenResult:
    """The looks of data with rounds (after those of ``previous``), assembled into one result."""
    round_column, max_replicates = options["round_column"], options["max_replicates"]
    spending, recycle = options["spending"], options["recycle"]
    round_of = _round_numbers(data[round_column], round_column)
    numbers = sorted(set(round_of.tolist()))
    if len(numbers) > 1 and design_kind(data, knobs, baseline) != AnalysisKind.OAT:
        raise DataError("sequential replicates (several rounds) need a one-at-a-time design: every run with at most "
                        "one knob away from its baseline")
    looks, rounds, first, last, spent = _resume(previous, data, round_of, knobs, alpha, options, screen_args)
    screened_up_to = rounds[-1]["round"] if rounds else 0
    idle: list[str] = []                # looks that had no new runs to test (a replay under other settings)
    for number in [n for n in numbers if n > screened_up_to]:
        upto = data[(round_of <= number).to_numpy()]
        pending = _pending(looks, knobs)
        if not pending:
            break
        replicates = _least_replicated(upto, pending, baseline)
        fraction = min(1.0, replicates / max_replicates)
        now = spent_alpha(fraction, alpha, spending)
        nominal = max(0.0, now - spent)
        if nominal == 0 and number > 1:
            latest = data[(round_of == number).to_numpy()]
            stopped = [k for k in pending if _least_replicated(latest, [k], baseline) == 0]
            idle.append(f"round {number}: open knob(s) {', '.join(stopped)} had no runs in this round, so the look "
                        "tested nothing; the study itself had decided them, so this replay (with other metrics or "
                        "guards than the study ran with) is a different rule from the one the study ran")
        if nominal > 0:
            rows = upto[_only_knobs(upto, knobs, pending, baseline)]
            settled = _settled(looks, recycle)
            result = screen_look(rows, knobs=pending, baseline={k: baseline[k] for k in pending}, alpha=nominal,
                                 settled=settled, **screen_args)
            first = first or result
            last = result
            looks.update({key: (result, number, nominal) for key in _keys(result.verdicts) if key not in settled})
        spent = max(spent, now)
        rounds.append(_round_row(number, len(upto), replicates, fraction, spent, nominal,
                                 _current_verdicts(looks)))
    if last is None:
        raise DataError("no look had any alpha to spend: the levels of the knobs have no runs in any round")
    result = _assemble(first, looks, rounds, {**options, "looks": len(rounds)}, alpha, data, last)
    result.settings["notes"].extend(idle)
    return result


def _round_numbers(values: pd.Series, column: str) -> pd.Series:
    """The round of every row as integers; DataError unless every value is a whole number >= 1."""
    numeric = pd.to_numeric(values, errors="coerce")
    bad = numeric.isna() | (numeric < 1) | (numeric % 1 != 0)
    if bad.any():
        examples = ", ".join(map(repr, values[bad].unique()[:3].tolist()))
        raise DataError(f"column {column!r} must hold each trial's round as a whole number 1, 2, ...; found {examples}")
    return numeric.astype(int)


def _keys(verdicts: pd.DataFrame) -> list[tuple[str, str]]:
    return list(zip(verdicts["knob"].tolist(), verdicts["metric"].tolist()))


def _least_replicated(data: pd.DataFrame, knobs: list[str], baseline: Mapping[str, Any]) -> int:
    """Runs of the least-replicated non-baseline level of ``knobs`` (one-at-a-time rows, finished trials of any
    outcome: the count follows the plan, not the measurements)."""
    if "status" in data.columns:
        data = data[data["status"].isin([status.value for status in DONE_STATUSES])]
    rows_of = rows_per_knob(data, knobs, dict(baseline), AnalysisKind.OAT)
    counts = []
    for knob in knobs:
        values = data.loc[rows_of[knob], knob].dropna()
        off = values[~level_matches(values, baseline[knob])]
        counts += [int(level_matches(off, level).sum()) for level in sorted_levels(off)]
    return min(counts, default=0)


def _only_knobs(data: pd.DataFrame, knobs: list[str], keep: list[str], baseline: Mapping[str, Any]) -> np.ndarray:
    """Rows whose knobs outside ``keep`` all sit at their baselines."""
    mask = np.ones(len(data), dtype=bool)
    for knob in knobs:
        if knob not in keep:
            mask &= level_matches(data[knob], baseline[knob])
    return mask


def _pending(looks: dict, knobs: list[str]) -> list[str]:
    """Knobs with an inconclusive row (all knobs before the first look)."""
    if not looks:
        return list(knobs)
    open_knobs = {key[0] for key, (result, _, _) in looks.items()
                  if _row(result, *key)["verdict"] == Verdict.INCONCLUSIVE.value}
    return [knob for knob in knobs if knob in open_knobs]


def _row(result: ScreenResult, knob: str, metric: str) -> pd.Series:
    verdicts = result.verdicts
    return verdicts[(verdicts["knob"] == knob) & (verdicts["metric"] == metric)].iloc[0]


def _settled(looks: dict, recycle: bool) -> dict[tuple[str, str], bool]:
    """The rows decided at earlier looks, each mapped to whether it stays in the next look's family with
    p = 1 (:func:`tunelab.stats.look.family_p_adj`).

    With ``recycle`` a row frozen as ``matters`` (a rejected no-effect null) leaves the family
    (group-sequential Holm); rows frozen with any other verdict stay in it with p = 1, except rows
    that had no test (p NaN), which were never in a family.
    """
    rows = {key: _row(found, *key) for key, (found, _, _) in looks.items()}
    return {key: not math.isnan(float(row["p"])) and not (recycle and row["verdict"] == Verdict.MATTERS.value)
            for key, row in rows.items() if row["verdict"] != Verdict.INCONCLUSIVE.value}


def _current_verdicts(looks: dict) -> pd.Series:
    return pd.Series([_row(result, *key)["verdict"] for key, (result, _, _) in looks.items()], dtype=object)


def _round_row(number: int, runs: int, replicates: int, fraction: float, spent: float, nominal: float,
               verdicts: pd.Series | pd.DataFrame) -> dict[str, Any]:
    column = verdicts["verdict"] if isinstance(verdicts, pd.DataFrame) else verdicts
    undecided = int((column == Verdict.INCONCLUSIVE.value).sum())
    return {"round": int(number), "runs": int(runs), "replicates": int(replicates),
            "information_fraction": float(fraction), "alpha_spent": float(spent), "alpha_nominal": float(nominal),
            "decided": int(len(column) - undecided), "inconclusive": undecided}


def _resume(previous: ScreenResult | None, data: pd.DataFrame, round_of: pd.Series, knobs: list[str], alpha: float,
            options: dict[str, Any], screen_args: dict[str, Any]) -> tuple[dict, list, Any, Any, float]:
    """The state after the looks of ``previous`` (empty when None), checked against the data and settings."""
    if previous is None:
        return {}, [], None, None, 0.0
    if not isinstance(previous, ScreenResult):
        raise DataError(f"previous must be a ScreenResult of screen_in_rounds, got {type(previous).__name__}")
    settings = previous.settings
    earlier = settings.get("sequential") or {}
    same = ({k: earlier.get(k) for k in options} == options and settings.get("alpha") == alpha
            and settings.get("knobs") == knobs and settings.get("correction") == screen_args["correction"]
            and settings.get("n_boot") == screen_args["n_boot"] and settings.get("seed") == screen_args["seed"])
    if not same or not len(previous.rounds):
        raise DataError("previous must be the screen_in_rounds result of the same study with the same settings "
                        "(alpha, correction, spending, max_replicates, knobs, n_boot, seed); re-screen without it")
    rounds = previous.rounds.to_dict(orient="records")
    for row in rounds:
        seen = int((round_of <= row["round"]).sum())
        if seen != row["runs"]:
            raise DataError(f"previous saw {row['runs']} runs up to round {row['round']} but the data have {seen}; "
                            "re-screen without previous")
    verdicts = previous.verdicts
    looks = {key: (previous, int(r), float(a))
             for key, r, a in zip(_keys(verdicts), verdicts["round"], verdicts["alpha_nominal"])}
    return looks, rounds, previous, previous, float(rounds[-1]["alpha_spent"])


def _gather_by_knob(name: str, looks: dict, knob_source: dict[str, ScreenResult], last: ScreenResult) -> pd.DataFrame:
    """A per-knob table (no ``metric`` column) of a sequential screen: each knob's rows from the knob's last
    look; in the guards table a guard that is a screened metric comes from the look that decided its own row
    (so it shows that row's change and interval)."""
    def source(knob: str, guard: str | None) -> ScreenResult | None:
        return looks[(knob, guard)][0] if (knob, guard) in looks else knob_source.get(knob)

    sources = {id(result): result for result in (*knob_source.values(), *(r for r, _, _ in looks.values()))}
    parts = []
    for result in sources.values():
        if len(table := getattr(result, name)):
            guards = table["guard"] if name == "guards" else [None] * len(table)
            parts.append(table[[source(k, g) is result for k, g in zip(table["knob"], guards)]])
    parts = [part for part in parts if len(part)]
    if not parts:
        return getattr(last, name).iloc[0:0]
    out = pd.concat(parts, ignore_index=True)
    rank = {knob: i for i, knob in enumerate(dict.fromkeys(knob for knob, _ in looks))}
    return out.iloc[np.argsort([rank[knob] for knob in out["knob"]], kind="stable")].reset_index(drop=True)


def _assemble(first: ScreenResult, looks: dict, rounds: list[dict[str, Any]], options: dict[str, Any], alpha: float,
              data: pd.DataFrame, last: ScreenResult | None = None) -> ScreenResult:
    """One ScreenResult: every knob × metric row (and its detail rows) from the look that decided it."""
    last = last or first
    order = {key: i for i, key in enumerate(looks)}
    by_source: dict[int, tuple[ScreenResult, set]] = {}
    for key, (result, _, _) in looks.items():
        by_source.setdefault(id(result), (result, set()))[1].add(key)

    # a knob's per-level tables without a metric (the guards) come from the last look that screened it
    knob_source: dict[str, ScreenResult] = {}
    for (knob, _), (result, number, _) in sorted(looks.items(), key=lambda item: item[1][1]):
        knob_source[knob] = result

    def gather(name: str) -> pd.DataFrame:
        frame = getattr(last, name)
        if "knob" in frame.columns and "metric" not in frame.columns:
            return _gather_by_knob(name, looks, knob_source, last)
        if not {"knob", "metric"} <= set(frame.columns):
            return frame
        parts = []
        for result, keys in by_source.values():
            part = getattr(result, name)
            if len(part):
                mask = np.fromiter(((k, m) in keys for k, m in zip(part["knob"], part["metric"])), bool, len(part))
                parts.append(part[mask])
        parts = [p for p in parts if len(p)]
        if not parts:
            return frame.iloc[0:0]
        out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].reset_index(drop=True)
        rank = [order.get((k, m), len(order)) for k, m in zip(out["knob"], out["metric"])]
        return out.iloc[np.argsort(rank, kind="stable")].reset_index(drop=True)

    tables = {name: gather(name) for name in last.tables if name not in ("verdicts", "rounds")}
    rows = []
    for key, (result, number, nominal) in looks.items():
        row = result.verdicts[(result.verdicts["knob"] == key[0]) & (result.verdicts["metric"] == key[1])]
        rows.append(row.assign(round=int(number), alpha_nominal=float(nominal)))
    verdicts = pd.concat(rows, ignore_index=True) if len(rows) > 1 else rows[0].reset_index(drop=True)
    for column in ("level", "levels"):
        verdicts[column] = pd.Series([value for row in rows for value in row[column].tolist()], dtype=object)
    verdicts = verdicts[SEQUENTIAL_VERDICT_COLUMNS]
    spread = [note for note in last.settings.get("notes", []) if note.startswith(TESTBED_NOTE)]
    notes = list(dict.fromkeys(note for result in (first, *[r for r, _ in by_source.values()], last)
                               for note in result.settings.get("notes", [])
                               if not note.startswith(TESTBED_NOTE) or note in spread))   # the last look's spread
    usable = data
    if "status" in data.columns:
        usable = data[data["status"].isin([status.value for status in USABLE_STATUSES])]
    settings = {**first.settings, "alpha": alpha, "n_runs": len(usable), "notes": notes, "sequential": options}
    names = tuple(dict.fromkeys([*last.tables, "rounds"]))
    return replace(last, settings=settings, verdicts=verdicts, rounds=pd.DataFrame(rounds, columns=ROUND_COLUMNS),
                   tables=names, **tables)
