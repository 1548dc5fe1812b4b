"""Build a study's report: execute the notebooks with papermill, render them to self-contained HTML
with nbconvert (code hidden by default, figures embedded as base64 PNG, no external scripts) and
write ``index.html`` with the results summary, the verdict table, key figures, the methods section
and links to every notebook (and why any was skipped).

The notebooks run in a kernel started with *this* interpreter (``sys.executable``): a temporary
kernelspec named ``python3`` is put first on ``JUPYTER_PATH`` while they execute, because the
kernelspec a virtualenv installs runs plain ``python`` from ``PATH``, which may be another Python
without tunelab.

Examples
--------
>>> from tunelab.report import build_report
>>> build_report("data/examples/default.sqlite", "reports/default")      # doctest: +SKIP
PosixPath('reports/default/index.html')
"""
from __future__ import annotations

import datetime as _dt
import difflib
import json
import os
import sys
import tempfile
import types
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from tunelab.designs.schema import CORRECTIONS
from tunelab.errors import TunelabError
from tunelab.model import AnalysisKind
from tunelab.progress import StudyProgress
from tunelab.report.loading import (ReportError, Study, StudyInputs, UnknownParameterError, is_synthetic, load_study,
                                    screen_study)
from tunelab.store import check_study_name

if TYPE_CHECKING:
    from tunelab.stats import ScreenResult

# papermill, nbformat, nbconvert and the figures (matplotlib, seaborn) are imported inside the functions
# that use them: together several seconds, which `import tunelab.report` (the CLI, the API) must not pay.

#: the kernel name papermill starts (our temporary kernelspec shadows the installed one)
KERNEL_NAME = "python3"
#: notebooks in report order, with what each answers
NOTEBOOKS = {
    "01_screen": "Which knobs matter? Data overview, drift, warm-up, assumption checks, omnibus tests, verdicts.",
    "02_posthoc": "Which levels differ? Post-hoc tests, compact letters and p-value heatmaps per significant knob.",
    "03_refine": "What did the search find? Search settings, convergence of each engine, racing rounds, Pareto fronts, "
                 "confirmation of the winner.",
    "04_validate": "Is the candidate better than the baseline? ABBA blocks, % change with CI, TOST, verdict.",
}
#: parameters every notebook declares; build_report passes them to each
COMMON_PARAMETERS = ("study", "data_dir", "metric", "alpha", "correction", "sesoi_pct", "include_flagged", "n_boot")
DEFAULT_TIMEOUT_S = 600
#: the nbconvert template of the notebook pages (tunelab/report/templates/notebook_page.html.j2)
_TEMPLATE_NAME = "notebook_page.html.j2"


def notebook_dir() -> Path:
    """The ``notebooks/`` directory of the tunelab checkout."""
    return Path(__file__).resolve().parents[2] / "notebooks"


def notebook_path(name: str, directory: str | os.PathLike[str] | None = None) -> Path:
    """The path of notebook ``name`` (``'01_screen'`` or ``'01'``, or another shipped notebook by its full name,
    ``'00_tour'``); ReportError if there is none."""
    directory = Path(directory) if directory is not None else notebook_dir()
    exact = directory / f"{Path(name).stem}.ipynb"
    path = exact if exact.is_file() else directory / f"{_match(name)}.ipynb"
    if not path.is_file():
        raise ReportError(f"notebook {path} is missing; run from a tunelab checkout or pass its notebooks/ directory")
    return path


def declared_parameters(notebook: str | os.PathLike[str]) -> dict[str, Any]:
    """The parameters a notebook declares in its ``parameters`` cell (``papermill.inspect_notebook``)."""
    import papermill

    return dict(papermill.inspect_notebook(str(notebook)))


def check_parameters(notebook: str | os.PathLike[str], parameters: Mapping[str, Any]) -> None:
    """Raise :class:`UnknownParameterError` naming every parameter ``notebook`` does not declare."""
    declared = declared_parameters(notebook)
    unknown = [name for name in parameters if name not in declared]
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(declared), n=1)
        raise UnknownParameterError(
            f"{Path(notebook).name} has no parameter {', '.join(repr(u) for u in unknown)}"
            + (f" (did you mean {close[0]!r}?)" if close else "")
            + f"; its parameters are: {', '.join(declared) or '(none)'}")


