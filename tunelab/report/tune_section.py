"""The report's tune section: the budget per stage (planned and spent), the knobs the screen kept or dropped and
why, and the confirmed gain, from a tune result's JSON (:meth:`tunelab.optimize.tune.TuneResult.to_json`, as
``tunelab tune --json OUT`` writes it), through ``templates/tune.html.j2``."""
from __future__ import annotations

from typing import Any, Mapping

from markupsafe import Markup

from tunelab.formatting import fmt_ci, fmt_pct
from tunelab.model import Phase
from tunelab.report.rendering import render

#: the stages in order, and what each one is for
STAGE_WORDS = {Phase.CALIBRATE: "A/A runs of the baseline: the noise",
               Phase.SCREEN: "which knobs matter",
               Phase.REFINE: "the best levels of the knobs kept",
               Phase.CONFIRM: "the winner against the baseline, ABBA blocks"}


def stage_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per stage: its planned and spent measurements and what it is for (the split's design shown)."""
    split, spent = result.get("split") or {}, result.get("spent") or {}
    rows = []
    for stage, what in STAGE_WORDS.items():
        if stage is Phase.SCREEN:
            what = f"{what} ({split.get('design')}: {split.get('screen_runs')} runs x {split.get('replicates')})"
        rows.append({"stage": stage.value, "planned": split.get(stage.value, 0), "spent": spent.get(stage.value, 0),
                     "what": what})
    return rows


def gain_text(result: Mapping[str, Any]) -> str:
    """The confirmed change of the goal with its CI, or why there is none."""
    if result.get("stopped"):
        return str(result["stopped"])
    gain = result.get("gain")
    if not gain:
        return str(result.get("note") or "the winner was not confirmed")
    return (f"{result.get('verdict')}: {fmt_pct(gain.get('pct_change'))} "
            f"{fmt_ci(gain.get('ci_low'), gain.get('ci_high'), gain.get('pct_change'))}")


def tune_section_html(result: Mapping[str, Any]) -> Markup:
    """The tune section of a report from a tune result's JSON."""
    budget, total = (result.get("settings") or {}).get("budget"), result.get("spent_total")
    kept = result.get("kept") or []
    headline = (f"{total} of {budget} measurements spent; the screen kept {len(kept)} of "
                f"{len(result.get('knobs') or [])} knobs" + (f" ({', '.join(kept)})" if kept else "") + ".")
    return render("tune.html.j2", headline=headline, stages=stage_rows(result),
                  notes=list((result.get("split") or {}).get("notes") or []), knobs=list(result.get("knobs") or []),
                  gain=gain_text(result))
