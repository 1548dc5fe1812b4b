"""The screen's range route: Latin-hypercube and Morris designs, each knob read over its range.

:func:`range_route` reads, per metric, the usable runs through
:func:`tunelab.stats.range_screen.range_parts` (a response model over the knobs' ranges, or
Morris elementary effects) and returns the parts, the ``response`` or ``morris`` table and the
notes as a :class:`~tunelab.stats.screen_common.RouteParts`. A testbed is no block here: the runs
of several testbeds are pooled (noted when the runs are prepared).
"""
from __future__ import annotations

from typing import Any

from tunelab.errors import DataError
from tunelab.stats.range_screen import range_parts
from tunelab.stats.screen_common import RouteParts, TestedPart, untestable
from tunelab.stats.screen_data import ScreenRuns, metric_runs


def range_route(runs: ScreenRuns) -> RouteParts:
    """Every metric's range parts (see the module docstring)."""
    return RouteParts.combine([_metric_ranges(runs, metric) for metric in runs.metrics])


def _metric_ranges(runs: ScreenRuns, metric: dict[str, Any]) -> RouteParts:
    name = metric["name"]
    sub, active, found = metric_runs(runs, name)
    if not active:
        return found
    try:
        parts, tables = range_parts(sub, metric, active, runs.baseline, runs.design, runs.alpha, runs.seed)
    except DataError as exc:
        problem = RouteParts.combine([untestable(knob, name, f"the model of {name} cannot be fitted: {exc}")
                                      for knob in active])
        return found + problem + RouteParts(notes=[f"model of {name} not fitted: {exc}"])
    return found + RouteParts([TestedPart(label, metric, part) for label, part in parts], [],
                              {key: [frame] for key, frame in tables.items()})
