"""What a study run returns (:func:`tunelab.run`'s result): :class:`StudyRun`, the runner's counts over every
round with a sequential design's rounds (:class:`RoundRecord`), the A/A calibration, the labs removed first and a
dry run's preview; ``str()`` gives the CLI's lines, a notebook shows it as HTML (:mod:`tunelab.report.reprs`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from tunelab.display import Displayed
from tunelab.formatting import fmt_pct, level_label
from tunelab.model import json_value
from tunelab.runner.outcomes import RunSummary

if TYPE_CHECKING:
    from tunelab.calibration import Calibration


@dataclass(frozen=True)
class RoundRecord:
    """One round of a sequential study: what was planned, run, and left undecided after it."""

    number: int
    planned: int
    pending: Mapping[str, tuple[Any, ...]]
    decided: int
    verdicts: int

    def line(self) -> str:
        levels = "; ".join(f"{knob}={', '.join(level_label(v) for v in values)}"
                           for knob, values in self.pending.items())
        left = f", still inconclusive: {levels}" if levels else ""
        return f"round {self.number}: {self.planned} trials; {self.decided}/{self.verdicts} verdicts decided{left}"


@dataclass
class StudyRun(RunSummary, Displayed):
    """What a study run did (:func:`tunelab.run`'s result): the runner's counts over all rounds, a
    sequential design's rounds and why it stopped, the orphaned labs removed first, the A/A
    calibration, and for a dry run the preview of every planned trial. In a notebook it shows as a
    short HTML summary (:mod:`tunelab.report.reprs`); ``str()`` gives the CLI's lines."""

    rounds: list[RoundRecord] = field(default_factory=list)
    stop_reason: str | None = None
    labs_removed: list[str] = field(default_factory=list)
    #: the A/A calibration before the study's trials (``noise.calibration_runs``), or None
    calibration: "Calibration | None" = None
    #: a dry run's preview lines (:meth:`tunelab.targets.dryrun.DryRunTarget.preview`); empty otherwise
    preview: list[str] = field(default_factory=list)
    #: what the time budget did: the busy-machine warning of the first round, trimmed rounds
    budget_lines: list[str] = field(default_factory=list)
    #: measured wall seconds per attempt (the budget's clock); None: the runner's wall time per attempt
    attempt_s: float | None = None

    @property
    def attempts(self) -> int:
        """Attempts made: every trial run, busy repeats included."""
        return self.ok + self.flagged + self.failed + self.interrupted + self.repeated

    def busy_share(self) -> float:
        """The share of attempts set aside and repeated because other processes were busy."""
        return self.repeated / self.attempts if self.attempts else 0.0

    def noise_cost_line(self) -> str | None:
        """What busy repeats cost (minutes, and their share of the run's attempts), or None without repeats."""
        if not self.repeated:
            return None
        per_attempt = self.attempt_s if self.attempt_s is not None else self.wall_s / max(self.attempts, 1)
        return (f"noise cost: ~{self.repeated * per_attempt / 60:.1f} min on {self.repeated} busy repeat(s), "
                f"{fmt_pct(100 * self.busy_share(), signed=False, decimals=0)} of {self.attempts} attempts "
                f"(~{self.attempts * per_attempt / 60:.1f} min)")

    @classmethod
    def of(cls, summary: RunSummary) -> "StudyRun":
        """The study run whose counts so far are ``summary``'s."""
        return cls(**vars(summary))

    def add(self, more: RunSummary) -> None:
        """Add a later round's runner counts."""
        for name in ("planned", "skipped", "ok", "flagged", "failed", "interrupted", "repeated", "wall_s"):
            setattr(self, name, getattr(self, name) + getattr(more, name))
        self.failures += more.failures
        self.foreign_load += more.foreign_load
        self.repeats += more.repeats

    def __str__(self) -> str:
        if not self.recorded and self.preview:
            return "\n".join([*self.preview, self.preview_line()])
        lines = [super().__str__(), *round_lines(self.rounds, self.stop_reason)]
        lines += [f"  {line}" for line in self.budget_lines]
        lines += [line for line in [self.noise_cost_line()] if line]
        calibration = self.calibration
        if calibration is not None:
            lines.append(f"noise: {calibration.cv_text() or 'no metric'} over {calibration.usable} A/A trials"
                         + (f"; {len(calibration.warnings)} SESOI warning(s), see above" if calibration.warnings else ""))
        return "\n".join(lines)

    def __repr__(self) -> str:
        """Two lines: the counts and the store (``str()`` has every line the CLI prints).

        >>> StudyRun("tour", "data/tour.sqlite", planned=36, ok=35, failed=1, wall_s=2.04)
        StudyRun: study tour, 35 ok of 36 planned (0 skipped, 0 flagged, 1 failed) in 2.0 s
          store data/tour.sqlite; str(result) for every line, .failures for the failed trials
        """
        where = f"store {self.store_path}" if self.recorded else "dry run: nothing recorded"
        rounds = f", {len(self.rounds)} round(s)" if self.rounds else ""
        return (f"StudyRun: study {self.study}, {self.ok} ok of {self.planned} planned ({self.skipped} skipped, "
                f"{self.flagged} flagged, {self.failed} failed{rounds}) in {self.wall_s:.1f} s\n"
                f"  {where}; str(result) for every line, .failures for the failed trials")

    def preview_line(self) -> str:
        """A dry run's last line: what was previewed and that nothing was done (its problems after it)."""
        lines = [f"dry run of study {self.study}: {self.planned} planned trial(s) previewed in {self.wall_s:.1f} s; "
                 "nothing was applied, run or recorded"]
        lines += [f"  {self.stop_reason}"] if self.stop_reason else []
        if self.failed or self.interrupted:
            lines.append(f"{self.failed + self.interrupted} trial(s) could not be previewed:")
            lines += [f"  {line}" for line in self.failures]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"study": self.study, "store": str(self.store_path), "recorded": self.recorded, "planned": self.planned,
                "skipped": self.skipped, "ok": self.ok, "flagged": self.flagged, "failed": self.failed,
                "interrupted": self.interrupted, "wall_s": self.wall_s, "failures": list(self.failures),
                "foreign_load": list(self.foreign_load), "labs_removed": list(self.labs_removed),
                "rounds": [json_value(vars(record)) for record in self.rounds], "stop_reason": self.stop_reason,
                "repeated": self.repeated, "repeats": list(self.repeats), "budget": list(self.budget_lines),
                "noise_cost": self.noise_cost_line(),
                "noise": self.calibration.to_json() if self.calibration is not None else None}


def round_lines(rounds: list[RoundRecord], stop_reason: str | None) -> list[str]:
    """The run summary's lines about a sequential study: one per round, then why it stopped."""
    lines = [f"  {record.line()}" for record in rounds]
    return lines + ([f"  stopped: {stop_reason}"] if stop_reason else [])


__all__ = ["RoundRecord", "StudyRun", "round_lines"]
