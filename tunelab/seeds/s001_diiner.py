"""Seed 001 (DIINER slides): does ``tcp_abort_on_overflow=1`` help a DNS server under intense load?

The paper changed one knob at a time and found that, under intense load, abort_on_overflow cut lost
queries by 98 % (latency -5 %, QPS +8 %), while at low load the defaults were fine. In the lab the knob
only acts when the accept queue overflows, so the study crosses it with ``net.core.somaxconn`` (the
paper's kernels defaulted to 128, today's to 4096) and with the load profile (low, overload)
(``designs/seeds/001_diiner_overload.yaml``). The page shows the somaxconn x abort_on_overflow
interaction on ``lost`` under overload with its p-value and simple effects, each knob's effect per
profile, and two fresh validations of the paper's change at somaxconn 128, in sequential ABBA blocks and
in duet pairs (issue 27), side by side with their CI widths compared. When the factorial recorded kernel
counters (issue 29), a mechanism section shows which counters moved under overload with the knob levels
that matter (the report's heatmap and tables) and whether the listen-queue counters bear out the paper's
reading (ListenOverflows and ListenDrops at somaxconn 128, the resets of abort_on_overflow=1), in words
written from the data. A store without counters, or without the duet, says so with the record command.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import tunelab
from tunelab.errors import SeedError
from tunelab.optimize.confirm import goals_of
from tunelab.optimize.duet_confirm import MIN_PAIRS
from tunelab.formatting import fmt_number, fmt_p_exact, fmt_p_value, fmt_pct_interval
from tunelab.model import COUNTER_PREFIX, USABLE_STATUSES, MeasurementKind, counter_columns
from tunelab.report import figures, refinement
from tunelab.report.loading import load_study, screen_study
from tunelab.report.tables import mechanism_frames
from tunelab.report.wording import mechanisms_markdown
from tunelab.seeds.contract import (DESIGNS, SEED_STUDIES, Claim, FigureImage, Measured, RecordContext, Section,
                                 SeedStudy, StudyPage, Table, record_command, recorded_store)
from tunelab.stats.mechanisms import change_text, counter_values, pooled_comparisons, with_q_values

DESIGN = DESIGNS / "001_diiner_overload.yaml"
SOMAXCONN = "net.core.somaxconn"
ABORT = "net.ipv4.tcp_abort_on_overflow"
INTERACTION = f"{SOMAXCONN}:{ABORT}"
#: the paper's era: the accept queue the knob acts on (the default somaxconn before Linux 5.4)
PAPER_SOMAXCONN = 128
#: the validation's metrics: the paper's four, lost in absolute queries
VALIDATE_METRICS = ("lost:min:abs=10", "qps:max:5", "latency_mean_ms:min:5", "conn_latency_mean_ms:min:10")
VALIDATE_BLOCKS = 6
#: the duet validation's pairs: as many trials as the ABBA blocks (2 per pair, 4 per block)
VALIDATE_PAIRS = 2 * VALIDATE_BLOCKS
#: the fewest pairs a duet validation takes (two of each crossover orientation; duet_confirm.check_pairs)
MIN_DUET_PAIRS = MIN_PAIRS + 1
NAME = "001-diiner-overload"
SCREEN_STORE = f"{NAME}.sqlite"
VALIDATE_STORE = f"{NAME}-validate.sqlite"
DUET_STORE = f"{NAME}-validate-duet.sqlite"
#: how the page names each validation
VALIDATION_NAMES = {MeasurementKind.SEQUENTIAL: "sequential ABBA", MeasurementKind.DUET: "duet"}
#: the heading of the page's counter section
MECHANISMS_TITLE = "Mechanisms: the kernel counters under overload"
#: the listen-queue counters the paper's reading rests on (server side): the overflows, then the resets of
#: abort_on_overflow=1 (a connection whose last handshake ACK finds the queue full is reset through the kernel's
#: embryonic_reset, counted as EmbryonicRsts; TCPAbortOnOverflow is the counter named after the knob)
OVERFLOWS = ("TcpExt.ListenOverflows", "TcpExt.ListenDrops")
RESETS = ("TcpExt.TCPAbortOnOverflow", "TcpExt.EmbryonicRsts")
LISTEN_QUEUE = OVERFLOWS + RESETS
#: the listen-queue comparisons: (what, the runs at the level, the runs compared with)
LISTEN_CHECKS = (
    (f"somaxconn {PAPER_SOMAXCONN} vs 4096 (abort 0, overload)",
     {"profile": "overload", SOMAXCONN: PAPER_SOMAXCONN, ABORT: 0}, {"profile": "overload", SOMAXCONN: 4096, ABORT: 0}),
    (f"abort 1 vs 0 (somaxconn {PAPER_SOMAXCONN}, overload)",
     {"profile": "overload", SOMAXCONN: PAPER_SOMAXCONN, ABORT: 1},
     {"profile": "overload", SOMAXCONN: PAPER_SOMAXCONN, ABORT: 0}),
    (f"overload vs low (somaxconn {PAPER_SOMAXCONN}, abort 0)",
     {"profile": "overload", SOMAXCONN: PAPER_SOMAXCONN, ABORT: 0},
     {"profile": "low", SOMAXCONN: PAPER_SOMAXCONN, ABORT: 0}))
#: the columns of :func:`listen_queue_checks` taken from the pooled comparison
LISTEN_COLUMNS = ("n", "baseline_n", "mean", "baseline_mean", "difference", "ci_low", "ci_high", "p")


def record(ctx: RecordContext) -> list[Path]:
    """Run the factorial, then validate abort_on_overflow=1 at the paper's somaxconn under overload twice:
    in sequential ABBA blocks and in duet pairs (both sides at once, then swapped; as many trials)."""
    screen_store = ctx.store(SCREEN_STORE)
    ctx.echo(f"001: factorial somaxconn x abort_on_overflow x profile -> {screen_store}")
    tunelab.run(DESIGN, store=screen_store, target=ctx.target)
    baseline, candidate = validation_pair()
    validate_store, duet_store = ctx.store(VALIDATE_STORE), ctx.store(DUET_STORE)
    ctx.echo(f"001: validating {candidate} against {baseline} under overload in ABBA blocks -> {validate_store}")
    _validate(ctx, store=validate_store, blocks=ctx.scaled(VALIDATE_BLOCKS, 2))
    ctx.echo(f"001: the same validation in duet pairs -> {duet_store}")
    _validate(ctx, store=duet_store, measurement="duet", pairs=ctx.scaled(VALIDATE_PAIRS, MIN_DUET_PAIRS),
              cpu_layout=None)
    return [screen_store, validate_store, duet_store]


def _validate(ctx: RecordContext, **how: Any) -> None:
    """:func:`tunelab.validate` of :func:`validation_pair` under overload on the paper's four metrics."""
    baseline, candidate = validation_pair()
    tunelab.validate(ctx.target or "lab", candidate, baseline=baseline, metrics=list(VALIDATE_METRICS),
                     load="dnsperf", profiles=["overload"], warmup_s=2.0, measure_s=4.0, write_sysctl=False, **how)


