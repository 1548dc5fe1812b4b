"""Seed 003 (NSGA-II over GCC flags for Apache): are the usual presets dominated by the searched Pareto front?

The paper drew its NSGA-II fronts per pair of objectives with the GCC presets (-O0 ... -O3, -Os) on the
same plot and found the presets "always dominated ... very far from the optimal Pareto Front". The lab's
analogue (``designs/seeds/003_nsga2_pareto.yaml``) searches congestion control, socket buffers and
``tcp_notsent_lowat`` for an iperf3 upload through a 200 Mbit/s bottleneck with a deep queue on three
objectives (throughput, mean RTT, retransmits), then measures the knob presets people apply (:data:`PRESETS`)
and the front's two extremes again against the kernel defaults in ABBA blocks, so every marked point has a
95 % CI. A preset is called *dominated* only when a front point is better on both objectives of a pair
beyond both CIs (:func:`dominance_verdict`).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import yaml
from matplotlib.figure import Figure

import tunelab
from tunelab.errors import SeedError
from tunelab.formatting import fmt_number, fmt_pct_interval
from tunelab.model import Direction, level_value
from tunelab.optimize import non_dominated
from tunelab.report import figures, refinement
from tunelab.report.loading import load_study
from tunelab.seeds.contract import (DESIGNS, SEED_STUDIES, Claim, FigureImage, Measured, RecordContext, SeedStudy,
                                 StudyPage, Table, recorded_store)

DESIGN = DESIGNS / "003_nsga2_pareto.yaml"
NAME = "003-nsga2-pareto"
SEARCH_STORE = f"{NAME}.sqlite"
PRESETS_STORE = f"{NAME}-presets.sqlite"
#: the search's objectives, in the order of the plots' axes
OBJECTIVES = ("throughput_mbps:max", "rtt_mean_ms:min", "retransmits:min")
DIRECTIONS = {"throughput_mbps": "maximize", "rtt_mean_ms": "minimize", "retransmits": "minimize"}
#: the pairs of objectives, one Pareto plot each; the first is the claim's headline pair
PAIRS = (("throughput_mbps", "rtt_mean_ms"), ("throughput_mbps", "retransmits"), ("rtt_mean_ms", "retransmits"))
#: the validations' goals (retransmits in absolute segments: the defaults may retransmit none)
VALIDATE_METRICS = ("throughput_mbps:max:5", "rtt_mean_ms:min:10", "retransmits:min:abs=50")
#: the search: NSGA-II's budget (measurements) and seed (keep it to resume)
BUDGET = 36
SEED = 3
#: ABBA blocks per preset (each block: defaults, preset, preset, defaults)
VALIDATE_BLOCKS = 2
#: how many front configurations are measured again like the presets (the front's two extremes)
FRONT_VALIDATED = 2
CC = "net.ipv4.tcp_congestion_control@client"
WMEM = "net.ipv4.tcp_wmem@client"
RMEM = "net.ipv4.tcp_rmem"
LOWAT = "net.ipv4.tcp_notsent_lowat@client"
KNOBS = (CC, WMEM, RMEM, LOWAT)
#: the lab's defaults (the first level of each knob in the design): kernel 6.18 in a fresh namespace
DEFAULTS: dict[str, Any] = {CC: "bbr", WMEM: (4096, 16384, 4194304), RMEM: (4096, 131072, 6291456),
                            LOWAT: 4294967295}
FASTERDATA_WMEM = (4096, 65536, 33554432)
FASTERDATA_RMEM = (4096, 87380, 33554432)
SEED000_BUFFERS = (8192, 873800, 16777216)


@dataclass(frozen=True)
class Preset:
    """A named knob preset (the analogue of a GCC -O level): its changes to the defaults and their source."""

    name: str
    changes: Mapping[str, Any]
    source: str

    @property
    def config(self) -> dict[str, Any]:
        """The full configuration: the defaults with this preset's changes."""
        return {**DEFAULTS, **self.changes}


