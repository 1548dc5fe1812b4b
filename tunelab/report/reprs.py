"""How the API's results show in a notebook: a short HTML summary and the first figure of each.

Importing this module (``tunelab.report`` does) registers one :class:`tunelab.display.View` per result
class in :data:`tunelab.display.VIEWS`, so a result made in a low layer shows the report's tables without
importing the report:

====================  ===========================================  =====================================
result                HTML summary (``_repr_html_``)                ``plot()``
====================  ===========================================  =====================================
``PlanResult``        runs, configurations, wall time, the knobs   none
``StudyRun``          the run's counts, rounds, calibration        none
``ScreenResult``      verdict counts and the verdict table         forest plot of the effects
``RefineRun``         winner, convergence summary, confirmation    convergence of the search
``ValidateRun``       verdict, change with CI, blocks needed       % change of each ABBA block
====================  ===========================================  =====================================

Each summary is ``result_repr.html.j2`` (autoescaped) with the report's table markup
(``table.html.j2`` through :mod:`tunelab.report.presentation`: reader labels, rows classed by verdict with a
legend, each verdict cell coloured inline as in ``tables.css``, since a notebook output has no stylesheet;
notes under the row they explain). Tables longer than :data:`MAX_ROWS` are cut (the rows
that matter first) and the summary names the attribute holding the full table. The report's
modules (tables, figures: matplotlib, seaborn) are imported on the first summary, not with this module.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import pandas as pd

from tunelab.display import VIEWS, View
from tunelab.errors import DataError
from tunelab.formatting import fmt_pct, fmt_sig, level_label

#: rows of a table in a summary; a longer one is cut and the summary says where the rest is
MAX_ROWS = 12


def summary_html(title: str, facts: Sequence[str], sections: Sequence[Mapping[str, Any]],
                 more: Sequence[tuple[str, str]], verdict: str | None = None) -> str:
    """``result_repr.html.j2``: a title (and a coloured ``verdict``), fact lines, tables and where the rest is."""
    from tunelab.report.presentation import VERDICT_STYLE, verdict_class
    from tunelab.report.rendering import render

    css = verdict_class(verdict) if verdict else ""
    return str(render("result_repr.html.j2", title=title, facts=list(facts), sections=list(sections),
                      more=list(more), verdict=verdict.upper() if verdict else None, verdict_css=css,
                      verdict_style=VERDICT_STYLE.get(css, "")))


def section(heading: str | None, frame: pd.DataFrame, verdicts: str | None = None,
            what: str = "rows", notes: Sequence[str] = ()) -> dict[str, Any]:
    """A table of ``frame`` (through the presentation layer, :func:`tunelab.report.rendering.html_table`) under
    ``heading``, cut at :data:`MAX_ROWS` rows; with ``verdicts`` (a column name) each row is classed and coloured
    by that column, with a legend; ``notes`` go under the table."""
    from markupsafe import Markup

    from tunelab.report.rendering import html_table

    table = Markup(html_table(frame.head(MAX_ROWS), verdicts=verdicts, notes=notes))
    cut = f" (the first {MAX_ROWS} of {len(frame)} {what})" if len(frame) > MAX_ROWS else ""
    return {"heading": f"{heading}{cut}" if heading else (cut.strip(" ()") or None), "table": table}


# ---- plan and run -----------------------------------------------------------------------------------


def plan_html(result: Any) -> str:
    """A :class:`tunelab.api.PlanResult`: the design, its runs and wall time, one row per knob."""
    summary = result.summary
    info, timing = summary.get("design", {}), summary.get("timing", {})
    knobs = pd.DataFrame([{"knob": k["id"], "levels": ", ".join(level_label(v) for v in k["levels"]),
                           "baseline": level_label(k["baseline"]), "scope": k["scope"],
                           "restart": "yes" if k["requires_restart"] else "no"} for k in summary.get("knobs", [])])
    load = info.get("load", {})
    facts = [f"{summary['runs']} runs: {summary.get('runs_per_replicate')} per replicate × {info.get('replicates')} "
             f"replicate(s) × {info.get('blocks')} block(s); {summary.get('configs')} configurations, "
             f"{summary.get('baseline_runs')} baseline runs, in randomised order (seed {info.get('seed')})",
             f"target {info.get('target')}, load {load.get('generator')} ({', '.join(load.get('profiles', []))})",
             f"about {summary.get('estimated_wall_s', 0):.0f} s on a real target ({timing.get('warmup_s', 0):g} s "
             f"warm-up + {timing.get('measure_s', 0):g} s measured per run, {summary.get('restarts', 0)} restarts)",
             *summary.get("warnings", [])]
    return summary_html(f"Plan of {info.get('name')}: {info.get('type')} design", facts,
                        [section("Knobs", knobs, what="knobs")] if len(knobs) else [],
                        [("result.plan", "one row per run, in run order"), ("result.summary", "this summary as a dict"),
                         ("tunelab.run(design)", "runs it")])


def run_html(result: Any) -> str:
    """A :class:`tunelab.study_result.StudyRun`: the lines the CLI prints, the first :data:`MAX_ROWS` of them."""
    lines = str(result).splitlines()
    facts = lines[:MAX_ROWS] + ([f"... {len(lines) - MAX_ROWS} more lines: print(result)"] if len(lines) > MAX_ROWS
                                else [])
    more = [("print(result)", "every line"), ("result.failures", "the failed trials")]
    if result.recorded:
        more.append((f"tunelab.screen({str(result.store_path)!r})", "which knobs matter"))
    return summary_html(f"Run of study {result.study}", facts, [], more)


# ---- screen -----------------------------------------------------------------------------------------


def screen_html(result: Any) -> str:
    """A :class:`tunelab.stats.ScreenResult`: how many verdicts of each kind, and the verdict table."""
    from tunelab.report.tables import NOTE_COLUMN, general_notes, row_notes, verdict_frame
    from tunelab.report.wording import VERDICT_ORDER

    verdicts, settings = result.verdicts, result.settings
    notes = list(settings.get("notes") or [])
    frame = verdict_frame(verdicts, settings.get("metrics")).assign(**{NOTE_COLUMN: row_notes(verdicts, notes)})
    if len(frame) > MAX_ROWS:     # the rows that matter first, else in the table's own order
        rank = verdicts["verdict"].astype(str).map(lambda v: VERDICT_ORDER.get(v, len(VERDICT_ORDER)))
        frame = frame.iloc[rank.reset_index(drop=True).argsort(kind="stable")]
    counts = verdicts["verdict"].astype(str).value_counts()
    facts = [", ".join(f"{n} {verdict}" for verdict, n in counts.items()) or "no verdicts",
             f"{settings.get('n_runs', '?')} runs, alpha {settings.get('alpha')} ({settings.get('correction')} over "
             "the family), changes against the baseline with the interval of the verdict's test at its CI level"]
    return summary_html(f"Screen ({getattr(result.design, 'value', result.design)}): which knobs matter?", facts,
                        [section(None, frame, verdicts="verdict", what="rows, those that matter first",
                                 notes=general_notes(verdicts, notes))],
                        [("result.verdicts", f"the full table ({len(verdicts)} rows)"),
                         ("result.effects", "every level's change with its CI"),
                         ("result.plot(metric=...)", "the forest plot")])


def screen_plot(result: Any, metric: str | None = None, ax: Any = None) -> Any:
    """The forest plot of ``metric`` (default: the first) that agrees with the verdicts: each level's % change
    against the baseline with the interval the verdict uses, coloured by the verdict's test, and the ±SESOI
    band (:func:`tunelab.report.figures.verdict_forest`); ``ax`` draws into an existing axes."""
    from tunelab.report import figures

    specs = {m["name"]: m for m in result.settings.get("metrics", [])}
    known = list(dict.fromkeys([*specs, *map(str, result.verdicts["metric"])]))
    name = metric or (known[0] if known else None)
    if name not in known:
        raise DataError(f"the screen has no metric {name!r}; its metrics: {', '.join(known) or 'none'}")
    spec = specs.get(name, {})
    band = spec.get("sesoi_pct") if spec.get("sesoi_abs") is None else None
    return displayable(figures.verdict_forest(result, name, band, ax=ax))


# ---- refine and validate ----------------------------------------------------------------------------


def abba_frame(table: pd.DataFrame) -> pd.DataFrame:
    """A confirmation's or validation's table for reading (:func:`tunelab.report.tables.abba_frame`)."""
    from tunelab.report.tables import abba_frame as frame_of

    return frame_of(table)


def configs_frame(baseline: Mapping[str, Any] | None, candidate: Mapping[str, Any], name: str) -> pd.DataFrame:
    """One row per knob: its baseline value and ``name``'s (the winner, the candidate)."""
    base = baseline or {}
    return pd.DataFrame({"knob": list(candidate),
                         "baseline": [level_label(base[k]) if k in base else "-" for k in candidate],
                         name: [level_label(v) for v in candidate.values()]})


