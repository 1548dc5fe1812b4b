"""Evaluators: how a search or a confirmation gets one measurement of one configuration.

An evaluator has one method, ``evaluate(config, replicate, key) -> {metric: value}``. ``key``
names the evaluation uniquely and deterministically within a phase (the search derives it from
the evaluation index, e.g. ``"17:r0"``), which is what makes a crashed search resumable: the
store keeps every finished evaluation under ``"<phase>:<key>"``, and replaying the search with
the same seed asks for the same keys, so finished ones are read back instead of re-measured.

``SimulatorEvaluator`` (SYNTHETIC surfaces) lives in :mod:`tunelab.simulator`;
:class:`StoreEvaluator` records any evaluator's results in a store (resume for pure functions);
:class:`RunnerEvaluator` runs real trials through :func:`tunelab.runner.run_trial`.

A failed measurement returns NaN for every metric; the search treats it as the worst value.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

import pandas as pd

from tunelab.errors import StoreError
from tunelab.loads import Load
from tunelab.model import USABLE_STATUSES, TrialStatus, level_value
from tunelab.progress import StudyProgress
from tunelab.runner.binding import BoundKnob
from tunelab.runner.load_setup import keyed_settings
from tunelab.runner.outcomes import RunSummary
from tunelab.runner.plans import describe_target
from tunelab.runner.trials import run_trial
from tunelab.store import Store
from tunelab.targets import Target


@runtime_checkable
class Evaluator(Protocol):
    """Measure ``config`` (knob id -> value) once; ``key`` identifies the evaluation for the store."""

    def evaluate(self, config: Mapping[str, Any], replicate: int, key: str | None = None) -> dict[str, float]:
        ...


def trial_metrics(row: Any) -> dict[str, float]:
    """The metrics of one stored trial (a row of :meth:`tunelab.store.Store.trials`) as floats
    (``None`` -> NaN); ``{}`` unless the trial is usable (ok or flagged)."""
    if row.status not in USABLE_STATUSES:
        return {}
    return {k: (math.nan if v is None else float(v)) for k, v in (row.metrics or {}).items()}


def finished_trials(trials: pd.DataFrame) -> dict[str, tuple[dict[str, Any], dict[str, float]]]:
    """Run key -> (config, metrics) of the finished (ok/flagged/failed) trials in ``trials`` (failed: no metrics)."""
    return {row.run_key: (dict(row.config or {}), trial_metrics(row)) for row in trials.itertuples()
            if row.status in (*USABLE_STATUSES, TrialStatus.FAILED)}


def same_config(stored: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """True when ``stored`` holds every knob of ``wanted`` at the same level (numpy, list and tuple
    forms of a level compare equal)."""
    return all(k in stored and level_value(stored[k]) == level_value(v) for k, v in wanted.items())


class ResumableEvaluator:
    """Shared bookkeeping: read finished run keys once, count reused and new measurements.

    ``trials`` are the phase's recorded trials; ``source`` names where they come from in errors. ``progress``
    (a :class:`tunelab.progress.StudyProgress`, set by the verb) counts every evaluation, measured or read back,
    with its trial's status.
    """

    def __init__(self, phase: str, trials: pd.DataFrame, source: Any) -> None:
        self.phase = phase
        self.source = source
        self.done = finished_trials(trials)
        self.statuses = {row.run_key: str(row.status) for row in trials.itertuples() if row.run_key in self.done}
        self.reused = 0
        self.measured = 0
        self.progress: StudyProgress | None = None
        self.counted: set[str] = set()

    def recorded(self, prefix: str) -> list[str]:
        """The statuses of the recorded evaluations whose run keys start with ``prefix`` (a search's, which a
        resumed search reads from its log, not from here), counted as shown: :meth:`count` skips them."""
        keys = [key for key in self.statuses if key.startswith(prefix) and key not in self.counted]
        self.counted.update(keys)
        return [self.statuses[key] for key in keys]

    def count(self, run_key: str, status: Any) -> None:
        """Show one evaluation (measured now, or ``run_key``'s recorded one) on ``progress``, once, if any."""
        if self.progress is not None and run_key not in self.counted:
            self.counted.add(run_key)
            self.progress.record(str(status if status is not None else self.statuses.get(run_key, "ok")))

    def run_key(self, key: str | None, config: Mapping[str, Any], replicate: int) -> str:
        if key is None:
            raise StoreError(f"a stored {self.phase} evaluation needs a key (got none for {dict(config)}, "
                             f"replicate {replicate}); the search and confirm pass one")
        return f"{self.phase}:{key}"

    def cached(self, run_key: str, config: Mapping[str, Any], metrics: Sequence[str] = ()) -> dict[str, float] | None:
        if run_key not in self.done:
            return None
        stored_config, stored_metrics = self.done[run_key]
        if not same_config(stored_config, config):
            raise StoreError(
                f"{self.source}: {run_key} was recorded for config {stored_config}, but this run asks it for "
                f"{dict(config)}; the search settings (knobs, budget, preset, seed, objectives) changed since. "
                "Rerun with the original settings to resume, or pass a new --store to start a fresh search")
        self.reused += 1
        self.count(run_key, None)
        found = dict(stored_metrics)
        for name in metrics:
            found.setdefault(name, math.nan)
        return found


class StoreEvaluator(ResumableEvaluator):
    """Record every evaluation of ``inner`` in ``store`` as a trial of ``phase``; reuse finished ones.

    For evaluators that do not touch a machine (the simulator): the trial holds the config and
    the metrics, with run key ``"<phase>:<key>"``.
    """

    def __init__(self, inner: Evaluator, store: Store, phase: str = "refine") -> None:
        super().__init__(phase, store.trials(phase), store.path)
        self.store = store
        self.inner = inner

    def evaluate(self, config: Mapping[str, Any], replicate: int, key: str | None = None) -> dict[str, float]:
        run_key = self.run_key(key, config, replicate)
        found = self.cached(run_key, config)
        if found is not None:
            return found
        trial_id = self.store.begin_trial(run_key, self.phase, dict(config), plan={"replicate": replicate})
        metrics = self.inner.evaluate(config, replicate, key)
        self.store.finish_trial(trial_id, "ok", None, dict(config), metrics)
        self.measured += 1
        self.count(run_key, TrialStatus.OK)
        self.done[run_key] = (dict(config), dict(metrics))
        return metrics


class RunnerEvaluator(ResumableEvaluator):
    """Run one real trial per evaluation with :func:`tunelab.runner.run_trial` (apply, verify,
    measure, record, restore), recorded as ``"<phase>:<key>"``; finished keys are read back.

    Parameters
    ----------
    target : an up Target; ``reset()`` is called before each trial (fresh lab namespaces)
    load, load_settings : the Load instance and its merged profile settings
    knob_specs : :class:`tunelab.runner.BoundKnob` of the searched knobs
    store : the study's :class:`tunelab.store.Store`
    fixed : knob id -> value for knobs the trial sets but the search does not vary
    retry_failed : measure again the keys whose recorded trial failed (instead of reading the failure back)
    """

    def __init__(self, target: Target, load: Load, knob_specs: Sequence[BoundKnob], store: Store, *,
                 phase: str = "refine", warmup_s: float = 2.0, measure_s: float = 8.0, load_settings: Mapping[str, Any] | None = None,
                 allow_host_global: bool = False, fixed: Mapping[str, Any] | None = None,
                 provenance: Mapping[str, Any] | None = None, retry_failed: bool = False) -> None:
        trials = store.trials(phase)
        if retry_failed:                 # measured again: run_trial sets the failed attempts aside as superseded
            trials = trials[trials["status"] != TrialStatus.FAILED.value]
        super().__init__(phase, trials, store.path)
        self.store = store
        self.target, self.load, self.knob_specs = target, load, list(knob_specs)
        self.warmup_s, self.measure_s = float(warmup_s), float(measure_s)
        self.load_settings = dict(load_settings or {})
        self.allow_host_global = allow_host_global
        self.fixed = dict(fixed or {})
        self.provenance = dict(provenance or {})
        self.metric_names = list(getattr(load, "metrics", {}) or {})
        self.failures: list[str] = []
        self._run_recorded = False

    def evaluate(self, config: Mapping[str, Any], replicate: int, key: str | None = None) -> dict[str, float]:
        run_key = self.run_key(key, config, replicate)
        found = self.cached(run_key, config, self.metric_names)
        if found is not None:
            return found
        if not self._run_recorded:   # lets `tunelab restore` find (and remove) a crashed run's lab
            self.store.begin_run(describe_target(self.target))
            self._run_recorded = True
        settings = keyed_settings(self.load, self.load_settings, run_key)
        self.target.reset()
        outcome = run_trial(self.target, self.load, self.knob_specs, {**self.fixed, **config}, run_key, self.phase,
                            self.store, self.warmup_s, self.measure_s, load_settings=settings,
                            plan_info={"replicate": replicate}, allow_host_global=self.allow_host_global,
                            provenance=self.provenance)
        self.measured += 1
        self.count(run_key, outcome.status)
        if outcome.status == TrialStatus.FAILED:
            self.failures.append(f"{run_key}: {outcome.reason}")
            metrics = {name: math.nan for name in self.metric_names}
        else:
            metrics = dict(outcome.metrics)
        self.done[run_key] = (dict(config), metrics)
        return metrics


class ClusterEvaluator(ResumableEvaluator):
    """Run trials on many testbeds at once (:class:`tunelab.cluster.Dispatcher`): the same trials,
    run keys, store and resume as :class:`RunnerEvaluator`, but :meth:`evaluate_many` measures a
    whole batch in parallel, one trial per free testbed (the driver asks it for each search batch
    and race round, the confirmation for its blocks, each block kept on one testbed).

    Parameters are those of :class:`RunnerEvaluator`, with ``dispatcher`` instead of a target.
    """

    def __init__(self, dispatcher: Any, load: Load, knob_specs: Sequence[BoundKnob], store: Store, *,
                 phase: str = "refine", warmup_s: float = 2.0, measure_s: float = 8.0,
                 load_settings: Mapping[str, Any] | None = None, allow_host_global: bool = False,
                 fixed: Mapping[str, Any] | None = None, provenance: Mapping[str, Any] | None = None) -> None:
        from tunelab.cluster import RunContext    # dask is imported only when a search runs on many testbeds

        super().__init__(phase, store.trials(phase), store.path)
        self.dispatcher, self.store, self.load = dispatcher, store, load
        self.load_settings = dict(load_settings or {})
        self.fixed = dict(fixed or {})
        self.metric_names = list(getattr(load, "metrics", {}) or {})
        self.failures: list[str] = []
        study = store.study.name if store.study else store.path.stem
        description = {"target": "testbeds", "testbeds": [bed.name for bed in dispatcher.session.beds]}
        self.context = RunContext(study=study, phase=phase, specs=list(knob_specs), load=load,
                                  warmup_s=float(warmup_s), measure_s=float(measure_s),
                                  allow_host_global=allow_host_global,
                                  provenance={**dict(provenance or {}), "target": description})
        self._run_recorded = False

    def evaluate(self, config: Mapping[str, Any], replicate: int, key: str | None = None) -> dict[str, float]:
        return self.evaluate_many([(config, replicate, key)])[0]

    def evaluate_many(self, requests: Sequence[tuple[Mapping[str, Any], int, str | None]],
                      groups: Sequence[Any] | None = None) -> list[dict[str, float]]:
        """Measure ``(config, replicate, key)`` requests, the new ones in parallel; finished keys are read back.

        ``groups`` (one label per request) keeps requests with the same label on one testbed, in order.
        """
        keys = [self.run_key(key, config, replicate) for config, replicate, key in requests]
        results: list[dict[str, float] | None] = [self.cached(k, c, self.metric_names)
                                                  for k, (c, _, _) in zip(keys, requests)]
        todo = [i for i, found in enumerate(results) if found is None]
        if todo:
            if not self._run_recorded:
                self.store.begin_run(dict(self.context.provenance["target"]))
                self._run_recorded = True
            trials = [(keys[i], {**self.fixed, **dict(requests[i][0])}, {"replicate": requests[i][1]},
                       keyed_settings(self.load, self.load_settings, keys[i])) for i in todo]
            summary = RunSummary(study=self.context.study, store_path=self.store.path, planned=len(trials))
            outcomes = self.dispatcher.run(self.context, trials, summary,
                                           groups=[groups[i] for i in todo] if groups is not None else None)
            for i in todo:
                outcome = outcomes.get(keys[i])
                self.measured += 1
                if outcome is None or outcome.status not in USABLE_STATUSES:
                    self.failures.append(f"{keys[i]}: {outcome.reason if outcome else 'not run'}")
                    metrics = {name: math.nan for name in self.metric_names}
                else:
                    metrics = dict(outcome.metrics)
                self.done[keys[i]] = (dict(requests[i][0]), metrics)
                results[i] = metrics
        return [dict(r or {}) for r in results]
