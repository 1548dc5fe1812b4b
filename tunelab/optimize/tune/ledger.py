"""The budget's ledger and the evaluators tune measures through.

:class:`Ledger` counts every attempt tune's store records (each trial row of its phases, whatever its status:
failed, superseded and a crash's unfinished ones count), so a resumed run can never spend more than the budget;
:class:`Guarded` refuses a new measurement that would exceed it. :class:`CallableEvaluator` measures with any
Python callable (a configuration in, metrics out) and records each call as a trial, as
:class:`tunelab.optimize.evaluators.StoreEvaluator` does, but a call that raises is a failed trial, not a crash.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

from tunelab.errors import TunelabError
from tunelab.formatting import shorten
from tunelab.model import Phase, TrialStatus
from tunelab.optimize.evaluators import Evaluator, ResumableEvaluator
from tunelab.store import Store

#: the phases of tune's trials, in stage order
TUNE_PHASES = (Phase.CALIBRATE.value, Phase.SCREEN.value, Phase.REFINE.value, Phase.CONFIRM.value)


class BudgetError(TunelabError):
    """A measurement would exceed tune's budget (never expected: each stage is sized to fit)."""


class Ledger:
    """Attempts spent per phase of tune's store, every recorded trial counted (``spent``, ``total``)."""

    def __init__(self, store: Store, budget: int) -> None:
        self.budget = int(budget)
        trials = store.trials()
        self.spent = {phase: int((trials["phase"] == phase).sum()) if len(trials) else 0 for phase in TUNE_PHASES}

    @property
    def total(self) -> int:
        return sum(self.spent.values())

    @property
    def left(self) -> int:
        return self.budget - self.total

    def charge(self, phase: str) -> None:
        """Count one new attempt of ``phase``; :class:`BudgetError` when the budget is spent already."""
        if self.total >= self.budget:
            raise BudgetError(f"tune's budget of {self.budget} measurements is spent ({self.spent}); a {phase} "
                              "measurement was refused. This is a bug in tune's split: please report it")
        self.spent[phase] += 1


class Guarded:
    """``inner`` (a resumable evaluator of one phase) that charges each new measurement to the ledger first;
    ``fixed`` completes a configuration with the knobs the stage does not vary (refine's dropped knobs)."""

    def __init__(self, inner: ResumableEvaluator, ledger: Ledger, fixed: Mapping[str, Any] | None = None) -> None:
        self.inner, self.ledger, self.fixed = inner, ledger, dict(fixed or {})

    @property
    def measured(self) -> int:
        return self.inner.measured

    def evaluate(self, config: Mapping[str, Any], replicate: int, key: str | None = None) -> dict[str, float]:
        full = {**self.fixed, **config}
        if self.inner.run_key(key, full, replicate) not in self.inner.done:
            self.ledger.charge(self.inner.phase)
        return self.inner.evaluate(full, replicate, key)


class CallableEvaluator(ResumableEvaluator):
    """Measure with ``measure`` (``config -> {metric: value}``, or an object with
    ``evaluate(config, replicate, key)`` such as :class:`tunelab.simulator.SimulatorEvaluator`), each call
    recorded in ``store`` as a trial of ``phase`` under ``"<phase>:<key>"``; finished keys are read back.

    A call that raises, or returns no finite value of a goal, is a failed trial (the exception's type and
    first 200 characters as its reason) measured as NaN; ``metrics`` are the goal names that must be there.
    """

    def __init__(self, measure: Callable[..., Mapping[str, Any]] | Evaluator, store: Store, phase: str,
                 metrics: Sequence[str], provenance: Mapping[str, Any] | None = None) -> None:
        super().__init__(phase, store.trials(phase), store.path)
        self.store, self.measure, self.metric_names = store, measure, list(metrics)
        self.provenance = dict(provenance or {})

    def evaluate(self, config: Mapping[str, Any], replicate: int, key: str | None = None) -> dict[str, float]:
        run_key = self.run_key(key, config, replicate)
        found = self.cached(run_key, config, self.metric_names)
        if found is not None:
            return found
        trial_id = self.store.begin_trial(run_key, self.phase, dict(config), plan={"replicate": replicate})
        metrics, reason = self._call(dict(config), replicate, key)
        status = TrialStatus.OK.value if reason is None else TrialStatus.FAILED.value
        self.store.finish_trial(trial_id, status, reason, dict(config), metrics if reason is None else None,
                                provenance=self.provenance)
        self.measured += 1
        if reason is not None:
            metrics = {name: math.nan for name in self.metric_names}
        self.done[run_key] = (dict(config), dict(metrics))
        return metrics

    def _call(self, config: dict[str, Any], replicate: int, key: str | None) -> tuple[dict[str, float], str | None]:
        """The callable's metrics as floats, or the reason the measurement failed."""
        try:
            if callable(getattr(self.measure, "evaluate", None)):
                raw = self.measure.evaluate(config, replicate, key)
            else:
                raw = self.measure(config)
        except Exception as exc:            # the user's evaluator failed on this configuration: a failed trial
            return {}, shorten(f"the evaluator raised {type(exc).__name__}: {exc}")
        if not isinstance(raw, Mapping):
            return {}, f"the evaluator returned a {type(raw).__name__}, not a mapping of metric -> value"
        metrics = {str(k): _number(v) for k, v in raw.items()}
        missing = [name for name in self.metric_names if not math.isfinite(metrics.get(name, math.nan))]
        if missing:
            return {}, f"the evaluator returned no finite value of {', '.join(missing)}"
        return {k: v for k, v in metrics.items() if math.isfinite(v)}, None


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