def validation_pair() -> tuple[dict[str, int], dict[str, int]]:
    """The change the paper recommends, at the accept queue it was made on: (baseline, candidate)."""
    return {SOMAXCONN: PAPER_SOMAXCONN, ABORT: 0}, {SOMAXCONN: PAPER_SOMAXCONN, ABORT: 1}


def overload_screen(study: Any) -> tuple[Any, Any]:
    """The factorial screened within the overload profile only (where the accept queue can overflow)."""
    from tunelab.stats import screen

    inputs, _ = screen_study(study, metric="lost")
    data = inputs.data[inputs.data["profile"] == "overload"].drop(columns="profile")
    knobs = [k for k in inputs.knobs if k != "profile"]
    baseline = {k: v for k, v in inputs.baseline.items() if k != "profile"}
    result = screen(data, inputs.metrics, knobs, baseline, alpha=inputs.alpha, correction=inputs.correction,
                    design={"type": "full_factorial"})
    return inputs, result


def simple_effects(result: Any, metric: str = "lost") -> pd.DataFrame:
    """abort_on_overflow's effect on ``metric`` at each somaxconn (the model's simple-effect contrasts)."""
    rows = result.contrasts[(result.contrasts["metric"] == metric) & (result.contrasts["knob"] == ABORT)
                            & result.contrasts["at"].astype(str).str.startswith(f"{SOMAXCONN}=")]
    return rows[["at", "level", "baseline", "estimate", "ci_low", "ci_high", "p_adj"]].reset_index(drop=True)


