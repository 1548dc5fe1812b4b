"""A/A calibration: the study's baseline run again and again before its own trials, to measure the noise.

With ``noise: {calibration_runs: N}`` in the design, :func:`run_calibration` runs N trials of the
baseline configuration in their own phase (``calibrate``, run keys ``calibrate:<i>``, resumable
like any run) and :func:`assess_noise` turns them into each metric's noise CV
(:func:`tunelab.stats.noise.noise_cv`) and the replicates per level the design's analysis needs
to resolve the metric's SESOI at that noise (:func:`tunelab.stats.noise.noise_table`: detect a
change of the SESOI and bound a null one within it, each with 80 % power at the design's alpha).
A warning names each metric whose SESOI the design's replicates (a sequential design's ``max``)
cannot resolve, and how many would. The low-noise metrics of :data:`LOW_NOISE_METRICS` (the server's
CPU time per answered query, from the trials' counters) are reported beside the design's whenever the
A/A trials measured them, CV only, so a user can see which metric is the sharpest.

The replicates compare one level's runs with the baseline's: for OAT a level has ``replicates``
runs; for factorial and screening designs a main effect's level has ``replicates x
runs_per_replicate / levels`` runs. Latin hypercube and Morris designs are analysed by a response
model, not level against baseline, so only the CV is reported for them.

Under ``measurement: duet`` every A/A run is measured beside a concurrent baseline on the other side
(:func:`tunelab.duet.run_duet_design`): ``calibration_runs`` pairs, twice as many trials. A duet's analysis
uses each pair's log ratio, so the table also gives each metric's paired figures
(:func:`tunelab.stats.noise.paired_noise_table`): ``pairs``, ``paired_cv_pct`` (the residual SD of the paired
log ratio after the crossover fit, in %: the A/A CV of the paired ratio) and ``side_diff_pct``; the advice
(``needed``, the warnings) then counts pairs per level at that paired noise. Interference both sides share
cancels from the paired CV, so on a busy machine it is the one to pick the sharpest metric by.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tunelab.designs import Design
from tunelab.designs.generators import runs_per_replicate
from tunelab.designs.plan import PLAN_COLUMNS
from tunelab.model import RANGE_DESIGNS, DesignType, MeasurementKind, Phase, json_value
from tunelab.runner.outcomes import RunSummary
from tunelab.runner.plans import PlanRunner
from tunelab.store import Store

#: the phase of the A/A trials
CALIBRATE = Phase.CALIBRATE.value
#: the power the replicate advice asks for
POWER = 0.8
#: metrics the calibration reports (CV only) beside the design's own when the A/A trials measured them
LOW_NOISE_METRICS = ("server_cpu_per_query",)


def calibration_plan(design: Design, runs: int) -> pd.DataFrame:
    """``runs`` rows of the design's baseline configuration, a plan per Contract 2 (run ids 0..runs-1)."""
    rows = [{"run_id": i, "config_id": 0, "block": 0, "replicate": i, "run_order": i, "is_baseline": True,
             "varied_knob": None, **design.baseline} for i in range(runs)]
    return pd.DataFrame(rows, columns=PLAN_COLUMNS + design.knob_ids)


def design_replicates(design: Design) -> int:
    """The replicates the design can give each level: a sequential design's ``max``, else ``replicates``."""
    return design.rounds.max if design.rounds is not None else design.replicates


def runs_per_level(design: Design, replicates: int) -> float | None:
    """Runs behind one level's mean that a level-vs-baseline comparison uses; None for range designs."""
    if design.design_type in RANGE_DESIGNS:
        return None
    if design.design_type == DesignType.OAT:
        return float(replicates)
    levels = max(len(knob.levels) for knob in design.knobs)
    return replicates * runs_per_replicate(design) / levels


def replicates_for_runs(design: Design, per_level: float) -> int:
    """The design's replicates that give every level at least ``per_level`` runs (inverse of :func:`runs_per_level`)."""
    one = runs_per_level(design, 1) or 1.0
    return max(1, math.ceil(per_level / one - 1e-9))


@dataclass
class Calibration:
    """What the A/A trials showed: the noise table, the design's replicates and the warnings."""

    runs: int
    usable: int
    table: pd.DataFrame
    replicates: int
    warnings: list[str] = field(default_factory=list)
    summary: "RunSummary | None" = None

    @property
    def paired(self) -> bool:
        """Whether the A/A trials were duet pairs (the table has the paired figures)."""
        return "paired_cv_pct" in self.table.columns

    def cv_text(self) -> str:
        """``qps CV 5.7 %, latency_mean_ms CV 8.1 %`` (``?`` when a CV could not be measured); for duet pairs
        ``qps CV 10.2 % per run, paired ratio CV 2.9 % (12 pairs)``."""
        return ", ".join(noise_text(row) for row in self.table.itertuples())

    def lines(self) -> list[str]:
        """The calibration's lines: the noise CVs, then one warning per unresolvable SESOI."""
        head = f"calibration: {self.usable} of {self.runs} A/A trials usable"
        if self.paired:
            head += " (duet: each A/A run beside a concurrent one)"
        if self.summary is not None and self.summary.repeated:
            head += f" ({self.summary.repeated} busy attempt(s) measured again)"
        if self.usable < 2:
            return [head + "; at least 2 are needed for a noise CV"]
        return [f"{head}; noise {self.cv_text()}", *self.warnings]

    def to_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "usable": self.usable, "replicates": self.replicates, "warnings": list(self.warnings),
                "metrics": [json_value(row) for row in self.table.to_dict("records")]}