def check_notebook_parameters(namespace: Mapping[str, Any], notebook: str) -> dict[str, Any]:
    """The first cell after a notebook's parameters: its variables (``globals()``) against the parameters
    ``notebook`` declares (papermill only warns of an unknown name), their values, and the metrics they name
    against the study's store, before any work. Returns the parameters as the notebook uses them (``objectives``
    as a list: ``-p objectives qps:max`` gives one text).

    Raises
    ------
    UnknownParameterError
        A variable the notebook does not declare (a mistyped ``-p NAME``), with the closest declared name.
    ReportError
        An invalid value (:data:`_VALUE_RULES`: the report notebooks' common ones, objectives, the tour's target,
        design, replicates, ...), a study without a store, or a ``metric`` or objective the study did not measure
        (with the closest measured names). Every bad value is named, in one line.
    """
    path = notebook_path(notebook)
    hidden = _ipython_names()
    given = {name: value for name, value in namespace.items() if not name.startswith("_") and name not in hidden
             and not isinstance(value, types.ModuleType) and not callable(value)}
    declared = declared_parameters(path)
    unknown = [name for name in given if name not in declared]
    problems = [_unknown_text(path, name, declared) for name in unknown]
    problems += [f"{path.name}: invalid parameter {name}={given[name]!r}: {rule}{_closest(given[name], name)}"
                 for name, (valid, rule) in _VALUE_RULES.items() if name in given and not valid(given[name])]
    if problems:
        raise (UnknownParameterError if unknown else ReportError)("; ".join(problems))
    used = {**given, **({"objectives": _objective_list(given["objectives"])} if "objectives" in given else {})}
    _check_study_parameters(used)
    return used


