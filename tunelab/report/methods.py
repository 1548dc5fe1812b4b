"""What the notebooks call as ``methods.*``: the report's words, tables and HTML, gathered under the name
the notebooks import (``from tunelab.report import methods``).

Nothing is defined here; each name lives in the module that says what it holds:

=================================  =====================================================================
:mod:`tunelab.report.wording`      the plain-words summary, the methods section, the model in words
:mod:`tunelab.report.tables`       DataFrames for reading (verdicts, model terms, post-hoc detail, ...)
:mod:`tunelab.report.rendering`    HTML from the Jinja2 templates, Markdown rendered with HTML escaped
:mod:`tunelab.report.loading`      facts read from the store (machine, repeated trials, synthetic data)
:mod:`tunelab.formatting`          every number as people read it
=================================  =====================================================================
"""
from __future__ import annotations

from tunelab.formatting import fmt_abs, fmt_ci, fmt_p, fmt_p_exact, fmt_p_value, fmt_pct, fmt_pct_interval
from tunelab.report.loading import (SOFTWARE, foreign_load, is_synthetic, machine, pinning_text, planned_runs,
                                    repeated_trials, software_versions)
from tunelab.report.rendering import TABLE_CSS, html_table, markdown_html, markdown_to_html, verdicts_html
from tunelab.report.tables import (RANGE_TESTS, assumptions_table, between_testbeds_frame, cell_texts, chosen_tests,
                                   letters_by_level, mechanism_frames, model_terms_frame, phase_table, posthoc_detail,
                                   rounds_frame, significant_pairs, verdict_frame)
from tunelab.report.wording import (CORRECTION_TEXT, DESIGN_TEXT, MODEL_TEST_SHORT, MODEL_TEST_TEXT, POSTHOC_TEXT,
                                    ROUTE_SHORT, VERDICT_ORDER, between_testbeds_markdown, condition_text,
                                    configs_text, mechanism_sentences, mechanisms_markdown, methods_markdown,
                                    posthoc_estimate_text,
                                    model_lines, model_markdown, noise_markdown,
                                    result_notes, rounds_markdown, runs_text, sesoi_text, summary_markdown,
                                    summary_sentences)

__all__ = [
    "CORRECTION_TEXT", "DESIGN_TEXT", "MODEL_TEST_SHORT", "MODEL_TEST_TEXT", "POSTHOC_TEXT", "RANGE_TESTS",
    "ROUTE_SHORT", "SOFTWARE", "TABLE_CSS", "VERDICT_ORDER", "assumptions_table", "between_testbeds_frame",
    "between_testbeds_markdown", "cell_texts", "chosen_tests", "condition_text", "configs_text", "fmt_abs", "fmt_ci",
    "fmt_p", "fmt_p_exact", "fmt_p_value", "fmt_pct", "fmt_pct_interval", "foreign_load", "html_table",
    "is_synthetic", "letters_by_level", "machine", "markdown_html", "markdown_to_html", "mechanism_frames",
    "mechanism_sentences", "mechanisms_markdown", "methods_markdown", "posthoc_estimate_text",
    "model_lines", "model_markdown", "model_terms_frame", "noise_markdown", "phase_table", "pinning_text",
    "planned_runs", "posthoc_detail", "repeated_trials", "result_notes", "rounds_frame", "rounds_markdown", "runs_text",
    "sesoi_text", "significant_pairs", "software_versions", "summary_markdown", "summary_sentences",
    "verdict_frame", "verdicts_html",
]