def noise_text(row: Any) -> str:
    """One metric's noise: ``qps CV 5.7 %`` (``?``: not measured), with a duet's paired ratio CV after it.

    >>> noise_text(pd.Series({"metric": "qps", "cv_pct": 10.24, "paired_cv_pct": 2.91, "pairs": 12}))
    'qps CV 10.2 % per run, paired ratio CV 2.9 % (12 pairs)'
    """
    def pct(value: float) -> str:
        return f"{value:.1f} %" if math.isfinite(value) else "?"

    text = f"{row.metric} CV {pct(row.cv_pct)}"
    if not hasattr(row, "paired_cv_pct"):
        return text
    return f"{text} per run, paired ratio CV {pct(row.paired_cv_pct)} ({int(row.pairs)} pairs)"


def within_testbed(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``frame[columns]`` with each testbed's mean moved to the overall mean, when the trials ran on
    several testbeds (a ``testbed`` column): the noise the screen sees once the testbed is a block.
    Unchanged otherwise.

    >>> f = pd.DataFrame({"testbed": ["a", "a", "b", "b"], "qps": [10.0, 12.0, 20.0, 22.0]})
    >>> within_testbed(f, ["qps"])["qps"].tolist()
    [15.0, 17.0, 15.0, 17.0]
    """
    values = frame.reindex(columns=columns)
    if "testbed" not in frame.columns or frame["testbed"].nunique(dropna=True) < 2:
        return values
    means = values.groupby(frame["testbed"]).transform("mean")
    return values - means + values.mean()


def assess_noise(frame: pd.DataFrame, design: Design, runs: int | None = None) -> Calibration:
    """The :class:`Calibration` of the A/A trials in ``frame`` (the store's tidy ``calibrate`` frame);
    trials on several testbeds are judged within each testbed (:func:`within_testbed`), a duet's also by
    their pairs (the module docstring)."""
    from tunelab.stats.noise import noise_table, paired_noise_table

    metrics = [metric.to_json() for metric in design.metrics]
    metrics += [{"name": name, "sesoi_pct": None} for name in LOW_NOISE_METRICS
                if name in frame.columns and name not in {m["name"] for m in metrics}]
    if getattr(design, "measurement", None) is MeasurementKind.DUET:   # a duet runs on one machine, no testbeds
        table = paired_noise_table(frame, metrics, alpha=design.analysis.alpha, power=POWER)
    else:
        usable = within_testbed(frame, [m["name"] for m in metrics])
        table = noise_table(usable, metrics, alpha=design.analysis.alpha, power=POWER)
    replicates = design_replicates(design)
    per_level = runs_per_level(design, replicates)
    warnings = []
    for row in table.itertuples():
        if per_level is None or not math.isfinite(row.needed) or per_level >= row.needed:
            continue
        would = replicates_for_runs(design, row.needed)
        warnings.append(
            f"warning: at the measured noise ({noise_text(row)}), {replicates} replicates cannot "
            f"resolve {row.metric}'s ±{row.sesoi_pct:g} % SESOI: {would} would (to detect a {row.sesoi_pct:g} % "
            f"change and to show a null one within it, each with {100 * POWER:.0f} % power at alpha "
            f"{design.analysis.alpha:g}); raise the replicates, the SESOI, or quiet the machine")
    return Calibration(runs=len(frame) if runs is None else runs, usable=int(len(frame)), table=table,
                       replicates=replicates, warnings=warnings)


def run_calibration(design: Design, store: Store, run_plan: PlanRunner) -> Calibration | None:
    """Run the design's ``noise.calibration_runs`` A/A trials (skipping those already recorded) with
    ``run_plan(phase, plan)`` (:func:`tunelab.study_run.plan_runner`) and assess them; None when the
    design asks for none. On many testbeds the A/A trials are spread over them, and the noise is
    measured within each testbed (:func:`within_testbed`)."""
    runs = design.noise.calibration_runs
    if runs <= 0:
        return None
    summary = run_plan(CALIBRATE, calibration_plan(design, runs))
    trials = 2 * runs if getattr(design, "measurement", None) is MeasurementKind.DUET else runs   # each beside another
    calibration = assess_noise(store.tidy(CALIBRATE), design, trials)
    calibration.summary = summary
    return calibration


__all__ = ["CALIBRATE", "Calibration", "assess_noise", "calibration_plan", "design_replicates", "noise_text",
           "run_calibration", "runs_per_level", "within_testbed"]