#: the presets people apply, each with where it comes from (only knobs of the search space)
PRESETS = (
    Preset("fasterdata", {WMEM: FASTERDATA_WMEM, RMEM: FASTERDATA_RMEM, CC: "reno"},
           "ESnet fasterdata host tuning for 10G hosts: tcp_rmem/tcp_wmem max 32 MiB with a loss-based congestion "
           "control (fasterdata names htcp or cubic; the lab allows only reno and bbr, so reno stands in)."),
    Preset("fasterdata-bbr", {WMEM: FASTERDATA_WMEM, RMEM: FASTERDATA_RMEM, CC: "bbr"},
           "ESnet fasterdata's 32 MiB buffers with bbr, which fasterdata recommends for newer kernels."),
    Preset("latency", {CC: "bbr", LOWAT: 16384},
           "Low-latency tuning as in Cloudflare's HTTP/2 prioritisation write-up: bbr with tcp_notsent_lowat "
           "16384, so little unsent data waits in the socket."),
    Preset("seed000", {WMEM: SEED000_BUFFERS, RMEM: SEED000_BUFFERS},
           "Seed 000 (Gembala et al.): the tuned tcp_rmem/tcp_wmem values of its Table-2 parameter list "
           "(8192 873800 16777216)."),
)
DEFAULTS_NAME = "defaults"


# ---- pure analysis ------------------------------------------------------------------------------

def mean_interval(values: Iterable[float], level: float = 0.95,
                  floor: float | None = None) -> tuple[float, float, float, int]:
    """Mean and Student-t confidence interval of ``values`` (NaNs dropped; statsmodels' ``tconfint_mean``):
    ``(mean, low, high, n)``.

    With fewer than two values the interval is ``(nan, nan)``; with no spread it is the mean itself.
    ``floor`` clips the interval to a metric's range (0 for counts and rates).
    """
    data = np.asarray([v for v in values if v is not None and not pd.isna(v)], dtype=float)
    n = len(data)
    if n == 0:
        return math.nan, math.nan, math.nan, 0
    mean = float(data.mean())
    if n < 2:
        return mean, math.nan, math.nan, n
    if data.std(ddof=1) == 0:
        return mean, mean, mean, n
    from statsmodels.stats.weightstats import DescrStatsW

    low, high = (float(v) for v in DescrStatsW(data).tconfint_mean(alpha=1 - level))
    return mean, low if floor is None else max(low, floor), high, n


def pct_change_interval(candidate: Iterable[float], baseline: Iterable[float],
                        level: float = 0.95) -> tuple[float, float, float]:
    """The candidate's change against the baseline in % with a Welch CI on the log scale: ``(pct, low, high)``.

    ``exp`` of the difference of the mean logs (a ratio of geometric means), Welch-Satterthwaite degrees
    of freedom (:class:`statsmodels.stats.weightstats.CompareMeans`). NaN when a side has fewer than two
    positive values.
    """
    from statsmodels.stats.weightstats import CompareMeans, DescrStatsW

    cand = np.asarray([v for v in candidate if v is not None and not pd.isna(v)], dtype=float)
    base = np.asarray([v for v in baseline if v is not None and not pd.isna(v)], dtype=float)
    if len(cand) < 2 or len(base) < 2 or (cand <= 0).any() or (base <= 0).any():
        return math.nan, math.nan, math.nan
    compare = CompareMeans(DescrStatsW(np.log(cand)), DescrStatsW(np.log(base)))
    diff = float(np.log(cand).mean() - np.log(base).mean())
    low, high = compare.tconfint_diff(alpha=1 - level, usevar="unequal")
    return tuple(100.0 * (math.exp(x) - 1.0) for x in (diff, float(low), float(high)))   # type: ignore[return-value]


def better_beyond_ci(a: Sequence[float], b: Sequence[float], direction: str) -> bool:
    """True when interval ``a = (mean, low, high)`` is better than ``b`` with the two CIs apart.

    ``direction`` is ``"maximize"`` (a's low above b's high) or ``"minimize"`` (a's high below b's low);
    a missing bound (NaN) is never beyond.
    """
    a_low, a_high, b_low, b_high = float(a[1]), float(a[2]), float(b[1]), float(b[2])
    if any(math.isnan(x) for x in (a_low, a_high, b_low, b_high)):
        return False
    return a_low > b_high if direction == Direction.MAXIMIZE else a_high < b_low