def interaction_row(result: Any, metric: str = "lost") -> pd.Series:
    """The model's somaxconn x abort_on_overflow term for ``metric``."""
    terms = result.model_terms
    rows = terms[(terms["metric"] == metric) & (terms["term"] == INTERACTION)]
    if rows.empty:
        raise SeedError(f"seed 001: the screen has no {INTERACTION} term for {metric}; is the store from "
                                f"{DESIGN.name}?")
    return rows.iloc[0]


def validation_table(path: Path, measurement: MeasurementKind = MeasurementKind.SEQUENTIAL) -> pd.DataFrame:
    """The recorded validation judged on the paper's four metrics (gain, 95 % CI, TOST, verdict per metric):
    ABBA blocks (``sequential``) or duet pairs (``duet``, ``blocks`` counting the pairs)."""
    study = load_study(path)
    read = refinement.duet_comparisons if measurement is MeasurementKind.DUET else refinement.abba_comparisons
    comparisons = read(study)
    if not comparisons:
        raise SeedError(f"{path} holds no {measurement} validation: record seed 001 again "
                        f"(`{record_command(NAME, path.parent)}`)")
    return refinement.judge(comparisons[-1], goals_of(list(VALIDATE_METRICS)))


def recorded_validations(stores: Path) -> dict[MeasurementKind, tuple[Path, pd.DataFrame]]:
    """The validations recorded in ``stores``: measurement -> (store, judged table). The sequential one is
    required (a missing store is one SeedError line); the duet one is left out when its store is absent or
    holds no pair yet (a recording stopped early: recording again resumes it)."""
    found = {MeasurementKind.SEQUENTIAL: (path := recorded_store(stores, VALIDATE_STORE, NAME), validation_table(path))}
    duet = stores / DUET_STORE
    if duet.is_file() and refinement.duet_comparisons(load_study(duet)):
        found[MeasurementKind.DUET] = (duet, validation_table(duet, MeasurementKind.DUET))
    return found


def combined_verdict(verdicts: Sequence[str]) -> str:
    """One verdict word from the validations' verdicts on lost: a decision both would not contradict.

    >>> combined_verdict(["inconclusive", "improve"]), combined_verdict(["improve", "regress"])
    ('improve', 'inconclusive')
    """
    said = set(verdicts)
    if {"improve", "regress"} <= said:
        return "inconclusive"
    for word in ("improve", "regress"):
        if word in said:
            return word
    return verdicts[0] if verdicts else "n/a"


def _lost_row(table: pd.DataFrame) -> pd.Series | None:
    rows = table[table["metric"] == "lost"] if "metric" in table.columns else table.iloc[:0]
    return rows.iloc[0] if not rows.empty else None


def _factorial_text(term: pd.Series, effects: pd.DataFrame, alpha: float) -> tuple[str, bool, bool, bool]:
    """``abort_on_overflow``'s simple effect on lost at somaxconn 128 in words, whether the interaction is
    significant, and whether the simple effect is clearly below / above 0."""
    at_paper = effects[effects["at"] == f"{SOMAXCONN}={PAPER_SOMAXCONN}"]
    if at_paper.empty:
        return "no estimate", float(term["p_adj"]) < alpha, False, False
    e = at_paper.iloc[0]
    low, high = (fmt_number(e[end], 0, signed=True) for end in ("ci_low", "ci_high"))
    return (f"{fmt_number(e['estimate'], 0, signed=True)} queries [{low}, {high}]", float(term["p_adj"]) < alpha,
            float(e["ci_high"]) < 0, float(e["ci_low"]) > 0)


