"""From a :class:`~tunelab.designs.schema.Design` to the plan DataFrame (Contract 2) and its summary.

Replicates repeat the design's runs; consecutive replicates form blocks (``blocks`` must divide
``replicates``); the execution order is randomised from ``numpy.random.default_rng(seed)``:

* every type but OAT: all runs of a block are shuffled together;
* OAT: each replicate keeps its runs together; its varied runs are shuffled and a baseline run
  opens the replicate and follows every ``baseline_every`` (default 2) varied runs, so baseline
  runs are spread through the whole plan and drift shows up as a trend in the baselines.

A design with several load profiles (``load.profile: [low, overload]``) crosses every design row
with every profile; the plan column ``profile`` names each run's profile (single-profile plans
have no such column). Profiles are shuffled, not blocked: a block's runs are shuffled together
over all profiles, and an OAT replicate's groups (a baseline run of one profile and the
``baseline_every`` varied runs of that profile that follow it) are shuffled over the profiles, so
each profile's baselines stay interleaved with its own varied runs while drift falls on every
profile alike (blocking the profiles would confound the load with time). The runner runs each
trial with its own profile's settings (one load invocation per trial).

``run_id`` numbers the runs in standard order (replicate by replicate, then profile by profile,
design row by row), so it does not depend on the seed; ``config_id`` numbers distinct knob settings in order of appearance.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from tunelab.designs.constraints import Constraints, entry_text, in_write_order, matching_entry, write_rank
from tunelab.designs.generators import GENERATORS, DesignRows
from tunelab.designs.schema import Design, design_commands
from tunelab.errors import DesignError
from tunelab.model import DesignType, level_to_json

if TYPE_CHECKING:
    import pandas as pd

#: fixed per-run cost assumed by the wall-time estimate: lab reset, knob writes and reads, parsing
RUN_OVERHEAD_S = 1.0
#: extra cost of restarting the service when a ``requires_restart`` knob changes between runs
RESTART_S = 1.0

#: bookkeeping columns of a plan (Contract 2), before the knob columns; they travel with each trial into the store
PLAN_COLUMNS = ["run_id", "config_id", "block", "replicate", "run_order", "is_baseline", "varied_knob"]
#: bookkeeping columns only some trials have: ``round`` (sequential designs, 1, 2, ...), ``profile`` (a load
#: profile per run), ``testbed`` (the testbed that ran the trial, when a study runs on several: tunelab.cluster)
OPTIONAL_PLAN_COLUMNS = ["round", "profile", "testbed", "duet_pair", "duet_side", "duet_arm"]


def _rows(design: Design) -> DesignRows:
    return GENERATORS.get(design.design_type).build(design, np.random.default_rng(design.seed))


def _without_excluded(design: Design, rows: DesignRows) -> DesignRows:
    """The design's rows minus those an ``constraints.exclude`` entry matches (the baseline never is)."""
    exclude = design.constraints.exclude
    if not exclude:
        return rows
    keep = [i for i, row in enumerate(rows.rows) if matching_entry(row, exclude) is None]
    return replace(rows, rows=[rows.rows[i] for i in keep], varied=[rows.varied[i] for i in keep])


def _replicate_template(design: Design, rows: DesignRows) -> tuple[list[dict[str, Any]], list[str | None]]:
    """One replicate's runs in standard order (OAT: baseline copies first, then varied runs)."""
    if rows.baseline_every is not None:
        n_varied = sum(v is not None for v in rows.varied)
        n_base = math.ceil(n_varied / rows.baseline_every)
        configs = [rows.rows[0]] * n_base + [r for r, v in zip(rows.rows, rows.varied) if v is not None]
        varied = [None] * n_base + [v for v in rows.varied if v is not None]
        return configs, varied
    extra = int(design.options.get("baseline_runs", 0) or 0)
    return list(rows.rows) + [design.baseline] * extra, list(rows.varied) + [None] * extra


def _order(design: Design, rows: DesignRows, per_rep: int, varied: list[str | None],
           rng: np.random.Generator, profiles: int = 1) -> list[int]:
    """Run ids (standard numbering) in execution order.

    ``per_rep`` runs per replicate and profile; a replicate holds ``profiles`` such segments
    (standard order: profile by profile). With one profile the random draws are those of a
    single-load plan, so existing plans keep their order.
    """
    order: list[int] = []
    reps_per_block = design.replicates // design.blocks
    if rows.baseline_every is not None:
        for rep in range(design.replicates):
            groups: list[list[int]] = []
            for profile in range(profiles):
                start = (rep * profiles + profile) * per_rep
                baselines = [start + i for i, v in enumerate(varied) if v is None]
                changed = [start + i for i, v in enumerate(varied) if v is not None]
                changed = [changed[i] for i in rng.permutation(len(changed))]
                groups += [[baselines[group], *changed[group * rows.baseline_every:(group + 1) * rows.baseline_every]]
                           for group in range(len(baselines))]
            if profiles > 1:
                groups = [groups[i] for i in rng.permutation(len(groups))]
            for group in groups:
                order.extend(group)
        return order
    for block in range(design.blocks):
        size = reps_per_block * per_rep * profiles
        ids = np.arange(block * size, (block + 1) * size)
        order.extend(int(i) for i in rng.permutation(ids))
    return order


