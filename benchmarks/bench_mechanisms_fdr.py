"""The mechanism screen's false mechanism rate and power with hundreds of counters, on many simulated studies.

What it measures
----------------
The larger twin of ``tests/stats/test_simulation_mechanisms.py`` (same generator, imported from it): one-at-a-time
studies over three knobs (six levels that matter, 3 runs each, 18 baseline runs) with 305 counters (200 normal and
100 Poisson-count null counters, 5 true mechanisms shifted by ``--shift`` SD at one level), every level screened
with Benjamini-Hochberg at 0.05 across all 1,830 tests. Printed per truth: the mean false discovery proportion with
its Monte Carlo SE, the power (share of the true mechanisms found) and, under the global null, the share of studies
with any false mechanism (BH bounds both by 0.05).

Run: ``PYTHONPATH=. python benchmarks/bench_mechanisms_fdr.py [--studies 1000]``
"""
from __future__ import annotations

import argparse
import math
import time

from tests.stats.test_simulation_mechanisms import SHIFT_SD, rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=1000)
    parser.add_argument("--shift", type=float, default=SHIFT_SD)
    parser.add_argument("--seed", type=int, default=2029)
    args = parser.parse_args()
    start = time.perf_counter()
    fdp, power = rates(args.studies, args.seed, args.shift)
    print(f"{args.studies} studies, true mechanisms shifted by {args.shift:g} SD")
    print(f"  false mechanism rate (mean FDP): {fdp.mean():.4f} (Monte Carlo SE "
          f"{fdp.std(ddof=1) / math.sqrt(len(fdp)):.4f}); power: {power.mean():.3f}")
    null, _ = rates(args.studies, args.seed + 1, 0.0)
    share = (null > 0).mean()
    print(f"  global null: share of studies with any false mechanism {share:.4f} "
          f"(Monte Carlo SE {math.sqrt(share * (1 - share) / len(null)):.4f})")
    print(f"({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