def dominates_by_means(a: Mapping[str, Sequence[float]], b: Mapping[str, Sequence[float]],
                       directions: Mapping[str, str]) -> bool:
    """Pareto dominance on the means: ``a`` no worse than ``b`` on every objective and better on one."""
    signs = {m: (-1.0 if d == Direction.MAXIMIZE else 1.0) for m, d in directions.items()}
    pairs = [(signs[m] * float(a[m][0]), signs[m] * float(b[m][0])) for m in directions]
    if any(math.isnan(x) or math.isnan(y) for x, y in pairs):
        return False
    return all(x <= y for x, y in pairs) and any(x < y for x, y in pairs)


def dominance_verdict(point: Mapping[str, Sequence[float]], front: Sequence[Mapping[str, Sequence[float]]],
                      directions: Mapping[str, str]) -> str:
    """How a marked point stands against the front on the objectives of ``directions``.

    Each point maps an objective to ``(mean, ci_low, ci_high)``. Returns

    - ``"dominated"``: some front point is better on every objective beyond both CIs;
    - ``"not separable"``: some front point dominates it on the means, but not beyond the CIs;
    - ``"on the front"``: no front point dominates it, even on the means.
    """
    if any(all(better_beyond_ci(f[m], point[m], d) for m, d in directions.items()) for f in front):
        return "dominated"
    if any(dominates_by_means(f, point, directions) for f in front):
        return "not separable"
    return "on the front"


def front_mask(frame: pd.DataFrame, x: str, y: str, directions: Mapping[str, str]) -> np.ndarray:
    """Boolean mask of the rows of ``frame`` non-dominated in ``x`` and ``y`` (means; NaN rows are False)."""
    mask = np.zeros(len(frame), dtype=bool)
    valid = frame[[x, y]].notna().all(axis=1).to_numpy()
    if valid.any():
        signs = [-1.0 if directions[m] == Direction.MAXIMIZE else 1.0 for m in (x, y)]
        vectors = np.column_stack([signs[0] * frame.loc[valid, x].to_numpy(float),
                                   signs[1] * frame.loc[valid, y].to_numpy(float)])
        mask[valid] = non_dominated(vectors)
    return mask


def _interval(row: Mapping[str, Any], metric: str) -> tuple[float, float, float]:
    return (float(row[metric]), float(row.get(f"{metric}_low", math.nan)), float(row.get(f"{metric}_high", math.nan)))


def dominance_table(configs: pd.DataFrame, marked: pd.DataFrame, pairs: Sequence[tuple[str, str]] = PAIRS,
                    directions: Mapping[str, str] = DIRECTIONS) -> pd.DataFrame:
    """Per marked point but the front's (the defaults and each preset) and pair: its :func:`dominance_verdict`
    against every other measured configuration (the searched ones on means, CIs where measured more than
    once, and the marked ones with their CIs): a point dominated by any of them is dominated by the front,
    which holds the best of them. Also the points that dominate it beyond the CIs and :func:`beaten_on`."""
    rows = []
    pool_all = pd.concat([configs, marked], ignore_index=True)
    pool_keys = [_key(r) for r in pool_all[list(KNOBS)].to_dict("records")]
    for x, y in pairs:
        dirs = {x: directions[x], y: directions[y]}
        for row in marked[marked["kind"] != "front"].to_dict("records"):
            own = _key(row)
            pool = pool_all[[k != own for k in pool_keys]].dropna(subset=[x, y])
            front = [({m: _interval(r, m) for m in dirs}, str(r.get("label") or "")) for r in pool.to_dict("records")]
            point = {m: _interval(row, m) for m in dirs}
            verdict = dominance_verdict(point, [f for f, _ in front], dirs)
            by = [label for f, label in front if all(better_beyond_ci(f[m], point[m], d) for m, d in dirs.items())]
            rows.append({"pair": f"{x} vs {y}", "point": row["label"], "verdict": verdict,
                         "dominated_by": ", ".join(dict.fromkeys(b for b in by if b)) if verdict == "dominated"
                         else "", "beaten_on": ", ".join(beaten_on(point, [f for f, _ in front], dirs))})
    return pd.DataFrame(rows, columns=["pair", "point", "verdict", "dominated_by", "beaten_on"])


