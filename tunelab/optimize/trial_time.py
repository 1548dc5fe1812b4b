"""The time model of a validation's trials, shared by ``validate --plan`` (:mod:`tunelab.optimize.validate_plan`)
and ``--pilot`` (:mod:`tunelab.optimize.pilot_noise`): ``warm-up + measured time + overhead`` per trial, plus a
restart when the service restarts, four trials (A B B A) per block."""
from __future__ import annotations

#: seconds per trial besides warm-up and measurement: apply, verify, restore, start the load (assumed)
TRIAL_OVERHEAD_S = 1.0
#: seconds a service restart is assumed to take, per trial that restarts it
RESTART_S = 2.0
#: trials per ABBA block
TRIALS_PER_BLOCK = 4


def trial_seconds(warmup_s: float, measure_s: float, restarts: bool) -> float:
    """The assumed wall seconds of one trial.

    >>> trial_seconds(2.0, 8.0, restarts=True)
    13.0
    """
    return warmup_s + measure_s + TRIAL_OVERHEAD_S + (RESTART_S if restarts else 0.0)