def _unknown_text(path: Path, name: str, declared: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(name, list(declared), n=1)
    return (f"{path.name} has no parameter {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
            + f"; its parameters are: {', '.join(declared) or '(none)'}")


def _closest(value: Any, name: str) -> str:
    """`` (did you mean 'holm'?)`` for a text value close to one of parameter ``name``'s choices."""
    choices = _CHOICES.get(name, ())
    close = difflib.get_close_matches(value, choices, n=1) if isinstance(value, str) else []
    return f" (did you mean {close[0]!r}?)" if close else ""


def _objective_list(objectives: Any) -> list[str] | None:
    """``objectives`` as a list of texts: one text (``-p objectives qps:max``) is one objective."""
    return None if objectives is None else [objectives] if isinstance(objectives, str) else list(objectives)


def _check_study_parameters(used: Mapping[str, Any]) -> None:
    """The study's store must exist (:func:`~tunelab.report.loading.resolve_store`), and the metric in focus and
    the objectives must name something the study measured (then the store is read)."""
    from tunelab.report.loading import check_metric_names, examples_dir, resolve_store

    if "study" not in used:
        return
    data_dir = examples_dir() if used.get("data_dir") is None else used["data_dir"]
    resolve_store(used["study"], data_dir)
    named = {"metric": [used["metric"]] if used.get("metric") else [], "objective": used.get("objectives") or []}
    if not any(named.values()):
        return
    study = load_study(used["study"], data_dir, include_flagged=bool(used.get("include_flagged")))
    for what, names in named.items():
        check_metric_names(study, names, what)


def _is_objective(value: Any) -> bool:
    """None, or one or more ``METRIC[:max|:min]`` texts."""
    from tunelab.model import Metric

    if value is None:
        return True
    if not isinstance(value, (str, list, tuple)):
        return False
    texts = _objective_list(value)
    if not texts or not all(isinstance(t, str) and t for t in texts):
        return False
    try:
        for text in texts:
            Metric.parse(text)
    except TunelabError:
        return False
    return True


#: parameters with a fixed set of values -> the values
_CHOICES: dict[str, tuple[str, ...]] = {"correction": tuple(CORRECTIONS), "target": ("simulator", "lab")}


def _whole(minimum: int | None) -> Any:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and (minimum is None or v >= minimum)


#: parameter -> (is the value valid, the rule in words); checked wherever a notebook declares the name
_VALUE_RULES: dict[str, tuple[Any, str]] = {
    "alpha": (lambda v: v is None or (_is_number(v) and 0 < v < 1), "a significance level between 0 and 1"),
    "correction": (lambda v: v is None or v in CORRECTIONS, f"one of {', '.join(CORRECTIONS)}"),
    "sesoi_pct": (lambda v: v is None or (_is_number(v) and 0 < v < float("inf")), "a positive percentage"),
    "n_boot": (_whole(1), "a whole number of resamples, 1 or more"),
    "include_flagged": (lambda v: isinstance(v, bool), "True or False"),
    "objectives": (_is_objective, "one objective METRIC:max or METRIC:min, or a list of them, e.g. "
                   "-p objectives throughput_mbps:max or -y 'objectives: [throughput_mbps:max]'"),
    "target": (lambda v: v in _CHOICES["target"], "'simulator' (SYNTHETIC) or 'lab'"),
    "replicates": (_whole(1), "a whole number of runs per knob level, 1 or more"),
    "budget": (_whole(1), "a whole number of measurements, 1 or more"),
    "blocks": (_whole(1), "a whole number of ABBA blocks, 1 or more"),
    "seed": (_whole(None), "a whole number"),
    "design": (lambda v: v is None or (isinstance(v, (str, os.PathLike)) and Path(v).is_file()),
               "None (the tour's own design) or the path of a design file that exists"),
    "out_dir": (lambda v: v is None or (isinstance(v, (str, os.PathLike)) and str(v) != ""),
                "None (a new temporary directory) or a directory path"),
    "study": (lambda v: isinstance(v, (str, os.PathLike)) and str(v) != "", "a study name or the path of its store"),
    "data_dir": (lambda v: v is None or (isinstance(v, (str, os.PathLike)) and str(v) != ""),
                 "None (the shipped examples) or a directory of study stores"),
}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _ipython_names() -> set[str]:
    """The names IPython puts in a kernel's namespace itself (``In``, ``Out``, ``get_ipython``, ...)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return set()
    shell = get_ipython()
    return set(shell.user_ns_hidden) if shell is not None else set()


@contextmanager
def venv_kernel() -> Iterator[str]:
    """A kernelspec ``python3`` that runs ``sys.executable -m ipykernel_launcher``, first on ``JUPYTER_PATH``
    while the context lasts (the environment variable is restored afterwards)."""
    with tempfile.TemporaryDirectory(prefix="tunelab-kernel-") as tmp:
        spec_dir = Path(tmp) / "kernels" / KERNEL_NAME
        spec_dir.mkdir(parents=True)
        spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                         "--IPKernelApp.log_level=ERROR"],
                "display_name": f"Python 3 ({sys.executable})", "language": "python",
                "env": {"MPLBACKEND": "Agg", "PYTHONHASHSEED": "0"}}
        (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1))
        previous = os.environ.get("JUPYTER_PATH")
        os.environ["JUPYTER_PATH"] = os.pathsep.join([tmp, *([previous] if previous else [])])
        try:
            yield KERNEL_NAME
        finally:
            if previous is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = previous


def execute_notebook(notebook: str | os.PathLike[str], output: str | os.PathLike[str],
                     parameters: Mapping[str, Any] | None = None, cwd: str | os.PathLike[str] | None = None,
                     timeout_s: float = DEFAULT_TIMEOUT_S) -> Path:
    """Execute ``notebook`` with papermill into ``output`` (an ``.ipynb``) after checking its parameters.

    Raises
    ------
    UnknownParameterError
        A parameter the notebook does not declare.
    ReportError
        A cell raised; the message names the notebook, the cell and the error, and ``output``
        holds the executed notebook with the full traceback.
    """
    parameters = dict(parameters or {})
    check_parameters(notebook, parameters)
    with venv_kernel() as kernel:
        return _execute(Path(notebook), Path(output), parameters, cwd, timeout_s, kernel)


def _execute(notebook: Path, output: Path, parameters: Mapping[str, Any], cwd: str | os.PathLike[str] | None,
             timeout_s: float, kernel: str) -> Path:
    """papermill without checks (inside :func:`venv_kernel`); a failing cell becomes a ReportError."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from tunelab.report.kernel import QuietShutdownKernelManager

    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        papermill.execute_notebook(str(notebook), str(output), parameters=dict(parameters), kernel_name=kernel,
                                   cwd=str(cwd) if cwd else None, progress_bar=False, log_output=False,
                                   execution_timeout=int(timeout_s), kernel_manager_class=QuietShutdownKernelManager)
    except PapermillExecutionError as exc:
        raise ReportError(f"{notebook.name} failed in cell {exc.exec_count}: {exc.ename}: {exc.evalue}; "
                          f"the executed notebook with the traceback is {output}") from None
    return output


def render_html(notebook: str | os.PathLike[str], html: str | os.PathLike[str], show_code: bool = False,
                title: str | None = None, synthetic: bool = False) -> Path:
    """Render an executed notebook as self-contained HTML (images inline, no CDN scripts), code hidden
    unless ``show_code``; ``synthetic`` puts the SYNTHETIC banner on top (trials of the simulator target)."""
    import nbformat
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    from tunelab.report.rendering import TABLE_CSS, render, template_source

    nb = nbformat.read(str(notebook), as_version=4)
    # only this one template joins nbconvert's loaders: it extends the lab template's index.html.j2
    exporter = HTMLExporter(template_name="lab", template_file=_TEMPLATE_NAME,
                            extra_loaders=[DictLoader({_TEMPLATE_NAME: template_source(_TEMPLATE_NAME)})])
    exporter.exclude_input = not show_code
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    exporter.embed_images = True
    # second layer behind the templates' autoescaping: bleach every HTML and Markdown output
    # against an allow-list (no script, style, iframe, event attributes or javascript: links) and drop
    # outputs of other rich types (JavaScript, SVG, widgets)
    exporter.register_preprocessor(output_sanitizer(), enabled=True)
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title or Path(notebook).stem},
                                                         "tunelab_table_css": TABLE_CSS,
                                                         "tunelab_banner": render("synthetic_banner.html.j2")
                                                         if synthetic else ""})
    html = Path(html)
    html.write_text(body, encoding="utf-8")
    return html


