"""How the verbs print: tables, plain lines and JSON files, shared so each verb stays parse -> api -> print.

Everything here takes an API result (or a plain dict or DataFrame from one) and returns text;
:func:`write_text` writes a file a user named, after :func:`~tunelab.cli.paths.check_output_file`.

>>> duration(422.0)
'7 min 02 s'
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Callable

from tunelab.cli.paths import check_output_file, write_failed
from tunelab.formatting import fmt_abs, fmt_level, fmt_p_exact, fmt_pct, fmt_sig, is_number, level_label

#: columns of the screen's verdict table as printed
VERDICT_COLUMNS = ["knob", "metric", "verdict", "test", "p_adj", "level", "effect", "ci_low", "ci_high", "ci_level",
                   "direction", "equivalent", "only_when"]
#: longest note shown by ``tunelab knobs list`` (csv and json keep the full text)
NOTE_WIDTH = 80
#: the banner of every result measured on the simulator target
SYNTHETIC = "NOTE: SYNTHETIC results from the simulator target; no real kernel was measured"


def printable(text: Any) -> str:
    """``text`` with control characters (terminal escapes from a hostile CSV or store) shown as ``\\xNN``.

    >>> printable("ok\\x1b[2J")
    'ok\\\\x1b[2J'
    """
    return "".join(c if c.isprintable() or c in "\n\t" else repr(c)[1:-1] for c in str(text))


def dumps(data: Any, sort_keys: bool = False) -> str:
    """Strict JSON (no NaN), indented, as every ``--json``/``--format json`` output."""
    return json.dumps(data, indent=2, allow_nan=False, ensure_ascii=False, sort_keys=sort_keys)


def write_text(path: str | os.PathLike[str], text: str, flag: str) -> None:
    """Write ``text`` to the file given with ``flag`` (checked first); one OutputError on failure."""
    check_output_file(path, flag)
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise write_failed(exc, path, flag) from None


def write_outputs(*outputs: tuple[Any, str, Callable[[], str]]) -> None:
    """For each ``(path, flag, make_text)`` whose path was given: write ``make_text()`` (plus a newline when it
    lacks one) there and print ``wrote PATH``."""
    for path, flag, make_text in outputs:
        if path:
            text = make_text()
            write_text(path, text if text.endswith("\n") else text + "\n", flag)
            print(f"wrote {path}")


def duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


def plan_frame(plan: Any) -> Any:
    """The plan with level values as text (triplets as ``"4096 87380 6291456"``)."""
    shown = plan.copy()
    for column in shown.columns[7:]:
        shown[column] = shown[column].map(level_label)
    return shown


def plan_table(summary: dict[str, Any], plan: Any) -> str:
    """Human-readable summary of a plan followed by the plan."""
    import pandas as pd

    d, t = summary["design"], summary["timing"]
    lines = [
        f"design      {d['name']} ({d['type']}) from {d['source']}",
        f"hash        {d['hash']}",
        f"target      {d['target']}; load {d['load']['generator']} " + _profile_text(d["load"]),
        f"runs        {summary['runs']} = {summary['runs_per_replicate']} per replicate x {d['replicates']} "
        f"replicates in {d['blocks']} block(s); {summary['configs']} configurations, "
        f"{summary['baseline_runs']} baseline runs; seed {d['seed']}",
        f"wall time   ~{duration(summary['estimated_wall_s'])} (runs x (warmup {t['warmup_s']:g} s + "
        f"measure {t['measure_s']:g} s + {t['run_overhead_s']:g} s) + "
        f"{summary['restarts']} restarts x {t['restart_s']:g} s)",
        *_rounds_lines(summary.get("sequential")),
        "",
    ]
    knobs = pd.DataFrame([{
        "knob": k["id"], "family": k["family"], "scope": k["scope"], "host": k["host"],
        "restart": "yes" if k["requires_restart"] else "no",
        "levels": ", ".join(level_label(v) for v in k["levels"]), "baseline": level_label(k["baseline"]),
    } for k in summary["knobs"]])
    lines += [knobs.to_string(index=False), ""]
    for command in summary.get("commands", []):
        lines.append(f"command (runs as root) {command}")
    for warning in summary["warnings"]:
        lines.append(f"warning: {warning}")
    frac = summary["fractional"]
    if frac:
        res = frac["resolution"]
        lines.append(f"resolution  {res if res is not None else 'full factorial'}; generators "
                     f"{', '.join(frac['generators']) or '(none)'}")
        lines.append("letters     " + ", ".join(f"{letter}={knob}" for letter, knob in frac["letters"].items()))
        lines.append("defining relation: I = " + " = ".join(frac["defining_relation"]))
        lines.append("aliases of order <= 2 (main effects, then 2FI classes without a main effect):")
        for effect, partners in frac["aliases"].items():
            bare = [p.lstrip("-") for p in partners]
            if partners and (len(effect) == 1 or all(len(p) == 2 for p in bare)):
                if len(effect) == 2 and any(p < effect for p in bare):
                    continue  # this 2FI class was printed under its first member
                lines.append(f"  {effect} = {' = '.join(partners)}")
        lines.append("")
    lines.append(plan_frame(plan).to_string(index=False))
    return "\n".join(lines)


def _profile_text(load: dict[str, Any]) -> str:
    """``profile overload``, or for a profile-crossed design ``profiles low, overload (crossed with every run)``."""
    profiles = load.get("profiles") or load.get("profile")
    if isinstance(profiles, (list, tuple)) and len(profiles) > 1:
        return f"profiles {', '.join(map(str, profiles))} (crossed with every run)"
    return f"profile {profiles[0] if isinstance(profiles, (list, tuple)) else profiles}"


def _rounds_lines(rule: dict[str, Any] | None) -> list[str]:
    """What a sequential design's plan shows beyond its first round."""
    if not rule:
        return []
    budgets = [f"budget_trials {rule['budget_trials']}" if rule.get("budget_trials") else "",
               f"budget_minutes {rule['budget_minutes']:g}" if rule.get("budget_minutes") else ""]
    budget = "; ".join(b for b in budgets if b)
    return [f"sequential  the plan below is round 1 ({rule['min']} replicates); then {rule['step']} more replicates "
            f"of each still-inconclusive level per round until every verdict is decided, up to {rule['max']} "
            f"replicates{'; ' + budget if budget else ''}",
            f"            at most {rule['max_runs']} runs, ~{duration(rule['max_wall_s'])}"]


