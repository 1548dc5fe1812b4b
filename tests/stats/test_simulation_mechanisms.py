"""Simulation of the mechanism screen (:func:`tunelab.stats.mechanisms.mechanism_table`): false mechanism
rate and power with hundreds of counters.

Each simulated study is a one-at-a-time design over three knobs with two non-baseline levels each
(six knob levels that matter, three runs per level and 18 baseline runs) and 305 counters: 200 normal null counters,
100 Poisson-count null counters (rates 0.5 to 50 events/s over an 8 s window, as the kernel counts),
and 5 true mechanisms that shift by 6 SD at one level (``a = 2``) only. Every level is screened (1,830
tests per study), with Benjamini-Hochberg at 0.05 across all of them. The generator uses numpy only.

The false mechanism rate is the mean over studies of false discoveries / discoveries (0 when there is
none): Benjamini-Hochberg bounds it by 0.05 · m0 / m. The tests allow 2.58 Monte Carlo standard errors
above 0.05; under the global null (no true mechanism) the rate is the chance of any false discovery.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tunelab.model import AnalysisKind
from tunelab.stats.mechanisms import FDR, mechanism_table

KNOBS = {"a": [0, 1, 2], "b": [0, 1, 2], "c": [0, 1, 2]}
BASELINE = {knob: 0 for knob in KNOBS}
#: runs per non-baseline level and of the baseline: the shape of the default study (3 replicates per level,
#: the baseline run with every round), where Welch's t-test is far too liberal in the tail BH uses
REPLICATES, BASELINE_RUNS = 3, 18
N_NORMAL, N_POISSON, N_TRUE = 200, 100, 5
TRUE_LEVEL = ("a", 2)
SHIFT_SD = 6.0
WINDOW_S = 8.0
Z99 = 2.58
#: every level is one that matters: each knob matters for qps at both its levels (``levels``, level 1
#: decisive) and for latency at level 2, so the simulation screens the counters of all six levels once each
VERDICTS = pd.DataFrame({"knob": [k for k in KNOBS for _ in ("qps", "latency")],
                         "metric": ["qps", "latency"] * len(KNOBS), "verdict": "matters",
                         "level": pd.Series([lv for levels in KNOBS.values() for lv in levels[1:]], dtype=object),
                         "levels": [entries for levels in KNOBS.values()
                                    for entries in ([{"level": lv} for lv in levels[1:]], [{"level": levels[2]}])]})
LEVELS_THAT_MATTER = sum(len(levels) - 1 for levels in KNOBS.values())
RUNS = pd.DataFrame([dict(BASELINE)] * BASELINE_RUNS + [{**BASELINE, k: lv} for k, levels in KNOBS.items()
                                                       for lv in levels[1:] for _ in range(REPLICATES)])
NAMES = ([f"counter.null.Normal{i}" for i in range(N_NORMAL)] + [f"counter.null.Count{i}" for i in range(N_POISSON)]
         + [f"counter.true.Mechanism{i}" for i in range(N_TRUE)])


def simulated_study(rng: np.random.Generator, shift_sd: float = SHIFT_SD) -> pd.DataFrame:
    n = len(RUNS)
    normal = rng.normal(100.0, 10.0, size=(n, N_NORMAL + N_TRUE))
    normal[(RUNS[TRUE_LEVEL[0]] == TRUE_LEVEL[1]).to_numpy(), N_NORMAL:] += shift_sd * 10.0
    counts = rng.poisson(rng.uniform(0.5, 50.0, size=N_POISSON) * WINDOW_S, size=(n, N_POISSON)) / WINDOW_S
    values = np.hstack([normal[:, :N_NORMAL], counts, normal[:, N_NORMAL:]])
    return pd.concat([RUNS, pd.DataFrame(values, columns=NAMES)], axis=1)


def rates(studies: int, seed: int, shift_sd: float) -> tuple[np.ndarray, np.ndarray]:
    """Per study: the false discovery proportion and the share of the true mechanisms found."""
    rng = np.random.default_rng(seed)
    fdp, power = np.empty(studies), np.empty(studies)
    for i in range(studies):
        table = mechanism_table(simulated_study(rng, shift_sd), VERDICTS, list(KNOBS), BASELINE, AnalysisKind.OAT)
        assert len(table) == LEVELS_THAT_MATTER * len(NAMES)
        found = table[table["significant"]]
        true = found["counter"].str.startswith("counter.true.") & (found["knob"] == TRUE_LEVEL[0]) \
            & (found["level"] == TRUE_LEVEL[1]) & (shift_sd != 0)
        fdp[i] = (~true).sum() / max(len(found), 1)
        power[i] = true.sum() / N_TRUE
    return fdp, power


def test_false_mechanism_rate_stays_at_the_fdr_level_and_true_mechanisms_are_found() -> None:
    fdp, power = rates(studies=100, seed=2029, shift_sd=SHIFT_SD)
    standard_error = fdp.std(ddof=1) / math.sqrt(len(fdp))
    assert fdp.mean() <= FDR + Z99 * standard_error, (fdp.mean(), standard_error)
    assert power.mean() >= 0.9, power.mean()


def test_global_null_any_false_mechanism_at_most_the_fdr_level() -> None:
    fdp, _ = rates(studies=100, seed=7, shift_sd=0.0)
    any_false = (fdp > 0).mean()
    assert any_false <= FDR + Z99 * math.sqrt(FDR * (1 - FDR) / len(fdp)), any_false