def _measured(term: pd.Series, effects: pd.DataFrame, validations: Mapping[MeasurementKind, pd.DataFrame],
              alpha: float = 0.05) -> Measured:
    """The claim row from the overload interaction, abort_on_overflow's simple effects and the validations."""
    p_text, p_adj_text = fmt_p_value(float(term["p"])), fmt_p_value(float(term["p_adj"]))
    simple_text, significant, clear_at_paper, clear_worse = _factorial_text(term, effects, alpha)
    parts = [f"lost {simple_text} at somaxconn {PAPER_SOMAXCONN} (factorial, overload)"] \
        if simple_text != "no estimate" else []
    said = {}
    for measurement, table in validations.items():
        row = _lost_row(table)
        said[measurement] = str(row["verdict"]) if row is not None else "n/a"
        if row is not None and pd.notna(row.get("pct_change")):
            change = fmt_pct_interval(row["pct_change"], row["ci_low"], row["ci_high"], decimals=0)
            parts.append(f"{VALIDATION_NAMES[measurement]} validation: lost {change}")
    verdict_word = combined_verdict(list(said.values()))
    said_text = ", ".join(f"{VALIDATION_NAMES[m]} {v}" for m, v in said.items())
    if verdict_word == "improve" and (significant or clear_at_paper):
        agreement = "agrees"
    elif verdict_word == "improve" or significant or clear_at_paper:
        agreement = "partly"
    else:
        agreement = "differs"
    why = _why(p_text, p_adj_text, simple_text, significant, clear_worse, verdict_word, said_text)
    return Measured(effect="; ".join(parts) or "no estimate",
                    verdict=f"interaction p = {p_text} (adj. {p_adj_text}); validation: {said_text}",
                    agreement=agreement, why=why)


def _why(p_text: str, p_adj_text: str, simple_text: str, significant: bool, clear_worse: bool, verdict_word: str,
         said_text: str) -> str:
    """Why the lab agrees with the paper or differs, in two or three sentences."""
    if significant:
        why = (f"The somaxconn x abort_on_overflow interaction on lost (p = {p_text}, adjusted {p_adj_text}) says the "
               f"knob acts only when the accept queue overflows: at somaxconn {PAPER_SOMAXCONN}, the default of the "
               "paper's kernels, not at today's 4096.")
    elif clear_worse:
        why = (f"In the factorial abort_on_overflow=1 raised lost at somaxconn {PAPER_SOMAXCONN} by {simple_text}, "
               "the opposite of the paper; "
               + ("the fresh validation confirms the rise. " if verdict_word == "regress" else
                  f"the fresh validation did not repeat it ({said_text}), so the lab shows neither the paper's "
                  "gain nor a reliable harm. ")
               + "At today's default 4096 the queue does not overflow and the knob does nothing; with 4 replicates "
               f"the interaction test is too weak to confirm that difference (p = {p_text}, adjusted {p_adj_text}).")
    else:
        why = (f"The lab does not separate the interaction from noise (p = {p_text}, adjusted {p_adj_text}): "
               f"abort_on_overflow changes lost by {simple_text} at somaxconn {PAPER_SOMAXCONN}, and at today's "
               "default 4096 the accept queue does not overflow, so the knob has nothing to act on.")
    if not clear_worse:
        why += f" The fresh validation says: {said_text}."
    return why + (" The lab's overload is 200 TCP clients (the paper's 13,000), so it loses far fewer queries to "
                  "begin with (tens per trial): a 98 % cut cannot show at this scale.")


# ---- the validations side by side (issue 27) ------------------------------------------------------------


