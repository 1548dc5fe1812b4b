"""Reports: papermill notebooks rendered to self-contained HTML, with figures, methods and a summary.

>>> from tunelab.report import build_report
>>> index = build_report("data/examples/default.sqlite")     # doctest: +SKIP

Modules: :mod:`~tunelab.report.loading` (read a store into a ``Study``, the screen's ``StudyInputs``, run
the screen as ``tunelab screen`` does), :mod:`~tunelab.report.figures` (seaborn figures, DataFrame in,
Figure out), :mod:`~tunelab.report.wording` (plain-words summary, methods section, the model in words),
:mod:`~tunelab.report.tables` (DataFrames for reading, every cell as text),
:mod:`~tunelab.report.rendering` (HTML from the Jinja2 templates in ``templates/``, autoescaped),
:mod:`~tunelab.report.refinement` (refine/confirm/validate trials read back),
:mod:`~tunelab.report.build` (papermill, nbconvert, index page), :mod:`~tunelab.report.reprs` (how the API's
results show in a notebook: their HTML summaries and ``plot()``, registered on import),
:mod:`~tunelab.report.kernel` (the kernel manager: shutdown without SIGINT). Numbers are formatted by
:mod:`tunelab.formatting`.
"""
from tunelab.report import reprs  # noqa: F401  (registers the results' notebook views in tunelab.display.VIEWS)
from tunelab.report.build import (COMMON_PARAMETERS, NOTEBOOKS, build_report, check_parameters, declared_parameters,
                                  execute_notebook, notebook_path, render_html)
from tunelab.report.loading import (ReportError, Study, StudyInputs, UnknownParameterError, load_study, screen_study,
                                    study_inputs)

__all__ = [
    "build_report", "execute_notebook", "render_html", "check_parameters", "declared_parameters", "notebook_path",
    "NOTEBOOKS", "COMMON_PARAMETERS",
    "ReportError", "UnknownParameterError", "Study", "StudyInputs", "load_study", "screen_study", "study_inputs",
]