#: tags a notebook output may hold once sanitised (what tunelab's tables and Markdown produce)
SAFE_TAGS = ("a", "abbr", "b", "blockquote", "br", "caption", "code", "dd", "del", "div", "dl", "dt", "em", "h1",
             "h2", "h3", "h4", "h5", "h6", "hr", "i", "li", "ol", "p", "pre", "span", "strong", "sub", "sup",
             "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul")
#: attributes kept on those tags (links keep only http, https and mailto targets)
SAFE_ATTRIBUTES = {"*": ["class", "title"], "a": ["href", "title"], "td": ["class", "colspan", "rowspan"],
                   "th": ["class", "colspan", "rowspan"]}


def output_sanitizer() -> Any:
    """nbconvert's ``SanitizeHTML`` preprocessor with :data:`SAFE_TAGS` and :data:`SAFE_ATTRIBUTES`:
    disallowed markup is escaped (shown as text, never run); only PNG/JPEG, plain text, JSON and
    LaTeX outputs pass unchanged. (``HTMLExporter.sanitize_html`` uses a fixed, smaller allow-list
    that would show tunelab's tables and headings as escaped text.)"""
    from nbconvert.preprocessors.sanitize import SanitizeHTML

    return SanitizeHTML(tags=list(SAFE_TAGS), attributes=SAFE_ATTRIBUTES, strip=False, strip_comments=True)


@dataclass(frozen=True)
class NotebookRun:
    """One notebook of a report: executed (``html`` set) or skipped (``skipped`` says why)."""

    name: str
    question: str
    html: Path | None = None
    ipynb: Path | None = None
    skipped: str | None = None