def log_width(ci_low: Any, ci_high: Any) -> float:
    """The width of a % change's 95 % CI on the log-ratio scale the validations analyse (where it is
    symmetric, proportional to the standard error): ``log((100 + high) / (100 + low))``; NaN without one.

    >>> round(log_width(-50.0, 100.0), 6) == round(math.log(4), 6), math.isnan(log_width(-100.0, 5.0))
    (True, True)
    """
    low, high = float(ci_low), float(ci_high)
    return math.log((100 + high) / (100 + low)) if low > -100 and high > low else float("nan")


def validations_frame(validations: Mapping[MeasurementKind, pd.DataFrame]) -> pd.DataFrame:
    """Both validations in one table: per measurement and metric, the units measured, the change with its
    95 % CI, the CI's width on the log-ratio scale, TOST p and the verdict; a duet not recorded is one row
    saying so."""
    rows = []
    for measurement, name in VALIDATION_NAMES.items():
        table = validations.get(measurement)
        if table is None:
            rows.append({"measurement": name, "metric": "all four", "measured": "not recorded yet",
                         "change [95 % CI]": "not recorded yet", "CI width (log ratio)": float("nan"),
                         "TOST p": float("nan"), "verdict": "not recorded yet"})
            continue
        for row in table.itertuples(index=False):
            rows.append({"measurement": name, "metric": row.metric, "measured": _units(measurement, row.blocks),
                         "change [95 % CI]": fmt_pct_interval(row.pct_change, row.ci_low, row.ci_high),
                         "CI width (log ratio)": log_width(row.ci_low, row.ci_high), "TOST p": row.tost_p,
                         "verdict": row.verdict})
    return pd.DataFrame(rows)


def _units(measurement: MeasurementKind, units: Any) -> str:
    """``'12 pairs (24 trials)'`` or ``'6 ABBA blocks (24 trials)'``."""
    unit, per_unit = ("pairs", 2) if measurement is MeasurementKind.DUET else ("ABBA blocks", 4)
    return f"{int(units)} {unit} ({per_unit * int(units)} trials)"


def ci_width_sentence(validations: Mapping[MeasurementKind, pd.DataFrame], stores: Path, metric: str = "lost") -> str:
    """One sentence comparing the two validations' 95 % CI widths on ``metric`` (the first metric both judged
    when they did not both judge it) on the log-ratio scale, or saying how to record the duet when it is
    missing."""
    if MeasurementKind.DUET not in validations:
        return (f"The duet validation is not recorded yet: `{record_command(NAME, stores)}` measures it (recording "
                "resumes, so the factorial and the ABBA validation already in the stores are kept).")
    sequential, duet = validations[MeasurementKind.SEQUENTIAL], validations[MeasurementKind.DUET]
    both = [m for m in sequential["metric"] if m in set(duet["metric"])]
    if not both:
        return "The two validations judged no metric in common, so their intervals cannot be compared."
    metric = metric if metric in both else both[0]
    a, b = (t[t["metric"] == metric].iloc[0] for t in (sequential, duet))
    width_a, width_b = log_width(a["ci_low"], a["ci_high"]), log_width(b["ci_low"], b["ci_high"])
    if not (width_a > 0 and width_b > 0):
        return f"On {metric} one of the validations has no interval (too few usable blocks or pairs) to compare."
    ratio = width_a / width_b
    how = (f"{fmt_number(ratio, 1)} times narrower than" if ratio >= 1.25 else
           f"{fmt_number(1 / ratio, 1)} times wider than" if ratio <= 0.8 else "about as wide as")
    interval = {id(r): fmt_pct_interval(r["pct_change"], r["ci_low"], r["ci_high"], decimals=0) for r in (a, b)}
    duet_units, sequential_units = _units(MeasurementKind.DUET, b["blocks"]), _units(MeasurementKind.SEQUENTIAL, a["blocks"])
    return (f"On {metric}, the duet's 95 % CI, {interval[id(b)]} from {duet_units}, is {how} the "
            f"sequential one, {interval[id(a)]} from {sequential_units}, on the log-ratio scale "
            "both are computed on.")


