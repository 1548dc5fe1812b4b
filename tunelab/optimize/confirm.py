"""Confirmation and validation: candidate vs baseline re-measured in fresh interleaved ABBA blocks.

A refinement's winner looks better than it is (it was selected *because* it measured well:
the winner's curse), so its gain is never reported from the search's own measurements. It is
re-measured against the baseline in ``blocks`` blocks, each in the order A B B A (A = baseline,
B = candidate): within a block a linear drift of the machine cancels out of ``mean(B) - mean(A)``.

Analysis (per metric): each block gives ``d_b = log(mean B_b / mean A_b)``; the blocks are the
replicates of a paired design, so the gain is ``100 (exp(mean d) - 1)`` % with a Student-t
95 % interval on ``mean d`` (df = blocks - 1), back-transformed. Equivalence is a paired TOST
on the same log scale with bounds ``log(1 -/+ sesoi/100)`` (90 % interval inside the bounds).
A bootstrap interval of the unpaired % change (:func:`tunelab.stats.pct_change`) is reported
alongside as a cross-check.

Verdict per metric, in the metric's "better" direction:

``regress``       the 95 % interval lies entirely on the worse side of 0
``improve``       the 95 % interval lies entirely on the better side of 0 and the change is not
                  equivalent to 0 within the SESOI (a significant but negligible gain is ``equivalent``)
``equivalent``    the TOST says the change is within ±SESOI
``inconclusive``  none of these; ``blocks_needed`` says how many blocks in total would decide it
                  if the observed mean and variance held
``untestable``    fewer than 2 blocks have a usable (positive) value in both arms, e.g. every trial
                  failed; ``reason`` says ``N usable blocks, need 2`` and nothing is estimated

Overall verdict: ``regress`` if any metric regresses, else ``untestable`` if any is, else
``inconclusive`` if any is, else ``improve`` if any improves, else ``equivalent``.

:func:`tunelab.optimize.validation.validate` checks everything it can before the first trial (:func:`plan_validation`: durations,
blocks, SESOI, metrics, load profiles and settings, host-global knobs, a candidate that differs from
the baseline) so a bad request is one error line with nothing applied and no store written; after the
trials it counts the failed ones and keeps the first reason (:class:`TrialFailures`).
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from tunelab.designs.change import BlockRule
from tunelab.errors import TunelabError
from tunelab.formatting import fmt_ci, fmt_pct, level_label
from tunelab.loads import Load
from tunelab.model import Direction, MeasurementKind, Metric, ParseError, TrialStatus, Verdict
from tunelab.optimize.evaluators import Evaluator
from tunelab.runner.binding import BoundKnob, bind_knob_ids, check_host_global
from tunelab.store import Store
from tunelab.targets import Target

# scipy.stats and tunelab.stats (scipy, statsmodels, pingouin: about 2 s) are imported inside the
# functions that compute, so importing this package (as tunelab.simulator and tunelab.api do) stays cheap.

VERDICTS = ("improve", "regress", "equivalent", "inconclusive", "untestable")
#: CLI exit status per verdict (documented in ``tunelab validate --help``)
EXIT_STATUS = {"improve": 0, "equivalent": 0, "regress": 3, "inconclusive": 4, "untestable": 5}
#: the fewest blocks with usable values in both arms that estimate a variance
MIN_BLOCKS = 2
#: the largest block count ``blocks_needed`` looks for
MAX_BLOCKS = 1000


class ValidationError(TunelabError):
    """A validation or confirmation cannot run as asked (too few blocks, unknown metric, ...)."""


def goals_of(metrics: Sequence[Metric | Mapping[str, Any] | str]) -> list[Metric]:
    """Each metric to judge as a :class:`~tunelab.model.Metric` (from a Metric, a mapping
    ``{name, direction, sesoi_pct}`` or ``"qps:max[:5]"``); :class:`ValidationError` if one cannot be read.

    >>> [str(g) for g in goals_of(["qps:max", {"name": "latency_mean_ms", "direction": "minimize", "sesoi_pct": 10}])]
    ['qps:max:5', 'latency_mean_ms:min:10']
    """
    try:
        return [Metric.coerce(m) for m in metrics]
    except ParseError as exc:
        raise ValidationError(f"{exc}; a metric must look like NAME:max, NAME:min or NAME:max:SESOI_PCT") from None


def config_digest(*configs: Mapping[str, Any]) -> str:
    """8 hex digits identifying the compared configurations (keeps store keys of different comparisons apart).

    >>> config_digest({"a": 1}) == config_digest({"a": 1}), config_digest({"a": 1}) == config_digest({"a": 2})
    (True, False)
    """
    text = json.dumps([sorted((str(k), repr(v)) for k, v in c.items()) for c in configs])
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def check_confirm_blocks(blocks: int) -> None:
    """Refuse a confirmation that could not estimate its variance (one :class:`ValidationError` line), before
    anything runs; 0 skips the confirmation.

    >>> check_confirm_blocks(0), check_confirm_blocks(2)
    (None, None)
    """
    if blocks != 0 or isinstance(blocks, bool):
        try:
            abba_order(blocks)
        except ValidationError as exc:
            raise ValidationError(f"{exc} (or 0 to skip the confirmation)") from None


def abba_order(blocks: int) -> list[tuple[int, int, str]]:
    """The measurement order: ``(block, position, arm)`` with arms A (baseline) and B (candidate).

    >>> [arm for _, _, arm in abba_order(2)]
    ['A', 'B', 'B', 'A', 'A', 'B', 'B', 'A']
    """
    if isinstance(blocks, bool) or not isinstance(blocks, (int, np.integer)) or blocks < MIN_BLOCKS:
        raise ValidationError(f"confirmation needs at least {MIN_BLOCKS} ABBA blocks to estimate its variance, "
                              f"got {blocks!r}; pass 2 or more")
    return [(b, p, arm) for b in range(blocks) for p, arm in enumerate("ABBA")]


def _half_width(sd: float, n: int, q: float, fitted: int = 1) -> float:
    """Half width of the ``q`` one-sided Student-t interval of a mean of ``n`` values with SD ``sd``
    (``n - fitted`` degrees of freedom)."""
    from scipy import stats as ss

    return float(ss.t.ppf(q, n - fitted) * sd / math.sqrt(n))


def blocks_needed(mean_log: float, sd_log: float, bound_log: float, alpha: float = 0.05,
                  fitted: int = 1) -> int | None:
    """Smallest block count at which the observed mean/SD would decide: a significant difference
    (95 % interval excludes 0) or equivalence (90 % interval inside ±bound). ``None`` if no count up
    to :data:`MAX_BLOCKS` would (the mean sits on the SESOI boundary). ``fitted``: parameters fitted
    besides the mean's (a duet's crossover fits its side difference too: df = pairs - 2).

    >>> blocks_needed(0.02, 0.02, math.log(1.05))
    4
    """
    if not np.isfinite(sd_log) or sd_log == 0:
        return 1 + fitted
    for n in range(1 + fitted, MAX_BLOCKS + 1):
        if _half_width(sd_log, n, 1 - alpha / 2, fitted) < abs(mean_log):
            return n
        if _half_width(sd_log, n, 1 - alpha, fitted) < bound_log - abs(mean_log):
            return n
    return None


def analyse_blocks(measurements: pd.DataFrame, goal: Metric, alpha: float = 0.05,
                   bootstrap: bool = True, needed: bool = True) -> dict[str, Any]:
    """Gain, CI, TOST and verdict of one metric from ABBA measurements.

    ``measurements`` has columns ``block``, ``arm`` (A/B) and the metric; see the module docstring.
    Returns a dict with ``metric, direction, sesoi_pct, blocks, baseline_mean, candidate_mean,
    pct_change, ci_low, ci_high, tost_p, verdict, blocks_needed`` (+ ``boot_ci_low/high``); ``alpha`` is the
    two-sided level of the interval and the level of the TOST (a sequential look's nominal level);
    ``needed=False`` leaves ``blocks_needed`` out (None) at an interim look.
    """
    if goal.name not in measurements.columns:
        raise ValidationError(f"metric {goal.name!r} was not measured; measured columns: "
                              f"{', '.join(c for c in measurements.columns if c not in ('block', 'arm', 'position'))}")
    data = measurements[["block", "arm", goal.name]].dropna()
    means = data.groupby(["block", "arm"])[goal.name].mean().unstack("arm")
    means = means.dropna()
    means = means[(means["A"] > 0) & (means["B"] > 0)] if {"A", "B"} <= set(means.columns) else means.iloc[0:0]
    n = len(means)
    base = {"metric": goal.name, "direction": goal.direction, "sesoi_pct": goal.sesoi_pct, "blocks": n,
            "baseline_mean": float(data.loc[data["arm"] == "A", goal.name].mean()),
            "candidate_mean": float(data.loc[data["arm"] == "B", goal.name].mean())}
    if n < MIN_BLOCKS:
        return {**base, "pct_change": math.nan, "ci_low": math.nan, "ci_high": math.nan, "tost_p": math.nan,
                "verdict": "untestable", "blocks_needed": None, "reason": f"{n} usable blocks, need {MIN_BLOCKS}"}
    d = np.log(means["B"].to_numpy(float) / means["A"].to_numpy(float))
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    out = judge_log_change(mean, sd / math.sqrt(n), n - 1, goal, alpha, sd=sd, needed=needed)
    out = {**base, **out}
    if bootstrap:
        out.update(_bootstrap_ci(data, goal.name))
    return out


def judge_log_change(mean: float, se: float, df: int, goal: Metric, alpha: float = 0.05,
                     sd: float | None = None, fitted: int = 1, needed: bool = True) -> dict[str, Any]:
    """The % change, Student-t interval, paired TOST and verdict of a mean log ratio ``mean`` with standard
    error ``se`` on ``df`` degrees of freedom (see the module docstring); ``alpha`` is the two-sided level of
    the interval and the level of the TOST; ``sd`` (one unit's SD) and ``fitted`` (parameters fitted besides,
    df = units - fitted) size ``blocks_needed`` when inconclusive (``needed=False``: None, at an interim look).

    >>> row = judge_log_change(math.log(1.10), 0.01, 5, Metric("qps", "maximize", 5))
    >>> round(row["pct_change"], 6), row["verdict"]
    (10.0, 'improve')
    """
    from scipy import stats as ss

    tq = float(ss.t.ppf(1 - alpha / 2, df))
    low, high = (mean - tq * se, mean + tq * se) if se > 0 else (mean, mean)
    lower_bound, upper_bound = math.log(1 - goal.sesoi_pct / 100), math.log(1 + goal.sesoi_pct / 100)
    if se > 0:
        p_lower = float(ss.t.sf((mean - lower_bound) / se, df))
        p_upper = float(ss.t.cdf((mean - upper_bound) / se, df))
    else:
        p_lower = 0.0 if mean > lower_bound else 1.0
        p_upper = 0.0 if mean < upper_bound else 1.0
    tost_p = max(p_lower, p_upper)
    sign = 1.0 if goal.direction == Direction.MAXIMIZE else -1.0
    better_low, better_high = sorted((sign * low, sign * high))
    equivalent = tost_p < alpha
    if better_high < 0:
        verdict = "regress"
    elif better_low > 0 and not equivalent:
        verdict = "improve"
    elif equivalent:
        verdict = "equivalent"
    else:
        verdict = "inconclusive"
    more = None
    if verdict == Verdict.INCONCLUSIVE and needed:
        more = blocks_needed(mean, se * math.sqrt(df + fitted) if sd is None else sd,
                             min(-lower_bound, upper_bound), alpha, fitted)
    return {"pct_change": 100 * math.expm1(mean), "ci_low": 100 * math.expm1(low),
            "ci_high": 100 * math.expm1(high), "tost_p": tost_p, "verdict": verdict, "blocks_needed": more}


def _bootstrap_ci(data: pd.DataFrame, metric: str) -> dict[str, float]:
    """Cross-check: tunelab.stats.pct_change percentile bootstrap (unpaired) of B vs A."""
    from tunelab.stats import pct_change

    try:
        table = pct_change(data, metric, "arm", baseline="A", n_boot=1000, seed=0)
        row = table[table["level"] == "B"].iloc[0]
        return {"boot_ci_low": float(row["ci_low"]), "boot_ci_high": float(row["ci_high"])}
    except (TunelabError, IndexError):
        return {"boot_ci_low": math.nan, "boot_ci_high": math.nan}


def overall_verdict(verdicts: Sequence[str]) -> str:
    """Combine per-metric verdicts: regress > untestable > inconclusive > improve > equivalent.

    >>> overall_verdict(["improve", "equivalent"]), overall_verdict(["improve", "regress"])
    ('improve', 'regress')
    >>> overall_verdict(["improve", "untestable"])
    'untestable'
    """
    for verdict in ("regress", "untestable", "inconclusive", "improve"):
        if verdict in verdicts:
            return verdict
    return "equivalent" if verdicts else "inconclusive"


@dataclass(frozen=True)
class TrialFailures:
    """How many of a comparison's trials failed (and were flagged: usable but suspicious), out of how many, and
    the first one's reason."""

    trials: int
    failed: int
    first_reason: str | None = None
    flagged: int = 0
    first_flag: str | None = None

    @property
    def all_failed(self) -> bool:
        return self.trials > 0 and self.failed == self.trials

    def line(self) -> str | None:
        """One line for the terminal (``None`` when no trial failed or was flagged).

        >>> TrialFailures(8, 8, "dnsperf exited with status 1: bad option").line()
        'all 8 trials failed; first failure: dnsperf exited with status 1: bad option'
        >>> TrialFailures(8, 3, "timeout").line(), TrialFailures(8, 0).line()
        ('3 of 8 trials failed; first failure: timeout', None)
        >>> TrialFailures(8, 0, None, 5, "achieved 0 qps, below 50% of the requested 500 qps").line()
        '5 of 8 trials flagged; first: achieved 0 qps, below 50% of the requested 500 qps'
        """
        parts = []
        if self.failed:
            how = f"all {self.trials} trials failed" if self.all_failed else \
                f"{self.failed} of {self.trials} trials failed"
            parts.append(f"{how}; first failure: {self.first_reason or 'no reason was recorded'}")
        if self.flagged:
            parts.append(f"{self.flagged} of {self.trials} trials flagged; first: "
                         f"{self.first_flag or 'no reason was recorded'}")
        return "; ".join(parts) or None

    def to_json(self) -> dict[str, Any]:
        return {"trials": self.trials, "failed": self.failed, "first_reason": self.first_reason,
                "flagged": self.flagged, "first_flag": self.first_flag}


def first_reason(rows: pd.DataFrame) -> str | None:
    """The first row's ``reason`` on one line (None when there is none)."""
    if not len(rows):
        return None
    first = rows.iloc[0]["reason"]
    return " ".join(str(first).split()) if first is not None and not pd.isna(first) else None


def trial_failures(store: Store, run_keys: Sequence[str], phase: str | None = None) -> TrialFailures:
    """The failed and flagged trials among ``run_keys`` (of ``phase``, default all) in ``store`` (a key's last
    record counts) and the first reason of each."""
    wanted = list(dict.fromkeys(run_keys))
    trials = store.trials(phase)
    last = trials[trials["run_key"].isin(wanted)].drop_duplicates("run_key", keep="last")
    failed = last[last["status"] == TrialStatus.FAILED.value]
    flagged = last[last["status"] == TrialStatus.FLAGGED.value]
    return TrialFailures(len(wanted), len(failed), first_reason(failed), len(flagged), first_reason(flagged))


@dataclass
class ConfirmResult:
    """Outcome of :func:`confirm` / :func:`validate`.

    ``verdict`` overall (from the ``role == 'objective'`` rows); ``table`` one row per (profile,
    metric) with ``role`` (``'objective'`` or ``'side effect'``), ``pct_change, ci_low, ci_high,
    tost_p, verdict, blocks_needed`` (and ``reason`` for an ``untestable`` row); ``measurements`` one
    row per measurement (``profile, block, position, arm, key`` and metrics); ``failures`` the failed
    trials of a :func:`validate` (``None`` for a bare :func:`confirm`).
    """

    verdict: str
    table: pd.DataFrame
    measurements: pd.DataFrame
    baseline: dict[str, Any]
    candidate: dict[str, Any]
    failures: TrialFailures | None = None
    #: one line on how the blocks were run (a sequential validation's looks and why it stopped), or None
    note: str | None = None

    def gain(self, metric: str | None = None) -> dict[str, float]:
        """``{"pct_change", "ci_low", "ci_high"}`` of ``metric`` (default: the first) in the first profile."""
        row = self.table.iloc[0] if metric is None else self.table[self.table["metric"] == metric].iloc[0]
        # (objective rows come first, so the default is the first objective)
        return {k: float(row[k]) for k in ("pct_change", "ci_low", "ci_high")}

    def gain_text(self) -> str:
        """The first row's change with its CI: ``'qps +12.4 % [95 % CI +7.1 % to +18.0 %] (overload)'``."""
        if self.table.empty:
            return "nothing was judged"
        row = self.table.iloc[0]
        change = (f"untestable ({row.get('reason') or 'no usable blocks'})" if row["verdict"] == Verdict.UNTESTABLE else
                  f"{fmt_pct(row['pct_change'])} {fmt_ci(row['ci_low'], row['ci_high'], row['pct_change'])}")
        return f"{row['metric']} {change} ({row['profile']})"

    def __repr__(self) -> str:
        """Two lines: the verdict with the first metric's change, and where the rest is."""
        return (f"ConfirmResult: {self.verdict.upper()}; {self.gain_text()}\n"
                "  .summary() for every metric, .table, .measurements (one row per measurement)")

    def summary(self) -> str:
        """The verdict, the failed trials (if any) and one line per (profile, metric); never ``nan``."""
        lines = [f"verdict: {self.verdict.upper()}"]
        failed = self.failures.line() if self.failures is not None else None
        lines += [failed] if failed else []
        lines += [self.note] if self.note else []
        return "\n".join(lines + [row_text(row) for row in self.table.itertuples()])


def row_text(row: Any) -> str:
    """One (profile, metric) row of :meth:`ConfirmResult.summary`."""
    side = " (side effect, not judged)" if getattr(row, "role", "objective") == "side effect" else ""
    if row.verdict == Verdict.UNTESTABLE:
        return f"  [{row.profile}] {row.metric}: untestable ({getattr(row, 'reason', None) or 'no usable blocks'}){side}"
    needed, unit = row.blocks_needed, "pairs" if getattr(row, "measurement", None) == MeasurementKind.DUET.value else "blocks"
    extra = f"; about {int(needed)} {unit} in total would decide" if needed is not None and not pd.isna(needed) else ""
    alpha = getattr(row, "alpha_nominal", None)
    level = 95.0 if alpha is None or pd.isna(alpha) else 100 * (1 - float(alpha))
    return (f"  [{row.profile}] {row.metric}: {row.pct_change:+.2f} % ({level:.4g} % CI {row.ci_low:+.2f} .. "
            f"{row.ci_high:+.2f}), SESOI ±{row.sesoi_pct:g} %, TOST p={row.tost_p:.3g} -> {row.verdict}{extra}{side}")


def confirm(evaluator: Evaluator, baseline: Mapping[str, Any], candidate: Mapping[str, Any],
            metrics: Sequence[Metric | Mapping[str, Any] | str], *, blocks: int = 6, alpha: float = 0.05,
            key_prefix: str = "", profile: str = "default",
            side_metrics: Sequence[Metric | Mapping[str, Any] | str] = ()) -> ConfirmResult:
    """Measure ``baseline`` (A) and ``candidate`` (B) in ``blocks`` ABBA blocks and judge the change.

    ``metrics`` decide the verdict; ``side_metrics`` (e.g. the design's other metrics) are
    analysed from the same measurements and reported with ``role == 'side effect'`` so a
    trade-off is visible, but they do not change the verdict.

    Evaluation keys are ``"<key_prefix>b<block>:<position><arm>"`` (stable, so a store-backed
    evaluator resumes an interrupted confirmation).

    Examples
    --------
    >>> from tunelab.simulator import SimulatorEvaluator, get_surface
    >>> s = get_surface("simple")
    >>> confirm(SimulatorEvaluator(s, seed=3), s.baseline, s.optimum(), ["qps:max:5"], blocks=4).verdict
    'improve'
    """
    goals = goals_of(metrics)
    if not goals:
        raise ValidationError("name at least one metric to confirm, e.g. qps:max:5")
    measurements = measure_blocks(evaluator, baseline, candidate, goals, range(int(blocks)), key_prefix, profile,
                                  checked_blocks=int(blocks))
    sides = [g for g in goals_of(side_metrics) if g.name in measurements.columns
             and g.name not in {goal.name for goal in goals}]
    table = pd.DataFrame([{"profile": profile, "role": role, **analyse_blocks(measurements, g, alpha)}
                          for role, group in (("objective", goals), ("side effect", sides)) for g in group])
    table["blocks_needed"] = table["blocks_needed"].astype("Int64")
    verdict = overall_verdict(list(table.loc[table["role"] == "objective", "verdict"]))
    return ConfirmResult(verdict, table, measurements, dict(baseline), dict(candidate))


def measure_blocks(evaluator: Evaluator, baseline: Mapping[str, Any], candidate: Mapping[str, Any],
                   goals: Sequence[Metric], blocks: range, key_prefix: str = "", profile: str = "default", *,
                   checked_blocks: int | None = None) -> pd.DataFrame:
    """Measure the ABBA blocks numbered ``blocks`` (e.g. ``range(4, 8)``: a sequential validation's second
    round): one row per measurement (``profile, block, position, arm, key`` and the metrics; a trial that
    reported nothing has NaN). Keys as in :func:`confirm`, so a block is the same trial in every round."""
    order = [(b, p, arm) for b, p, arm in abba_order(checked_blocks or max(MIN_BLOCKS, blocks.stop)) if b in blocks]
    requests = [(dict(baseline if arm == "A" else candidate), block * 2 + (position in (2, 3)),
                 f"{key_prefix}b{block}:{position}{arm}") for block, position, arm in order]
    many = getattr(evaluator, "evaluate_many", None)
    if callable(many):            # many testbeds: blocks in parallel, each block's ABBA on one testbed
        results = many(requests, groups=[block for block, _, _ in order])
    else:
        results = [evaluator.evaluate(config, replicate, key=key) for config, replicate, key in requests]
    unmeasured = {goal.name: math.nan for goal in goals}     # a trial that reported nothing (a dry run): NaN
    rows = [{"profile": profile, "block": block, "position": position, "arm": arm, "key": key, **unmeasured,
             **{k: float(v) for k, v in values.items()}}
            for (block, position, arm), (_, _, key), values in zip(order, requests, results)]
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=["profile", "block", "position", "arm", "key",
                                                                 *unmeasured])


