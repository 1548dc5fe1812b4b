"""The pilot's noise (``--pilot SECONDS``): from the per-second series of one baseline window to a trial's CV, the
ABBA blocks it takes to decide at the SESOI, and their wall time; and :func:`pilot_for`, the pilot of a
validation (the run itself is :mod:`tunelab.preflight.pilot`).

What is estimated, honestly: the pilot is **one** window, so the spread it shows is the spread of its seconds,
not of separate trials. With ``n`` seconds of CV ``c`` and lag-1 autocorrelation ``r`` (clipped to 0..0.95), a
trial measuring ``m`` seconds has a CV of about ``c * sqrt((1 + r) / (1 - r) / m)`` (the variance of the mean of
an AR(1) series). That is a **floor**: what differs between trials (the knobs written and put back, a restart,
the load started again, caches, a neighbour) is not in one window, so the blocks computed from it are at least
that many. An ABBA block's log ratio (two B trials against two A trials) then has the SD of one trial's log
value, about that CV; the blocks are the larger of

- those a paired t test needs to detect a change of the SESOI with 80 % power (two-sided, ``alpha``), and
- those :func:`tunelab.optimize.confirm.blocks_needed` (validate's own rule) needs to bound a change that does
  nothing within ±SESOI,

and at least :data:`tunelab.optimize.confirm.MIN_BLOCKS`.
"""
from __future__ import annotations

import math
import sys
from typing import Any, Mapping, Sequence, TextIO

import numpy as np

from tunelab.errors import TunelabError
from tunelab.model import Metric
from tunelab.optimize.confirm import MIN_BLOCKS, ValidationPlan, blocks_needed
from tunelab.optimize.trial_time import TRIALS_PER_BLOCK, trial_seconds
from tunelab.preflight.pilot import PilotReport, PilotWindow, run_pilot
from tunelab.runner.load_setup import cleanup_load
from tunelab.targets import Target

#: the power a detection is planned with
POWER = 0.8
#: the fewest seconds after the warm-up a noise estimate is made from
MIN_SECONDS = 3


def window_noise(values: Sequence[float], measure_s: float) -> dict[str, float] | None:
    """The per-second CV (%), lag-1 autocorrelation and the trial CV floor (%) of a ``measure_s`` window, from
    the per-second ``values`` of one window (module docstring); None with fewer than :data:`MIN_SECONDS` values
    or a mean of 0.

    >>> window_noise([90.0, 110.0, 90.0, 110.0], 4.0)        # alternating: r < 0 is clipped to 0
    {'seconds': 4, 'mean': 100.0, 'per_second_cv_pct': 11.547, 'lag1_r': 0.0, 'trial_cv_pct': 5.774}
    """
    x = np.asarray([v for v in values if math.isfinite(v)], dtype=float)
    if len(x) < MIN_SECONDS or x.mean() == 0:
        return None
    cv = 100.0 * float(x.std(ddof=1)) / abs(float(x.mean()))
    r = float(np.corrcoef(x[:-1], x[1:])[0, 1]) if len(x) >= 4 and x[:-1].std() > 0 and x[1:].std() > 0 else 0.0
    r = min(max(r, 0.0), 0.95)
    trial = cv * math.sqrt((1 + r) / (1 - r) / max(measure_s, 1.0))
    return {"seconds": int(len(x)), "mean": float(x.mean()), "per_second_cv_pct": round(cv, 3),
            "lag1_r": round(r, 3), "trial_cv_pct": round(trial, 3)}


def paired_power(n: int, sd_log: float, effect_log: float, alpha: float) -> float:
    """Power of a two-sided paired (one-sample) t test of ``n`` block log ratios with SD ``sd_log`` at a true
    mean of ``effect_log``.

    >>> round(paired_power(10, 0.05, 0.05, 0.05), 3)
    0.803
    """
    from scipy import stats as ss              # not on `tunelab plan`'s import path

    df = n - 1
    critical = float(ss.t.ppf(1 - alpha / 2, df))
    ncp = effect_log / (sd_log / math.sqrt(n))
    return float(ss.nct.sf(critical, df, ncp) + ss.nct.cdf(-critical, df, ncp))


def blocks_at_sesoi(trial_cv_pct: float, sesoi_pct: float, alpha: float = 0.05) -> dict[str, int | None]:
    """ABBA blocks to ``detect`` a SESOI change (80 % power), to ``bound`` a null one (validate's rule), and the
    ``needed`` larger one (None: no count up to the rule's maximum bounds it), at a trial CV of ``trial_cv_pct``.

    >>> blocks_at_sesoi(5.0, 5.0)
    {'detect': 10, 'bound': 5, 'needed': 10}
    """
    sd_log, bound_log = math.log1p(trial_cv_pct / 100.0), math.log1p(sesoi_pct / 100.0)
    from tunelab.stats.power import smallest_n      # the statistics: not on `tunelab plan`'s import path

    detect = max(MIN_BLOCKS, smallest_n(lambda n: paired_power(n, sd_log, bound_log, alpha) >= POWER))
    bound = blocks_needed(0.0, sd_log, bound_log, alpha)
    bound = None if bound is None else max(MIN_BLOCKS, bound)
    return {"detect": detect, "bound": bound, "needed": None if bound is None else max(detect, bound)}


