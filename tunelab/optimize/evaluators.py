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

from tunelab.errors import StoreError


@runtime_checkable
class Evaluator(Protocol):
    """Measure ``config`` (knob id -> value) once; ``key`` identifies the evaluation for the store."""

    def evaluate(self, config: Mapping[str, Any], replicate: int, key: str | None = None) -> dict[str, float]:
        ...


def _done_trials(store: Any, phase: str) -> dict[str, tuple[dict[str, Any], dict[str, float]]]:
    """Run key -> (config, metrics) of the finished (ok/flagged/failed) trials of ``phase`` (failed: no metrics)."""
    trials = store.trials(phase)
    out: dict[str, tuple[dict[str, Any], dict[str, float]]] = {}
    for row in trials.itertuples():
        if row.status in ("ok", "flagged"):
            metrics = {k: (math.nan if v is None else float(v)) for k, v in (row.metrics or {}).items()}
        elif row.status == "failed":
            metrics = {}
        else:
            continue
        out[row.run_key] = (dict(row.config or {}), metrics)
    return out


def _same_config(stored: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    from tunelab.optimize.space import _canonical

    return all(k in stored and _canonical(stored[k]) == _canonical(v) for k, v in wanted.items())


class _Resumable:
    """Shared bookkeeping: read finished run keys once, count reused and new measurements."""

    def __init__(self, store: Any, phase: str) -> None:
        self.store = store
        self.phase = phase
        self.done = _done_trials(store, phase)
        self.reused = 0
        self.measured = 0

    def run_key(self, key: str | None, config: Mapping[str, Any], replicate: int) -> str:
        if key is None:
            raise StoreError(f"a stored {self.phase} evaluation needs a key (got none for {dict(config)}, "
                             f"replicate {replicate}); the search and confirm pass one")
        return f"{self.phase}:{key}"

    def cached(self, run_key: str, config: Mapping[str, Any], metrics: Sequence[str] = ()) -> dict[str, float] | None:
        if run_key not in self.done:
            return None
        stored_config, stored_metrics = self.done[run_key]
        if not _same_config(stored_config, config):
            raise StoreError(
                f"{self.store.path}: {run_key} was recorded for config {stored_config}, but this run asks it for "
                f"{dict(config)}; the search settings (knobs, budget, preset, seed, objectives) changed since. "
                "Rerun with the original settings to resume, or pass a new --store to start a fresh search")
        self.reused += 1
        found = dict(stored_metrics)
        for name in metrics:
            found.setdefault(name, math.nan)
        return found


class StoreEvaluator(_Resumable):
    """Record every evaluation of ``inner`` in ``store`` as a trial of ``phase``; reuse finished ones.

    For evaluators that do not touch a machine (the simulator): the trial holds the config and
    the metrics, with run key ``"<phase>:<key>"``.
    """

    def __init__(self, inner: Evaluator, store: Any, phase: str = "refine") -> None:
        super().__init__(store, phase)
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
        self.done[run_key] = (dict(config), dict(metrics))
        return metrics


class RunnerEvaluator(_Resumable):
    """Run one real trial per evaluation with :func:`tunelab.runner.run_trial` (apply, verify,
    measure, record, restore), recorded as ``"<phase>:<key>"``; finished keys are read back.

    Parameters
    ----------
    target : an up Target; ``reset()`` is called before each trial (fresh lab namespaces)
    load, load_settings : the Load instance and its merged profile settings
    knob_specs : :class:`tunelab.journal.KnobSpec` of the searched knobs
    store : the study's :class:`tunelab.store.Store`
    fixed : knob id -> value for knobs the trial sets but the search does not vary
    """

    def __init__(self, target: Any, load: Any, knob_specs: Sequence[Any], store: Any, *, phase: str = "refine",
                 warmup_s: float = 2.0, measure_s: float = 8.0, load_settings: Mapping[str, Any] | None = None,
                 allow_host_global: bool = False, fixed: Mapping[str, Any] | None = None,
                 provenance: Mapping[str, Any] | None = None) -> None:
        super().__init__(store, phase)
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
        from tunelab.runner import describe_target, run_trial

        run_key = self.run_key(key, config, replicate)
        found = self.cached(run_key, config, self.metric_names)
        if found is not None:
            return found
        if not self._run_recorded:   # lets `tunelab restore` find (and remove) a crashed run's lab
            self.store.begin_run(describe_target(self.target))
            self._run_recorded = True
        settings = dict(self.load_settings)
        if getattr(self.load, "wants_key", False):
            settings["key"] = run_key
        self.target.reset()
        outcome = run_trial(self.target, self.load, self.knob_specs, {**self.fixed, **config}, run_key, self.phase,
                            self.store, self.warmup_s, self.measure_s, load_settings=settings,
                            plan_info={"replicate": replicate}, allow_host_global=self.allow_host_global,
                            provenance=self.provenance)
        self.measured += 1
        if outcome.status == "failed":
            self.failures.append(f"{run_key}: {outcome.reason}")
            metrics = {name: math.nan for name in self.metric_names}
        else:
            metrics = dict(outcome.metrics)
        self.done[run_key] = (dict(config), metrics)
        return metrics
