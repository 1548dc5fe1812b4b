"""SYNTHETIC response surfaces and the ``simulator`` target that measures them (for learning and benchmarks).

Importing this package registers the ``simulator`` target. It sits above :mod:`tunelab.targets`
and :mod:`tunelab.optimize` (its surfaces are defined on a search space).
"""
from tunelab.simulator.target import SURFACES, SimulatorEvaluator, SimulatorLoad, SimulatorTarget, get_surface

__all__ = ["SURFACES", "SimulatorEvaluator", "SimulatorLoad", "SimulatorTarget", "get_surface"]
