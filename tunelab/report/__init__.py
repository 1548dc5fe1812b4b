"""Reports: papermill notebooks rendered to self-contained HTML, with figures, methods and a summary.

>>> from tunelab.report import build_report
>>> index = build_report("data/examples/default.sqlite")     # doctest: +SKIP

Modules: :mod:`~tunelab.report.study` (read a store, run the screen as ``tunelab screen`` does),
:mod:`~tunelab.report.figures` (seaborn figures, DataFrame in, Figure out),
:mod:`~tunelab.report.methods` (methods section, plain-words summary, verdict table),
:mod:`~tunelab.report.refinement` (refine/confirm/validate trials read back),
:mod:`~tunelab.report.build` (papermill, nbconvert, index page).
"""
from tunelab.report.build import (COMMON_PARAMETERS, NOTEBOOKS, build_report, check_parameters, declared_parameters,
                                  execute_notebook, notebook_path, render_html)
from tunelab.report.study import ReportError, Study, UnknownParameterError, load_study, screen_study

__all__ = [
    "build_report", "execute_notebook", "render_html", "check_parameters", "declared_parameters", "notebook_path",
    "NOTEBOOKS", "COMMON_PARAMETERS",
    "ReportError", "UnknownParameterError", "Study", "load_study", "screen_study",
]
