"""The screen's model route on many simulated studies: the four checks of the test file, with more studies.

What it measures
----------------
The larger twin of ``tests/stats/test_simulation_model_screen.py`` (same generator, seeds and checks, imported
from it; the test runs 40 studies per check, 60 for the PB power). Every simulated study goes through
``tunelab.stats.screen`` unchanged. Printed per simulation: each rate over ``--studies`` studies, its Monte Carlo
SE and the exact binomial limit the test file applies (a correct procedure is outside it in about 1 of 740 runs):

1. 2^(7-3) resolution IV × 2, complete null: the family-wise error (<= the upper limit of alpha), and the raw
   (unadjusted) rate for comparison;
2. Plackett–Burman 8 × 2, k0 +10 %, k1 -10 %: each active knob's power (>= the lower limit of its Bonferroni
   planning power less 0.01) and the null knobs' family-wise error;
3. 2 × 2 factorial × 4 with a reversing interaction: the share of studies finding it (>= the lower limit of the
   planning power) and the median interaction effect (-18.2 % true);
4. the same factorial with no interaction: the share flagging it (<= the upper limit of alpha).

Run: ``PYTHONPATH=. python benchmarks/bench_model_screen_sim.py [--studies 400]`` (about 0.1-0.2 s per study and
simulation on a 2-core machine: ~4 minutes at 400). Always exits 0: the figures are for reading.
"""
from __future__ import annotations

import argparse
import math
import time

from tests.stats.test_simulation_model_screen import (ALPHA, INTERACTION_PCT, PB_EFFECTS, interaction_planned_power,
                                                      large_interaction, lower_limit, null_fractional_factorial,
                                                      null_interaction, pb_planned_power, pb_power, upper_limit)


def _line(name: str, rate: float, n: int, limit: str) -> str:
    return f"  {name:<22} {rate:.3f} (Monte Carlo SE {math.sqrt(rate * (1 - rate) / n):.3f}); {limit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=400, help="simulated studies per simulation (default 400)")
    args = parser.parse_args()
    n, start = args.studies, time.perf_counter()
    at_most = f"limit <= {upper_limit(ALPHA, n):.3f}"
    print(f"{n} studies per simulation")
    print("1. 2^(7-3) x 2, complete null")
    rates = null_fractional_factorial(n)
    print(_line("FWER (Holm)", rates["fwer"], n, at_most))
    print(_line("raw (unadjusted)", rates["raw"], n, "expected about 1 - 0.95^14 = 0.51"))
    print("2. PB 8 x 2, k0 +10 %, k1 -10 %")
    rates = pb_power(n)
    for knob in PB_EFFECTS:
        planned = pb_planned_power(knob)
        print(_line(f"power {knob}", rates[knob], n,
                    f"planned {planned:.3f}, limit >= {lower_limit(planned - 0.01, n):.3f}"))
    print(_line("null knobs' FWER", rates["null_fwer"], n, at_most))
    print("3. 2 x 2 x 4, reversing interaction")
    rates, planned = large_interaction(n), interaction_planned_power()
    print(_line("a:b found", rates["found"], n, f"planned {planned:.3f}, limit >= {lower_limit(planned, n):.3f}"))
    print(f"  median a:b effect      {rates['median_pct']:+.1f} % (true {INTERACTION_PCT:+.1f} %)")
    print("4. 2 x 2 x 4, no interaction")
    rates = null_interaction(n)
    print(_line("a:b flagged", rates["flagged"], n, at_most))
    print(_line("a found (+10 %)", rates["found_a"], n, "the test wants > 0.9"))
    print(f"({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