def _column(values: list[Any], knob_type: str) -> pd.Series:
    """One knob's plan column, typed as the knob is (int64, bool, else object: text, triplets)."""
    import pandas as pd                      # deferred: `tunelab --help` does not need pandas

    if knob_type == "int" and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return pd.Series(values, dtype="int64")
    if knob_type == "bool" and all(isinstance(v, bool) for v in values):
        return pd.Series(values, dtype="bool")
    return pd.Series(values, dtype=object)


def make_plan(design: Design) -> pd.DataFrame:
    """The plan of a design: one row per run, sorted by ``run_order`` (Contract 2).

    Same design and seed -> the same plan; another seed -> another execution order.

    Examples
    --------
    >>> from tunelab.designs import load_design
    >>> plan = make_plan(load_design("designs/default.yaml"))         # relative to the repository root
    >>> list(plan.columns[:7])
    ['run_id', 'config_id', 'block', 'replicate', 'run_order', 'is_baseline', 'varied_knob']
    """
    import pandas as pd                      # deferred: `tunelab --help` does not need pandas

    rng = np.random.default_rng(design.seed)
    rows = _without_excluded(design, GENERATORS.get(design.design_type).build(design, rng))
    configs, varied = _replicate_template(design, rows)
    per_rep = len(configs)
    ids = design.knob_ids
    config_ids: dict[tuple[Any, ...], int] = {}
    for config in configs:
        config_ids.setdefault(tuple(config[k] for k in ids), len(config_ids))

    profiles = design.load.profiles if design.load.crossed else (None,)
    order = _order(design, rows, per_rep, varied, rng, len(profiles))
    run_order = {run_id: position for position, run_id in enumerate(order)}
    baseline = design.baseline
    reps_per_block = design.replicates // design.blocks
    records: dict[str, list[Any]] = {c: [] for c in [*PLAN_COLUMNS, "profile"]}
    knob_values: dict[str, list[Any]] = {k: [] for k in ids}
    for rep, (p, profile) in itertools.product(range(design.replicates), enumerate(profiles)):
        for i, (config, knob) in enumerate(zip(configs, varied)):
            run_id = (rep * len(profiles) + p) * per_rep + i
            records["profile"].append(profile)
            records["run_id"].append(run_id)
            records["config_id"].append(config_ids[tuple(config[k] for k in ids)])
            records["block"].append(rep // reps_per_block)
            records["replicate"].append(rep)
            records["run_order"].append(run_order[run_id])
            records["is_baseline"].append(all(config[k] == baseline[k] for k in ids))
            records["varied_knob"].append(knob)
            for k in ids:
                knob_values[k].append(config[k])
    frame = pd.DataFrame({
        "run_id": pd.Series(records["run_id"], dtype="int64"),
        "config_id": pd.Series(records["config_id"], dtype="int64"),
        "block": pd.Series(records["block"], dtype="int64"),
        "replicate": pd.Series(records["replicate"], dtype="int64"),
        "run_order": pd.Series(records["run_order"], dtype="int64"),
        "is_baseline": pd.Series(records["is_baseline"], dtype="bool"),
        "varied_knob": pd.Series(records["varied_knob"], dtype=object),
        **{knob.id: _column(knob_values[knob.id], knob.type) for knob in design.knobs},
    })
    if design.load.crossed:
        frame.insert(len(PLAN_COLUMNS), "profile", pd.Series(records["profile"], dtype=object))
    if design.rounds is not None:
        frame.insert(len(PLAN_COLUMNS), "round", pd.Series([1] * len(frame), dtype="int64"))
    return frame.sort_values("run_order", kind="stable").reset_index(drop=True)


def round_plan(design: Design, pending: Mapping[str, Sequence[Any]], round_number: int,
               first_run_id: int, replicates: int | None = None) -> pd.DataFrame:
    """The plan of a later round of a sequential design: ``step`` (or ``replicates``) more
    replicates of ``pending``.

    ``pending`` maps knob id -> the non-baseline levels that need more replicates (what the
    sequential screen left undecided). The (one-at-a-time) design runs ``step`` replicates of
    just those levels with fresh baseline runs interleaved as in round 1. Run ids continue from
    ``first_run_id``, ``round`` is ``round_number``, ``block`` numbers the rounds from 0 and the
    order is randomised from ``seed + round_number - 1``, so a resumed study plans the same round.

    Examples
    --------
    >>> from tunelab.designs import load_design
    >>> design = load_design("designs/default.yaml")
    >>> later = round_plan(design, {"net.ipv4.tcp_fin_timeout": [10]}, round_number=2, first_run_id=100)
    >>> sorted(set(later["varied_knob"].dropna())), int(later["run_id"].min()), set(later["round"])
    (['net.ipv4.tcp_fin_timeout'], 100, {2})
    """
    if design.rounds is None:
        raise DesignError(f"design {design.name!r} has a fixed number of replicates; only a sequential design "
                          "(replicates: {min, max, until: decided}) has later rounds")
    unknown = sorted(set(pending) - set(design.knob_ids))
    if unknown:
        raise DesignError(f"pending knob(s) {', '.join(unknown)} are not knobs of design {design.name!r}")
    knobs = tuple(replace(k, levels=(k.baseline, *[v for v in k.levels if v != k.baseline
                                                   and v in set(pending.get(k.id, ()))]))
                  for k in design.knobs)
    sub = replace(design, knobs=knobs, replicates=replicates or design.rounds.step, blocks=1,
                  seed=design.seed + round_number - 1)
    frame = make_plan(sub)
    ids = design.knob_ids
    known = _config_ids(make_plan(design), ids)
    configs = [tuple(row) for row in frame[ids].itertuples(index=False, name=None)]
    for config in configs:
        known.setdefault(config, len(known))
    frame["config_id"] = [known[config] for config in configs]
    frame["run_id"] += first_run_id
    frame["run_order"] += first_run_id
    frame["replicate"] += design.rounds.min + design.rounds.step * (round_number - 2)
    frame["block"] = round_number - 1
    frame["round"] = round_number
    return frame


def _config_ids(plan: pd.DataFrame, ids: list[str]) -> dict[tuple[Any, ...], int]:
    """Knob settings -> ``config_id`` as a plan numbered them."""
    rows = plan.sort_values("config_id")[[*ids, "config_id"]].itertuples(index=False, name=None)
    return {tuple(row[:-1]): int(row[-1]) for row in rows}


def count_restarts(design: Design, plan: pd.DataFrame) -> int:
    """Runs (after the first) whose ``requires_restart`` knobs differ from the previous run's."""
    restart_ids = [k.id for k in design.knobs if k.requires_restart]
    if not restart_ids or plan.empty:
        return 0
    ordered = plan.sort_values("run_order")
    values = [tuple(row) for row in ordered[restart_ids].itertuples(index=False, name=None)]
    return sum(a != b for a, b in zip(values, values[1:]))


def estimated_wall_s(design: Design, plan: pd.DataFrame) -> float:
    """runs × (warmup_s + measure_s + RUN_OVERHEAD_S) + restarts × RESTART_S."""
    per_run = design.warmup_s + design.measure_s + RUN_OVERHEAD_S
    return len(plan) * per_run + count_restarts(design, plan) * RESTART_S


def plan_records(plan: pd.DataFrame) -> list[dict[str, Any]]:
    """The plan as JSON-able rows (tuples become lists, numpy scalars Python scalars)."""
    return [level_to_json(row) for row in plan.to_dict(orient="records")]


def plan_summary(design: Design, plan: pd.DataFrame) -> dict[str, Any]:
    """What a plan costs and touches, as a JSON-able dict (schema in designs/README.md).

    Keys: ``design`` (name, type, source, hash, seed, replicates, blocks, options, target, load:
    generator, profile (a list for a profile-crossed design) and profiles), ``runs``,
    ``runs_per_replicate`` (every profile's runs of one replicate), ``configs``, ``baseline_runs``, ``knobs`` (id, name, host,
    device, family, scope, type, requires_restart, levels, baseline), ``host_global``, ``commands``
    (every command the design names, one line each; see ``--allow-design-commands``),
    ``warnings``, ``restarts``, ``estimated_wall_s``, ``timing`` and ``fractional`` (resolution,
    generators, defining relation, aliases of main effects and 2FIs; None for other types) and
    ``sequential`` (a sequential design's rule, ``first_round_runs``, and the worst case
    ``max_runs``/``max_wall_s`` within ``max`` and the budgets; None for a fixed design); only
    with ``constraints.exclude``: ``excluded`` (:func:`excluded_summary`); only when a knob has a
    write rank other than 0: ``apply_order`` (:func:`apply_order_summary`).
    """
    rows = _rows(design)
    fractional = None
    if design.design_type == DesignType.FRACTIONAL_FACTORIAL:
        fractional = {key: rows.info[key] for key in ("resolution", "generators", "defining_relation", "aliases", "letters")}
    host_global = design.host_global_knobs
    warnings = []
    if host_global and not design.target.allow_host_global:
        warnings.append(f"host-global knobs {', '.join(host_global)}: the runner refuses them unless "
                        "target.allow_host_global is true")
    restarts = count_restarts(design, plan)
    order = apply_order_summary(design)
    return {
        "design": {
            "name": design.name, "type": design.design_type.value, "source": design.source, "hash": design.design_hash,
            "seed": design.seed, "replicates": design.replicates, "blocks": design.blocks,
            "options": level_to_json(design.options), "target": design.target.type,
            "allow_host_global": design.target.allow_host_global,
            "load": {"generator": design.load.generator,
                     "profile": list(design.load.profiles) if design.load.crossed else design.load.profile,
                     "profiles": list(design.load.profiles)},
        },
        "runs": len(plan),
        "runs_per_replicate": len(plan) // design.replicates,
        "configs": int(plan["config_id"].nunique()),
        "baseline_runs": int(plan["is_baseline"].sum()),
        "knobs": [{key: value for key, value in k.to_dict().items()} for k in design.knobs],
        "host_global": host_global,
        "commands": design_commands(design),
        "warnings": warnings,
        "restarts": restarts,
        "estimated_wall_s": estimated_wall_s(design, plan),
        "timing": {"warmup_s": design.warmup_s, "measure_s": design.measure_s,
                   "run_overhead_s": RUN_OVERHEAD_S, "restart_s": RESTART_S},
        "fractional": fractional,
        "sequential": _rounds_summary(design, plan),
        **({"excluded": excluded_summary(design, plan)} if design.constraints.exclude else {}),
        # only when a knob has a rank other than 0 (its own, the design's list or a built-in one)
        **({"apply_order": order} if any(k["rank"] for k in order) else {}),
    }


def excluded_summary(design: Design, plan: pd.DataFrame) -> dict[str, Any]:
    """How many runs ``constraints.exclude`` left out of the plan, and which entry left out which.

    Keys: ``runs`` (planned runs without the exclusions minus ``plan``'s), ``entries`` (one per
    entry: ``exclude`` (knob id -> level), ``runs`` it matched, ``text`` (the YAML line)) and
    ``fewer_baseline_runs`` (OAT: baseline runs no longer needed between the varied runs).
    """
    full = make_plan(replace(design, constraints=Constraints(apply_order=design.constraints.apply_order)))
    exclude = design.constraints.exclude
    counts = [0] * len(exclude)
    for record in full[design.knob_ids].to_dict(orient="records"):
        index = matching_entry(record, exclude)
        if index is not None:
            counts[index] += 1
    runs = len(full) - len(plan)
    return {"runs": runs, "planned_without": len(full), "fewer_baseline_runs": runs - sum(counts),
            "entries": [{"exclude": level_to_json(dict(entry)), "runs": count, "text": entry_text(entry)}
                        for entry, count in zip(exclude, counts)]}


def excluded_lines(summary: Mapping[str, Any]) -> list[str]:
    """The plan summary's exclusions in words, one line each (none without exclusions)."""
    excluded = summary.get("excluded")
    if not excluded:
        return []
    lines = [f"excluded {excluded['runs']} of {excluded['planned_without']} runs (constraints.exclude: combinations "
             "the kernel refuses or the design leaves out):"]
    lines += [f"  {entry['runs']} run(s) match {entry['text'][2:]}" for entry in excluded["entries"]]
    if excluded["fewer_baseline_runs"]:
        lines.append(f"  {excluded['fewer_baseline_runs']} baseline run(s) fewer (fewer varied runs to interleave)")
    return lines


def apply_order_summary(design: Design) -> list[dict[str, Any]]:
    """The design's knobs in the order a trial writes them (``rank``: lower first; restored in reverse)."""
    ordered = in_write_order(design.knobs)
    return [{"id": k.id, "rank": write_rank(k.name, k.apply_order)} for k in ordered]


def _rounds_summary(design: Design, plan: pd.DataFrame) -> dict[str, Any] | None:
    """A sequential design's rule and its worst case: every level run to ``max`` replicates."""
    spec = design.rounds
    if spec is None:
        return None
    most = len(plan) * spec.max // spec.min
    if spec.budget_trials is not None:
        most = min(most, spec.budget_trials)
    per_run = estimated_wall_s(design, plan) / max(len(plan), 1)
    return {**spec.to_dict(), "first_round_runs": len(plan), "max_runs": most,
            "max_wall_s": min(most * per_run, 60 * spec.budget_minutes) if spec.budget_minutes else most * per_run}
