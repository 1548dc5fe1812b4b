"""What a run reads from a typed :class:`~tunelab.designs.Design`: its target section, its load (or the
target's paired one) and profiles, its planned trials in ``run_order`` and its durations."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from tunelab.designs import Design
from tunelab.designs.plan import OPTIONAL_PLAN_COLUMNS, PLAN_COLUMNS
from tunelab.errors import DesignError
from tunelab.loads import Load, get_load
from tunelab.model import level_from_json, level_to_json
from tunelab.runner.binding import BoundKnob
from tunelab.targets import Target


def target_spec_of(design: Design) -> dict[str, Any]:
    """``{"type", "options", "allow_host_global"}`` of the design's target section."""
    return {"type": design.target.type, "options": dict(design.target.options),
            "allow_host_global": bool(design.target.allow_host_global)}


def load_of(design: Design) -> tuple[Load, dict[str, Any]]:
    """Instantiate the design's load generator and merge its profile settings."""
    load = get_load(design.load.generator)()
    return load, load.settings(design.load.profile, dict(design.load.settings))


def load_for(design: Design, target_cls: type[Target], options: Mapping[str, Any]) -> tuple[Load, dict[str, Any]]:
    """The load a run of ``design`` measures with on a target of ``target_cls`` with ``options``: the
    target's own (:meth:`~tunelab.targets.Target.paired_load`, the simulator's) or the design's."""
    paired = target_cls.paired_load(dict(options), design.load.profile)
    return paired if paired is not None else load_of(design)


#: one planned trial: its run key, config (knob id -> level) and plan bookkeeping
PlannedTrial = tuple[str, dict[str, Any], dict[str, Any]]


def profile_settings(design: Design, load: Load, rows: Sequence[PlannedTrial]) -> dict[str, dict[str, Any]]:
    """The load settings of each profile the planned trials name (plan column ``profile``).

    Each is the profile merged with the design's ``load.settings``, as :func:`load_of` merges the
    single profile; empty for a plan without profiles. A profile the load does not know raises
    :class:`~tunelab.errors.LoadError` here, before anything runs.
    """
    overrides = dict(design.load.settings)
    names = dict.fromkeys(info["profile"] for _, _, info in rows if info.get("profile") is not None)
    return {name: load.settings(name, overrides) for name in names}


def planned_trials(plan: pd.DataFrame, specs: Sequence[BoundKnob], phase: str) -> list[PlannedTrial]:
    """The plan's rows in ``run_order`` as trials: run key ``"<phase>:<run_id>"``, config, bookkeeping."""
    missing = [spec.id for spec in specs if spec.id not in plan.columns]
    if missing:
        raise DesignError(f"the plan has no column for knob(s) {', '.join(missing)}; plan columns are {list(plan.columns)}")
    plan = plan.sort_values("run_order") if "run_order" in plan.columns else plan
    rows: list[PlannedTrial] = []
    for record in plan.to_dict("records"):
        config = {spec.id: level_from_json(level_to_json(record[spec.id])) for spec in specs}
        info = {col: level_from_json(level_to_json(record[col])) for col in (*PLAN_COLUMNS, *OPTIONAL_PLAN_COLUMNS)
                if col in record}
        rows.append((f"{phase}:{info.get('run_id', len(rows))}", config, info))
    return rows


def durations(design: Design) -> tuple[float, float]:
    """``(warmup_s, measure_s)`` of the design; DesignError unless ``measure_s > 0``."""
    warmup_s, measure_s = float(design.warmup_s or 0), float(design.measure_s)
    if measure_s <= 0:
        raise DesignError(f"measure_s must be > 0, got {measure_s}; set `measure_s:` in the design")
    return warmup_s, measure_s


__all__ = ["PlannedTrial", "durations", "load_for", "load_of", "planned_trials", "profile_settings", "target_spec_of"]