def beaten_on(point: Mapping[str, Sequence[float]], front: Sequence[Mapping[str, Sequence[float]]],
              directions: Mapping[str, str]) -> list[str]:
    """The objectives on which a front point that dominates ``point`` on the means is also better beyond
    the CIs (e.g. a preset with the same throughput but a clearly longer RTT: ``["rtt_mean_ms"]``)."""
    dominating = [f for f in front if dominates_by_means(f, point, directions)]
    return [m for m, d in directions.items() if any(better_beyond_ci(f[m], point[m], d) for f in dominating)]


# ---- reading the stores -------------------------------------------------------------------------

def _key(config: Mapping[str, Any], knobs: Sequence[str] = KNOBS) -> tuple:
    return tuple(level_value(config.get(k)) for k in knobs)


def config_label(config: Mapping[str, Any]) -> str:
    """A short label of a configuration, e.g. ``"reno wmem 4096/16384/262144 rmem default lowat 16384"``."""
    parts = []
    for knob, short in ((CC, ""), (WMEM, "wmem "), (RMEM, "rmem "), (LOWAT, "lowat ")):
        value = level_value(config.get(knob))
        if knob != CC and value == level_value(DEFAULTS[knob]):
            continue
        parts.append(short + ("/".join(map(str, value)) if isinstance(value, tuple) else str(value)))
    return " ".join(parts)


def search_configs(history: pd.DataFrame, metrics: Sequence[str] = tuple(DIRECTIONS)) -> pd.DataFrame:
    """Per configuration the search measured: the knobs, ``n``, and each metric's mean with its 95 % CI
    (``<metric>_low``/``_high``; NaN when measured once), plus ``label`` and ``is_baseline``."""
    rows = []
    frame = history.copy()
    frame["_key"] = [_key(r) for r in frame[list(KNOBS)].to_dict("records")]
    for key, group in frame.groupby("_key", sort=False):
        row: dict[str, Any] = dict(zip(KNOBS, key))
        for metric in metrics:
            mean, low, high, n = mean_interval(group[metric] if metric in group else [], floor=0.0)
            row.update({metric: mean, f"{metric}_low": low, f"{metric}_high": high})
        row.update(n=len(group), label=config_label(row), is_baseline=_key(row) == _key(DEFAULTS))
        rows.append(row)
    return pd.DataFrame(rows)


def name_of(config: Mapping[str, Any]) -> str | None:
    """The preset (or ``"defaults"``) a configuration is, else None."""
    key = _key({**DEFAULTS, **config})
    if key == _key(DEFAULTS):
        return DEFAULTS_NAME
    return next((p.name for p in PRESETS if _key(p.config) == key), None)


