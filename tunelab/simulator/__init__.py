"""SYNTHETIC response surfaces and the ``simulator`` target that measures them (for learning and benchmarks).

Nothing here measures a real machine. A :class:`Surface` is a seeded, known function from a knob
configuration to metric values (the *truth*) plus heteroscedastic multiplicative noise, so searches
and statistical procedures can be scored against the truth. One module per concern:

==================  ===========================================================================
``surface.py``      :class:`Surface`: truth, noise, exhaustive table, optimum
``surfaces.py``     the registered surfaces (``simple``, ``null``, ``hard512``, ``smooth``, ``tradeoff``, ``wide27``)
``evaluator.py``    :class:`SimulatorEvaluator`: the fast path for searches (no store, no runner);
                    :class:`InterferedEvaluator`: the same on a busy machine (common-mode noise, duet pairs)
``noise.py``        common-mode noise per time slot and a duet side bias
``load.py``         :class:`SimulatorLoad`: the load whose command the simulator target answers
``target.py``       :class:`SimulatorTarget` (registered as ``"simulator"``): knob files in memory
``setup.py``        :func:`refine_setup`: a refinement on a surface without a design file
==================  ===========================================================================

Importing this package registers the ``simulator`` target. It sits above :mod:`tunelab.targets`
and :mod:`tunelab.optimize` (its surfaces are defined on a search space).

Examples
--------
>>> surface = get_surface("simple")
>>> best = surface.optimum()
>>> round(surface.truth(best)["qps"])
10600
>>> draw = SimulatorEvaluator(surface, seed=1).evaluate(best, 0, key="x")
>>> draw == SimulatorEvaluator(surface, seed=1).evaluate(best, 0, key="x")
True
"""
from tunelab.simulator.surface import Surface
from tunelab.simulator.surfaces import SURFACES, get_surface
from tunelab.simulator.evaluator import InterferedEvaluator, SimulatorEvaluator
from tunelab.simulator.load import SIMULATE_COMMAND, SimulatorLoad
from tunelab.simulator.target import SimulatorTarget
from tunelab.simulator.setup import refine_setup

__all__ = ["InterferedEvaluator", "SIMULATE_COMMAND", "SURFACES", "SimulatorEvaluator", "SimulatorLoad", "SimulatorTarget", "Surface",
           "get_surface", "refine_setup"]
