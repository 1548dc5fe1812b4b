"""``tunelab tune``: one budget from many knobs to a confirmed winner, in one store.

Stages (:mod:`~tunelab.optimize.tune.stages`): an A/A calibration of the baseline when the noise is not given;
a screen whose design suits the knob count (one at a time below 8 knobs, Plackett–Burman from 8), replicated as
the noise needs (:mod:`~tunelab.optimize.tune.screening`); refine (:func:`tunelab.optimize.driver.refine`) over
the knobs the screen keeps, the others at their baselines, warm-started with the measurements that fit; and the
confirmation of the winner against the baseline in ABBA blocks (:func:`tunelab.optimize.confirm.confirm`). The
budget is split by :func:`~tunelab.optimize.tune.budget.split_budget` (``--plan`` shows it, ``--split``
overrides it) and never exceeded: :class:`~tunelab.optimize.tune.ledger.Ledger` counts every recorded attempt.
When the screen keeps no knob, tune stops and keeps the rest of the budget. A rerun with the same settings
resumes exactly (each measurement is read back by its run key; refine resumes from its stored batches).

=============  =====================================================================
module         owns
=============  =====================================================================
``budget``     the split between the stages (one rule, its constants) and ``--split``
``screening``  the screen's runs from a search space, the calls on each knob, warm points
``ledger``     the budget's ledger, the guard, the evaluator of a Python callable
``stages``     the sequence (:func:`run_tune`) and each stage
``result``     :class:`TuneSettings`, :class:`TuneResult`
``workflow``   the runs under the run's owner: on a target, on a Python evaluator
=============  =====================================================================
"""
from tunelab.optimize.tune.budget import BudgetSplit, parse_split, split_budget
from tunelab.optimize.tune.result import TuneResult, TuneSettings
from tunelab.optimize.tune.ledger import CallableEvaluator
from tunelab.optimize.tune.stages import OUTCOME_ID, TuneProblem, outcome_of, run_tune, stored_tune, tune_plan
from tunelab.optimize.tune.workflow import evaluator_problem, problem_of, tune_evaluator, tune_study

__all__ = ["OUTCOME_ID", "BudgetSplit", "CallableEvaluator", "TuneProblem", "TuneResult", "TuneSettings",
           "evaluator_problem", "outcome_of", "parse_split", "problem_of", "run_tune", "split_budget", "stored_tune",
           "tune_evaluator", "tune_plan", "tune_study"]