def applicable(study: Study, name: str) -> str | None:
    """Why notebook ``name`` does not apply to ``study`` (``None`` when it does)."""
    if name in ("01_screen", "02_posthoc") and study.tune is not None:
        return ("tune judged its own screen (each knob over its range, coded baseline / changed; its call on every "
                "knob is in the tune section of the front page), which the design's analysis would misread")
    if name in ("01_screen", "02_posthoc") and not study.has_phase("screen"):
        return "no screen trials in this store; run `tunelab run DESIGN` to screen the knobs"
    if name == "03_refine" and not study.has_phase("refine"):
        return ("no refine trials in this store; run `tunelab refine DESIGN --knobs screened` to search the knobs "
                "that matter")
    if name == "04_validate" and not study.has_phase("confirm", "validate"):
        return ("no confirm or validate trials in this store; `tunelab refine` confirms its winner in ABBA blocks, "
                "`tunelab validate` compares any candidate with the baseline")
    return None


def _select(names: Sequence[str] | None) -> list[str]:
    if not names:
        return list(NOTEBOOKS)
    chosen = {_match(n) for n in names}
    return [n for n in NOTEBOOKS if n in chosen]


def _match(name: str) -> str:
    name = Path(name).stem
    matches = [n for n in NOTEBOOKS if name in (n, n.split("_")[0], n.split("_", 1)[1])]
    if len(matches) != 1:
        raise ReportError(f"unknown notebook {name!r}; choose from {', '.join(NOTEBOOKS)} (or 01, 02, 03, 04)")
    return matches[0]


def build_report(store_path: str | os.PathLike[str], out_dir: str | os.PathLike[str] | None = None, *,
                 metric: str | None = None, alpha: float | None = None, correction: str | None = None,
                 sesoi_pct: float | None = None, n_boot: int = 1000, include_flagged: bool = False,
                 notebooks: Sequence[str] | None = None, parameters: Mapping[str, Any] | None = None,
                 data_dir: str | os.PathLike[str] = "data", show_code: bool = False,
                 notebooks_dir: str | os.PathLike[str] | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, jobs: int = 2) -> Path:
    """Build the HTML report of a study and return the path of its ``index.html``.

    Parameters
    ----------
    store_path : str or path
        The study's store, or a study name in ``data_dir``.
    out_dir : str or path, optional
        Where the report goes; default ``reports/<store name>/``.
    metric : str, optional
        The metric in focus (figures, post-hoc details); default the design's first metric.
    alpha, correction, sesoi_pct : optional
        Override the design's significance level, multiplicity correction and the focus
        metric's smallest effect of interest (%).
    n_boot : int
        Bootstrap resamples of the effect-size intervals.
    include_flagged : bool
        Also analyse trials the runner flagged.
    notebooks : list of str, optional
        Run only these (``'01_screen'`` or ``'01'``); default all that apply (03 needs refine
        trials, 04 confirm or validate trials).
    parameters : dict, optional
        Further notebook parameters; each must be declared by at least one notebook that runs
        and is passed to those that declare it.
    show_code : bool
        Show the code cells in the HTML (hidden by default).
    jobs : int
        Notebooks executed at the same time (each in its own kernel).

    Raises
    ------
    ReportError
        No usable trials, screen trials without a design, an unknown parameter or notebook, or a notebook
        that failed.
    """
    selected = _select(notebooks)
    paths = {name: notebook_path(name, notebooks_dir) for name in selected}
    declared = {name: declared_parameters(path) for name, path in paths.items()}
    extra = dict(parameters or {})
    _check_extra(declared, extra)
    study = load_study(store_path, data_dir, include_flagged=include_flagged)
    _check_reportable(study)
    screened = (screen_study(study, metric=metric, alpha=alpha, correction=correction, sesoi_pct=sesoi_pct,
                             n_boot=n_boot) if study.has_phase("screen") and study.tune is None else None)
    out = (Path(out_dir) if out_dir is not None else default_report_dir(study.path)).resolve()
    out.mkdir(parents=True, exist_ok=True)
    common = {"study": str(study.path.resolve()), "data_dir": str(Path(data_dir).resolve()), "metric": metric,
              "alpha": alpha, "correction": correction, "sesoi_pct": sesoi_pct,
              "include_flagged": include_flagged, "n_boot": int(n_boot)}
    skipped = {name: "not selected (--notebooks)" for name in NOTEBOOKS if name not in selected}
    skipped.update({name: reason for name in selected if (reason := applicable(study, name))})
    jobs_ = {name: (paths[name], {k: v for k, v in {**common, **extra}.items() if k in declared[name]})
             for name in selected if name not in skipped}
    runs = []
    with StudyProgress(f"report {study.name}", expected=[2 * len(jobs_)], units="steps", statuses=()) as shown:
        executed = _execute_all(jobs_, out, timeout_s, jobs, shown)
        for name in NOTEBOOKS:
            if name in skipped:
                runs.append(NotebookRun(name, NOTEBOOKS[name], skipped=skipped[name]))
                continue
            html = render_html(executed[name], out / f"{name}.html", show_code=show_code,
                               title=f"{study.name}: {name}", synthetic=is_synthetic(study))
            shown.step(f"{name} rendered")
            runs.append(NotebookRun(name, NOTEBOOKS[name], html=html, ipynb=executed[name]))
    if screened is not None:
        (out / "screen.json").write_text(json.dumps(screened[1].to_json(), indent=1, allow_nan=False,
                                                    ensure_ascii=False) + "\n", encoding="utf-8")
    index = out / "index.html"
    validations = comparison_verdicts(study, metric=metric, alpha=alpha, sesoi_pct=sesoi_pct)
    index.write_text(index_html(study, *(screened or (None, None)), runs, n_boot=n_boot, validations=validations),
                     encoding="utf-8")
    return index


