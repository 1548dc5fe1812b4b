"""Refinement and validation: GA / NSGA-II over the screened knobs (pymoo ask/tell), confirmation of
the winner against the baseline in interleaved ABBA blocks, ``validate``, and exports.

On a SYNTHETIC surface of :mod:`tunelab.simulator` (which sits above this package):

>>> from tunelab.optimize import refine
>>> from tunelab.simulator import SimulatorEvaluator, get_surface
>>> surface = get_surface("hard512")
>>> result = refine(surface.search_space(), SimulatorEvaluator(surface), ["qps:max"], budget=60)
>>> result.evaluations, sorted(result.winner) == sorted(surface.baseline)
(60, True)
"""
from tunelab.optimize.space import (ChoiceDimension, IntDimension, SearchSpace, TripletDimension,
                                    dimension_from_design_knob, space_from_spec)
from tunelab.optimize.evaluators import (Evaluator, ReplayEvaluator, ReplayMismatch, RunnerEvaluator,
                                        StoreEvaluator)
from tunelab.optimize.search import (PRESETS, Preset, RefineError, RefineResult, get_preset, non_dominated,
                                     objectives_of, pessimistic_bounds, random_search, refine)

__all__ = [
    "ChoiceDimension", "IntDimension", "SearchSpace", "TripletDimension", "dimension_from_design_knob",
    "space_from_spec",
    "Evaluator", "ReplayEvaluator", "ReplayMismatch", "RunnerEvaluator", "StoreEvaluator",
    "PRESETS", "Preset", "RefineError", "RefineResult", "get_preset", "non_dominated", "objectives_of",
    "pessimistic_bounds", "random_search", "refine",
]
