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
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping, Protocol, Sequence

import pandas as pd

from tunelab.duet import PairSetup, SideTrial, on_testbeds, pair_trials, run_pair
from tunelab.loads import Load
from tunelab.model import USABLE_STATUSES, Metric
from tunelab.optimize.confirm import (ConfirmResult, ValidationError, config_digest, goals_of, judge_log_change,
                                      overall_verdict, profiles_result, validation_provenance)
from tunelab.optimize.evaluators import ResumableEvaluator
from tunelab.runner import BoundKnob, describe_target, keyed_settings
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


def pair_log_ratios(measurements: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One row per pair with a positive value on both arms: ``pair``, ``orientation`` (+1: A on side 0,
    -1: A on side 1) and ``d = log(B / A)`` (:func:`tunelab.stats.duet_route.paired_runs`)."""
    from tunelab.stats.duet_route import ARM, PAIR, SIDE, paired_runs

    named = measurements[["pair", "side", "arm", metric]].rename(columns={"pair": PAIR, "side": SIDE, "arm": ARM})
    pairs = paired_runs(named, metric)
    return pd.DataFrame({"pair": pairs[PAIR].to_numpy(int), "orientation": pairs["orientation"].to_numpy(float),
                         "d": pairs["d"].to_numpy(float)})


def analyse_pairs(measurements: pd.DataFrame, goal: Metric, alpha: float = 0.05) -> dict[str, Any]:
    """Gain, CI, TOST and verdict of one metric from duet pairs (columns ``pair, side, arm`` and the metric);
    the row :func:`tunelab.optimize.confirm.analyse_blocks` gives, with ``blocks`` counting the usable pairs,
    ``blocks_needed`` the pairs, and ``side_diff_pct`` (side 1 against side 0)."""
    if goal.name not in measurements.columns:
        raise ValidationError(f"metric {goal.name!r} was not measured in the duet; measured columns: "
                              f"{', '.join(c for c in measurements.columns if c not in ('pair', 'side', 'arm'))}")
    ratios = pair_log_ratios(measurements, goal.name)
    n, both = len(ratios), ratios["orientation"].nunique() == 2
    column = measurements[goal.name]
    base = {"metric": goal.name, "direction": goal.direction, "sesoi_pct": goal.sesoi_pct, "blocks": n,
            "baseline_mean": float(column[measurements["arm"] == "A"].mean()),
            "candidate_mean": float(column[measurements["arm"] == "B"].mean())}
    if n < MIN_PAIRS or not both:
        why = f"{n} usable pairs, need {MIN_PAIRS}" if n < MIN_PAIRS else "usable pairs of one orientation only"
        return {**base, "pct_change": math.nan, "ci_low": math.nan, "ci_high": math.nan, "tost_p": math.nan,
                "verdict": "untestable", "blocks_needed": None, "side_diff_pct": math.nan, "reason": why}
    from tunelab.stats.duet_route import crossover_fit

    fit = crossover_fit(ratios["d"].to_numpy(float), ratios["orientation"].to_numpy(float))
    judged = judge_log_change(fit["mu"], fit["se"], fit["df"], goal, alpha, sd=fit["sd"], fitted=2)
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


def confirm_duet(evaluator: PairEvaluator, baseline: Mapping[str, Any], candidate: Mapping[str, Any],
                 metrics: Sequence[Metric | Mapping[str, Any] | str], *, pairs: int = 12, alpha: float = 0.05,
                 key_prefix: str = "", profile: str = "default",
                 side_metrics: Sequence[Metric | Mapping[str, Any] | str] = ()) -> ConfirmResult:
    """Measure ``pairs`` duet pairs of ``baseline`` (A) and ``candidate`` (B) and judge each metric
    (:func:`analyse_pairs`); the :class:`~tunelab.optimize.confirm.ConfirmResult` of :func:`confirm`,
    with measurements ``profile, pair, side, arm, key, block`` (``block``: the crossover block, pair // 2).

    Examples
    --------
    >>> from tunelab.simulator import InterferedEvaluator, get_surface
    >>> s = get_surface("simple")
    >>> confirm_duet(InterferedEvaluator(s, seed=3, common_cv=0.2), s.baseline, s.optimum(), ["qps:max:5"]).verdict
    'improve'
    """
    goals = goals_of(metrics)
    if not goals:
        raise ValidationError("name at least one metric to confirm, e.g. qps:max:5")
    check_pairs(pairs)
    configs = {"A": dict(baseline), "B": dict(candidate)}
    unmeasured = {goal.name: math.nan for goal in goals}
    rows = [{"profile": profile, "pair": pair, "block": pair // 2, "side": side, "arm": arm, "key": key, **unmeasured,
             **{k: float(v) for k, v in values.items()}}
            for pair in range(pairs) for side, arm, key, values in evaluator.evaluate_pair(pair, configs, key_prefix)]
    measurements = pd.DataFrame(rows)
    sides = [g for g in goals_of(side_metrics) if g.name in measurements.columns
             and g.name not in {goal.name for goal in goals}]
    table = pd.DataFrame([{"profile": profile, "role": role, "measurement": "duet", **analyse_pairs(measurements, g, alpha)}
                          for role, group in (("objective", goals), ("side effect", sides)) for g in group])
    table["blocks_needed"] = table["blocks_needed"].astype("Int64")
    verdict = overall_verdict(list(table.loc[table["role"] == "objective", "verdict"]))
    return ConfirmResult(verdict, table, measurements, dict(baseline), dict(candidate))


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




def run_duet_validation(plan: Any, targets: Sequence[Target], loads: Sequence[Load], store: Store, *, pairs: int,
                        allow_host_global: bool = False, alpha: float = 0.05, phase: str = "validate",
                        testbeds: Sequence[str] = ()) -> ConfirmResult:
    """Measure a checked :class:`~tunelab.optimize.confirm.ValidationPlan` in ``pairs`` duet pairs per profile on
    two up ``targets`` (the testbeds ``testbeds``, if named), each with its own instance of the load (``loads``),
    trials recorded in ``store``; judge it and count the failed trials."""
    digest = config_digest(plan.baseline, plan.candidate)
    parts = []
    for profile, settings in plan.profiles.items():
        evaluator = RunnerDuetEvaluator(targets, loads, plan.specs, store, phase=phase, warmup_s=plan.warmup_s,
                                        measure_s=plan.measure_s, load_settings=settings,
                                        allow_host_global=allow_host_global,
                                        provenance=validation_provenance(plan, profile, alpha, measurement="duet"),
                                        testbeds=testbeds)
        parts.append(confirm_duet(evaluator, plan.baseline, plan.candidate, plan.goals, pairs=pairs, alpha=alpha,
                                  key_prefix=f"duet:{profile}:{digest}:", profile=profile))
    return profiles_result(parts, plan, store, phase)


__all__ = ["MIN_PAIRS", "PairEvaluator", "check_pairs", "RunnerDuetEvaluator", "analyse_pairs", "confirm_duet",
           "pair_key", "pair_log_ratios", "run_duet_validation"]