def verdict_table(verdicts: Any, absolute: frozenset[str] = frozenset(), levels: bool = False) -> str:
    """The screen's verdict table as readable text (no reasons); a verdict a guard overruled reads
    ``not comparable (guard: qps -99.8 %)``. ``ci_level`` names the level of the row's interval: the one
    its verdict used (``99.17 %`` at a sequential look whose nominal alpha is 0.0083).

    Effects are % changes (:func:`~tunelab.formatting.fmt_pct`: a tiny one keeps two significant
    digits), or differences in the metric's units for the metrics in ``absolute`` (those with a
    ``sesoi_abs``) and wherever a % change is undefined (a baseline mean of 0); p-values go through
    :func:`~tunelab.formatting.fmt_p_exact` (an underflowed one reads ``< 1e-300``). With ``levels``
    every significant level of a row (its ``levels``) gets a line of its own under the row, with the
    adjusted p of its comparison with the baseline.
    """
    import pandas as pd

    rows = []
    for row in verdicts.to_dict(orient="records"):
        units = (row["metric"] in absolute or pd.isna(row["effect_pct"])) and pd.notna(row["effect_abs"])
        guard = row.get("guard")
        rows.append({"knob": row["knob"], "metric": row["metric"],
                     "verdict": f"{row['verdict']} ({guard})" if isinstance(guard, str) and guard else row["verdict"],
                     "test": row["test"] if isinstance(row["test"], str) else "-", "p_adj": fmt_p_exact(row["p_adj"]),
                     "level": _level(row["level"]),
                     **_effect_cells(row["effect_pct"], row["effect_ci_low"], row["effect_ci_high"], row["effect_abs"],
                                     row["effect_abs_ci_low"], row["effect_abs_ci_high"], units),
                     "ci_level": fmt_level(row.get("ci_level")) if is_number(row.get("ci_level")) else "-",
                     "direction": row["direction"], "equivalent": row["equivalent"],
                     "only_when": row["only_when"] if isinstance(row["only_when"], str) and row["only_when"] else "-"})
        for extra in (row.get("levels") or [])[1:] if levels else ():
            rows.append({"knob": "", "metric": "", "verdict": "", "test": "", "p_adj": fmt_p_exact(extra["p_adj"]),
                         "level": _level(extra["level"]),
                         **_effect_cells(extra["effect_pct"], extra["ci_low"], extra["ci_high"], extra["effect_abs"],
                                         extra["abs_ci_low"], extra["abs_ci_high"], units),
                         "ci_level": "", "direction": "", "equivalent": "", "only_when": ""})
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS).to_string(index=False)


