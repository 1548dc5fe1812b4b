"""Search engines behind one ask/tell interface (:class:`Refiner`), in the :data:`ENGINES` registry.

========== ============================================================================
engine     what proposes the configurations
========== ============================================================================
tunelab    the default: a Bayesian model of main effects and pairwise interactions
           (Thompson sampling and its best prediction), then a race of the leaders
model      the same model without the race
random     distinct random configurations (the reference)
ga, nsga2  pymoo's GA and NSGA-II (presets ``gembala2013``, ``ioperf``, ``lab``, ``nsga2-crowding``)
tpe, gp,   Optuna's samplers, used as a library (tunelab's store stays the record)
cmaes,
optuna-nsga2
========== ============================================================================

>>> "tunelab" in ENGINES and "ga" in ENGINES and "tpe" in ENGINES
True
"""
from tunelab.optimize.engines.base import (ENGINES, FAILED_PENALTY, PRESETS, Candidate, EngineSettings, Measurement,
                                           Preset, RefineError, Refiner, first_batch, get_preset, make_engine,
                                           objective_vector, objectives_of, typed_config)
from tunelab.optimize.engines import model, random_search  # noqa: F401  (register "tunelab", "model", "random")
from tunelab.optimize.engines import pymoo_engine, optuna_engine  # noqa: F401  (register pymoo and Optuna engines)

__all__ = ["ENGINES", "FAILED_PENALTY", "PRESETS", "Candidate", "EngineSettings", "Measurement", "Preset",
           "RefineError", "Refiner", "first_batch", "get_preset", "make_engine", "objective_vector", "objectives_of",
           "typed_config"]
