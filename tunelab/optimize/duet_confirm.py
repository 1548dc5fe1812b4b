"""Validation by duet: baseline (A) and candidate (B) measured at the same moment on two sides, then swapped.

Pair ``p`` measures A on side ``crossover_sides(...)[p]`` and B on the other (:mod:`tunelab.duet`), both at
once; it gives one paired log ratio ``d_p = log(B_p / A_p)``. Interference common to both sides cancels
within a pair. A fixed difference between the sides adds ``+delta`` to the pairs with A on side 0 and
``-delta`` to the others, so the analysis fits it (crossover-balanced least squares)::

    d_p = mu + delta * o_p + e_p,   o_p = +1 (A on side 0) or -1 (A on side 1)

(:func:`tunelab.stats.duet_route.crossover_fit`, as the duet screen does) and judges ``mu``: the % change
``100 (exp(mu) - 1)`` with a Student-t 95 % interval on ``pairs - 2``
degrees of freedom, the paired TOST and the verdict of :func:`tunelab.optimize.confirm.judge_log_change`.
With as many pairs of each orientation (an even count) ``mu`` is the mean of the ``d_p`` and the side
difference cancels exactly; its own estimate is reported as ``side_diff_pct``.

Pairs in rounds (:func:`confirm_duet_in_rounds`; ``blocks: {min, max, step, until: decided}`` of a change file
counts pairs under a duet) are the rounds of ABBA blocks (:func:`tunelab.optimize.blocks_in_rounds.judge_in_rounds`:
the same looks, alpha spending, freezing and stopping), each look judged by the crossover fit at its nominal
level. Every count is even (:func:`check_pair_rule`), so every look is balanced; a multiple of 4 also cancels a
linear drift of the side difference within each round.
"""
from __future__ import annotations

import math
from dataclasses import asdict, replace
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np
import pandas as pd

from tunelab.designs.change import BlockRule
from tunelab.duet import PairSetup, SideTrial, on_testbeds, pair_trials, run_pair
from tunelab.loads import Load
from tunelab.model import USABLE_STATUSES, MeasurementKind, Metric
from tunelab.optimize.confirm import (ConfirmResult, ValidationError, config_digest, goals_of, judge_log_change,
                                      overall_verdict, trial_failures, validation_provenance)
from tunelab.optimize.evaluators import ResumableEvaluator
from tunelab.optimize.blocks_in_rounds import judge_in_rounds
from tunelab.runner.binding import BoundKnob
from tunelab.runner.load_setup import keyed_settings
from tunelab.runner.plans import describe_target
from tunelab.store import Store
from tunelab.targets import Target

#: the fewest usable pairs with both orientations that estimate the effect, the side difference and a variance
#: (as :data:`tunelab.stats.duet_route.MIN_PAIRS`; tunelab.stats is imported only when a duet is judged)
MIN_PAIRS = 3


class PairEvaluator(Protocol):
    """Measure one duet pair: ``evaluate_pair(pair, {"A": config, "B": config}, key_prefix)`` returns, per
    side, ``(side, arm, key, metrics)``."""

    def evaluate_pair(self, pair: int, configs: Mapping[str, Mapping[str, Any]],
                      key_prefix: str) -> list[tuple[int, str, str, dict[str, float]]]:
        ...


def pair_key(key_prefix: str, pair: int) -> Any:
    """The evaluation key of each side of ``pair``: ``"<prefix>p<pair>:s<side><arm>"``.

    >>> pair_key("overload:ab12cd34:", 3)(1, "A")
    'overload:ab12cd34:p3:s1A'
    """
    return lambda side, arm: f"{key_prefix}p{pair}:s{side}{arm}"


