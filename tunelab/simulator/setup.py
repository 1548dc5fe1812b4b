"""A refinement on a SYNTHETIC surface without a design file (``tunelab refine --target simulator``).

The surface names its knobs, baseline and metrics, so everything a refinement needs comes from it;
the study is called ``sim-SURFACE`` and its "design text" is the surface's JSON description.
"""
from __future__ import annotations

import hashlib
import json
from typing import Sequence

from tunelab.model import Metric
from tunelab.optimize.workflow import RefineSetup
from tunelab.runner.binding import bind_knob_ids
from tunelab.simulator.load import SimulatorLoad
from tunelab.simulator.surfaces import get_surface


def refine_setup(surface_name: str, *, cv: float = 0.03, seed: int = 0,
                 objectives: Sequence[Metric] = ()) -> RefineSetup:
    """A :class:`~tunelab.optimize.workflow.RefineSetup` on the SYNTHETIC surface ``surface_name``.

    Parameters
    ----------
    surface_name : a name in :data:`~tunelab.simulator.SURFACES`
    cv : noise coefficient of variation
    seed : the simulator target's noise seed
    objectives : the metrics to optimise; default the surface's first metric

    Examples
    --------
    >>> setup = refine_setup("simple", seed=2)
    >>> setup.study, setup.target_type, setup.target_options["seed"], [g.name for g in setup.goals]
    ('sim-simple', 'simulator', 2, ['qps'])
    """
    surface = get_surface(surface_name, cv)
    objs = list(objectives) or [Metric(m, d) for m, d in list(surface.metrics.items())[:1]]
    specs = bind_knob_ids(surface.space)
    text = json.dumps({"surface": surface_name, "cv": cv, "space": {k: dict(v) for k, v in surface.space.items()}},
                      sort_keys=True, default=str)
    load = SimulatorLoad(surface)
    return RefineSetup(
        study=f"sim-{surface_name}", space=surface.search_space(), baseline=dict(surface.baseline), knob_specs=specs,
        target_type="simulator", target_options={"surface": surface_name, "cv": cv, "seed": seed}, load=load,
        load_settings=load.settings("overload"), warmup_s=0.0, measure_s=1.0,
        goals=[Metric(o.name, o.direction, 5.0) for o in objs],
        design_hash=hashlib.sha256(text.encode()).hexdigest(), design_text=text)