# ---- validate: checked before the first trial, then run -----------------------------------------------


def check_durations(warmup_s: float, measure_s: float) -> tuple[float, float]:
    """``(warmup_s, measure_s)`` as floats; :class:`ValidationError` unless the warm-up is >= 0 s and the
    measured time > 0 s (both finite).

    >>> check_durations(2, 8)
    (2.0, 8.0)
    >>> check_durations(2, -1)
    Traceback (most recent call last):
    ...
    tunelab.optimize.confirm.ValidationError: the measured time (--measure) must be a number of seconds > 0, got -1
    """
    for what, value, rule, zero_ok in (("warm-up (--warmup)", warmup_s, ">= 0 (0: none)", True),
                                       ("measured time (--measure)", measure_s, "> 0", False)):
        number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
        if not math.isfinite(number) or number < 0 or (number == 0 and not zero_ok):
            shown = f"{value:g}" if isinstance(number, (int, float)) and math.isfinite(number) else repr(value)
            raise ValidationError(f"the {what} must be a number of seconds {rule}, got {shown}")
    return float(warmup_s), float(measure_s)


def checked_goals(metrics: Sequence[Metric | Mapping[str, Any] | str], sesoi_pct: float | None,
                  load: Load) -> list[Metric]:
    """The metrics to judge (``sesoi_pct`` overriding each SESOI), each one the load reports."""
    goals = goals_of(metrics)
    if not goals:
        raise ValidationError("name at least one metric to validate, e.g. qps:max:5")
    if sesoi_pct is not None:
        if isinstance(sesoi_pct, bool) or not isinstance(sesoi_pct, (int, float)) or not 0 < sesoi_pct < 100:
            raise ValidationError(f"--sesoi must be a percentage above 0 and below 100, got {sesoi_pct!r}")
        goals = [replace(g, sesoi_pct=float(sesoi_pct)) for g in goals]
    reported = list(getattr(load, "metrics", {}) or {})
    unknown = [g.name for g in goals if reported and g.name not in reported]
    if unknown:
        raise ValidationError(f"{load.name} does not report metric {unknown[0]!r}; it reports {', '.join(reported)}")
    return goals