def marked_points(comparisons: Sequence[refinement.Comparison],
                  metrics: Sequence[str] = tuple(DIRECTIONS)) -> pd.DataFrame:
    """The defaults (every comparison's A arm pooled), each preset and each front configuration measured
    again (its B arm): ``label, kind`` (defaults/preset/front), ``n``, each metric's mean and 95 % CI, and the
    change against the defaults of throughput and RTT in % with its Welch CI (``<metric>_pct``, ``_pct_low``,
    ``_pct_high``)."""
    if not comparisons:
        return pd.DataFrame(columns=["label", "kind", "n"])
    base = pd.concat([c.measurements[c.measurements["arm"] == "A"] for c in comparisons], ignore_index=True)
    groups = [(DEFAULTS_NAME, "defaults", DEFAULTS, base)]
    fronts = 0
    for comparison in comparisons:
        arm = comparison.measurements[comparison.measurements["arm"] == "B"]
        name, kind = name_of(comparison.candidate), "preset"
        if name is None:
            fronts += 1
            name, kind = f"front {fronts}", "front"
        groups.append((name, kind, comparison.candidate, arm))
    rows = []
    for label, kind, config, data in groups:
        full = {**DEFAULTS, **{k: level_value(v) for k, v in config.items()}}
        row: dict[str, Any] = {"label": label, "kind": kind, "config": config_label(full), "n": len(data),
                               **{k: full.get(k) for k in KNOBS}}
        for metric in metrics:
            values = data[metric] if metric in data else []
            mean, low, high, _ = mean_interval(values, floor=0.0)
            row.update({metric: mean, f"{metric}_low": low, f"{metric}_high": high})
            if metric != "retransmits":
                pct = pct_change_interval(values, base[metric] if metric in base else []) if kind != "defaults" \
                    else (math.nan,) * 3
                row.update({f"{metric}_pct": pct[0], f"{metric}_pct_low": pct[1], f"{metric}_pct_high": pct[2]})
        rows.append(row)
    return pd.DataFrame(rows)


def best_gain_without_rtt_cost(marked: pd.DataFrame) -> pd.Series | None:
    """The marked point (preset or front configuration) with the largest throughput change against the
    defaults among those whose mean RTT is no higher than the defaults' (RTT change <= 0 %); None when none
    qualifies. Its CIs are reported with it: the judgement is on means, the CIs say how sure it is."""
    if marked.empty or "throughput_mbps_pct" not in marked:
        return None
    ok = marked[(marked["kind"] != "defaults") & (marked["rtt_mean_ms_pct"] <= 0)
                & marked["throughput_mbps_pct"].notna()]
    return None if ok.empty else ok.loc[ok["throughput_mbps_pct"].idxmax()]


# ---- the figure ---------------------------------------------------------------------------------

MARK_STYLE = {"defaults": ("*", figures.BASELINE_COLOR, 15), "preset": ("s", None, 8), "front": ("D", "k", 7)}
#: colours of the presets (tab10 without its orange, the defaults' colour)
PRESET_COLORS = tuple(plt.get_cmap("tab10")(i) for i in (0, 2, 3, 4, 5, 6, 8, 9))
#: metrics spanning zero to thousands (counts): drawn on a symlog axis
SYMLOG = {"retransmits": 10.0}


