"""Sequential replicates: error rates, power and trials of :func:`tunelab.stats.screen_in_rounds` against fixed designs.

What it measures
----------------
A one-at-a-time study is simulated round by round: round 1 runs ``--min`` replicates of every
level, then the sequential rule decides which levels get ``--step`` more replicates (the last
round tops up to ``--max``), until every verdict is final or ``--max`` is reached. Fresh baseline
runs come with every round as ``designs/plan.py`` interleaves them: ceil(varied runs / 2) per
replicate (``--baseline-every``), i.e. fewer once knobs are decided (``baseline plan``); the
variant ``baseline fixed`` keeps ceil(all knobs' levels / 2) per replicate in every round.

* ``--knobs`` (4) knobs with one non-baseline level each (2 levels), one metric
  ``y = 1000 (1 + effect) exp(e)``, lognormal noise with CV ``--cv`` (6 %), SESOI ``--sesoi`` (5 %),
  alpha 0.05, Holm;
* truths: ``null`` (every effect 0), ``sesoi`` (every effect +-SESOI, alternating signs),
  ``2x`` (every effect +-2 SESOI) and ``mixed`` (half the knobs +-2 SESOI, half null);
* fixed designs: the same layout with ``n`` replicates of every level in one round (one screen at
  alpha), simulated for every ``n`` from 2 to ``2 * max`` with the same engine and the same number
  of studies. "The fixed design of the same power" is found on that curve: the two integers ``n``
  whose power brackets the sequential design's, and the replicates and trials interpolated
  linearly between them; the saving is reported against the interpolated design (and, as a
  range, against the two bracketing ones).

Two engines run the same rule on the same simulated runs:

* ``fast`` (all figures): every look's p-values in one vectorised pass with the scipy functions
  that :func:`tunelab.stats.screen` uses (route by :func:`tunelab.stats.recommend` from
  Shapiro–Wilk on the group-standardised residuals, Brown–Forsythe and the SD ratio; ANOVA,
  Welch or Kruskal–Wallis; Welch TOST at the SESOI), with tunelab's ``adjust`` (Holm) and
  ``spent_alpha`` unchanged;
* ``real``: :func:`tunelab.stats.screen_in_rounds` with ``previous`` and
  :func:`tunelab.stats.pending_levels` in the run loop, on the first ``--check`` studies of each
  default row; the line ``engines agree`` counts the studies whose verdicts, decision rounds and
  trials are identical (a FAIL there means the fast figures are not tunelab's).

Figures (each +- one Monte-Carlo SE, the study as the unit): FWER = share of null or mixed studies
with any false ``matters``; false equivalence = share of rows called ``no effect (equivalent)``
when the true effect is the SESOI; power = share of 2xSESOI rows called ``matters``; trials = mean
runs per study (baseline included).

Goals: FWER <= alpha and false equivalence <= 5 % (both + 1.96 MC SE), and at the 2xSESOI truth
at least 30 % fewer trials than the fixed design of the same power. The lever table (one change
at a time from the default: alpha recycling off, spending function, step, fixed baseline) is what
chose the defaults.

Usage::

    .venv/bin/python benchmarks/bench_sequential.py [--seeds N] [--check C] [--jobs J]

A benchmark, not a test: it always exits 0. The default (4,000 studies per row, 12 real-engine
studies per truth) takes about 2-3 minutes on 2 cores (wall time printed at the end).
"""
from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats as ss

from tunelab.stats import adjust, pending_levels, recommend, screen_in_rounds, spent_alpha
from tunelab.stats.rounds import DEFAULT_SPENDING

ALPHA = 0.05
Z_MC = 1.96
TRUTHS = ("null", "sesoi", "2x", "mixed")
ROUTE_TEST = {"anova+tukey": "anova", "welch+games_howell": "welch", "kruskal+dunn": "kruskal"}
MATTERS, EQUIVALENT, INCONCLUSIVE = "matters", "no effect (equivalent)", "inconclusive"


