"""Seed 004 (Wayfinder, APSys'21): a range space explored by a Latin hypercube and by three searches.

Wayfinder declares an OS configuration space as name/min/max/step ranges, explores it automatically,
compares grid search, random search and Bayesian optimisation by the best configuration each finds
within a fixed number of evaluations, and asks which options matter most. The lab's version
(``designs/seeds/004_wayfinder_space.yaml``): four per-namespace knobs declared as ranges under dnsperf
TCP overload, a 16-sample Latin hypercube screened by one regression over the ranges ("which knobs
matter"), then random search, pymoo's GA and Optuna's TPE with 16 evaluations each on the same space.
The page draws each method's best found against evaluations (:func:`best_found`) with the default's
mean, and gives the best configuration's % change over the default with a 95 % CI.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import statsmodels.api as sm
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

import tunelab
from tunelab.errors import SeedError
from tunelab.formatting import fmt_pct, fmt_pct_interval, fmt_plain
from tunelab.model import Phase, TrialStatus, Verdict, level_value
from tunelab.report import figures
from tunelab.report.refinement import REFINE_KEY, config_label
from tunelab.report.loading import Study, load_study, screen_study
from tunelab.study_data import design_info
from tunelab.seeds.contract import (DESIGNS, SEED_STUDIES, Claim, FigureImage, Measured, RecordContext, SeedStudy,
                                 StudyPage, Table, recorded_store)

DESIGN = DESIGNS / "004_wayfinder_space.yaml"
NAME = "004-wayfinder-space"
STORE = f"{NAME}.sqlite"
#: the searches compared with the Latin hypercube, in the page's order (the paper's random and Bayesian, and a GA)
ENGINES = ("random", "ga", "tpe")
#: how the page names each method
METHOD_NAMES = {"lhs": "Latin hypercube", "random": "random search", "ga": "GA (pymoo)", "tpe": "TPE (Optuna)"}
#: measurements per search at scale 1.0 (the Latin hypercube's 16 samples)
BUDGET = 16
#: each search's seed: fixed, so a rerun resumes; different, so the GA's first generation is not random search's draws
SEARCH_SEEDS = {"random": 4004, "ga": 4005, "tpe": 4006}
OBJECTIVE = "qps"
SECONDARY = "latency_mean_ms"


# ---- recording ------------------------------------------------------------------------------------------------------

def record(ctx: RecordContext) -> list[Path]:
    """Run the Latin hypercube, then random search, the GA and TPE (``confirm_blocks=0``) into one store."""
    store = ctx.store(STORE)
    started = time.monotonic()
    ctx.echo(f"004: Latin hypercube of the range space ({DESIGN.name}) -> {store}")
    tunelab.run(DESIGN, store=store, target=ctx.target)
    ctx.echo(f"004: Latin hypercube done after {time.monotonic() - started:.0f} s")
    budget = ctx.scaled(BUDGET, 4)
    for engine in ENGINES:
        began = time.monotonic()
        ctx.echo(f"004: {engine} search, {budget} evaluations (seed {SEARCH_SEEDS[engine]}) -> {store}")
        tunelab.refine(DESIGN, engine=engine, budget=budget, confirm_blocks=0, seed=SEARCH_SEEDS[engine], store=store,
                       target=ctx.target)
        ctx.echo(f"004: {engine} done after {time.monotonic() - began:.0f} s")
    ctx.echo(f"004: recorded in {time.monotonic() - started:.0f} s of lab time")
    return [store]


# ---- evaluations in order -------------------------------------------------------------------------------------------

def _evaluation_rows(trials: pd.DataFrame, knobs: Sequence[str], metrics: Sequence[str]) -> pd.DataFrame:
    """One row per trial (in trial order): the knob levels it was set to, its metrics (NaN unless ok)."""
    rows = []
    for row in trials.sort_values("trial_id").itertuples(index=False):
        config = {k: level_value(v) for k, v in (row.config or {}).items()}
        values = row.metrics or {} if row.status == TrialStatus.OK else {}
        rows.append({"trial_id": row.trial_id, "status": row.status, **{k: config.get(k) for k in knobs},
                     **{m: float(values[m]) if values.get(m) is not None else math.nan for m in metrics}})
    return pd.DataFrame(rows, columns=["trial_id", "status", *knobs, *metrics])


def method_runs(study: Study, knobs: Sequence[str],
                metrics: Sequence[str] = (OBJECTIVE, SECONDARY)) -> dict[str, pd.DataFrame]:
    """Each method's evaluations in the order they were measured: ``"lhs"`` (the screen's trials) and one
    frame per stored search (named by its engine), with ``trial_id, status``, the knob columns and ``metrics``.
    A failed trial is an evaluation with NaN metrics (it used up budget)."""
    trials = study.trials
    runs = {"lhs": _evaluation_rows(trials[trials["phase"] == Phase.SCREEN], knobs, metrics)}
    refine = trials[trials["phase"] == Phase.REFINE]
    searches = [REFINE_KEY.match(key) for key in refine["run_key"]]
    ids = pd.Series([m["search"] if m is not None else None for m in searches], index=refine.index, dtype=object)
    for search_id in dict.fromkeys(ids.dropna()):
        engine = str(search_id).split("-")[0]
        runs[engine if engine not in runs else str(search_id)] = _evaluation_rows(refine[ids == search_id], knobs,
                                                                                  metrics)
    return runs


def best_found(runs: Mapping[str, pd.DataFrame], objective: str, knobs: Sequence[str],
               maximize: bool = True) -> pd.DataFrame:
    """Best-so-far of ``objective`` against the number of evaluations, per method.

    At evaluation ``i`` every configuration measured so far is estimated by the mean of its measurements
    among the first ``i`` (a configuration measured again is one configuration, not two chances), and the
    best of those means is the method's best found. Failed measurements (NaN) count as evaluations but
    never as a value.

    Parameters
    ----------
    runs : method -> its evaluations in measurement order (knob columns and the ``objective`` column).
    objective : the metric column.
    knobs : the knob columns that identify a configuration.
    maximize : whether larger ``objective`` values are better.

    Returns
    -------
    DataFrame
        ``method, evaluation`` (1, 2, ...), ``value`` (that evaluation's measurement), ``best`` (the best
        configuration mean so far; NaN until a value exists), ``best_config`` (its knob levels as a dict)
        and ``best_n`` (its measurements so far).

    Examples
    --------
    >>> runs = {"m": pd.DataFrame({"k": [1, 2, 1], "y": [5.0, 4.0, 1.0]})}
    >>> best_found(runs, "y", ["k"])["best"].tolist()     # k=1 falls to mean 3 after its second measurement
    [5.0, 5.0, 4.0]
    """
    rows = []
    for method, frame in runs.items():
        missing = [c for c in (*knobs, objective) if c not in frame.columns]
        if missing:
            raise SeedError(f"seed 004: the {method} evaluations lack column(s) {', '.join(missing)}")
        sums: dict[tuple, float] = {}
        counts: dict[tuple, int] = {}
        configs: dict[tuple, dict[str, Any]] = {}
        for i, record in enumerate(frame[[*knobs, objective]].to_dict("records"), start=1):
            value = float(record[objective])
            key = tuple(level_value(record[k]) for k in knobs)
            if math.isfinite(value):
                sums[key] = sums.get(key, 0.0) + value
                counts[key] = counts.get(key, 0) + 1
                configs[key] = {k: level_value(record[k]) for k in knobs}
            means = {k: sums[k] / counts[k] for k in sums}
            best_key = (max if maximize else min)(means, key=means.__getitem__) if means else None
            rows.append({"method": method, "evaluation": i, "value": value,
                         "best": means[best_key] if best_key is not None else math.nan,
                         "best_config": configs.get(best_key) if best_key is not None else None,
                         "best_n": counts.get(best_key, 0) if best_key is not None else 0})
    return pd.DataFrame(rows, columns=["method", "evaluation", "value", "best", "best_config", "best_n"])


def configuration_values(runs: Mapping[str, pd.DataFrame], config: Mapping[str, Any], objective: str) -> np.ndarray:
    """Every finite measurement of ``objective`` at ``config``, pooled over the methods."""
    values = []
    for frame in runs.values():
        same = np.ones(len(frame), dtype=bool)
        for knob, level in config.items():
            same &= np.array([level_value(v) == level for v in frame[knob]], dtype=bool)
        values.extend(float(v) for v in frame.loc[same, objective] if math.isfinite(float(v)))
    return np.array(values, dtype=float)


def pct_change_ci(candidate: Sequence[float], reference: Sequence[float],
                  alpha: float = 0.05) -> tuple[float, float, float]:
    """``candidate``'s % change over ``reference`` (ratio of geometric means) with a ``1 - alpha`` CI.

    A two-group linear model of ``log value`` (statsmodels OLS, one residual variance pooled over both
    groups), so a candidate measured once borrows the noise of the reference's repeats; the interval of
    the log ratio is turned into % as ``100 (exp(x) - 1)``.

    Raises
    ------
    SeedError
        A non-positive value, an empty candidate, or too few measurements to estimate the noise.
    """
    a, b = np.asarray(candidate, dtype=float), np.asarray(reference, dtype=float)
    if a.size < 1 or b.size < 1 or a.size + b.size < 3:
        raise SeedError(f"seed 004: {a.size} candidate and {b.size} reference measurement(s) cannot give a CI; "
                        "record more baseline runs")
    if (a <= 0).any() or (b <= 0).any():
        raise SeedError("seed 004: a % change needs positive measurements (a ratio of geometric means)")
    y = np.log(np.concatenate([a, b]))
    x = sm.add_constant(np.concatenate([np.ones(a.size), np.zeros(b.size)]))
    fit = sm.OLS(y, x).fit()
    low, high = fit.conf_int(alpha)[1]
    return tuple(float(100.0 * math.expm1(v)) for v in (fit.params[1], low, high))   # type: ignore[return-value]


def best_found_figure(curve: pd.DataFrame, objective: str, default_mean: float | None = None,
                      names: Mapping[str, str] | None = None) -> Figure:
    """One step line per method: best found (y) against evaluations (x), the default's mean dashed."""
    names = names or {}
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    for method, group in curve.groupby("method", sort=False):
        ax.step(group["evaluation"], group["best"], where="post", marker="o", markersize=3,
                label=names.get(method, method))
    if default_mean is not None and math.isfinite(default_mean):
        ax.axhline(default_mean, color="black", linestyle="--", linewidth=1, label="default (mean)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("evaluations (measurements, in the order they were taken)")
    ax.set_ylabel(f"best {objective} found (configuration mean)")
    ax.set_title(f"Best {objective} found against evaluations")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


# ---- the page -------------------------------------------------------------------------------------------------------

def _knob_text(config: Mapping[str, Any] | None) -> str:
    return config_label(config, list(config)) if config else "none"


def _noise_halfwidth(default_values: np.ndarray, alpha: float = 0.05) -> float:
    """The ``1 - alpha`` half-width, in %, of the difference between two single measurements (on the log
    scale, from the default's repeats): method differences below it are noise."""
    from scipy import stats as ss

    logs = np.log(default_values[default_values > 0])
    if logs.size < 2:
        return math.nan
    half = ss.t.ppf(1 - alpha / 2, logs.size - 1) * float(np.std(logs, ddof=1)) * math.sqrt(2.0)
    return 100.0 * math.expm1(half)


def final_best(curve: pd.DataFrame, evaluations: int | None = None) -> pd.DataFrame:
    """Each method's row of ``curve`` after ``evaluations`` (default: its last), as a table."""
    rows = []
    for method, group in curve.groupby("method", sort=False):
        upto = group if evaluations is None else group[group["evaluation"] <= evaluations]
        if upto.empty:
            continue
        last = upto.iloc[-1]
        rows.append({"method": METHOD_NAMES.get(method, method), "key": method, "evaluations": int(last["evaluation"]),
                     f"best {OBJECTIVE}": last["best"], "measurements of it": int(last["best_n"]),
                     "best configuration": _knob_text(last["best_config"])})
    return pd.DataFrame(rows)


def _measured(finals: pd.DataFrame, change: tuple[float, float, float], best_text: str, n_best: int,
              n_default: int, default_mean: float, noise_pct: float, matters: list[str],
              default_text: str = "the defaults", sesoi_pct: float = 10.0) -> Measured:
    """The claim row from each method's best found, the best configuration's change and the screen."""
    pct, low, high = change
    values = dict(zip(finals["key"], finals[f"best {OBJECTIVE}"]))
    spread = 100.0 * math.expm1(math.log(max(values.values()) / min(values.values()))) if values else math.nan
    leader = max(values, key=values.__getitem__) if values else None
    runner_up = max((v for k, v in values.items() if k != leader), default=math.nan)
    lead_pct = 100.0 * math.expm1(math.log(values[leader] / runner_up)) if leader and runner_up > 0 else math.nan
    separated = bool(math.isfinite(lead_pct) and math.isfinite(noise_pct) and lead_pct > noise_pct)
    bayes_wins = separated and leader == "tpe"
    gain_clear = low > 0
    effect = (f"best {OBJECTIVE} after {int(finals['evaluations'].max())} evaluations each: "
              + ", ".join(f"{METHOD_NAMES.get(k, k)} {fmt_plain(v)}" for k, v in values.items())
              + f" (default mean {fmt_plain(default_mean)}, n = {n_default}); best configuration {best_text}: "
              f"{fmt_pct_interval(pct, low, high, decimals=1)} over the default (n = {n_best} vs {n_default})")
    verdict = (f"{'improve' if gain_clear else 'regress' if high < 0 else 'not separated from the default'}; "
               f"leader: {METHOD_NAMES.get(leader, leader)}{'' if separated else ' (within noise)'}; "
               f"knobs that matter: {', '.join(matters) or 'none'}")
    agreement = "agrees" if bayes_wins and gain_clear else "partly" if bayes_wins or gain_clear else "differs"
    if separated:
        why = (f"{METHOD_NAMES.get(leader, leader)} leads the next method by {fmt_pct(lead_pct, signed=False)}, more "
               f"than the ±{fmt_pct(noise_pct, signed=False)} two single measurements differ by from noise alone "
               "(the default's repeats)")
        why += ", as the paper found for Bayesian optimisation." if bayes_wins else \
            ", but the paper's winner was Bayesian optimisation."
    else:
        why = (f"The methods' best found span {fmt_pct(spread, signed=False)}, within the "
               f"±{fmt_pct(noise_pct, signed=False)} that two single "
               f"measurements differ by from noise alone: {int(finals['evaluations'].max())} evaluations, one search "
               "per method, cannot rank them (the paper averaged 10 searches of each at 10, 40 and 100 evaluations).")
    change = fmt_pct_interval(pct, low, high, decimals=1)
    why += (f" The best configuration beats the default by {change}" if gain_clear else
            f" No configuration clearly beats the default ({change})")
    if gain_clear:
        why += ("; it was picked as the best of many single measurements, so its estimate is biased upwards (a fresh "
                "validation would remove the winner's curse).")
    elif abs(pct) < sesoi_pct:
        why += (f": in the lab the defaults ({default_text}) are already near the top of the range space, unlike the "
                "paper's Unikraft default at 33 % of the best.")
    else:
        why += ("; one measurement of it against the default's repeats is too noisy to tell whether the defaults are "
                "near the top of the range space (the paper's Unikraft default reached 33 % of the best).")
    return Measured(effect=effect, verdict=verdict, agreement=agreement, why=why)


def range_extremes(response: pd.DataFrame | None) -> pd.DataFrame:
    """Per knob and metric, the lowest and highest predicted % change from the default over the range, and where.

    The verdict row reports one change (towards the better direction when it is large enough); a knob that
    matters because its low end collapses the metric shows that here.
    """
    columns = ["knob", "metric", "lowest_pct", "lowest_at", "highest_pct", "highest_at"]
    if response is None or response.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for (knob, metric), group in response.groupby(["knob", "metric"], sort=False):
        low, high = group.loc[group["effect_pct"].idxmin()], group.loc[group["effect_pct"].idxmax()]
        rows.append({"knob": knob, "metric": metric, "lowest_pct": float(low["effect_pct"]),
                     "lowest_at": float(low["x"]), "highest_pct": float(high["effect_pct"]),
                     "highest_at": float(high["x"])})
    return pd.DataFrame(rows, columns=columns)


def _default_note(values: np.ndarray, objective: str) -> str:
    if values.size < 2:
        return f"The default was measured {values.size} time(s): too few to see the noise."
    cv = float(np.std(values, ddof=1) / np.mean(values) * 100.0)
    return (f"The default was measured {values.size} times (Latin hypercube baselines and each search's first "
            f"evaluation), {objective} from {fmt_plain(values.min())} to {fmt_plain(values.max())} "
            f"(CV {fmt_pct(cv, signed=False, decimals=0)}): differences "
            "between methods smaller than that spread are noise or drift of the machine, not search skill.")


def _response_figures(study: Study, response: pd.DataFrame | None, default: Mapping[str, Any]) -> list[FigureImage]:
    """The Latin hypercube's response curves of the objective (% change from the default), if the screen drew them."""
    if not isinstance(response, pd.DataFrame) or response.empty:
        return []
    rows = response[response["metric"] == OBJECTIVE]
    if rows.empty:
        return []
    ranges = design_info(study.design).ranges or {}
    sesoi = float(next((m.sesoi_pct for m in study.design.metrics if m.name == OBJECTIVE), 10.0))
    fig = figures.response_curves_figure(
        rows, OBJECTIVE, baseline=default, band=(-sesoi, sesoi),
        x_scale={k: (r or {}).get("scale", "linear") for k, r in ranges.items()},
        ylabel=f"% change of {OBJECTIVE} from the default", columns=("effect_pct", "effect_ci_low", "effect_ci_high"))
    image = FigureImage(figures.to_png(fig), alt=f"{OBJECTIVE} response over each knob's range",
                        caption=f"Latin hypercube: the predicted change of {OBJECTIVE} from the default over each "
                                f"knob's range (one regression over all knobs, 95 % CI; band: the SESOI of "
                                f"±{sesoi:g} %).")
    plt.close(fig)
    return [image]


def page(stores: Path) -> StudyPage:
    """Best found against evaluations per method, the best configuration's change, and the range screen."""
    path = recorded_store(stores, STORE, NAME)
    study = load_study(path)
    if study.design is None:
        raise SeedError(f"{path} holds no design: record seed 004 again")
    knobs = list(study.design.knob_ids)
    runs = method_runs(study, knobs)
    if len(runs) < 2:
        raise SeedError(f"{path} holds no search next to the Latin hypercube: record seed 004 again")
    curve = best_found(runs, OBJECTIVE, knobs)
    default = {k: level_value(v) for k, v in study.design.baseline.items()}
    default_values = configuration_values(runs, default, OBJECTIVE)
    default_mean = float(np.exp(np.mean(np.log(default_values)))) if default_values.size else math.nan
    overall = best_found({"all": pd.concat(list(runs.values()), ignore_index=True)}, OBJECTIVE, knobs).iloc[-1]
    best_config = overall["best_config"]
    best_values = configuration_values(runs, best_config, OBJECTIVE)
    change = pct_change_ci(best_values, default_values)
    _, result = screen_study(study)
    verdicts = result.verdicts
    matters = [r.knob for r in verdicts.itertuples() if r.verdict == Verdict.MATTERS and r.metric == OBJECTIVE]
    common = int(curve.groupby("method")["evaluation"].max().min())   # every method compared at the same count
    finals = final_best(curve, common)
    fig = best_found_figure(curve, OBJECTIVE, default_mean, METHOD_NAMES)
    shown = [FigureImage(figures.to_png(fig), alt=f"best {OBJECTIVE} found against evaluations, one line per method",
                         caption=f"Best {OBJECTIVE} found (the best configuration mean so far) against the number of "
                                 "evaluations: the Latin hypercube in its run order, each search in measurement order; "
                                 "dashed: the default's mean (geometric, over all its measurements).")]
    plt.close(fig)
    response = getattr(result, "response", None)
    shown.extend(_response_figures(study, response, default))
    columns = [c for c in ("knob", "metric", "verdict", "p_adj", "effect_pct", "effect_ci_low", "effect_ci_high",
                           "level") if c in verdicts.columns]
    screen_table = verdicts[columns].merge(range_extremes(response), on=["knob", "metric"], how="left")
    return StudyPage(
        measured=_measured(finals, change, _knob_text(best_config), len(best_values), len(default_values),
                           default_mean, _noise_halfwidth(default_values), matters, _knob_text(default)),
        figures=shown,
        tables=[Table(f"Best {OBJECTIVE} found per method after {common} evaluations each (configuration mean; the "
                      "Latin hypercube's first ones in its run order)",
                      finals.drop(columns="key")),
                Table("Which knobs matter: the Latin hypercube read by one regression over the ranges "
                      "(Holm-adjusted p, predicted change from the default to the range's most extreme value)",
                      screen_table.reset_index(drop=True))],
        notes=[_default_note(default_values, OBJECTIVE),
               "Range designs are not guarded: where somaxconn collapses qps, latency is timed on the few queries "
               "still answered, so a lower latency there is not an improvement.",
               "The range space is four per-namespace knobs (somaxconn on a log scale, the server link's MTU, "
               "tcp_max_syn_backlog, tcp_fin_timeout); the paper's space was 512 build-time Unikraft/NGINX "
               "configurations.",
               "Each search is one draw with 16 evaluations (the paper: 10 searches per method at 10, 40 and 100), "
               "and the library engines (random, GA, TPE) report the best single measurement, as they would "
               "for a user."],
        stores=[path])


SEED_STUDIES.add("004", SeedStudy(
    key="004", slug="wayfinder-space", title="Wayfinder: a range space explored by a design and by three searches",
    paper="004_28f6b883c7331b67.txt",
    claim=Claim(text="Bayesian optimisation finds a better configuration than random or grid search with few "
                     "evaluations, and the defaults are far from the best",
                numbers="Unikraft's default at 33 % of the best throughput (239 to 103,470 req/s over 512 "
                        "configurations); BO finds the best or a close contender within 40 evaluations (8 % of "
                        "the space), grid search rarely",
                where="Section 3, Figures 2 and 3"),
    designs=(DESIGN,), minutes=7.5, record=record, page=page))
