"""Design files and experimental designs: YAML -> :class:`Design` -> plan DataFrame.

>>> from tunelab.designs import load_design, make_plan, plan_summary
>>> design = load_design("designs/default.yaml")        # relative to the repository root
>>> plan = make_plan(design)
>>> len(plan), plan_summary(design, plan)["estimated_wall_s"]
(27, 227.0)
"""
from tunelab.designs.generators import GENERATORS, Generator, fractional_factorial, hadamard, plackett_burman
from tunelab.designs.plan import estimated_wall_s, make_plan, plan_records, plan_summary, round_plan
from tunelab.designs.schema import (
    AnalysisSpec,
    Design,
    KnobSpec,
    LoadSpec,
    RoundsSpec,
    TargetSpec,
    check_design_commands,
    design_commands,
    load_design,
    load_design_text,
    parse_design,
)

__all__ = [
    "GENERATORS", "Generator", "fractional_factorial", "hadamard", "plackett_burman",
    "estimated_wall_s", "make_plan", "plan_records", "plan_summary", "round_plan",
    "AnalysisSpec", "Design", "KnobSpec", "LoadSpec", "RoundsSpec", "TargetSpec",
    "check_design_commands", "design_commands", "load_design", "load_design_text", "parse_design",
]