@dataclass(frozen=True)
class Setup:
    knobs: int = 4
    cv: float = 6.0
    sesoi: float = 5.0
    min: int = 3
    step: int = 3
    max: int = 20
    baseline_every: int = 2
    spending: str = DEFAULT_SPENDING
    recycle: bool = True
    baseline: str = "plan"          # "plan": ceil(varied / baseline_every) per replicate; "fixed": as in round 1

    def label(self) -> str:
        return (f"{self.spending} step {self.step} {'recycle' if self.recycle else 'no-recycle'} "
                f"baseline {self.baseline}")

    @property
    def names(self) -> list[str]:
        return [f"k{j}" for j in range(self.knobs)]

    def effects(self, truth: str) -> np.ndarray:
        """True fractional effect of each knob's non-baseline level."""
        size = {"null": 0.0, "sesoi": self.sesoi, "2x": 2 * self.sesoi, "mixed": 2 * self.sesoi}[truth] / 100
        return np.array([(size if j % 2 == 0 else -size) if truth != "mixed" or j < self.knobs // 2 else 0.0
                         for j in range(self.knobs)])

    def baseline_runs(self, varied: np.ndarray | int, replicates: int) -> np.ndarray:
        """Baseline runs of a round of ``replicates`` with ``varied`` open levels (the plan's interleaving)."""
        if self.baseline == "fixed":
            varied = np.full_like(np.asarray(varied), self.knobs)
        return np.ceil(np.asarray(varied) / self.baseline_every).astype(int) * replicates