def profile_settings(load: Load, profiles: Sequence[str] | Mapping[str, Mapping[str, Any]],
                     overrides: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each profile's load settings with ``overrides``, checked by the load's own rules as ``tunelab run``
    checks a design's ``load.settings`` (an unknown setting or a bad value is one :class:`LoadError`).

    ``profiles`` names the load's own profiles, or maps a name to settings of its own (a change file's
    ``load.profiles``), which start from the load's defaults."""
    if not profiles:
        raise ValidationError(f"name at least one load profile; {load.name} has {', '.join(load.profiles)}")
    if getattr(load, "wants_key", False) and "key" in overrides:
        raise ValidationError(f"{load.name}: load setting 'key' is set by tunelab for every trial (its run key), so "
                              "a value given for it would be ignored; remove --load-setting key=...")
    for key, value in overrides.items():          # one key at a time, so the error names it
        load.validate_settings({key: value})
    out = {}
    for profile in profiles:
        own = profiles[profile] if isinstance(profiles, Mapping) else None
        out[profile] = load.settings(None, {**own, **overrides}) if own is not None else \
            load.settings(profile, overrides)
        load.validate_settings(out[profile])
    return out


def block_rule(blocks: int | BlockRule) -> BlockRule:
    """``blocks`` as a :class:`BlockRule` (an int is a fixed count); :class:`ValidationError` unless every
    look has at least :data:`MIN_BLOCKS` blocks and ``min <= max``."""
    rule = blocks if isinstance(blocks, BlockRule) else None
    if rule is None:
        abba_order(blocks)
        return BlockRule.fixed(int(blocks))
    abba_order(rule.min)
    if rule.max < rule.min or rule.step < 1:
        raise ValidationError(f"blocks: max ({rule.max}) must be >= min ({rule.min}) and step ({rule.step}) >= 1")
    return rule