def validation_section(validations: Mapping[MeasurementKind, pd.DataFrame], stores: Path) -> Section:
    """The two validations of abort_on_overflow=1 at somaxconn 128 under overload, side by side."""
    return Section(
        title="Validation: sequential ABBA and duet",
        paragraphs=("abort_on_overflow=1 against 0 at somaxconn 128 under overload, measured twice: one side after "
                    "the other in ABBA blocks, and in duet pairs (two labs measure both at the same moment, then "
                    "swap sides, so interference common to both cancels; docs/duet.md). Each pair runs two labs on "
                    "the machine at once, each at about two thirds of its solo throughput.",
                    ci_width_sentence(validations, stores)),
        tables=(Table("Validation under overload: abort_on_overflow=1 against 0 at somaxconn 128, sequential ABBA "
                      "blocks and duet pairs (change with its 95 % CI, TOST p, verdict)",
                      validations_frame(validations)),))


# ---- mechanisms: the kernel counters under overload (issue 29) ------------------------------------------


def listen_queue_checks(data: pd.DataFrame) -> pd.DataFrame:
    """The listen-queue counters (:data:`LISTEN_QUEUE`) in each of :data:`LISTEN_CHECKS`: the runs at a
    level against the runs compared with (pooled t-test with its 95 % CI of the difference per second,
    :func:`tunelab.stats.mechanisms.pooled_comparisons`), q by Benjamini–Hochberg over the table. A counter
    absent from the tidy frame never moved in the study (0 in every run): its row says so, untested."""
    if "status" in data.columns:
        data = data[data["status"].isin(USABLE_STATUSES)]
    rows = []
    for check, level, base in LISTEN_CHECKS:
        masks = [_selected(data, where) for where in (level, base)]
        present = [f"{COUNTER_PREFIX}{name}" for name in LISTEN_QUEUE if f"{COUNTER_PREFIX}{name}" in data.columns]
        values = counter_values(data, present)
        tested = pooled_comparisons(values[masks[0]], values[masks[1]], present)
        found = {c: {k: v[i] for k, v in tested.items()} for i, c in enumerate(tested["counter"])}
        for name in LISTEN_QUEUE:
            column = f"{COUNTER_PREFIX}{name}"
            row = found.get(column, {"n": int(masks[0].sum()), "baseline_n": int(masks[1].sum()), "mean": 0.0,
                                     "baseline_mean": 0.0, "difference": 0.0, "p": float("nan")})
            rows.append({"check": check, "counter": name, "moved": column in data.columns,
                         **{k: row.get(k, float("nan")) for k in LISTEN_COLUMNS}})
    table = pd.DataFrame(rows)
    return with_q_values(table.assign(p=table["p"].astype(float)))      # an untested row: q NaN, not significant


def _selected(data: pd.DataFrame, where: Mapping[str, Any]) -> np.ndarray:
    """The rows of ``data`` at every ``column = value`` of ``where`` (a missing column selects none)."""
    mask = np.ones(len(data), dtype=bool)
    for column, value in where.items():
        mask &= (data[column] == value).to_numpy(bool) if column in data.columns else False
    return mask


def _check_row(checks: pd.DataFrame, check: int, counter: str) -> pd.Series:
    rows = checks[(checks["check"] == LISTEN_CHECKS[check][0]) & (checks["counter"] == counter)]
    return rows.iloc[0]


def _rose(row: pd.Series) -> bool:
    return bool(row["significant"]) and float(row["difference"]) > 0


def _change(row: pd.Series) -> str:
    change = change_text(row["difference"], row["ci_low"], row["ci_high"])
    return f"{row['counter']} {change} (q = {fmt_p_exact(row['q'])})"