def _level(value: Any) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else level_label(value)


def _effect_cells(pct: Any, low: Any, high: Any, diff: Any, diff_low: Any, diff_high: Any,
                  units: bool) -> dict[str, str]:
    """The effect and its interval: % changes, or differences in the metric's units (``units``)."""
    def text(value: Any, in_units: bool) -> str:
        if not is_number(value):
            return "-"
        return fmt_abs(value) if in_units else fmt_pct(value)

    values = (diff, diff_low, diff_high) if units else (pct, low, high)
    return dict(zip(("effect", "ci_low", "ci_high"), (text(v, units) for v in values)))


def screen_text(result: Any, levels: bool = False) -> str:
    """What ``tunelab screen`` prints: settings line, verdict table (every significant level with
    ``levels``), each verdict's reason, its post-hoc note and trade-off, the notes."""
    settings = result.settings
    baseline = ", ".join(f"{k}={v}" for k, v in settings["baseline"].items())
    lines = [f"screen: {settings['n_runs']} runs, {result.design} design, alpha={settings['alpha']}, "
             f"correction={settings['correction']}, baselines: {baseline}",
             verdict_table(result.verdicts, frozenset(m["name"] for m in settings["metrics"] if m.get("sesoi_abs")),
                           levels), ""]
    for row in result.verdicts.to_dict(orient="records"):
        lines.append(f"{row['knob']} × {row['metric']}: {row['reason']}")
        lines += [f"  {label}: {row[key]}" for key, label in (("posthoc_note", "post-hoc"), ("trade_off", "trade-off"))
                  if isinstance(row.get(key), str) and row.get(key)]
    lines += [f"note: {note}" for note in settings["notes"]]
    return printable("\n".join(lines))


def refine_text(run: Any) -> str:
    """What ``tunelab refine`` prints: counts, batches, the race, winner, Pareto set, confirmation."""
    result = run.result
    lines = [SYNTHETIC] if run.synthetic else []
    preset = f" (preset {result.preset})" if result.preset else ""
    lines.append(f"study {run.study}: {run.counts_text()}; engine {result.engine}{preset}, seed {result.seed}; "
                 f"store {run.store_path}")
    number = fmt_sig   # 4 significant digits, a whole number with separators from 5 digits: 10,250, never 1.025e+04
    if not result.batches.empty:
        cols = ["batch", "stage", "evaluations", "incumbent_mean", "best_mean", "baseline_mean"]
        lines.append(result.batches[cols].to_string(index=False, float_format=number))
    if not result.race.empty:
        lines.append("race (successive halving of the leaders; the better half by mean survives each round):")
        lines.append(result.race.to_string(index=False, float_format=number))
    lines.append("winner (best mean among the race's survivors):" if not result.race.empty else "winner (best mean):")
    lines += [f"  {kid} = {value}" for kid, value in result.winner.items()]
    if result.pareto is not None:
        lines.append(f"Pareto set ({len(result.pareto)} configurations by mean estimates):")
        lines.append(result.pareto.to_string(index=False, float_format=number))
    if run.note:
        lines.append(run.note)
    if run.confirmation is not None:
        lines.append(run.confirmation.summary())
    return "\n".join(lines)