@dataclass(frozen=True)
class ValidationPlan:
    """A validation checked before its first trial (:func:`plan_validation`): the bound knobs, both
    configurations in the knobs' canonical values, the goals, each profile's load settings, the ABBA
    blocks per profile and the durations. ``baseline_source`` is ``"current"`` (read from the target
    before anything was applied) or ``"given"``."""

    specs: list[BoundKnob]
    baseline: dict[str, Any]
    candidate: dict[str, Any]
    goals: list[Metric]
    profiles: dict[str, dict[str, Any]]
    blocks: BlockRule
    warmup_s: float
    measure_s: float
    baseline_source: str


def validation_provenance(plan: ValidationPlan, profile: str, alpha: float, **extra: Any) -> dict[str, Any]:
    """What each trial of a validation records about how it is judged, so a reader of the store judges it as
    ``validate`` did (:mod:`tunelab.report.refinement`): the profile, the block rule (``validate_blocks``), the
    goals with their SESOI as asked (``validate_goals``, :meth:`tunelab.model.Metric.to_json`) and the level
    (``validate_alpha``); ``extra`` adds keys (a duet's ``measurement``).

    >>> plan = ValidationPlan([], {}, {}, [Metric("qps", "maximize", 3)], {}, BlockRule(4, 16, 4), 2.0, 8.0, "given")
    >>> validation_provenance(plan, "low", 0.05)["validate_goals"]
    [{'name': 'qps', 'direction': 'maximize', 'sesoi_pct': 3.0}]
    """
    return {"validate_profile": profile, "validate_blocks": asdict(plan.blocks),
            "validate_goals": [goal.to_json() for goal in plan.goals], "validate_alpha": float(alpha), **extra}