def _sesoi_pct(goal: Metric, mean: float) -> float | None:
    if goal.sesoi_abs is not None:
        return 100.0 * goal.sesoi_abs / abs(mean) if mean else None
    return goal.sesoi_pct


def noise_entry(window: PilotWindow, goal: Metric, measure_s: float, per_trial_s: float,
                alpha: float = 0.05) -> dict[str, Any]:
    """One goal's noise under one profile's pilot window, with the ``line`` to print."""
    where = f"[{window.profile}] noise of {goal.name}"
    values = window.series.get(goal.name)
    if values is None:
        shown = ", ".join(window.series) or "none"
        return {"profile": window.profile, "metric": goal.name, "line": f"{where}: not estimated (the load reports "
                f"a per-second series of {shown} only; a trial's CV needs A/A trials: `tunelab calibrate`)"}
    noise = window_noise(values, measure_s)
    if noise is None:
        return {"profile": window.profile, "metric": goal.name, "line": f"{where}: not estimated ({len(values)} "
                f"second(s) after the warm-up, {MIN_SECONDS} needed: a longer --pilot)"}
    sesoi = _sesoi_pct(goal, noise["mean"])
    blocks = blocks_at_sesoi(noise["trial_cv_pct"], sesoi, alpha) if sesoi else {"needed": None}
    text = (f"{where}: per-second CV {noise['per_second_cv_pct']:.2g} % over {noise['seconds']} s (lag-1 r "
            f"{noise['lag1_r']:.2f}), so a {measure_s:g} s trial's CV is at least {noise['trial_cv_pct']:.2g} % "
            f"(one window, not separate trials: drift between trials is not in it)")
    needed = blocks.get("needed")
    if sesoi and needed is not None:
        text += (f"; at a SESOI of {sesoi:.3g} %: at least {needed} blocks ({blocks['detect']} to detect, "
                 f"{blocks['bound']} to bound), about {_duration(needed * TRIALS_PER_BLOCK * per_trial_s)}")
    elif sesoi:
        text += f"; at a SESOI of {sesoi:.3g} % no block count bounds it"
    return {"profile": window.profile, "metric": goal.name, **noise, "sesoi_pct": sesoi, **blocks,
            "estimate_s": None if needed is None else needed * TRIALS_PER_BLOCK * per_trial_s, "line": text}


def _duration(seconds: float) -> str:
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{seconds:.0f} s" if minutes < 2 else f"{minutes} min {rest} s"


def with_noise(report: PilotReport, goals: Sequence[Metric], measure_s: float, per_trial_s: float,
               alpha: float = 0.05) -> PilotReport:
    """``report`` with a :func:`noise_entry` per profile window and goal."""
    from dataclasses import replace

    entries = tuple(noise_entry(window, goal, measure_s, per_trial_s, alpha)
                    for window in report.windows for goal in goals)
    return replace(report, noise=entries)


def pilot_for(pilot_s: float | None, plan: ValidationPlan, load: Any, live: Target, restarts: bool,
              stream: TextIO | None = None) -> PilotReport | None:
    """The pilot of a planned validation when ``pilot_s`` is given (else None): run on ``live`` with nothing
    applied, its noise added, its lines printed on ``stream`` (stderr) before the first trial. Never refuses."""
    if pilot_s is None:
        return None
    try:
        report = run_pilot(live, load, plan.profiles, plan.specs, plan.baseline, plan.candidate, plan.warmup_s,
                           float(pilot_s))
    except TunelabError as exc:              # the trials will meet the same problem and say so; the pilot informs
        report = PilotReport((), {}, note=f"pilot: not measured: {str(exc)[:200]}")
    except BaseException:
        cleanup_load(load, live)
        raise
    report = with_noise(report, plan.goals, plan.measure_s, trial_seconds(plan.warmup_s, plan.measure_s, restarts))
    out = stream if stream is not None else sys.stderr
    for line in report.lines():
        print(line, file=out, flush=True)
    return report


def pilot_json(report: PilotReport | None) -> Mapping[str, Any]:
    """``{"pilot": ...}`` for the provenance, or nothing without a pilot."""
    return {} if report is None else {"pilot": report.to_json()}