def validate_text(run: Any) -> str:
    """What ``tunelab validate`` prints: both configurations, the verdict per profile and metric (with the
    failed trials and the first reason), then the sysctl.d files written or why none were."""
    lines = [SYNTHETIC] if run.synthetic else []
    lines += [f"baseline:  {run.confirmation.baseline}", f"candidate: {run.confirmation.candidate}", run.summary()]
    if run.sysctl is not None:
        lines += [f"sysctl.d file: {run.sysctl.paths['conf']}", f"rollback:      {run.sysctl.paths['rollback']}"]
    elif run.sysctl_note:
        lines.append(run.sysctl_note)
    return "\n".join(lines)


def knob_list(listing: Any, fmt: str) -> str:
    """``tunelab knobs list`` in ``fmt`` (table, csv or json), ending in a newline."""
    if fmt == "csv":
        return listing.table.to_csv(index=False)
    return (dumps(listing.to_json()) if fmt == "json" else knob_table(listing)) + "\n"


def knob_info(record: dict[str, Any]) -> str:
    """``tunelab knobs show``: one ``key  value`` line per field (empty ranges left out)."""
    width = max(len(key) for key in record)
    return "\n".join(f"{key:<{width}}  {value}" for key, value in record.items()
                     if not (key in ("minimum", "maximum", "choices") and value in (None, [])))


def knob_table(listing: Any) -> str:
    """``tunelab knobs list``'s table: yes/no columns, shortened notes, then the missing-knob line."""
    frame = listing.table
    shown = frame.assign(exists=frame["exists"].map({True: "yes", False: "no"}),
                         writable=frame["writable"].map({True: "yes", False: "no"}),
                         current=frame["current"].fillna("-"),
                         note=frame["note"].map(lambda text: shorten(text, NOTE_WIDTH)))
    return f"{shown.to_string(index=False, justify='left')}\n\n{listing.missing_summary()}"


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, ending in an ellipsis when cut."""
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def lab_status_text(status: dict[str, Any]) -> str:
    """``tunelab lab status`` as text: each lab, its namespaces and services, then stray namespaces."""
    lines = [] if status["labs"] else ["no labs"]
    for lab in status["labs"]:
        flags = ["detached" if lab["detached"] else f"owned by pid {lab['owner_pid']}"]
        if lab["orphan"]:
            flags.append("ORPHAN (owner died; `tunelab lab down` removes it)")
        lines.append(f"{lab['name']}: {', '.join(flags)}")
        lines += [f"  {role:<7} {ns['name']:<22} {'ok' if ns['exists'] else 'MISSING'}"
                  for role, ns in lab["namespaces"].items()]
        lines += [f"  service {name:<7} pid {svc['pid']:<8} {'alive' if svc['alive'] else 'DEAD'}"
                  for name, svc in lab["services"].items()]
        if lab["disk"]:
            lines.append(f"  disk    {lab['disk']}")
        if lab["options"].get("dns_server"):
            lines.append(f"  dns     {lab['options']['dns_server']} serving {lab['options'].get('zone')}")
    if status["orphan_namespaces"]:
        lines.append("namespaces without a lab: " + ", ".join(status["orphan_namespaces"]))
    return "\n".join(lines)


def lab_up_text(lab: Any) -> str:
    """``tunelab lab up``'s lines: the lab, its namespaces with addresses, the disk, how to remove it."""
    lines = [f"lab {lab.name} is up in {lab.up_s * 1000:.0f} ms"]
    lines += [f"  {role:<7} {ns}" + (f"  {lab.addresses[role]}" if role in lab.addresses else "")
              for role, ns in lab.namespaces.items()]
    if lab.disk:
        lines.append(f"  disk    /dev/{lab.disk}")
    lines.append(f"  dns     {lab.dns_server} serving {lab.zone} on {lab.addresses['server']} port 53")
    lines.append(f"query it from the client namespace: ip netns exec {lab.namespaces['client']} "
                 f"dnsperf -s {lab.addresses['server']} -d QUERY_FILE -l 10")
    lines.append(f"remove it with: tunelab lab down --name {lab.name}")
    return "\n".join(lines)