def compared_configs(target: Target, baseline: Mapping[str, Any] | str, candidate: Mapping[str, Any],
                     knob_lookup: Any = None) -> tuple[list[BoundKnob], dict[str, Any], dict[str, Any]]:
    """The bound knobs and both configurations in canonical values (``"current"``: read from ``target``).

    A knob the baseline sets and the candidate does not keeps the baseline's value in both arms.
    :class:`ValidationError` when the candidate equals the baseline: there would be nothing to measure.
    """
    if not candidate:
        raise ValidationError("the candidate sets no knob; give at least one KNOB=VALUE")
    if isinstance(baseline, str) and baseline != "current":
        raise ValidationError(f"baseline {baseline!r} must be a config mapping or 'current'")
    given = {} if isinstance(baseline, str) else dict(baseline)
    specs = bind_knob_ids({**given, **candidate}, knob_lookup)
    if isinstance(baseline, str):
        given = {spec.id: spec.knob.read(target, spec.host,
                                         device=target.resolve_device(spec.device) if spec.device else None)
                 for spec in specs}
    missing = [kid for kid in candidate if kid not in given]
    if missing:
        raise ValidationError(f"the baseline has no value for {', '.join(missing)}; give one or use --baseline current")
    canonical = {spec.id: spec.knob.validate for spec in specs}
    base = {kid: canonical[kid](value) for kid, value in given.items()}
    wanted = {**base, **{kid: canonical[kid](value) for kid, value in candidate.items()}}
    if base == wanted:
        source = "the target's current values" if isinstance(baseline, str) else "the baseline given"
        shown = ", ".join(f"{kid}={level_label(value)}" for kid, value in wanted.items())
        raise ValidationError(f"the candidate equals the baseline ({source}: {shown}); there is nothing to "
                              "validate: change at least one knob's value")
    return specs, base, wanted