def _check_reportable(study: Study) -> None:
    """ReportError unless some notebook applies to the study (usable screen, refine, confirm or validate trials)."""
    if all(applicable(study, name) for name in NOTEBOOKS):
        raise ReportError(f"the store {study.path} has no usable screen, refine, confirm or validate trials (it holds "
                          f"{study.holdings() or 'no trials at all'}); run `tunelab run DESIGN` (or `tunelab refine`, "
                          "`tunelab validate`) for this study first")


def default_report_dir(store: Path, reports: str | os.PathLike[str] = "reports") -> Path:
    """``reports/<store file name without .sqlite>``; ReportError when that name is not a valid study
    name (it must not leave ``reports/``): then pass ``--out``."""
    try:
        return Path(reports) / check_study_name(store.stem, f"the store file name {store.name!r} gives")
    except TunelabError as exc:
        raise ReportError(f"{exc}; pass --out DIR for the report") from None


def _check_extra(declared: Mapping[str, Mapping[str, Any]], extra: Mapping[str, Any]) -> None:
    """Every extra parameter must be declared by a selected notebook and not be a common one."""
    known = set().union(*declared.values()) if declared else set()
    unknown = [p for p in extra if p not in known or p in COMMON_PARAMETERS]
    if unknown:
        raise UnknownParameterError(
            f"unknown notebook parameter(s) {', '.join(repr(u) for u in unknown)}; the notebooks declare: "
            f"{', '.join(sorted(known - set(COMMON_PARAMETERS))) or '(none)'} (set {', '.join(COMMON_PARAMETERS)} "
            "with their own options)")


