"""Refinement and validation: GA / NSGA-II over the screened knobs (pymoo ask/tell), confirmation of
the winner against the baseline in interleaved ABBA blocks, ``validate``, and exports.

>>> from tunelab.optimize import refine, SimulatorEvaluator, get_surface   # doctest: +SKIP
>>> surface = get_surface("hard512")                                     # doctest: +SKIP
>>> result = refine(surface.search_space(), SimulatorEvaluator(surface), ["qps:max"], budget=60)  # doctest: +SKIP
"""
import tunelab.simulator as _simulator  # noqa: F401  (registers the "simulator" target)
from tunelab.simulator import SURFACES, SimulatorEvaluator, SimulatorLoad, SimulatorTarget, get_surface
from tunelab.optimize.space import (ChoiceDimension, IntDimension, SearchSpace, TripletDimension,
                                    dimension_from_design_knob, space_from_spec)
from tunelab.optimize.evaluators import Evaluator, RunnerEvaluator, StoreEvaluator
from tunelab.optimize.search import (PRESETS, Objective, Preset, RefineError, RefineResult, get_preset,
                                     non_dominated, pessimistic_bounds, random_search, refine)

__all__ = [
    "SURFACES", "SimulatorEvaluator", "SimulatorLoad", "SimulatorTarget", "get_surface",
    "ChoiceDimension", "IntDimension", "SearchSpace", "TripletDimension", "dimension_from_design_knob",
    "space_from_spec",
    "Evaluator", "RunnerEvaluator", "StoreEvaluator",
    "PRESETS", "Objective", "Preset", "RefineError", "RefineResult", "get_preset", "non_dominated",
    "pessimistic_bounds", "random_search", "refine",
]