def plan_validation(target: Target, load: Load, baseline: Mapping[str, Any] | str, candidate: Mapping[str, Any],
                    metrics: Sequence[Metric | Mapping[str, Any] | str], *, blocks: int | BlockRule = 6,
                    sesoi_pct: float | None = None,
                    profiles: Sequence[str] | Mapping[str, Mapping[str, Any]] = ("overload",),
                    load_settings: Mapping[str, Any] | None = None, warmup_s: float = 2.0, measure_s: float = 8.0,
                    allow_host_global: bool = False, knob_lookup: Any = None) -> ValidationPlan:
    """Check a validation before its first trial; nothing is applied (``"current"`` is only read).

    Refused with one error line: a warm-up < 0 s or a measured time <= 0 s, fewer than 2 blocks, a
    SESOI outside (0, 100) %, a metric the load does not report, an unknown profile, an unknown or
    ignored load setting (the load's own rules, as for ``tunelab run``), a host-global knob without
    ``allow_host_global``, and a candidate equal to the baseline.
    """
    warmup_s, measure_s = check_durations(warmup_s, measure_s)
    rule = block_rule(blocks)
    goals = checked_goals(metrics, sesoi_pct, load)
    settings = profile_settings(load, profiles, dict(load_settings or {}))
    specs, base, wanted = compared_configs(target, baseline, candidate, knob_lookup)
    check_host_global(specs, allow_host_global)
    return ValidationPlan(specs, base, wanted, goals, settings, rule, warmup_s, measure_s,
                          "current" if isinstance(baseline, str) else "given")