def _execute_all(todo: Mapping[str, tuple[Path, dict[str, Any]]], out: Path, timeout_s: float,
                 jobs: int, shown: StudyProgress | None = None) -> dict[str, Path]:
    """Execute notebooks (name -> (path, parameters)) into ``out``, ``jobs`` at a time, each a step of ``shown``
    as it finishes; name -> executed path."""
    if not todo:
        return {}
    # cwd=None: papermill's cwd option chdir()s the whole process, which races between threads
    # (a relative output path then lands in the wrong place); every path passed is absolute instead
    with venv_kernel() as kernel, ThreadPoolExecutor(max(1, min(int(jobs), len(todo)))) as pool:
        futures = {pool.submit(_execute, path, out / f"{name}.ipynb", params, None, timeout_s, kernel): name
                   for name, (path, params) in todo.items()}
        executed = {}
        for future in as_completed(futures):
            executed[futures[future]] = future.result()
            if shown is not None:
                shown.step(f"{futures[future]} executed")
        return {name: executed[name] for name in todo}


def _figure_html(fig: Any, alt: str, caption: str) -> str:
    from tunelab.report.figures import to_png
    from tunelab.report.rendering import figure_html

    return str(figure_html(to_png(fig), alt, caption))


def _model_figure_html(result: ScreenResult, metric: str, baseline: Mapping[str, Any]) -> str:
    """The model's interaction plot of ``metric`` (its main-effects plot when it estimated no interaction)
    as a ``<figure>``; empty for one-at-a-time designs and metrics without a model."""
    from tunelab.report import figures

    means = result.emmeans[result.emmeans["metric"] == metric]
    if result.design == AnalysisKind.OAT or means.empty:
        return ""
    if means["by"].notna().any():
        return _figure_html(figures.interaction_plot(result.emmeans, metric, baseline),
                            f"interaction plot of {metric} (model means)",
                            f"Model mean of {metric} (95 % CI) per level of one knob, one line per level of "
                            "another; parallel lines: the effect of the first knob does not depend on the second.")
    return _figure_html(figures.main_effects_figure(result.emmeans, metric, baseline),
                        f"main-effects plot of {metric} (model means)",
                        f"Model mean of {metric} (95 % CI) per level of each knob, averaged over the other knobs.")


def _key_figures_html(result: ScreenResult, inputs: StudyInputs, band: float | None, interval: str) -> str:
    """The focus metric's effect sizes and runs per level, or, for a study read over numeric ranges (Latin
    hypercube, Morris: no levels), its response curves or Morris plane."""
    from tunelab.report import figures
    from tunelab.report.wording import sesoi_text

    name = inputs.metric["name"]
    if name not in set(result.effects.get("metric", ())) and name in set(result.response.get("metric", ())):
        return _figure_html(figures.response_curves_figure(result.response, name, inputs.baseline),
                            f"response curves of {name} over each knob's range",
                            f"Predicted change of {name} against the baseline value over each knob's range (95 % "
                            "interval); dashed: the baseline value.")
    if name not in set(result.effects.get("metric", ())) and name in set(result.morris.get("metric", ())):
        return _figure_html(figures.morris_figure(result.morris, name), f"Morris mu* against sigma of {name}",
                            f"Morris elementary effects of {name}: each knob's mean absolute change over its range "
                            "(mu*) against its spread (sigma).")
    forest = figures.verdict_forest(result, name, band)
    levels = figures.levels_figure(inputs.runs, inputs.knobs, name, inputs.baseline, design=result.design)
    return "\n".join([
        _figure_html(forest, f"effect sizes for {name}",
                     f"% change of {name} per knob level against the baseline, {interval}"
                     + (f"; shaded: {sesoi_text(inputs.metric)} smallest effect of interest." if band else ".")),
        _figure_html(levels, f"{name} per knob level",
                     f"{name} of every run per knob level (box: quartiles); orange: the baseline level.")])


def mechanisms_html(result: ScreenResult) -> str:
    """The mechanism section: the words, the knob level × counter heatmap of Hedges' g (counters
    significant somewhere, at most 30) and a short table per knob; one line for a store without counters."""
    from tunelab.report import figures
    from tunelab.report.rendering import mechanisms_section_html
    from tunelab.report.tables import mechanism_frames
    from tunelab.report.wording import mechanisms_markdown

    table = result.mechanisms
    figure = None
    if len(table) and table["significant"].astype(bool).any():
        from markupsafe import Markup

        figure = Markup(_figure_html(figures.mechanism_heatmap(table), "heatmap of Hedges' g of each kernel counter "
                                     "at each knob level that matters",
                                     "Hedges' g of each counter's change against the baseline per knob level that "
                                     "matters; * significant after Benjamini–Hochberg over all counters and levels; "
                                     "only counters significant somewhere (at most 30)."))
    return str(mechanisms_section_html(mechanisms_markdown(result), figure, mechanism_frames(result)))