def listen_queue_reading(checks: pd.DataFrame, lost_verdict: str) -> list[str]:
    """Two sentences from :func:`listen_queue_checks`: does the listen queue overflow at somaxconn 128 under
    overload (and more than at low load), and does abort_on_overflow=1 reset the connections it overflows
    on, so does the paper's reading hold?"""
    overflow = [_check_row(checks, 0, name) for name in OVERFLOWS]
    risen = [row for row in overflow if _rose(row)]
    if risen:
        first = (f"Under overload the listen queue overflows at somaxconn {PAPER_SOMAXCONN}: "
                 + ", ".join(_change(row) for row in risen) + " against somaxconn 4096"
                 + (", and more than at low load" if any(_rose(_check_row(checks, 2, n)) for n in OVERFLOWS) else "")
                 + ".")
    elif any(row["moved"] for row in overflow):
        first = (f"Under overload the lab does not show the listen queue overflowing more at somaxconn "
                 f"{PAPER_SOMAXCONN} than at 4096: " + ", ".join(_change(row) for row in overflow) + ".")
    else:
        first = ("ListenOverflows and ListenDrops never moved in this recording: the listen queue did not overflow "
                 "in any trial.")
    resets = [_check_row(checks, 1, name) for name in RESETS]
    reset = [row for row in resets if _rose(row)]
    if risen and reset:
        second = (f"With abort_on_overflow=1 the kernel resets the connections that find the queue full "
                  f"({', '.join(_change(row) for row in reset)} at somaxconn {PAPER_SOMAXCONN}), so the paper's "
                  "listen-queue reading holds in the lab: the knob acts where the queue overflows"
                  + ("; and the validations see lost queries fall." if lost_verdict == "improve" else
                     f"; that this cuts lost queries, as the paper found, the validations do not show "
                     f"({lost_verdict})."))
    elif risen:
        second = (f"abort_on_overflow=1 reset no more connections measurably at somaxconn {PAPER_SOMAXCONN} ("
                  + ", ".join(_change(row) if row["moved"] else f"{row['counter']} stayed 0 in every trial"
                              for row in resets)
                  + "), so the lab shows the overflow the paper's reading needs, but not the knob acting on it.")
    else:
        second = ("Without an overflowing queue abort_on_overflow has nothing to act on, so the lab cannot test the "
                  "paper's listen-queue reading at this load.")
    return [first, second]


def listen_queue_frame(checks: pd.DataFrame) -> pd.DataFrame:
    """:func:`listen_queue_checks` as the page shows it (change per second with its 95 % CI, q)."""
    return pd.DataFrame({
        "comparison": checks["check"], "counter": checks["counter"],
        "runs": [f"{n} vs {b}" for n, b in zip(checks["n"], checks["baseline_n"])],
        "per second": checks["mean"], "compared with": checks["baseline_mean"],
        "change per second [95 % CI]": [change_text(d, lo, hi) if moved else "never moved (0 in every run)"
                                        for d, lo, hi, moved in zip(checks["difference"], checks["ci_low"],
                                                                    checks["ci_high"], checks["moved"])],
        "q (BH)": [fmt_p_exact(q) if pd.notna(q) else "n/a" for q in checks["q"]]})


def mechanisms_section(inputs: Any, result: Any, stores: Path, lost_verdict: str) -> Section:
    """Which kernel counters moved under overload with the knob levels that matter (the report's mechanism
    heatmap and tables), and whether the listen-queue counters bear out the paper's reading; one line with
    the record command when the store has no counters."""
    if not counter_columns(inputs.data):
        return Section(title=MECHANISMS_TITLE, paragraphs=(
            "This recording has no kernel counters (it predates them), so the page cannot show which kernel events "
            f"carry the effects: record the study again into an empty directory (`{record_command(NAME, 'NEW_DIR')}`; "
            "recording resumes a store it finds) and ship the new stores.",))
    checks = listen_queue_checks(inputs.data)
    shown = []
    if result.mechanisms["significant"].astype(bool).any():
        fig = figures.mechanism_heatmap(result.mechanisms)
        shown.append(FigureImage(figures.to_png(fig), alt="kernel counters against the baseline under overload",
                                 caption="Under overload: each counter's change at a knob level that matters against "
                                         "its baseline (Hedges' g; * significant at a 5 % false discovery rate)."))
        plt.close(fig)
    tables = [Table(f"Mechanisms of {knob} under overload: the counters that moved most with each level that matters "
                    "(per second, 95 % CI; q: Benjamini–Hochberg over every counter and level)", frame)
              for knob, frame in mechanism_frames(result).items()]
    tables.append(Table("The listen queue under overload: its overflows (ListenOverflows, ListenDrops) and the resets "
                        "of abort_on_overflow=1 (TCPAbortOnOverflow; EmbryonicRsts, which counts a connection reset "
                        "when its last handshake ACK finds the queue full) in three comparisons (pooled t-test, "
                        "q: Benjamini–Hochberg over this table)", listen_queue_frame(checks)))
    return Section(title=MECHANISMS_TITLE, paragraphs=(*listen_queue_reading(checks, lost_verdict),
                                                       mechanisms_markdown(result)),
                   figures=tuple(shown), tables=tuple(tables))


