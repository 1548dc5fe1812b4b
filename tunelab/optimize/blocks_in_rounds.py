"""ABBA blocks in rounds: ``blocks: {min, max, step, until: decided}`` stops as soon as every metric is decided.

Each profile first runs ``min`` blocks; at every look the open metrics are judged
(:func:`tunelab.optimize.confirm.analyse_blocks`) at the look's nominal level, the increment of the
screen's alpha-spending function (:func:`tunelab.stats.rounds.look_alphas`, information fraction
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

:func:`judge_in_rounds` is the loop itself, given how a round is measured and how a look judges one metric:
:func:`confirm_in_rounds` measures ABBA blocks and judges them with ``analyse_blocks``; a duet
(:func:`tunelab.optimize.duet_confirm.confirm_duet`) measures pairs and judges them with its crossover fit,
the rule's counts then being pairs.

>>> from tunelab.designs.change import BlockRule
>>> [(n, round(a, 4)) for n, a in block_looks(BlockRule(4, 16, 4), 0.05)]
[(4, 0.0125), (8, 0.0125), (12, 0.0125), (16, 0.0125)]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from tunelab.designs.change import BlockRule
from tunelab.model import Metric, Verdict
from tunelab.optimize.confirm import (ConfirmResult, Evaluator, analyse_blocks, goals_of, measure_blocks,
                                      overall_verdict)
from tunelab.progress import StudyProgress

# tunelab.stats (scipy, statsmodels, pingouin) is imported where the looks are computed, so importing this
# module (as tunelab.api does) stays cheap, as in tunelab.optimize.confirm.
#: verdicts that end a metric's looks
DECIDED = ("improve", "regress", "equivalent")


def block_looks(rule: BlockRule, alpha: float = 0.05) -> list[tuple[int, float]]:
    """``(blocks, nominal alpha)`` of every look of ``rule``."""
    from tunelab.stats.rounds import look_alphas

    counts = rule.looks()
    return list(zip(counts, look_alphas([n / rule.max for n in counts], alpha, rule.spending)))


def frozen(row: Mapping[str, Any] | None) -> bool:
    """A judged row that needs no more blocks: decided, or untestable with no usable block at all."""
    if row is None:
        return False
    return row["verdict"] in DECIDED or (row["verdict"] == Verdict.UNTESTABLE and row["blocks"] == 0)


#: ``analyse(frame, goal, nominal, final)``: one metric's judged row at a look (``final``: the last look, which
#: sizes ``blocks_needed``); :func:`abba_analysis` for ABBA blocks, a duet's pairs in
#: :mod:`tunelab.optimize.duet_confirm`
LookAnalysis = Callable[[pd.DataFrame, Metric, float, bool], dict[str, Any]]
#: ``measure(profile, numbers)``: the measurements of the blocks (or pairs) numbered ``numbers`` of one profile
RoundMeasure = Callable[[str, range], pd.DataFrame]


def abba_analysis(bootstrap: bool) -> LookAnalysis:
    """The look analysis of ABBA blocks: :func:`~tunelab.optimize.confirm.analyse_blocks` at the look's level,
    with its bootstrap cross-check (``bootstrap``) once a metric is frozen or at the last look."""
    def analyse(frame: pd.DataFrame, goal: Metric, nominal: float, final: bool) -> dict[str, Any]:
        row = analyse_blocks(frame, goal, nominal, bootstrap=False, needed=final)
        if bootstrap and (final or frozen(row)):
            row = analyse_blocks(frame, goal, nominal, bootstrap=True, needed=final)
        return row
    return analyse


def judge(frame: pd.DataFrame, goals: Sequence[Metric], rows: dict[tuple[str, str], dict[str, Any]], profile: str,
          look: int, nominal: float, final: bool, analyse: LookAnalysis) -> None:
    """Judge the open metrics of ``profile`` at one look with ``analyse``, in place."""
    for goal in goals:
        if frozen(rows.get((profile, goal.name))):
            continue
        row = analyse(frame, goal, nominal, final)
        rows[(profile, goal.name)] = {"profile": profile, "role": "objective", **row, "look": look,
                                      "alpha_nominal": nominal}


def replay_looks(frame: pd.DataFrame, goals: Sequence[Metric], rule: BlockRule, alpha: float = 0.05,
                 profile: str = "default", bootstrap: bool = True, *, analyse: LookAnalysis | None = None,
                 unit: str = "block") -> list[dict[str, Any]]:
    """The rows :func:`confirm_in_rounds` judged for one profile, judged again from its stored measurements
    (``block, arm`` and the metrics; a report reads a validation back this way): the same looks of ``rule`` at
    the same nominal levels, each on the blocks measured by then, a metric frozen at its deciding look, stopping
    where the validation stopped (an interrupted validation's last look is made on the blocks it measured).
    A duet's pairs: ``analyse`` its look (:func:`tunelab.optimize.duet_confirm.duet_look`), ``unit="pair"``.

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
    analyse = analyse or abba_analysis(bootstrap)
    measured = int(frame[unit].max()) + 1 if len(frame) else 0
    for number, (count, nominal) in enumerate(schedule, 1):
        if all(frozen(rows.get((profile, g.name))) for g in goals):
            break
        judge(frame[frame[unit] < count], goals, rows, profile, number, nominal, number == len(schedule), analyse)
        if count >= measured:
            break
    return [rows[(profile, g.name)] for g in goals if (profile, g.name) in rows]


def stop_note(rule: BlockRule, looks: list[dict[str, Any]], rows: Mapping[tuple[str, str], Mapping[str, Any]],
              unit: str = "blocks") -> str:
    """One line: the looks made and why the blocks (a duet's pairs: ``unit``) stopped."""
    counts = ", ".join(str(look["blocks"]) for look in looks)
    why = "every metric decided" if all(frozen(r) for r in rows.values()) else f"max={rule.max} {unit} reached"
    if all(r["verdict"] == Verdict.UNTESTABLE and r["blocks"] == 0 for r in rows.values()):
        why = f"no usable {unit[:-1]} (every trial failed)"
    return (f"{unit}: looks at {counts} of at most {rule.max} per profile ({rule.spending} alpha spending); "
            f"stopped: {why}")


@dataclass(frozen=True)
class Rounds:
    """What :func:`judge_in_rounds` found: one row per (profile, metric), the measurements, the note (None for a
    fixed count)."""

    table: pd.DataFrame
    measurements: pd.DataFrame
    note: str | None


def judge_in_rounds(profiles: Sequence[str], goals: Sequence[Metric], rule: BlockRule, measure: RoundMeasure,
                    analyse: LookAnalysis, *, alpha: float = 0.05, unit: str = "blocks",
                    on_look: Callable[[int, int], None] | None = None) -> Rounds:
    """The rounds of ``rule`` per profile (see the module docstring): at look ``r`` every open profile measures
    its units (blocks, or a duet's pairs) up to the look's count with ``measure`` and ``analyse`` judges its open
    metrics at the look's nominal level; a profile whose metrics are all frozen stops. ``on_look(r, units)`` is
    told, before look ``r`` measures, how many units it adds over its open profiles (a progress round)."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    parts: dict[str, list[pd.DataFrame]] = {profile: [] for profile in profiles}
    done = dict.fromkeys(profiles, 0)
    looks: list[dict[str, Any]] = []
    schedule = block_looks(rule, alpha)
    for number, (count, nominal) in enumerate(schedule, 1):
        open_profiles = [p for p in profiles if not all(frozen(rows.get((p, g.name))) for g in goals)]
        if not open_profiles:
            break
        if on_look is not None:
            on_look(number, sum(count - done[profile] for profile in open_profiles))
        for profile in open_profiles:
            parts[profile].append(measure(profile, range(done[profile], count)))
            done[profile] = count
            judge(pd.concat(parts[profile], ignore_index=True), goals, rows, profile, number, nominal,
                  number == len(schedule), analyse)
        looks.append({"look": number, "blocks": count, "alpha_nominal": nominal, "profiles": open_profiles})
    table = pd.DataFrame([rows[(p, g.name)] for p in profiles for g in goals])
    table["blocks_needed"] = table["blocks_needed"].astype("Int64")
    measurements = pd.concat([frame for frames in parts.values() for frame in frames], ignore_index=True)
    return Rounds(table, measurements, stop_note(rule, looks, rows, unit) if rule.in_rounds else None)


def confirm_in_rounds(evaluators: Mapping[str, Evaluator], baseline: Mapping[str, Any], candidate: Mapping[str, Any],
                      metrics: Sequence[Metric | Mapping[str, Any] | str], rule: BlockRule, *, alpha: float = 0.05,
                      key_prefix: Callable[[str], str] = lambda profile: f"{profile}:",
                      bootstrap: bool = True, progress: StudyProgress | None = None) -> ConfirmResult:
    """Measure ``baseline`` (A) and ``candidate`` (B) in ABBA blocks per profile (``evaluators``: profile ->
    evaluator) by ``rule`` and judge them (see the module docstring). Keys are ``key_prefix(profile)`` +
    ``b<block>:<position><arm>``, so a block is the same (stored, resumable) trial in every round. Each look is a
    round of ``progress`` (its evaluators count the trials into it).

    >>> from tunelab.simulator import SimulatorEvaluator, get_surface
    >>> s = get_surface("simple")
    >>> result = confirm_in_rounds({"overload": SimulatorEvaluator(s, seed=3)}, s.baseline, s.optimum(),
    ...                            ["qps:max:5"], BlockRule(4, 16, 4))
    >>> result.verdict, int(result.table["blocks"].iloc[0]), result.note.split(";")[1]
    ('improve', 4, ' stopped: every metric decided')
    """
    goals = goals_of(metrics)

    def measure(profile: str, blocks: range) -> pd.DataFrame:
        return measure_blocks(evaluators[profile], baseline, candidate, goals, blocks, key_prefix(profile), profile,
                              checked_blocks=blocks.stop)

    on_look = (lambda _number, blocks: progress.start_round(4 * blocks)) if progress is not None else None  # ABBA
    rounds = judge_in_rounds(list(evaluators), goals, rule, measure, abba_analysis(bootstrap), alpha=alpha,
                             on_look=on_look)
    return ConfirmResult(overall_verdict(list(rounds.table["verdict"])), rounds.table, rounds.measurements,
                         dict(baseline), dict(candidate), note=rounds.note)


__all__ = ["DECIDED", "LookAnalysis", "RoundMeasure", "Rounds", "abba_analysis", "block_looks", "confirm_in_rounds",
           "frozen", "judge_in_rounds", "replay_looks"]