@dataclass(frozen=True)
class ComparisonVerdict:
    """One candidate-vs-baseline comparison as 04_validate judges it: the front page's validation row."""

    phase: str
    profile: str
    baseline: str
    candidate: str
    units: int
    verdict: str


def comparison_verdicts(study: Study, metric: str | None = None, alpha: float | None = None,
                        sesoi_pct: float | None = None) -> list[ComparisonVerdict]:
    """The verdict of every confirm and validate comparison in the store, judged as 04_validate judges it (the
    goals and level a validation stored, else the design's, else 0.05); empty when the store has none."""
    from tunelab.optimize.confirm import overall_verdict
    from tunelab.report import refinement
    from tunelab.report.wording import configs_text

    default = study.design.analysis.alpha if study.design is not None else 0.05
    out = []
    for comparison in refinement.abba_comparisons(study) + refinement.duet_comparisons(study):
        goals = refinement.comparison_goals(study, list(comparison.measurements.columns), metric, sesoi_pct,
                                            stored=comparison.goals)
        table = refinement.judge(comparison, goals, refinement.comparison_alpha(comparison, alpha, default))
        out.append(ComparisonVerdict(comparison.phase, comparison.profile, configs_text(comparison.baseline) or "-",
                                     configs_text(comparison.candidate) or "-",
                                     int(comparison.measurements[comparison.unit].nunique()),
                                     overall_verdict(list(table["verdict"]))))
    return out


def index_html(study: Study, inputs: StudyInputs | None, result: ScreenResult | None, runs: Sequence[NotebookRun],
               n_boot: int | None = None, validations: Sequence[ComparisonVerdict] = ()) -> str:
    """The report's index page (``report_index.html.j2``): summary, verdict table, key figures, validations
    (:func:`comparison_verdicts`), notebooks, methods (self-contained), with the SYNTHETIC banner for trials of
    the simulator. Without a screen (``inputs``, ``result`` None: a store of refine or validate trials only) it
    says what the store holds and links the notebooks."""
    from markupsafe import Markup

    from tunelab.report.rendering import markdown_to_html, render, verdicts_html
    from tunelab.report.wording import methods_markdown, summary_markdown

    from tunelab.report import figures

    description = study.design.description.strip() if study.design is not None and study.design.description else ""
    page = {"title": f"tunelab report: {study.name}", "study_name": study.name, "store": str(study.path),
            "written": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "description": description,
            "runs": list(runs), "synthetic": is_synthetic(study), "validations": list(validations)}
    if inputs is None or result is None:
        from tunelab.report.tune_section import tune_section_html

        tune_html = tune_section_html(study.tune) if study.tune is not None else None
        return str(render("report_index.html.j2", **page, screened=False, holdings=study.holdings(),
                          tune_html=tune_html))
    focus = inputs.metric
    band = focus.get("sesoi_pct") if focus.get("sesoi_abs") is None else None
    interval = figures.verdict_interval_text(result)
    figures_html = "\n".join([_key_figures_html(result, inputs, band, interval),
                              _model_figure_html(result, focus["name"], inputs.baseline)])
    return str(render(
        "report_index.html.j2", **page, screened=True,
        summary_html=Markup(markdown_to_html(summary_markdown(result, inputs))),
        verdicts_html=Markup(verdicts_html(result.verdicts, inputs.metrics, notes=result.settings.get("notes", []))),
        factorial=result.design != AnalysisKind.OAT,
        interval=interval, focus=focus["name"], figures_html=Markup(figures_html),
        mechanisms_html=Markup(mechanisms_html(result)),
        methods_html=Markup(markdown_to_html(methods_markdown(study, inputs, result, n_boot=n_boot)))))
