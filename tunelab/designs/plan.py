"""From a :class:`~tunelab.designs.schema.Design` to the plan DataFrame (Contract 2) and its summary.

Replicates repeat the design's runs; consecutive replicates form blocks (``blocks`` must divide
``replicates``); the execution order is randomised from ``numpy.random.default_rng(seed)``:

* every type but OAT: all runs of a block are shuffled together;
* OAT: each replicate keeps its runs together; its varied runs are shuffled and a baseline run
  opens the replicate and follows every ``baseline_every`` (default 2) varied runs, so baseline
  runs are spread through the whole plan and drift shows up as a trend in the baselines.

``run_id`` numbers the runs in standard order (replicate by replicate, design row by row), so it
does not depend on the seed; ``config_id`` numbers distinct knob settings in order of appearance.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from tunelab.designs.generators import GENERATORS, DesignRows
from tunelab.designs.schema import Design, design_commands
from tunelab.model import level_to_json

if TYPE_CHECKING:
    import pandas as pd

#: fixed per-run cost assumed by the wall-time estimate: lab reset, knob writes and reads, parsing
RUN_OVERHEAD_S = 1.0
#: extra cost of restarting the service when a ``requires_restart`` knob changes between runs
RESTART_S = 1.0

#: bookkeeping columns of a plan (Contract 2), before the knob columns; they travel with each trial into the store
PLAN_COLUMNS = ["run_id", "config_id", "block", "replicate", "run_order", "is_baseline", "varied_knob"]


def _rows(design: Design) -> DesignRows:
    return GENERATORS.get(design.design_type).build(design, np.random.default_rng(design.seed))


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
           rng: np.random.Generator) -> list[int]:
    """Run ids (standard numbering) in execution order."""
    order: list[int] = []
    reps_per_block = design.replicates // design.blocks
    if rows.baseline_every is not None:
        for rep in range(design.replicates):
            start = rep * per_rep
            baselines = [start + i for i, v in enumerate(varied) if v is None]
            changed = [start + i for i, v in enumerate(varied) if v is not None]
            changed = [changed[i] for i in rng.permutation(len(changed))]
            for group in range(len(baselines)):
                order.append(baselines[group])
                order.extend(changed[group * rows.baseline_every:(group + 1) * rows.baseline_every])
        return order
    for block in range(design.blocks):
        start = block * reps_per_block * per_rep
        ids = np.arange(start, start + reps_per_block * per_rep)
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
    rows = GENERATORS.get(design.design_type).build(design, rng)
    configs, varied = _replicate_template(design, rows)
    per_rep = len(configs)
    ids = design.knob_ids
    config_ids: dict[tuple[Any, ...], int] = {}
    for config in configs:
        config_ids.setdefault(tuple(config[k] for k in ids), len(config_ids))

    order = _order(design, rows, per_rep, varied, rng)
    run_order = {run_id: position for position, run_id in enumerate(order)}
    baseline = design.baseline
    reps_per_block = design.replicates // design.blocks
    records: dict[str, list[Any]] = {c: [] for c in PLAN_COLUMNS}
    knob_values: dict[str, list[Any]] = {k: [] for k in ids}
    for rep in range(design.replicates):
        for i, (config, knob) in enumerate(zip(configs, varied)):
            run_id = rep * per_rep + i
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
    return frame.sort_values("run_order", kind="stable").reset_index(drop=True)


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

    Keys: ``design`` (name, type, source, hash, seed, replicates, blocks, options, target, load),
    ``runs``, ``runs_per_replicate``, ``configs``, ``baseline_runs``, ``knobs`` (id, name, host,
    device, family, scope, type, requires_restart, levels, baseline), ``host_global``, ``commands``
    (every command the design names, one line each; see ``--allow-design-commands``),
    ``warnings``, ``restarts``, ``estimated_wall_s``, ``timing`` and ``fractional`` (resolution,
    generators, defining relation, aliases of main effects and 2FIs; None for other types).
    """
    rows = _rows(design)
    fractional = None
    if design.design_type == "fractional_factorial":
        fractional = {key: rows.info[key] for key in ("resolution", "generators", "defining_relation", "aliases", "letters")}
    host_global = design.host_global_knobs
    warnings = []
    if host_global and not design.target.allow_host_global:
        warnings.append(f"host-global knobs {', '.join(host_global)}: the runner refuses them unless "
                        "target.allow_host_global is true")
    restarts = count_restarts(design, plan)
    return {
        "design": {
            "name": design.name, "type": design.design_type, "source": design.source, "hash": design.design_hash,
            "seed": design.seed, "replicates": design.replicates, "blocks": design.blocks,
            "options": level_to_json(design.options), "target": design.target.type,
            "allow_host_global": design.target.allow_host_global,
            "load": {"generator": design.load.generator, "profile": design.load.profile},
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
    }
