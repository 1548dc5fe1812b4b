"""What a table's column is called for a reader, and what kind of number it holds.

Every table a notebook, a report or a rich result shows (:mod:`tunelab.report.presentation`) names its
columns through :data:`LABELS`: column name -> :class:`Label` (the reader's text, its unit, the kind of
number, which picks its format in :func:`tunelab.report.tables.cell_texts`). A DataFrame keeps its own column
names (``tost_p``, ``p_adj``); only what is shown changes. A column a table shows must be registered
(``tests/report/test_presentation.py`` checks every table of the example studies); a knob id or a phase,
shown as a column of a pivot, is its own label.

>>> column_label("tost_p"), column_label("cv_pct"), column_label("net.core.somaxconn")
('TOST p', 'CV (%)', 'net.core.somaxconn')
>>> LABELS.get("blocks_needed").kind
'count'
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from tunelab.errors import TunelabError
from tunelab.registry import Registry

#: the kinds of cell a label may declare (how :func:`tunelab.report.tables.cell_texts` formats it)
KINDS = ("text", "number", "count", "p", "pct", "level")


@dataclass(frozen=True)
class Label:
    """A column as a reader sees it: ``text``, its ``unit`` (shown in brackets) and the ``kind`` of its
    values (one of :data:`KINDS`: ``count`` reads ``10,250``, ``p`` reads ``< 1e-300`` when it underflowed,
    ``level`` (a confidence level) ``0.99167`` reads ``99.17 %``)."""

    text: str
    unit: str | None = None
    kind: str = "text"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise TunelabError(f"label {self.text!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")

    def header(self) -> str:
        """The header a table shows: the text, and the unit in brackets."""
        return f"{self.text} ({self.unit})" if self.unit else self.text


#: column name -> :class:`Label`; register a new table's columns here
LABELS: Registry[Label] = Registry("column label", error=TunelabError)


_ENTRIES: dict[str, Label] = {}


def _add(kind: str, entries: dict[str, tuple[str, str | None]]) -> None:
    """Collect ``entries`` (name -> text, unit) of ``kind``."""
    _ENTRIES.update({name: Label(text, unit, kind) for name, (text, unit) in entries.items()})


_add("text", {name: (name, None) for name in (       # columns that are their own label (kinds below get theirs)
    "knob", "metric", "verdict", "level", "levels", "baseline", "candidate", "winner", "scope", "restart", "profile",
    "test", "term", "kind", "aliases", "reason", "phase", "status", "counter", "units", "guard", "round", "role",
    "source", "df", "screen", "calibrate", "refine", "confirm", "validate", "pilot", "change vs baseline",
    "change (95 % CI)", "change [CI]", "change per second [95 % CI]", "Hedges' g [95 % CI]", "equivalent (TOST)",
    "only when", "trade-off", "SESOI", "q (BH)", "partial η²", "information", "alpha spent", "alpha of this look",
    "offset %", "spread ± %", "testbed F", "SD", "baseline mean", "replicates per undecided level", "testbed")})
_add("text", {"text": ("change", None), "tripped": ("guard tripped", None), "group1": ("level A", None),
              "group2": ("level B", None), "direction": ("better when", None), "comparison": ("comparison", None),
              "effect_size_name": ("effect size measure", None), "recommended": ("chosen", None),
              "significant": ("significant", None), "equivalent": ("equivalent (TOST)", None),
              "relevant": ("at least the SESOI", None), "only_when": ("only when", None),
              "trade_off": ("trade-off", None), "posthoc_note": ("post-hoc note", None), "scale": ("scale", None),
              "run_key": ("run", None), "stage": ("stage", None), "engine": ("engine", None),
              "config": ("configuration", None), "is_baseline": ("is the baseline", None),
              "search_id": ("search", None), "search": ("search", None), "preset": ("preset", None),
              "race share": ("race share", None), "objectives": ("objectives", None), "knobs": ("knobs", None),
              "options": ("options", None), "parameter": ("parameter", None), "meaning": ("meaning", None),
              "default": ("default", None)})
_add("text", {"seed": ("seed", None), "trial_id": ("trial", None), "batch": ("batch", None)})   # ids, not counts
_add("count", {"budget": ("budget", None), "batches": ("batches", None),
               "measurements": ("measurements", None), "last_batch": ("last batch", None)})
_add("level", {"ci_level": ("CI level", None)})     # an interval's confidence level, a fraction shown in %
_add("count", {"n": ("n", None), "baseline_n": ("baseline n", None), "blocks": ("blocks", None),
               "blocks_needed": ("blocks needed", None), "runs": ("runs", None), "evaluations": ("measurements", None), "replicates": ("replicates", None),
               "df1": ("df", None), "df2": ("df (residual)", None), "blocks needed": ("blocks needed", None),
               "runs so far": ("runs so far", None), "final verdicts": ("final verdicts", None),
               "still inconclusive": ("still inconclusive", None), "baseline runs": ("baseline runs", None)})
_add("p", {"p": ("p", None), "p_adj": ("p (adjusted)", None), "tost_p": ("TOST p", None), "q": ("q (BH)", None),
           "p brown_forsythe": ("p Brown–Forsythe", None), "p levene": ("p Levene", None),
           "p shapiro_wilk": ("p Shapiro–Wilk", None),
           "p shapiro_wilk_standardized": ("p Shapiro–Wilk (standardised)", None),
           "p model_brown_forsythe": ("p Brown–Forsythe (model)", None),
           "p model_shapiro_wilk": ("p Shapiro–Wilk (model)", None),
           "p model_breusch_pagan": ("p Breusch–Pagan (model)", None), "alpha_nominal": ("alpha of the look", None)})
_add("pct", {"pct_change": ("change", "%"), "ci_low": ("CI low", None), "ci_high": ("CI high", None),
             "effect_pct": ("change", "%"), "effect_ci_low": ("CI low", "%"), "effect_ci_high": ("CI high", "%"),
             "boot_ci_low": ("bootstrap CI low", "%"), "boot_ci_high": ("bootstrap CI high", "%"),
             "sesoi_pct": ("SESOI", "%"), "cv_pct": ("CV", "%"), "busy_pct": ("busy", "% CPU"),
             "spread_pct": ("spread", "± %"), "offset_pct": ("offset", "%")})
_add("number", {"mean": ("mean", None), "sd": ("SD", None), "statistic": ("statistic", None),
                "estimate": ("estimate", None), "effect_size": ("effect size", None), "sesoi": ("SESOI", None),
                "baseline_mean": ("baseline mean", None), "candidate_mean": ("candidate mean", None),
                "effect_abs": ("change", None), "effect_abs_ci_low": ("CI low", None),
                "effect_abs_ci_high": ("CI high", None), "eta2": ("η²", None), "partial_eta2": ("partial η²", None),
                "incumbent_mean": ("incumbent mean", None), "incumbent_se": ("incumbent SE", None),
                "best_mean": ("best mean", None), "information_fraction": ("information", None),
                "alpha_spent": ("alpha spent", None), "hedges_g": ("Hedges' g", None), "difference": ("change", None)})
for _name, _label in _ENTRIES.items():
    LABELS.add(_name, _label)


def column_label(name: object) -> str:
    """The header of column ``name``: its registered label, else the name itself (a knob id, a phase).

    >>> column_label("p_adj"), column_label("baseline_mean"), column_label("knob")
    ('p (adjusted)', 'baseline mean', 'knob')
    """
    text = str(name)
    return LABELS.get(text).header() if text in LABELS else text


def column_kind(name: object) -> str | None:
    """The kind of number column ``name`` holds (:data:`KINDS`), or None when it has no label."""
    text = str(name)
    return LABELS.get(text).kind if text in LABELS else None


def unlabelled(columns: Iterable[object], own_labels: Iterable[object] = ()) -> list[str]:
    """The columns among ``columns`` without a label (``own_labels``: names that are their own label,
    such as knob ids).

    >>> unlabelled(["knob", "p_adj", "net.core.somaxconn", "fancy_new"], own_labels=["net.core.somaxconn"])
    ['fancy_new']
    """
    own = {str(name) for name in own_labels}
    return [str(c) for c in columns if str(c) not in LABELS and str(c) not in own]


__all__ = ["KINDS", "LABELS", "Label", "column_kind", "column_label", "unlabelled"]