def convergence_line(result: Any) -> str:
    """How the search's incumbent moved: its first and last estimate against the baseline's."""
    batches = result.batches
    if batches is None or batches.empty or batches["incumbent_mean"].isna().all():
        return f"{result.evaluations} measurements; no batch estimates were kept"
    stages = batches["stage"].value_counts()
    first, last = batches["incumbent_mean"].dropna().iloc[0], batches.iloc[-1]
    base = last["baseline_mean"]
    objective = result.objectives[0]
    against = f", baseline {fmt_sig(base)} ({fmt_pct(100 * (last['incumbent_mean'] / base - 1))})" \
        if base is not None and math.isfinite(float(base)) and float(base) != 0 else ""
    return (f"{len(batches)} batches ({', '.join(f'{n} {s}' for s, n in stages.items())}); the incumbent's "
            f"{getattr(objective, 'name', objective)} went from {fmt_sig(first)} to {fmt_sig(last['incumbent_mean'])} "
            f"± {fmt_sig(last['incumbent_se'])} (SE){against}")


def refine_html(run: Any) -> str:
    """A :class:`tunelab.api.RefineRun`: the winner against the baseline, how the search converged, and its
    confirmation (verdict, change with CI, blocks needed)."""
    result, confirmation = run.result, run.confirmation
    facts = [f"{result.engine} engine" + (f", preset {result.preset}" if result.preset else "")
             + f", seed {result.seed}; {run.counts_text()}", convergence_line(result)]
    if run.synthetic:
        facts.append("SYNTHETIC: measured on the simulator, no real kernel")
    sections = [section("Winner", configs_frame(result.baseline, result.winner, "winner"), what="knobs")]
    if confirmation is not None:
        sections.append(section("Confirmation of the winner in fresh ABBA blocks", abba_frame(confirmation.table),
                                verdicts="verdict"))
    else:
        facts.append(run.note or "the confirmation was skipped")
    more = [("result.result.estimates", "every configuration measured"), ("result.result.batches", "every batch"),
            ("result.sysctl_conf()", "the winner as a sysctl.d file"), ("result.plot()", "the convergence")]
    return summary_html(f"Refine of {run.study}: the winner", facts, sections, more,
                        verdict=confirmation.verdict if confirmation is not None else None)


