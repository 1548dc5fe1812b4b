"""What the runner returns: one trial's :class:`TrialOutcome` and a run's :class:`RunSummary` (counts, wall
time, failures, busy repeats, and the warning when other processes loaded the machine)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunelab.model import TrialStatus


#: warn when other processes used more than this share of the machine during the median trial
FOREIGN_LOAD_WARN = 0.10


@dataclass(frozen=True)
class TrialOutcome:
    """What :func:`run_trial` recorded (and whether the machine was put back)."""

    trial_id: int
    run_key: str
    status: str
    reason: str | None
    knobs_read: dict[str, Any]
    metrics: dict[str, float]
    timings: dict[str, float]
    restored: bool
    foreign_cpu_s: float | None = None


@dataclass
class RunSummary:
    """Counts and wall time of one :func:`run_design` call."""

    study: str
    store_path: Path
    planned: int
    skipped: int = 0
    ok: int = 0
    flagged: int = 0
    failed: int = 0
    interrupted: int = 0
    wall_s: float = 0.0
    failures: list[str] = field(default_factory=list)
    #: per trial run now: share of the machine (0..1) other processes used while the load ran
    foreign_load: list[float] = field(default_factory=list)
    #: False for a dry run: its trials went to a throw-away store, the study's store was not touched
    recorded: bool = True
    #: attempts set aside and measured again because other processes were busy (noise.repeat_busy_pct)
    repeated: int = 0
    #: one line per such attempt, and per run still busy after its last repeat
    repeats: list[str] = field(default_factory=list)

    def count(self, outcome: TrialOutcome, machine_cpu_s: float | None = None) -> None:
        """Count a trial; ``machine_cpu_s`` (CPUs x trial seconds) turns its foreign CPU into a share."""
        if outcome.foreign_cpu_s is not None and machine_cpu_s:
            self.foreign_load.append(outcome.foreign_cpu_s / machine_cpu_s)
        status = str(outcome.status)            # the counter's name: ok, flagged, failed, interrupted
        setattr(self, status, getattr(self, status) + 1)
        if outcome.status in (TrialStatus.FAILED, TrialStatus.FLAGGED):
            self.failures.append(f"{outcome.run_key} {outcome.status}: {outcome.reason}")

    def __str__(self) -> str:
        lines = [
            f"study {self.study}: {self.planned} planned, {self.skipped} already done (skipped), "
            f"{self.ok} ok, {self.flagged} flagged, {self.failed} failed"
            + (f", {self.interrupted} interrupted" if self.interrupted else ""),
            f"wall time {self.wall_s:.1f} s; "
            + (f"store {self.store_path}" if self.recorded else "dry run: nothing was recorded, the store was not touched"),
        ]
        if self.foreign_load:
            median = statistics.median(self.foreign_load)
            if median > FOREIGN_LOAD_WARN:
                lines.append(f"warning: other processes used {100 * median:.0f} % of the machine during the median "
                             "trial; that is the main noise source in lab measurements, so intervals will be wider "
                             "and effects may shift. Rerun on a quiet machine if you can (the report shows the drift).")
        if self.repeats:
            lines.append(f"{self.repeated} trial(s) measured again because other processes were busy "
                         "(the busy attempts stay in the store, status interrupted, reason 'repeated: ...'):")
            lines += [f"  {line}" for line in self.repeats[:20]]
        lines += [f"  {line}" for line in self.failures[:20]]
        if len(self.failures) > 20:
            lines.append(f"  ... and {len(self.failures) - 20} more (see the store)")
        return "\n".join(lines)


__all__ = ["FOREIGN_LOAD_WARN", "RunSummary", "TrialOutcome"]
