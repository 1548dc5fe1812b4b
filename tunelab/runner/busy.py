"""The busy rule (design ``noise.repeat_busy_pct`` / ``max_repeats``): a trial during which other processes
used more of the machine is set aside, kept in the store, and its run measured again."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from tunelab.designs import Design
from tunelab.model import TrialStatus
from tunelab.runner.outcomes import RunSummary, TrialOutcome
from tunelab.signals import deferred_interrupts
from tunelab.store import Store
from tunelab.targets import Target


@dataclass(frozen=True)
class BusyRule:
    """``noise.repeat_busy_pct`` / ``max_repeats``: measure a run again while other processes used
    more than ``pct`` % of the machine during it, at most ``max_repeats`` times."""

    pct: float
    max_repeats: int = 2


def busy_rule(design: Design) -> BusyRule | None:
    """The design's :class:`BusyRule` (its ``noise`` section), or None when busy trials are kept."""
    pct = design.noise.repeat_busy_pct
    return None if pct is None else BusyRule(float(pct), int(design.noise.max_repeats))


def repeat_while_busy(outcome: TrialOutcome, measure: Callable[[Mapping[str, Any]], TrialOutcome], target: Target,
                       store: Store, provenance: Mapping[str, Any], rule: BusyRule | None, machine_cpu_s: float,
                       summary: RunSummary, *, may_start: Callable[[], bool] | None = None) -> TrialOutcome:
    """While ``outcome`` is a measurement during which other processes used more than ``rule.pct`` %
    of the machine, set it aside (kept in the store: status ``interrupted``, reason ``repeated: ...``,
    provenance ``repeated``/``busy_pct``) and ``measure`` the run again with ``repeat_of`` (the set-aside
    trial) in its provenance; at most ``rule.max_repeats`` times, and only while ``may_start()`` (the
    study's time budget) allows another attempt. The last attempt is the run's."""
    repeats = 0
    while rule is not None and outcome.status in (TrialStatus.OK, TrialStatus.FLAGGED):
        busy = 100 * outcome.foreign_cpu_s / machine_cpu_s if outcome.foreign_cpu_s is not None and machine_cpu_s else None
        if busy is None or busy <= rule.pct:
            break
        if repeats == rule.max_repeats or (may_start is not None and not may_start()):
            why = "after" if repeats == rule.max_repeats else "and the time budget is spent, after"
            summary.repeats.append(f"{outcome.run_key}: still busy ({busy:.0f} %) {why} {repeats} repeat(s); "
                                   f"trial {outcome.trial_id} kept")
            break
        reason = f"repeated: other processes used {busy:.0f} % of the machine (threshold {rule.pct:g} %)"
        store.set_aside_trial(outcome.trial_id, reason,
                              {"repeated": True, "busy_pct": round(busy, 1), "repeat_threshold_pct": rule.pct})
        summary.repeats.append(f"{outcome.run_key} (trial {outcome.trial_id}): other processes used {busy:.0f} %")
        summary.repeated += 1
        repeats += 1
        with deferred_interrupts():
            target.reset()
        outcome = measure({**provenance, "repeat_of": outcome.trial_id, "attempt": repeats + 1})
    return outcome


__all__ = ["BusyRule", "busy_rule", "repeat_while_busy"]