def draw(setup: Setup, truth: str, studies: int, seed: int, n_max: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every run a study could make: baseline pool (study, run) and levels (study, knob, run), in run order."""
    rng = np.random.default_rng([20261124, TRUTHS.index(truth), seed])
    n = n_max or setup.max
    sd = math.sqrt(math.log1p((setup.cv / 100) ** 2))
    base = 1000.0 * np.exp(rng.normal(0.0, sd, (studies, int(setup.baseline_runs(setup.knobs, n)))))
    levels = 1000.0 * (1 + setup.effects(truth)[None, :, None]) * np.exp(rng.normal(0.0, sd, (studies, setup.knobs, n)))
    return base, levels


# ---- fast engine -----------------------------------------------------------------------------------

def look_values(b: np.ndarray, x: np.ndarray, sesoi: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Route p-value, % change and TOST p of every row (baseline runs ``b``, level runs ``x``)."""
    nb, nx = b.shape[1], x.shape[1]
    sb, sx = b.std(axis=1, ddof=1), x.std(axis=1, ddof=1)
    residuals = np.concatenate([(b - b.mean(axis=1, keepdims=True)) / sb[:, None],
                                (x - x.mean(axis=1, keepdims=True)) / sx[:, None]], axis=1)
    shapiro = ss.shapiro(residuals, axis=1).pvalue
    bf = ss.levene(b, x, center="median", axis=1).pvalue
    ratio = np.maximum(sb, sx) / np.minimum(sb, sx)
    p = {"anova": ss.f_oneway(b, x, axis=1).pvalue, "welch": ss.ttest_ind(b, x, axis=1, equal_var=False).pvalue,
         "kruskal": ss.kruskal(b, x, axis=1).pvalue}
    routes = [ROUTE_TEST[recommend(float(a), float(c), float(r))[0]] for a, c, r in zip(shapiro, bf, ratio)]
    chosen = np.array([p[route][i] for i, route in enumerate(routes)])
    mb, mx = b.mean(axis=1), x.mean(axis=1)
    vb, vx = sb ** 2 / nb, sx ** 2 / nx
    se, df = np.sqrt(vb + vx), (vb + vx) ** 2 / (vb ** 2 / (nb - 1) + vx ** 2 / (nx - 1))
    margin = sesoi / 100 * np.abs(mb)
    tost = np.maximum(ss.t.sf((mx - mb + margin) / se, df), ss.t.cdf((mx - mb - margin) / se, df))
    return chosen, 100 * (mx / mb - 1), tost


def fast_sequential(setup: Setup, base: np.ndarray, levels: np.ndarray) -> dict[str, np.ndarray]:
    """The sequential rule on every study at once: verdicts, decision rounds, trials, looks."""
    studies, k = levels.shape[:2]
    verdict = np.full((studies, k), INCONCLUSIVE, dtype=object)
    decided_at = np.zeros((studies, k), dtype=int)
    n_base = np.zeros(studies, dtype=int)
    trials = np.zeros(studies, dtype=int)
    looks = np.zeros(studies, dtype=int)
    done, number, spent = 0, 0, 0.0
    while done < setup.max:
        open_ = verdict == INCONCLUSIVE
        running = open_.any(axis=1)
        if not running.any():
            break
        number += 1
        add = setup.min if number == 1 else min(setup.step, setup.max - done)
        done += add
        varied = open_.sum(axis=1)
        extra = np.where(running, setup.baseline_runs(varied, add), 0)
        n_base += extra
        trials += extra + np.where(running, varied * add, 0)
        looks += running
        now = spent_alpha(min(1.0, done / setup.max), ALPHA, setup.spending)
        nominal, spent = now - spent, now
        p = np.full((studies, k), np.nan)
        effect = np.full((studies, k), np.nan)
        tost = np.full((studies, k), np.nan)
        for nb in np.unique(n_base[running]):
            s, j = np.nonzero(open_ & (n_base == nb)[:, None])
            p[s, j], effect[s, j], tost[s, j] = look_values(base[s, :nb], levels[s, j, :done], setup.sesoi)
        for i in np.flatnonzero(running):
            rows = np.flatnonzero(open_[i])
            kept = (verdict[i] != INCONCLUSIVE) & ~(setup.recycle & (verdict[i] == MATTERS))
            q = adjust(np.concatenate([p[i, rows], np.ones(int(kept.sum()))]), method="holm")[:len(rows)]
            for j, qj in zip(rows, q):
                decided_at[i, j] = number
                if qj < nominal and abs(effect[i, j]) >= setup.sesoi:
                    verdict[i, j] = MATTERS
                elif tost[i, j] < nominal:
                    verdict[i, j] = EQUIVALENT
    return {"verdict": verdict, "round": decided_at, "trials": trials, "looks": looks}


def fast_fixed(setup: Setup, base: np.ndarray, levels: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """Fixed designs with ``n`` replicates of every level: one screen at alpha (Holm over the knobs)."""
    studies, k = levels.shape[:2]
    nb = int(setup.baseline_runs(k, n))
    b = np.repeat(base[:, :nb], k, axis=0)
    p, effect, tost = (v.reshape(studies, k) for v in look_values(b, levels[:, :, :n].reshape(studies * k, n),
                                                                  setup.sesoi))
    q = np.vstack([adjust(row, method="holm") for row in p])
    verdict = np.where((q < ALPHA) & (np.abs(effect) >= setup.sesoi), MATTERS,
                       np.where(tost < ALPHA, EQUIVALENT, INCONCLUSIVE)).astype(object)
    return {"verdict": verdict, "trials": np.full(studies, nb + k * n), "looks": np.ones(studies, dtype=int)}


# ---- real engine -----------------------------------------------------------------------------------

def real_sequential(setup: Setup, base: np.ndarray, levels: np.ndarray) -> dict:
    """tunelab's own run loop on one study's runs: screen_in_rounds (with previous) and pending_levels."""
    names = setup.names
    baseline = {knob: 0 for knob in names}
    metrics = [{"name": "y", "direction": "maximize", "sesoi_pct": setup.sesoi}]
    pending = {knob: [1] for knob in names}
    rows: list[dict] = []
    done, number, used, result = 0, 0, 0, None
    while pending and done < setup.max:
        number += 1
        add = setup.min if number == 1 else min(setup.step, setup.max - done)
        extra = int(setup.baseline_runs(sum(len(v) for v in pending.values()), add))
        rows += [{**baseline, "round": number, "y": base[used + r]} for r in range(extra)]
        used += extra
        for knob in pending:
            j = names.index(knob)
            rows += [{**baseline, knob: 1, "round": number, "y": levels[j, r]} for r in range(done, done + add)]
        done += add
        data = pd.DataFrame(rows)
        result = screen_in_rounds(data, metrics, names, baseline, max_replicates=setup.max, spending=setup.spending,
                                   recycle=setup.recycle, n_boot=100, seed=0, previous=result)
        pending = pending_levels(result, data, names, baseline)
    verdicts = result.verdicts.set_index("knob").loc[names]
    return {"verdict": verdicts["verdict"].tolist(), "round": verdicts["round"].tolist(), "trials": len(rows)}


# ---- scoring ---------------------------------------------------------------------------------------

def score(out: dict[str, np.ndarray], effects: np.ndarray, sesoi: float) -> dict[str, float]:
    """Error rates, power and trials with Monte-Carlo SEs (ratio estimators, the study as the unit)."""
    verdict = out["verdict"]
    size = np.abs(effects) * 100
    null, active, at_sesoi = size == 0, size >= 2 * sesoi - 1e-9, np.abs(size - sesoi) < 1e-9
    matters, equivalent = verdict == MATTERS, verdict == EQUIVALENT
    studies = len(verdict)

    def mean(values: np.ndarray) -> tuple[float, float]:
        values = values.astype(float)
        return float(values.mean()), float(values.std(ddof=1) / math.sqrt(studies))

    def ratio(hits: np.ndarray, columns: np.ndarray) -> tuple[float, float]:
        if not columns.any():
            return math.nan, math.nan
        h, n = hits[:, columns].sum(axis=1).astype(float), float(columns.sum())
        p = h.mean() / n
        return float(p), float(math.sqrt(((h - p * n) ** 2).sum()) / (n * studies))

    result = {"studies": studies}
    result["fwer"], result["fwer_se"] = mean((matters & null).any(axis=1)) if null.any() else (math.nan, math.nan)
    result["false_eq"], result["false_eq_se"] = ratio(equivalent, at_sesoi)
    result["power"], result["power_se"] = ratio(matters, active)
    result["null_eq"], result["null_eq_se"] = ratio(equivalent, null)
    result["trials"], result["trials_se"] = mean(out["trials"])
    result["looks"] = float(np.mean(out["looks"]))
    return result


def _sequential_task(args: tuple) -> dict:
    setup, truth, studies, seed = args
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base, levels = draw(setup, truth, studies, seed)
        return score(fast_sequential(setup, base, levels), setup.effects(truth), setup.sesoi)


def _fixed_task(args: tuple) -> list[dict]:
    """The fixed designs with every ``n`` in ``ns`` on the same runs (prefixes: a smooth power curve)."""
    setup, truth, studies, seed, ns = args
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base, levels = draw(setup, truth, studies, 1000 + seed, n_max=max(ns))
        return [{"n": n, **score(fast_fixed(setup, base, levels, n), setup.effects(truth), setup.sesoi)} for n in ns]


def _check_task(args: tuple) -> tuple[int, int]:
    """Studies where the real and the fast engine agree, out of those checked."""
    setup, truth, studies, seed = args
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base, levels = draw(setup, truth, studies, seed)
        fast = fast_sequential(setup, base, levels)
        agree = 0
        for i in range(studies):
            real = real_sequential(setup, base[i], levels[i])
            agree += (real["verdict"] == fast["verdict"][i].tolist() and real["round"] == fast["round"][i].tolist()
                      and real["trials"] == int(fast["trials"][i]))
        return agree, studies


def pooled(parts: list[dict]) -> dict[str, float]:
    """Combine equal-sized chunks (means of means; SEs combined as independent)."""
    out = {"studies": sum(p["studies"] for p in parts)}
    for key in parts[0]:
        if key in ("studies", "n") or key.endswith("_se"):
            continue
        values = [p[key] for p in parts]
        out[key] = float(np.mean(values))
        if key + "_se" in parts[0]:
            out[key + "_se"] = float(math.sqrt(sum(p[key + "_se"] ** 2 for p in parts)) / len(parts))
    return out


def fixed_for_power(curve: list[dict], power: float) -> dict[str, float]:
    """The fixed design with ``power`` on the simulated curve: the bracketing integers and the interpolation."""
    points = sorted(curve, key=lambda row: row["n"])
    for low, high in zip(points, points[1:]):
        if low["power"] < power <= high["power"]:
            w = (power - low["power"]) / (high["power"] - low["power"])
            return {"n": low["n"] + w * (high["n"] - low["n"]), "trials": low["trials"] + w * (high["trials"] - low["trials"]),
                    "low": low, "high": high}
    if power <= points[0]["power"]:
        return {"n": points[0]["n"], "trials": points[0]["trials"], "low": points[0], "high": points[0]}
    return {"n": math.nan, "trials": math.nan, "low": points[-1], "high": points[-1]}


def fmt(value: float, se: float, pct: bool = True) -> str:
    if math.isnan(value):
        return "      -      "
    return f"{100 * value:5.1f} ±{100 * se:4.1f}" if pct else f"{value:6.1f} ±{se:4.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4000, help="simulated studies per row (default 4000)")
    parser.add_argument("--check", type=int, default=12, help="studies per truth run by the real engine too (12)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--spendings", default="linear,pocock,obrien-fleming", help="spending functions compared")
    parser.add_argument("--steps", default="2,3,4,5", help="steps compared (default 2,3,4,5)")
    parser.add_argument("--spending", default=DEFAULT_SPENDING, help=f"spending of the default rows ({DEFAULT_SPENDING})")
    parser.add_argument("--step", type=int, default=3, help="step of the default rows (default 3)")
    parser.add_argument("--knobs", type=int, default=4)
    parser.add_argument("--cv", type=float, default=6.0, help="noise CV in %% (default 6)")
    parser.add_argument("--sesoi", type=float, default=5.0, help="SESOI in %% (default 5)")
    parser.add_argument("--min", type=int, default=3)
    parser.add_argument("--max", type=int, default=20)
    args = parser.parse_args(argv)
    setup = Setup(knobs=args.knobs, cv=args.cv, sesoi=args.sesoi, min=args.min, step=args.step, max=args.max,
                  spending=args.spending)
    chunks = max(1, min(8, args.seeds // 250))
    size = max(1, args.seeds // chunks)
    start = time.perf_counter()
    print(f"OAT, {setup.knobs} knobs x 2 levels, lognormal noise CV {setup.cv:g} %, SESOI {setup.sesoi:g} %, "
          f"alpha {ALPHA}, Holm; replicates min {setup.min}, step {setup.step}, max {setup.max}; "
          f"{size * chunks} studies per row; baseline runs ceil(varied / {setup.baseline_every}) per replicate")
    print("figures in % (trials: runs per study), ± one Monte-Carlo SE\n")
    header = (f"{'design':46} {'truth':6} {'FWER':>12} {'false eq':>12} {'power':>12} {'null eq':>12} "
              f"{'trials':>13} {'looks':>5}")

    def line(label: str, truth: str, s: dict) -> None:
        print(f"{label:46} {truth:6} {fmt(s['fwer'], s['fwer_se'])} {fmt(s['false_eq'], s['false_eq_se'])} "
              f"{fmt(s['power'], s['power_se'])} {fmt(s['null_eq'], s['null_eq_se'])} "
              f"{fmt(s['trials'], s['trials_se'], pct=False)} {s['looks']:5.1f}", flush=True)

    variants = [setup, replace(setup, recycle=False), replace(setup, baseline="fixed")]
    variants += [replace(setup, spending=s) for s in args.spendings.split(",") if s and s != setup.spending]
    variants += [replace(setup, step=int(s)) for s in args.steps.split(",") if s and int(s) != setup.step]
    fixed_n = list(range(2, 2 * setup.max + 1))
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        jobs = {(variant, truth): [pool.submit(_sequential_task, (variant, truth, size, c)) for c in range(chunks)]
                for variant in variants for truth in TRUTHS}
        fixed_jobs = {truth: [pool.submit(_fixed_task, (setup, truth, size, c, fixed_n)) for c in range(chunks)]
                      for truth in TRUTHS}
        checks = [pool.submit(_check_task, (setup, truth, args.check, 0)) for truth in TRUTHS] if args.check else []
        results = {key: pooled([f.result() for f in futures]) for key, futures in jobs.items()}
        fixed = {(truth, n): pooled([f.result()[i] for f in futures])
                 for truth, futures in fixed_jobs.items() for i, n in enumerate(fixed_n)}
        agreement = [f.result() for f in checks]
    print(header)
    print("-" * len(header))
    for variant in variants:
        for truth in TRUTHS:
            line(("sequential " if variant == setup else "  ") + variant.label(), truth, results[(variant, truth)])
    for n in (6, 9, 12, 15, 20):
        for truth in ("null", "sesoi", "2x", "mixed"):
            line(f"fixed {n} replicates", truth, fixed[(truth, n)])
    print()
    print("fixed design of the same power (the fast engine's fixed curve, n = 2 .. "
          f"{fixed_n[-1]}, interpolated between the bracketing integers):")
    savings = {}
    for variant in variants:
        for truth in ("2x", "mixed"):
            s = results[(variant, truth)]
            curve = [{"n": n, **fixed[(truth, n)]} for n in fixed_n]
            match = fixed_for_power(curve, s["power"])
            saved = 1 - s["trials"] / match["trials"]
            savings[(variant, truth)] = saved
            low, high = match["low"], match["high"]
            same_trials = float(np.interp(s["trials"], [row["trials"] for row in curve], [row["power"] for row in curve]))
            print(f"  {variant.label():44} {truth:6}: power {100 * s['power']:5.2f} %, {s['trials']:6.1f} trials | "
                  f"fixed n={low['n']} {100 * low['power']:5.2f} % / n={high['n']} {100 * high['power']:5.2f} % "
                  f"-> {match['n']:5.2f} replicates, {match['trials']:6.1f} trials: {100 * saved:+5.1f} % fewer "
                  f"[{100 * (1 - s['trials'] / low['trials']):+5.1f}, {100 * (1 - s['trials'] / high['trials']):+5.1f}]; "
                  f"fixed power at the same trials {100 * same_trials:5.1f} %")
    print()
    null, sesoi, mixed = (results[(setup, t)] for t in ("null", "sesoi", "mixed"))
    for name, row in (("all null", null), ("mixed", mixed)):
        bound = ALPHA + Z_MC * row["fwer_se"]
        print(f"goal FWER <= alpha ({name}): {100 * row['fwer']:.2f} % <= {100 * bound:.2f} % (alpha + {Z_MC} SE): "
              f"{'PASS' if row['fwer'] <= bound else 'FAIL'}")
    bound = 0.05 + Z_MC * sesoi["false_eq_se"]
    print(f"goal false equivalence <= 5 %: {100 * sesoi['false_eq']:.2f} % <= {100 * bound:.2f} %: "
          f"{'PASS' if sesoi['false_eq'] <= bound else 'FAIL'}")
    saved = savings[(setup, "2x")]
    print(f"goal >= 30 % fewer trials than the fixed design of the same power (2xSESOI, {setup.label()}): "
          f"{100 * saved:.1f} %: {'PASS' if saved >= 0.30 else 'FAIL'}")
    valid = [v for v in variants if results[(v, "null")]["fwer"] <= ALPHA + Z_MC * results[(v, "null")]["fwer_se"]
             and results[(v, "sesoi")]["false_eq"] <= 0.05 + Z_MC * results[(v, "sesoi")]["false_eq_se"]]
    best = max(valid, key=lambda v: savings[(v, "2x")], default=None)
    if best is not None:
        print(f"largest saving at 2xSESOI among the variants that meet both error goals: {best.label()} "
              f"({100 * savings[(best, '2x')]:.1f} %)")
    if agreement:
        agree, checked = sum(a for a, _ in agreement), sum(c for _, c in agreement)
        print(f"engines agree (real screen_in_rounds run loop = fast engine, verdicts, rounds and trials): "
              f"{agree}/{checked} studies: {'PASS' if agree == checked else 'FAIL'}")
    print(f"\ntotal wall time: {time.perf_counter() - start:.0f} s ({args.jobs} processes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
