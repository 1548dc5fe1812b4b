"""Refinement and validation: ask/tell search engines over the screened knobs, the refine loop with its
race, confirmation of the winner against the baseline in interleaved ABBA blocks, ``validate``, and exports.

On a SYNTHETIC surface of :mod:`tunelab.simulator` (which sits above this package):

>>> from tunelab.optimize import refine
>>> from tunelab.simulator import SimulatorEvaluator, get_surface
>>> surface = get_surface("hard512")
>>> result = refine(surface.search_space(), SimulatorEvaluator(surface), ["qps:max"], budget=60,
...                 baseline=surface.baseline)
>>> result.evaluations, result.engine
(60, 'tunelab')
"""
from tunelab.optimize.space import (ChoiceDimension, IntDimension, SearchSpace, TripletDimension,
                                    dimension_from_design_knob, space_from_spec)
from tunelab.optimize.evaluators import Evaluator, ResumableEvaluator, RunnerEvaluator, StoreEvaluator
from tunelab.optimize.engines import (ENGINES, PRESETS, Candidate, EngineSettings, Preset, RefineError, Refiner,
                                      get_preset, make_engine, objectives_of)
from tunelab.optimize.history import MemorySearchLog, SearchLog, StoreSearchLog, Tally
from tunelab.optimize.driver import RefineResult, non_dominated, refine

__all__ = [
    "ChoiceDimension", "IntDimension", "SearchSpace", "TripletDimension", "dimension_from_design_knob",
    "space_from_spec",
    "Evaluator", "ResumableEvaluator", "RunnerEvaluator", "StoreEvaluator",
    "ENGINES", "PRESETS", "Candidate", "EngineSettings", "Preset", "RefineError", "Refiner", "get_preset",
    "make_engine", "objectives_of",
    "MemorySearchLog", "SearchLog", "StoreSearchLog", "Tally",
    "RefineResult", "non_dominated", "refine",
]