def page(stores: Path) -> StudyPage:
    """The interaction on lost with its simple effects, each knob per profile, both validations and the
    kernel counters under overload."""
    screen_path = recorded_store(stores, SCREEN_STORE, NAME)
    validations = recorded_validations(Path(stores))
    study = load_study(screen_path)
    inputs, result = overload_screen(study)
    term = interaction_row(result)
    effects = simple_effects(result)
    _, full = screen_study(study, metric="lost")
    tables = {m: table for m, (_, table) in validations.items()}
    measured = _measured(term, effects, tables)
    lost_verdict = combined_verdict([str(r["verdict"]) for r in map(_lost_row, tables.values()) if r is not None])
    shown = []
    for metric in ("lost", "qps"):
        fig = figures.interaction_plot(result.emmeans[result.emmeans["metric"] == metric], metric)
        shown.append(FigureImage(figures.to_png(fig), alt=f"{metric}: somaxconn x abort_on_overflow under overload",
                                 caption=f"{metric} under overload: estimated means per somaxconn and "
                                         "abort_on_overflow (95 % CI). Non-parallel lines are the interaction."))
        plt.close(fig)
    verdicts = full.verdicts[["knob", "metric", "verdict", "p_adj", "effect_pct", "effect_ci_low", "effect_ci_high",
                              "effect_abs", "only_when"]]
    return StudyPage(
        measured=measured,
        figures=shown,
        tables=[Table(f"Under overload: the {INTERACTION} term on lost (model test, adjusted p)",
                      term.to_frame().T[["metric", "term", "df1", "df2", "statistic", "p", "p_adj", "test"]]),
                Table("Simple effects: abort_on_overflow=1 against 0 on lost at each somaxconn (queries, adjusted "
                      "95 % CI)", effects),
                Table("Both profiles: every knob and interaction (verdicts of the model screen, profile as a "
                      "factor)", verdicts.reset_index(drop=True))],
        sections=[validation_section(tables, Path(stores)),
                  mechanisms_section(inputs, result, Path(stores), lost_verdict)],
        notes=["The lab's overload is 200 TCP clients against one nsd on 2 CPUs; the paper's was 13,000 clients "
               "and 100,000 queries in flight on a production server.",
               "The paper's other candidates (fs.file-max, net.core.dev_weight_tx_bias, default_qdisc) are host-global "
               "or need a qdisc this kernel lacks, so they are left out."],
        stores=[screen_path, *(path for path, _ in validations.values())])


SEED_STUDIES.add("001", SeedStudy(
    key="001", slug="diiner-overload", title="DIINER: tcp_abort_on_overflow for DNS over TCP under intense load",
    paper="001_da2a39ae525c4e45.txt",
    claim=Claim(text="tcp_abort_on_overflow=1 helps a DNS server under intense load; at low load the defaults are "
                     "fine",
                numbers="intense load: lost queries -98 %, latency about -5 %, QPS about +8 % (Tukey and Dunn)",
                where="slides 'Tuning Under Intense Load' and 'Statistically verifying our intuitions'"),
    designs=(DESIGN,), minutes=9.5, record=record, page=page))