def ratio_arrays(measurements: pd.DataFrame, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(pair, orientation, d)`` of every pair with a positive value on both arms (:func:`pair_log_ratios`)."""
    from tunelab.stats.duet_route import pair_rows

    value = pd.to_numeric(measurements[metric], errors="coerce").to_numpy(float)
    rows, base = pair_rows(measurements["pair"].to_numpy(), measurements["arm"].to_numpy(), value)
    sides = measurements["side"].to_numpy()[rows].astype(int)
    return measurements["pair"].to_numpy()[rows].astype(int), np.where(sides == 1, 1.0, -1.0), np.log(value[rows] / base)


def pair_log_ratios(measurements: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One row per pair with a positive value on both arms: ``pair``, ``orientation`` (+1: A on side 0,
    -1: A on side 1) and ``d = log(B / A)`` (:func:`tunelab.stats.duet_route.pair_rows`)."""
    pair, orientation, d = ratio_arrays(measurements, metric)
    return pd.DataFrame({"pair": pair, "orientation": orientation, "d": d})


def finite_mean(values: np.ndarray) -> float:
    """The mean of the finite ``values`` (NaN when there is none), as pandas' ``mean`` skips NaN."""
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else math.nan


def analyse_pairs(measurements: pd.DataFrame, goal: Metric, alpha: float = 0.05, needed: bool = True) -> dict[str, Any]:
    """Gain, CI, TOST and verdict of one metric from duet pairs (columns ``pair, side, arm`` and the metric);
    the row :func:`tunelab.optimize.confirm.analyse_blocks` gives, with ``blocks`` counting the usable pairs,
    ``blocks_needed`` the pairs (``needed=False``: None, at an interim look), and ``side_diff_pct`` (side 1
    against side 0)."""
    if goal.name not in measurements.columns:
        raise ValidationError(f"metric {goal.name!r} was not measured in the duet; measured columns: "
                              f"{', '.join(c for c in measurements.columns if c not in ('pair', 'side', 'arm'))}")
    _, orientation, d = ratio_arrays(measurements, goal.name)
    n, both = len(d), len(np.unique(orientation)) == 2
    values, arms = measurements[goal.name].to_numpy(float), measurements["arm"].to_numpy()
    base = {"metric": goal.name, "direction": goal.direction, "sesoi_pct": goal.sesoi_pct, "blocks": n,
            "baseline_mean": finite_mean(values[arms == "A"]), "candidate_mean": finite_mean(values[arms == "B"])}
    if n < MIN_PAIRS or not both:
        why = f"{n} usable pairs, need {MIN_PAIRS}" if n < MIN_PAIRS else "usable pairs of one orientation only"
        return {**base, "pct_change": math.nan, "ci_low": math.nan, "ci_high": math.nan, "tost_p": math.nan,
                "verdict": "untestable", "blocks_needed": None, "side_diff_pct": math.nan, "reason": why}
    from tunelab.stats.duet_route import crossover_fit

    fit = crossover_fit(d, orientation)
    judged = judge_log_change(fit["mu"], fit["se"], fit["df"], goal, alpha, sd=fit["sd"], fitted=2, needed=needed)
    # d = log B - log A; with A on side 0 (o = +1) B is on side 1: delta is the log side difference (side 1 / side 0)
    return {**base, **judged, "side_diff_pct": 100 * math.expm1(fit["delta"])}


def check_pairs(pairs: Any) -> int:
    """``pairs`` if a duet can judge that many (at least :data:`MIN_PAIRS` + 1), else one ValidationError line.

    >>> check_pairs(2)
    Traceback (most recent call last):
    ...
    tunelab.optimize.confirm.ValidationError: a duet needs at least 4 pairs (two of each crossover orientation), got 2
    """
    if isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < MIN_PAIRS + 1:
        raise ValidationError(f"a duet needs at least {MIN_PAIRS + 1} pairs (two of each crossover orientation), "
                              f"got {pairs!r}")
    return pairs


def check_pair_rule(rule: BlockRule) -> BlockRule:
    """``rule`` (pairs per profile) if a duet can run it: at least :data:`MIN_PAIRS` + 1 pairs at the first look
    and, in rounds, an even ``min``, ``step`` and ``max``, so that every look holds as many pairs with A on each
    side (the crossover ``0 1 1 0``: a fixed side difference cancels exactly at every look); else one
    ValidationError line.

    >>> check_pair_rule(BlockRule(4, 12, 4)).looks()
    [4, 8, 12]
    >>> check_pair_rule(BlockRule(4, 12, 3))
    Traceback (most recent call last):
    ...
    tunelab.optimize.confirm.ValidationError: a duet's rounds count pairs, in even numbers (best multiples of 4), got min=4, step=3, max=12; e.g. {min: 4, max: 16, step: 4}
    """
    check_pairs(rule.min)
    if rule.in_rounds and any(n % 2 for n in (rule.min, rule.step, rule.max)):
        raise ValidationError("a duet's rounds count pairs, in even numbers (best multiples of 4), got "
                              f"min={rule.min}, step={rule.step}, max={rule.max}; e.g. {{min: 4, max: 16, step: 4}}")
    return rule


def measure_pairs(evaluator: PairEvaluator, configs: Mapping[str, Mapping[str, Any]], goals: Sequence[Metric],
                  pairs: range, key_prefix: str, profile: str) -> pd.DataFrame:
    """Measure the pairs numbered ``pairs`` (e.g. ``range(4, 8)``: a duet's second round): one row per side
    (``profile, pair, block, side, arm, key`` and the metrics; NaN for a metric a side did not report)."""
    unmeasured = {goal.name: math.nan for goal in goals}
    return pd.DataFrame([{"profile": profile, "pair": pair, "block": pair // 2, "side": side, "arm": arm,
                          "key": key, **unmeasured, **{k: float(v) for k, v in values.items()}}
                         for pair in pairs
                         for side, arm, key, values in evaluator.evaluate_pair(pair, configs, key_prefix)])


def duet_look(frame: pd.DataFrame, goal: Metric, nominal: float, final: bool) -> dict[str, Any]:
    """One metric at one look of a duet (:data:`tunelab.optimize.blocks_in_rounds.LookAnalysis`)."""
    return {"measurement": MeasurementKind.DUET.value, **analyse_pairs(frame, goal, nominal, needed=final)}


def side_effect_rows(measurements: pd.DataFrame, goals: Sequence[Metric],
                     side_metrics: Sequence[Metric | Mapping[str, Any] | str], alpha: float) -> list[dict[str, Any]]:
    """Each profile's side metrics (measured, not among ``goals``) from all its pairs, reported, not judged."""
    names = {goal.name for goal in goals}
    sides = [g for g in goals_of(side_metrics) if g.name in measurements.columns and g.name not in names]
    if not sides:
        return []
    return [{"profile": profile, "role": "side effect", "measurement": MeasurementKind.DUET.value,
             **analyse_pairs(frame, g, alpha)}
            for profile, frame in measurements.groupby("profile", sort=False) for g in sides]


def confirm_duet_in_rounds(evaluators: Mapping[str, PairEvaluator], baseline: Mapping[str, Any],
                           candidate: Mapping[str, Any], metrics: Sequence[Metric | Mapping[str, Any] | str],
                           rule: BlockRule, *, alpha: float = 0.05,
                           key_prefix: Callable[[str], str] = lambda profile: f"{profile}:",
                           side_metrics: Sequence[Metric | Mapping[str, Any] | str] = ()) -> ConfirmResult:
    """Measure duet pairs of ``baseline`` (A) and ``candidate`` (B) per profile (``evaluators``: profile ->
    pair evaluator) in the rounds of ``rule``, counted in pairs (:func:`check_pair_rule`), and judge each look
    with :func:`analyse_pairs` at the look's nominal level: the rounds and alpha spending of ABBA blocks
    (:func:`tunelab.optimize.blocks_in_rounds.judge_in_rounds`). Keys are ``key_prefix(profile)`` +
    ``p<pair>:s<side><arm>``, so a pair is the same (stored, resumable) pair in every round.

    >>> from tunelab.simulator import InterferedEvaluator, get_surface
    >>> s = get_surface("simple")
    >>> result = confirm_duet_in_rounds({"overload": InterferedEvaluator(s, seed=3, common_cv=0.2)}, s.baseline,
    ...                                 s.optimum(), ["qps:max:5"], BlockRule(4, 16, 4))
    >>> result.verdict, int(result.table["blocks"].iloc[0]), result.note.split(";")[1]
    ('improve', 8, ' stopped: every metric decided')
    """
    goals = goals_of(metrics)
    if not goals:
        raise ValidationError("name at least one metric to confirm, e.g. qps:max:5")
    check_pair_rule(rule)
    configs = {"A": dict(baseline), "B": dict(candidate)}

    def measure(profile: str, pairs: range) -> pd.DataFrame:
        return measure_pairs(evaluators[profile], configs, goals, pairs, key_prefix(profile), profile)

    rounds = judge_in_rounds(list(evaluators), goals, rule, measure, duet_look, alpha=alpha, unit="pairs")
    sides = side_effect_rows(rounds.measurements, goals, side_metrics, alpha)
    table = rounds.table
    if sides:
        table = pd.concat([table, pd.DataFrame(sides)], ignore_index=True)
        table["blocks_needed"] = table["blocks_needed"].astype("Int64")
    verdict = overall_verdict(list(table.loc[table["role"] == "objective", "verdict"]))
    return ConfirmResult(verdict, table, rounds.measurements, dict(baseline), dict(candidate), note=rounds.note)


def confirm_duet(evaluator: PairEvaluator, baseline: Mapping[str, Any], candidate: Mapping[str, Any],
                 metrics: Sequence[Metric | Mapping[str, Any] | str], *, pairs: int | BlockRule = 12,
                 alpha: float = 0.05, key_prefix: str = "", profile: str = "default",
                 side_metrics: Sequence[Metric | Mapping[str, Any] | str] = ()) -> ConfirmResult:
    """Measure ``pairs`` duet pairs (or pairs in rounds: a :class:`~tunelab.designs.change.BlockRule`) of
    ``baseline`` (A) and ``candidate`` (B) in one profile and judge each metric (:func:`analyse_pairs`); the
    :class:`~tunelab.optimize.confirm.ConfirmResult` of :func:`confirm`, with measurements ``profile, pair,
    side, arm, key, block`` (``block``: the crossover block, pair // 2).

    Examples
    --------
    >>> from tunelab.simulator import InterferedEvaluator, get_surface
    >>> s = get_surface("simple")
    >>> confirm_duet(InterferedEvaluator(s, seed=3, common_cv=0.2), s.baseline, s.optimum(), ["qps:max:5"]).verdict
    'improve'
    """
    rule = pairs if isinstance(pairs, BlockRule) else BlockRule.fixed(check_pairs(pairs))
    return confirm_duet_in_rounds({profile: evaluator}, baseline, candidate, metrics, rule, alpha=alpha,
                                  key_prefix=lambda _: key_prefix, side_metrics=side_metrics)


class RunnerDuetEvaluator(ResumableEvaluator):
    """Measure duet pairs on two up targets with :func:`tunelab.duet.run_pair` (real trials, recorded as
    ``"<phase>:<key>"``); a pair both of whose keys are finished is read back, otherwise both sides are
    measured again (a side is only worth its concurrent partner). ``testbeds``: the testbed of each side,
    recorded with each trial (plan column ``testbed``, provenance ``duet.testbed``) and in the run."""

    def __init__(self, targets: Sequence[Target], loads: Sequence[Load], knob_specs: Sequence[BoundKnob], store: Store, *,
                 phase: str = "validate", warmup_s: float = 2.0, measure_s: float = 8.0,
                 load_settings: Mapping[str, Any] | None = None, allow_host_global: bool = False,
                 provenance: Mapping[str, Any] | None = None, testbeds: Sequence[str] = ()) -> None:
        super().__init__(phase, store.trials(phase), store.path)
        self.targets, self.store, self.load = list(targets), store, loads[0]
        self.testbeds = tuple(testbeds)
        self.metric_names = list(getattr(self.load, "metrics", {}) or {})
        self.load_settings = dict(load_settings or {})
        self.setup = PairSetup(loads=(loads[0], loads[1]), specs=list(knob_specs), store=store, warmup_s=float(warmup_s),
                               measure_s=float(measure_s), allow_host_global=allow_host_global,
                               provenance=dict(provenance or {}), phase=phase)
        self._run_recorded = False

    def evaluate_pair(self, pair: int, configs: Mapping[str, Mapping[str, Any]],
                      key_prefix: str) -> list[tuple[int, str, str, dict[str, float]]]:
        trials = on_testbeds(pair_trials(pair, configs, pair_key(key_prefix, pair), self.load_settings,
                                         wants_slot=getattr(self.load, "wants_key", False)), self.testbeds)
        keys = [self.run_key(trial.run_key, trial.config, pair) for trial in trials]
        found = [self.cached(key, trial.config, self.metric_names) for key, trial in zip(keys, trials)]
        if any(values is None for values in found):
            found = self._measure(trials, keys)
        return [(side, trial.plan_info["duet_arm"], trial.run_key, dict(values or {}))
                for side, (trial, values) in enumerate(zip(trials, found))]

    def _measure(self, trials: Sequence[SideTrial], keys: Sequence[str]) -> list[dict[str, float]]:
        if not self._run_recorded:       # lets `tunelab restore` find (and remove) a crashed run's labs
            names = self.testbeds or (None, None)
            self.store.begin_run({"target": "duet", "sides": [{**describe_target(t), **({"testbed": name} if name else {})}
                                                              for t, name in zip(self.targets, names)]})
            self._run_recorded = True
        keyed = [replace(trial, run_key=key, settings=keyed_settings(self.load, trial.settings, key))
                 for trial, key in zip(trials, keys)]
        outcomes = run_pair(self.targets, keyed, self.setup)
        results = []
        for key, trial, outcome in zip(keys, trials, outcomes):
            self.measured += 1
            usable = outcome.status in USABLE_STATUSES
            metrics = dict(outcome.metrics) if usable else {name: math.nan for name in self.metric_names}
            self.done[key] = (dict(trial.config), metrics)
            results.append(metrics)
        return results




def run_duet_validation(plan: Any, targets: Sequence[Target], loads: Sequence[Load], store: Store, *,
                        pairs: int | BlockRule, allow_host_global: bool = False, alpha: float = 0.05,
                        phase: str = "validate", testbeds: Sequence[str] = ()) -> ConfirmResult:
    """Measure a checked :class:`~tunelab.optimize.confirm.ValidationPlan` in duet pairs per profile (``pairs``: a
    count, or a rule of rounds counted in pairs) on two up ``targets`` (the testbeds ``testbeds``, if named), each
    with its own instance of the load (``loads``), trials recorded in ``store``; judge it and count the failed
    trials."""
    rule = pairs if isinstance(pairs, BlockRule) else BlockRule.fixed(check_pairs(pairs))
    digest = config_digest(plan.baseline, plan.candidate)
    evaluators = {profile: RunnerDuetEvaluator(targets, loads, plan.specs, store, phase=phase, warmup_s=plan.warmup_s,
                                               measure_s=plan.measure_s, load_settings=settings,
                                               allow_host_global=allow_host_global,
                                               provenance=validation_provenance(plan, profile, alpha,
                                                                                measurement=MeasurementKind.DUET.value,
                                                                                validate_pairs=asdict(rule)),
                                               testbeds=testbeds)
                  for profile, settings in plan.profiles.items()}
    result = confirm_duet_in_rounds(evaluators, plan.baseline, plan.candidate, plan.goals, rule, alpha=alpha,
                                    key_prefix=lambda profile: f"duet:{profile}:{digest}:")
    keys = [f"{phase}:{key}" for key in result.measurements["key"]]
    return replace(result, failures=trial_failures(store, keys, phase))


__all__ = ["MIN_PAIRS", "PairEvaluator", "check_pair_rule", "check_pairs", "RunnerDuetEvaluator", "analyse_pairs",
           "confirm_duet", "confirm_duet_in_rounds", "duet_look", "measure_pairs", "pair_key", "pair_log_ratios",
           "run_duet_validation"]