def pareto_pairs_figure(configs: pd.DataFrame, marked: pd.DataFrame, pairs: Sequence[tuple[str, str]] = PAIRS,
                        directions: Mapping[str, str] = DIRECTIONS) -> Figure:
    """One axes per pair of objectives: every searched configuration (its mean), the pair's front joined,
    and each marked point (defaults, presets, front configurations measured again) with 95 % CI error bars
    and a label; one figure legend with an entry per marked point."""
    fig, axes = plt.subplots(1, len(pairs), figsize=(5.2 * len(pairs), 4.6), squeeze=False)
    handles: dict[str, Any] = {}
    for ax, (x, y) in zip(axes[0], pairs):
        dirs = {x: directions[x], y: directions[y]}
        points = configs.dropna(subset=[x, y])
        h = ax.scatter(points[x], points[y], s=18, color=figures.LEVEL_COLOR, edgecolor="0.4", lw=0.4, zorder=2)
        handles.setdefault("searched configuration", h)
        front = points[front_mask(points, x, y, dirs)].sort_values(x)
        (h,) = ax.plot(front[x], front[y], "o-", color=figures.CANDIDATE_COLOR, ms=5, lw=1.2, zorder=3)
        handles.setdefault("Pareto front (search)", h)
        for i, row in enumerate(marked.to_dict("records")):
            if pd.isna(row.get(x)) or pd.isna(row.get(y)):
                continue
            marker, color, size = MARK_STYLE.get(row["kind"], ("o", None, 7))
            color = color or PRESET_COLORS[i % len(PRESET_COLORS)]
            xerr = _errors(row, x)
            yerr = _errors(row, y)
            h = ax.errorbar(row[x], row[y], xerr=xerr, yerr=yerr, fmt=marker, ms=size, color=color, mec="k",
                            mew=0.6, ecolor=color, elinewidth=1.1, capsize=3, zorder=5)
            handles.setdefault(str(row["label"]), h)
            ax.annotate(str(row["label"]), (row[x], row[y]), xytext=(5, 4), textcoords="offset points", fontsize=7)
        ax.set_xlabel(f"{x} ({'higher' if dirs[x] == Direction.MAXIMIZE else 'lower'} is better)")
        ax.set_ylabel(f"{y} ({'higher' if dirs[y] == Direction.MAXIMIZE else 'lower'} is better)")
        ax.set_title(f"{x} vs {y}", fontsize=9)
        for metric, set_scale in ((x, ax.set_xscale), (y, ax.set_yscale)):
            if metric in SYMLOG:
                set_scale("symlog", linthresh=SYMLOG[metric])
        ax.grid(alpha=0.3)
    fig.legend(list(handles.values()), list(handles.keys()), loc="lower center", ncol=min(5, len(handles)),
               fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def _errors(row: Mapping[str, Any], metric: str) -> Any:
    mean, low, high = _interval(row, metric)
    if math.isnan(low) or math.isnan(high):
        return None
    return [[max(mean - low, 0.0)], [max(high - mean, 0.0)]]


# ---- record -------------------------------------------------------------------------------------

def _target_options() -> list[str]:
    """The design's lab options as ``KEY=VALUE`` (the validations run on the same bottleneck)."""
    options = (yaml.safe_load(DESIGN.read_text()).get("target") or {}).get("options") or {}
    return [f"{k}={v}" for k, v in options.items()]


def front_to_validate(configs: pd.DataFrame, count: int = FRONT_VALIDATED) -> list[dict[str, Any]]:
    """The extremes (best throughput, then lowest RTT) of the front of the searched configurations that are
    neither a preset nor the defaults: the configurations measured again like the presets."""
    x, y = PAIRS[0]
    searched = configs[[name_of(dict(zip(KNOBS, r))) is None for r in configs[list(KNOBS)].itertuples(index=False)]]
    front = searched[front_mask(searched, x, y, DIRECTIONS)]
    chosen: list[dict[str, Any]] = []
    for _, row in pd.concat([front.sort_values(x, ascending=False).head(1), front.sort_values(y).head(1)]).iterrows():
        config = {k: row[k] for k in KNOBS}
        if config not in chosen and len(chosen) < count:
            chosen.append(config)
    return chosen


def record(ctx: RecordContext) -> list[Path]:
    """NSGA-II over the design's knobs, then each preset and the front's extremes against the defaults."""
    started = time.monotonic()
    search_store = ctx.store(SEARCH_STORE)
    budget = ctx.scaled(BUDGET, 8)
    ctx.echo(f"003: NSGA-II on {', '.join(OBJECTIVES)}, budget {budget} -> {search_store}")
    tunelab.refine(DESIGN, engine="nsga2", objectives=list(OBJECTIVES), budget=budget, seed=SEED, confirm_blocks=0,
                   target=ctx.target, store=search_store)
    ctx.echo(f"003: search done after {(time.monotonic() - started) / 60:.1f} min")
    history = refinement.search_history(load_study(search_store))
    candidates = [(p.name, p.config) for p in PRESETS]
    candidates += [(f"front {i + 1}", c) for i, c in enumerate(front_to_validate(search_configs(history)))]
    presets_store = ctx.store(PRESETS_STORE)
    blocks = ctx.scaled(VALIDATE_BLOCKS, 2)
    for name, config in candidates:
        ctx.echo(f"003: {name} ({config_label(config)}) against the defaults, {blocks} ABBA blocks -> {presets_store}")
        tunelab.validate(ctx.target or "lab", dict(config), baseline=dict(DEFAULTS), metrics=list(VALIDATE_METRICS),
                         target_options=_target_options(), load="iperf3", profiles=["bulk"], blocks=blocks,
                         warmup_s=1.0, measure_s=3.0, store=presets_store, write_sysctl=False)
    ctx.echo(f"003: recorded in {(time.monotonic() - started) / 60:.1f} min")
    return [search_store, presets_store]


# ---- page ---------------------------------------------------------------------------------------

def _ci_text(row: Mapping[str, Any], metric: str) -> str:
    return fmt_pct_interval(row[f"{metric}_pct"], row[f"{metric}_pct_low"], row[f"{metric}_pct_high"], decimals=1)


def _measured(configs: pd.DataFrame, marked: pd.DataFrame, dominance: pd.DataFrame) -> Measured:
    """The claim row: the headline pair's verdict per baseline (the defaults and each preset, as the paper's
    -O levels include its -O2 baseline), the best throughput gain at no RTT cost, and why."""
    x, y = PAIRS[0]
    head = dominance[dominance["pair"] == f"{x} vs {y}"]
    counts = head["verdict"].value_counts()
    total, dominated = len(head), int(counts.get("dominated", 0))
    words = [f"{int(counts[v])} {v}" for v in ("dominated", "not separable", "on the front") if counts.get(v)]
    named = "; ".join(f"{r.point} {r.verdict}" for r in head.itertuples())
    best = best_gain_without_rtt_cost(marked)
    best_text = (f"best throughput gain at no RTT cost: {best['label']} {_ci_text(best, x)} "
                 f"(RTT {_ci_text(best, y)})" if best is not None
                 else "no measured point gains throughput without an RTT cost")
    tput, rtt = configs[x].dropna(), configs[y].dropna()
    spread = 100.0 * (tput.max() - tput.min()) / tput.median() if len(tput) > 1 else math.nan
    verdict = (f"{dominated} of {total} baselines (defaults and presets) dominated beyond the CIs on {x} vs {y}"
               f" ({', '.join(words) or 'none measured'})")
    beaten = head[(head["verdict"] == "not separable") & (head["beaten_on"] != "")]
    if total and dominated == total:
        agreement, why = "agrees", ("As in the paper, every baseline has a front configuration better on both "
                                    "throughput and RTT beyond the CIs.")
    elif dominated:
        agreement, why = "partly", (f"Only {dominated} of {total} baselines are dominated beyond the CIs; the others "
                                    "are on the front or too close to it to separate.")
    elif len(beaten):
        agreement, why = "partly", ("No baseline is dominated beyond the CIs on both objectives, but the front "
                                    "dominates " + ", ".join(beaten["point"]) + " on the means and beats "
                                    + ("it" if len(beaten) == 1 else "them") + " beyond the CIs on "
                                    + " / ".join(dict.fromkeys(beaten["beaten_on"])) + ".")
    else:
        agreement, why = "differs", ("Unlike the paper's -O levels, no baseline is dominated beyond the CIs: the "
                                     "front beats some of them on the means, but not clearly on either objective.")
    if spread < 5.0:
        why += (f" Across the {len(configs)} searched configurations throughput moved by only {fmt_number(spread)} % "
                f"while the mean RTT ranged {fmt_number(rtt.min())}-{fmt_number(rtt.max())} ms: the lab's veth path "
                "has no propagation delay, so "
                "any buffer fills the 200 Mbit/s link and the trade-off lives in queueing delay and retransmits "
                "(congestion control and buffer sizes), where a front point can hardly beat a preset on throughput.")
    else:
        why += (f" Throughput moved by {fmt_number(spread, 0)} % and the mean RTT from {fmt_number(rtt.min())} to "
                f"{fmt_number(rtt.max())} ms "
                f"across the {len(configs)} searched configurations.")
    why += f" The search made {int(configs['n'].sum())} measurements against the paper's 32 x 200 NSGA-II evaluations."
    return Measured(effect=f"{x} vs {y}: {named}; {best_text}", verdict=verdict, agreement=agreement, why=why)


def page(stores: Path) -> StudyPage:
    """Pareto plots per pair with the presets marked, dominance beyond the CIs, and the presets' changes."""
    search_path = recorded_store(stores, SEARCH_STORE, NAME)
    presets_path = recorded_store(stores, PRESETS_STORE, NAME)
    search_study, presets_study = load_study(search_path), load_study(presets_path)
    history = refinement.search_history(search_study)
    if history.empty:
        raise SeedError(f"{search_path} holds no search measurements: record seed 003 again")
    configs = search_configs(history)
    comparisons = refinement.abba_comparisons(presets_study)
    if not comparisons:
        raise SeedError(f"{presets_path} holds no preset validations: record seed 003 again")
    marked = marked_points(comparisons)
    dominance = dominance_table(configs, marked)
    fig = pareto_pairs_figure(configs, marked)
    image = FigureImage(figures.to_png(fig), alt="Pareto fronts of throughput, mean RTT and retransmits with the "
                                                 "knob presets marked",
                        caption=f"Each pair of objectives: the {len(configs)} configurations NSGA-II measured (means), "
                                "the pair's non-dominated front joined, and the defaults, the presets and the front's "
                                "extremes measured again in ABBA blocks (95 % CI error bars).")
    plt.close(fig)
    shown = ["label", "kind", "config", "n"] + [c for m in DIRECTIONS for c in (m, f"{m}_low", f"{m}_high")] + \
        [c for m in PAIRS[0] for c in (f"{m}_pct", f"{m}_pct_low", f"{m}_pct_high")]
    front = configs[front_mask(configs, *PAIRS[0], DIRECTIONS)].sort_values(PAIRS[0][0], ascending=False)
    return StudyPage(
        measured=_measured(configs, marked, dominance),
        figures=[image],
        tables=[Table("Defaults, presets and front configurations measured again (mean and 95 % CI; change against "
                      "the defaults in % with a Welch CI on the log scale)", marked.reindex(columns=shown)),
                Table("Each baseline against each pair's front: dominated (a measured configuration is better on "
                      "both objectives beyond both CIs), not separable (dominated on the means only; beaten_on: the "
                      "objectives where a dominating configuration is better beyond the CIs) or on the front",
                      dominance),
                Table(f"The searched front on {PAIRS[0][0]} vs {PAIRS[0][1]} (means; CI where measured more than once)",
                      front[["label", "n", *[c for m in DIRECTIONS for c in (m, f"{m}_low", f"{m}_high")]]]
                      .reset_index(drop=True)),
                Table("The presets and where they come from",
                      pd.DataFrame([{"preset": p.name, "changes": config_label(p.config), "source": p.source}
                                    for p in PRESETS]))],
        notes=["The paper's presets are GCC's -O levels for Apache and its objectives throughput, time per request, "
               "context switches and L2 misses; here the presets are kernel TCP tunings and the objectives "
               "throughput, mean RTT and retransmits of one iperf3 upload through a 200 Mbit/s bottleneck with a "
               "400 kB queue.",
               "Only reno and bbr are allowed in the lab's namespaces: fasterdata's htcp/cubic is stood in for by "
               "reno.",
               "The search measures each configuration once, so its front is on means; the presets, the defaults "
               "and the front's two extremes are measured again against the defaults, and only they carry CIs.",
               f"The paper's scale (population 32, 200 iterations, islands) is cut to a budget of {BUDGET} "
               "measurements."],
        stores=[search_path, presets_path])


SEED_STUDIES.add("003", SeedStudy(
    key="003", slug="nsga2-pareto", title="NSGA-II Pareto fronts: are the usual presets dominated?",
    paper="003_2cf94a1dfa00ce20.txt",
    claim=Claim(text="the predefined presets (GCC -O0 ... -O3, -Os) are always dominated by NSGA-II's Pareto front, "
                     "far from it",
                numbers="front solutions improve the four criteria by 7.5 % (2 KiB pages) and 8.8 % (32 KiB) on "
                        "average; about 30 % fewer L2 misses and 8.5 % fewer context switches than -O2",
                where="section 6, Figures 6-17 (fronts per pair of objectives), Table 1 and Figure 18"),
    designs=(DESIGN,), minutes=7.0, record=record, page=page))