def refine_plot(run: Any, metric: str | None = None, ax: Any = None) -> Any:
    """The convergence of the search (:func:`tunelab.report.figures.convergence_figure`): the incumbent's
    estimate of the first objective (±SE) after each batch, the baseline's as a line; ``metric`` may name
    that objective, ``ax`` an axes to draw into."""
    from tunelab.report import figures

    result = run.result
    conv = result.batches.assign(search_id=result.engine, engine=result.engine)
    objective = result.objectives[0]
    name = getattr(objective, "name", str(objective))
    if metric is not None and metric != name:
        raise DataError(f"the search's convergence is recorded for its first objective {name!r}, not {metric!r}; "
                        f"call plot() or plot(metric={name!r})")
    return displayable(figures.convergence_figure(conv, name, ax=ax))


def validate_html(run: Any) -> str:
    """A :class:`tunelab.optimize.validation.ValidateRun`: the verdict, each metric's change with its CI,
    the blocks needed to decide, the compared configurations and the sysctl.d file."""
    confirmation = run.confirmation
    facts = [f"{len(confirmation.measurements)} measurements in "
             f"{confirmation.measurements['block'].nunique()} ABBA blocks per profile on {run.target_type}"
             + (" (SYNTHETIC: no real kernel)" if run.synthetic else "")]
    failed = confirmation.failures.line() if confirmation.failures is not None else None
    facts += [failed] if failed else []
    facts.append(f"sysctl.d file: {run.sysctl.paths['conf']}" if run.sysctl is not None else str(run.sysctl_note))
    sections = [section(None, abba_frame(confirmation.table), verdicts="verdict"),
                section("Compared configurations", configs_frame(confirmation.baseline, confirmation.candidate,
                                                                 "candidate"), what="knobs")]
    more = [("result.confirmation.table", "every column"), ("result.confirmation.measurements", "every measurement"),
            ("result.plot(metric=...)", "the % change of each block")]
    return summary_html("Validate: is the candidate better than the baseline?", facts, sections, more,
                        verdict=run.verdict)


def validate_plot(run: Any, metric: str | None = None, ax: Any = None) -> Any:
    """The paired ratio of each ABBA block (:func:`tunelab.report.figures.block_ratios_figure`) of ``metric``
    (default: the first judged one); ``ax`` draws into an existing axes."""
    from tunelab.report import figures

    confirmation = run.confirmation
    name = metric or str(confirmation.table["metric"].iloc[0])
    return displayable(figures.block_ratios_figure(confirmation.measurements, confirmation.table, name, ax=ax))


def displayable(fig: Any) -> Any:
    """``fig``, shown as a PNG when it is a cell's value in IPython: the shell's PNG formatter for figures is
    registered once unless one is (matplotlib's inline backend registers its own only when pyplot is used,
    and the report's figures never touch pyplot)."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:
        from matplotlib.figure import Figure

        formatter = shell.display_formatter.formatters["image/png"]
        try:
            formatter.lookup_by_type(Figure)
        except KeyError:
            formatter.for_type(Figure, figure_png)
    return fig


def figure_png(fig: Any) -> bytes:
    """The PNG of ``fig`` as the report embeds it (:func:`tunelab.report.figures.to_png`)."""
    from tunelab.report.figures import to_png

    return to_png(fig)


def register() -> None:
    """Register the views of every API result in :data:`tunelab.display.VIEWS` (idempotent)."""
    for name, view in (("PlanResult", View(plan_html)), ("StudyRun", View(run_html)),
                       ("ScreenResult", View(screen_html, screen_plot)), ("RefineRun", View(refine_html, refine_plot)),
                       ("ValidateRun", View(validate_html, validate_plot))):
        VIEWS.add(name, view)


register()
