"""ABBA blocks in rounds: ``blocks: {min, max, step, until: decided}`` stops as soon as every metric is decided.

Each profile first runs ``min`` blocks; at every look the open metrics are judged
(:func:`tunelab.optimize.confirm.analyse_blocks`) at the look's nominal level, the increment of the
screen's alpha-spending function (:func:`tunelab.stats.sequential.look_alphas`, information fraction
= blocks so far / ``max``): ``alpha_r = spent(t_r) - spent(t_{r-1})``. A metric whose verdict is
``improve``, ``regress`` or ``equivalent`` at a look is frozen with that look's analysis; a profile
whose metrics are all frozen stops; the others run ``step`` more blocks, never beyond ``max``, where
the last look spends what is left. A false ``improve``/``regress`` of one metric needs the two-sided
test of some look to reject falsely (probability ``<= alpha_r`` at look ``r``), and a false
``equivalent`` a falsely passed TOST at some look (``<= alpha_r``); by the union bound each has
probability at most ``sum(alpha_r) = alpha`` over all looks, whatever the dependence between looks
(docs/stats-notes.md, "Sequential replicates", the same argument as the screen's).

A fixed count (``min == max``) is one look at the full ``alpha``: the fixed ABBA validation. A profile
whose every trial failed so far stops at once (``untestable``: more blocks would fail the same way).

>>> from tunelab.designs.change import BlockRule
>>> [(n, round(a, 4)) for n, a in block_looks(BlockRule(4, 16, 4), 0.05)]
[(4, 0.0125), (8, 0.0125), (12, 0.0125), (16, 0.0125)]
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from tunelab.designs.change import BlockRule
from tunelab.model import Metric
from tunelab.optimize.confirm import (ConfirmResult, Evaluator, analyse_blocks, goals_of, measure_blocks,
                                      overall_verdict)

# tunelab.stats (scipy, statsmodels, pingouin) is imported where the looks are computed, so importing this
# module (as tunelab.api does) stays cheap, as in tunelab.optimize.confirm.
#: verdicts that end a metric's looks
DECIDED = ("improve", "regress", "equivalent")


def block_looks(rule: BlockRule, alpha: float = 0.05) -> list[tuple[int, float]]:
    """``(blocks, nominal alpha)`` of every look of ``rule``."""
    from tunelab.stats.sequential import look_alphas

    counts = rule.looks()
    return list(zip(counts, look_alphas([n / rule.max for n in counts], alpha, rule.spending)))


def frozen(row: Mapping[str, Any] | None) -> bool:
    """A judged row that needs no more blocks: decided, or untestable with no usable block at all."""
    if row is None:
        return False
    return row["verdict"] in DECIDED or (row["verdict"] == "untestable" and row["blocks"] == 0)


def judge(frame: pd.DataFrame, goals: Sequence[Metric], rows: dict[tuple[str, str], dict[str, Any]], profile: str,
          look: int, nominal: float, final: bool, bootstrap: bool) -> None:
    """Judge the open metrics of ``profile`` at one look, in place; a frozen row gets its bootstrap cross-check."""
    for goal in goals:
        if frozen(rows.get((profile, goal.name))):
            continue
        row = analyse_blocks(frame, goal, nominal, bootstrap=False, needed=final)
        if bootstrap and (final or frozen(row)):
            row = analyse_blocks(frame, goal, nominal, bootstrap=True, needed=final)
        rows[(profile, goal.name)] = {"profile": profile, "role": "objective", **row, "look": look,
                                      "alpha_nominal": nominal}


def replay_looks(frame: pd.DataFrame, goals: Sequence[Metric], rule: BlockRule, alpha: float = 0.05,
                 profile: str = "default", bootstrap: bool = True) -> list[dict[str, Any]]:
    """The rows :func:`confirm_in_rounds` judged for one profile, judged again from its stored measurements
    (``block, arm`` and the metrics; a report reads a validation back this way): the same looks of ``rule`` at
    the same nominal levels, each on the blocks measured by then, a metric frozen at its deciding look, stopping
    where the validation stopped (an interrupted validation's last look is made on the blocks it measured).

    >>> from tunelab.simulator import SimulatorEvaluator, get_surface
    >>> s = get_surface("simple")
    >>> result = confirm_in_rounds({"overload": SimulatorEvaluator(s, seed=3)}, s.baseline, s.optimum(),
    ...                            ["qps:max:5"], BlockRule(4, 16, 4))
    >>> [(row["verdict"], row["look"]) for row in replay_looks(result.measurements, [Metric("qps")],
    ...                                                         BlockRule(4, 16, 4), profile="overload")]
    [('improve', 1)]
    """
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    schedule = block_looks(rule, alpha)
    measured = int(frame["block"].max()) + 1 if len(frame) else 0
    for number, (count, nominal) in enumerate(schedule, 1):
        if all(frozen(rows.get((profile, g.name))) for g in goals):
            break
        judge(frame[frame["block"] < count], goals, rows, profile, number, nominal, number == len(schedule),
              bootstrap)
        if count >= measured:
            break
    return [rows[(profile, g.name)] for g in goals if (profile, g.name) in rows]


def stop_note(rule: BlockRule, looks: list[dict[str, Any]], rows: Mapping[tuple[str, str], Mapping[str, Any]]) -> str:
    """One line: the looks made and why the blocks stopped."""
    counts = ", ".join(str(look["blocks"]) for look in looks)
    why = "every metric decided" if all(frozen(r) for r in rows.values()) else f"max={rule.max} blocks reached"
    if all(r["verdict"] == "untestable" and r["blocks"] == 0 for r in rows.values()):
        why = "no usable block (every trial failed)"
    return (f"blocks: looks at {counts} of at most {rule.max} per profile ({rule.spending} alpha spending); "
            f"stopped: {why}")


def confirm_in_rounds(evaluators: Mapping[str, Evaluator], baseline: Mapping[str, Any], candidate: Mapping[str, Any],
                      metrics: Sequence[Metric | Mapping[str, Any] | str], rule: BlockRule, *, alpha: float = 0.05,
                      key_prefix: Callable[[str], str] = lambda profile: f"{profile}:",
                      bootstrap: bool = True) -> ConfirmResult:
    """Measure ``baseline`` (A) and ``candidate`` (B) in ABBA blocks per profile (``evaluators``: profile ->
    evaluator) by ``rule`` and judge them (see the module docstring). Keys are ``key_prefix(profile)`` +
    ``b<block>:<position><arm>``, so a block is the same (stored, resumable) trial in every round.

    >>> from tunelab.simulator import SimulatorEvaluator, get_surface
    >>> s = get_surface("simple")
    >>> result = confirm_in_rounds({"overload": SimulatorEvaluator(s, seed=3)}, s.baseline, s.optimum(),
    ...                            ["qps:max:5"], BlockRule(4, 16, 4))
    >>> result.verdict, int(result.table["blocks"].iloc[0]), result.note.split(";")[1]
    ('improve', 4, ' stopped: every metric decided')
    """
    goals = goals_of(metrics)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    parts: dict[str, list[pd.DataFrame]] = {profile: [] for profile in evaluators}
    done = dict.fromkeys(evaluators, 0)
    looks: list[dict[str, Any]] = []
    schedule = block_looks(rule, alpha)
    for number, (count, nominal) in enumerate(schedule, 1):
        open_profiles = [p for p in evaluators if not all(frozen(rows.get((p, g.name))) for g in goals)]
        if not open_profiles:
            break
        for profile in open_profiles:
            parts[profile].append(measure_blocks(evaluators[profile], baseline, candidate, goals,
                                                 range(done[profile], count), key_prefix(profile), profile,
                                                 checked_blocks=count))
            done[profile] = count
            judge(pd.concat(parts[profile], ignore_index=True), goals, rows, profile, number, nominal,
                  number == len(schedule), bootstrap)
        looks.append({"look": number, "blocks": count, "alpha_nominal": nominal, "profiles": open_profiles})
    table = pd.DataFrame([rows[(p, g.name)] for p in evaluators for g in goals])
    table["blocks_needed"] = table["blocks_needed"].astype("Int64")
    measurements = pd.concat([frame for frames in parts.values() for frame in frames], ignore_index=True)
    note = stop_note(rule, looks, rows) if rule.sequential else None
    return ConfirmResult(overall_verdict(list(table["verdict"])), table, measurements, dict(baseline),
                         dict(candidate), note=note)


__all__ = ["DECIDED", "block_looks", "confirm_in_rounds", "frozen", "replay_looks"]
