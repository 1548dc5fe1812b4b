"""The gallery of seed studies: one HTML table of the five papers' claims against what the lab measured.

``reports/seeds/index.html`` has one row per study (the paper, its claim and numbers, tunelab's effect
with its 95 % CI, verdict, agreement and why, and where the data came from); each study has its own page
``<study.name>/index.html`` with the figures (PNG files next to it), tables, notes, provenance, a copy of
each design it ran and, when built, a link to each store's full ``tunelab report``. Every link is
relative, the CSS is inline and there is no JavaScript, so the directory can be moved or served as is.

==========================  ===================================================================
:func:`store_provenance`    a store's trials, times, lab minutes, machine and busy share
:func:`write_gallery`       (study, page) pairs -> ``index.html`` and one page per study
:func:`build_gallery`       recorded stores -> pages (``study.page``) -> the gallery
:func:`record_studies`      run each selected study's ``record`` on the lab (resumes)
:func:`add_arguments`,      the arguments and body of ``tunelab gallery`` and ``python -m
:func:`gallery_command`     tunelab.seeds`` (the CLI module only parses and prints)
==========================  ===================================================================
"""
from __future__ import annotations

import argparse
import html
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from tunelab.errors import SeedError, TunelabError
from tunelab.report.methods import foreign_load
from tunelab.seeds import load_studies
from tunelab.seeds.arguments import DEFAULT_OUT, RECORDED, add_arguments
from tunelab.seeds.study import SEED_STUDIES, RecordContext, SeedStudy, StudyPage
from tunelab.store import Store
#: the claim row's columns, on the index and on each study page
CLAIM_COLUMNS = ("Paper", "The paper's claim", "tunelab measured (95 % CI)", "Verdict", "Agreement", "Why")

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 78rem;
       padding: 0 1rem; color: #1d232a; line-height: 1.45; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #d0d7de; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.92rem; }
th, td { border: 1px solid #d0d7de; padding: 0.35rem 0.55rem; vertical-align: top; text-align: left; }
th { background: #f3f5f7; }
table.claims td:nth-child(2), table.claims td:nth-child(6) { max-width: 22rem; }
table.claims td.provenance { min-width: 14rem; }
.numbers, .where, .provenance, figcaption, .small { color: #4b5661; font-size: 0.86rem; }
.agreement { font-weight: 600; white-space: nowrap; }
.agrees { color: #1a7f37; } .partly { color: #9a6700; } .differs { color: #cf222e; } .not-testable { color: #57606a; }
figure { margin: 1rem 0; } figure img { max-width: 100%; border: 1px solid #e1e4e8; }
.frame { overflow-x: auto; } caption { caption-side: top; text-align: left; font-weight: 600; padding: 0.3rem 0; }
"""


# ---- provenance -------------------------------------------------------------------------------------


def busy_shares(trials: pd.DataFrame, nproc: int | None) -> pd.Series:
    """Per trial, the share of the machine (0..1) that other processes used while its load ran.

    ``foreign_cpu_s`` (the runner's window spans the load) over ``nproc`` CPUs times the load's own duration
    (the trial's ``timings["load"]``, else its wall time), through :func:`tunelab.report.methods.foreign_load`.
    """
    if trials.empty or "foreign_cpu_s" not in trials.columns:
        return pd.Series(dtype=float)
    load_s = pd.Series([_load_seconds(row) for row in trials.to_dict("records")], index=trials.index, dtype=float)
    cpu_per_cpu = foreign_load(trials[["foreign_cpu_s"]], nproc or 1, 1.0)   # CPU-seconds per CPU
    share = cpu_per_cpu / load_s.reindex(cpu_per_cpu.index)
    return share[share.notna() & (load_s.reindex(share.index) > 0)]


def _load_seconds(row: Mapping[str, Any]) -> float:
    timings = row.get("timings") or {}
    load = timings.get("load") if isinstance(timings, Mapping) else None
    if isinstance(load, (int, float)) and load > 0:
        return float(load)
    started, ended = row.get("started_at"), row.get("ended_at")
    if started and ended:
        return (pd.Timestamp(ended) - pd.Timestamp(started)).total_seconds()
    return float("nan")


def store_provenance(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Where a store's data came from, read without changing it.

    Returns
    -------
    dict with ``store`` (file name), ``study``, ``trials`` (total), ``by_phase`` ({phase: {status: n}}),
    ``ok``, ``failed``, ``first``/``last`` (ISO times of the first start and last end), ``lab_minutes``
    (sum of the trials' wall time), ``kernel``, ``nproc``, ``cpu_model`` (from the recorded target
    description), ``busy_pct``/``busy_max_pct`` (median and largest % of the machine other processes used
    during a trial's load) and ``busy_trials`` (trials with a known share).
    """
    path = Path(path)
    with Store(path, readonly=True) as store:
        trials = store.trials()
        targets = store.run_targets()
        study = store.study.name if store.study else path.stem
    machine = next((t for t in reversed(targets) if t.get("kernel") or t.get("nproc")), {})
    nproc = machine.get("nproc") if isinstance(machine.get("nproc"), int) else None
    started = pd.to_datetime(trials["started_at"], utc=True, errors="coerce") if not trials.empty else pd.Series()
    ended = pd.to_datetime(trials["ended_at"], utc=True, errors="coerce") if not trials.empty else pd.Series()
    wall_s = (ended - started).dt.total_seconds().dropna() if not trials.empty else pd.Series(dtype=float)
    by_phase: dict[str, dict[str, int]] = {}
    for (phase, status), n in (trials.groupby(["phase", "status"]).size().items() if not trials.empty else ()):
        by_phase.setdefault(str(phase), {})[str(status)] = int(n)
    share = busy_shares(trials, nproc)
    statuses = trials["status"].value_counts() if not trials.empty else pd.Series(dtype=int)
    return {
        "store": path.name, "study": study, "trials": int(len(trials)), "by_phase": by_phase,
        "ok": int(statuses.get("ok", 0)), "failed": int(statuses.get("failed", 0)),
        "first": started.min().isoformat() if started.notna().any() else None,
        "last": ended.max().isoformat() if ended.notna().any() else None,
        "lab_minutes": round(float(wall_s.sum()) / 60, 2),
        "kernel": machine.get("kernel"), "nproc": nproc, "cpu_model": machine.get("cpu_model"),
        "busy_pct": round(100 * float(share.median()), 1) if not share.empty else None,
        "busy_max_pct": round(100 * float(share.max()), 1) if not share.empty else None,
        "busy_trials": int(len(share)),
    }


def phases_of(path: str | os.PathLike[str]) -> set[str]:
    """The phases of the trials in a store (read-only)."""
    with Store(path, readonly=True) as store:
        trials = store.trials()
    return set(trials["phase"]) if not trials.empty else set()


def provenance_text(prov: Mapping[str, Any]) -> str:
    """One line of provenance in words (plain text; escape it for HTML).

    >>> provenance_text({"store": "s.sqlite", "trials": 4, "by_phase": {"screen": {"ok": 3, "failed": 1}},
    ...                  "lab_minutes": 0.5, "first": "2026-01-02T10:00:00+00:00", "last": "2026-01-02T10:01:00+00:00",
    ...                  "kernel": "6.18", "nproc": 2, "busy_pct": 12.5, "busy_max_pct": 40.0})
    's.sqlite: 4 trials (screen: 3 ok, 1 failed), 0.5 lab minutes, recorded 2026-01-02 10:00 to 2026-01-02 10:01 UTC on Linux 6.18 (2 CPUs); busy share: other processes used a median 12 % of the machine during a trial (max 40 %)'
    """
    phases = "; ".join(f"{phase}: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items(), key=lambda kv: (kv[0] != "ok", kv[0])))
                       for phase, counts in (prov.get("by_phase") or {}).items())
    text = f"{prov.get('store', '?')}: {prov.get('trials', 0)} trials" + (f" ({phases})" if phases else "")
    if prov.get("lab_minutes") is not None:
        text += f", {prov['lab_minutes']:g} lab minutes"
    if prov.get("first"):
        text += f", recorded {_when(prov['first'])} to {_when(prov.get('last') or prov['first'])} UTC"
    if prov.get("kernel"):
        text += f" on Linux {prov['kernel']}" + (f" ({prov['nproc']} CPUs)" if prov.get("nproc") else "")
    if prov.get("busy_pct") is not None:
        text += (f"; busy share: other processes used a median {prov['busy_pct']:.0f} % of the machine during a "
                 f"trial (max {prov.get('busy_max_pct', prov['busy_pct']):.0f} %)")
    else:
        text += "; busy share: not recorded"
    return text


def _when(iso: str) -> str:
    stamp = pd.Timestamp(iso)
    stamp = stamp.tz_convert("UTC") if stamp.tzinfo else stamp
    return stamp.strftime("%Y-%m-%d %H:%M")


# ---- HTML ---------------------------------------------------------------------------------------------


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _document(title: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{_e(title)}</title>"
            f"<style>{STYLE}</style></head>\n<body>\n{body}\n</body></html>\n")


def _claim_cells(study: SeedStudy, page: StudyPage, paper_href: str | None) -> str:
    name = f"{study.key}: {study.title}"
    paper = f'<a href="{_e(paper_href)}">{_e(name)}</a>' if paper_href else _e(name)
    m = page.measured
    return (f"<td class=\"paper\">{paper}<div class=\"small\">{_e(study.paper)}</div></td>"
            f"<td class=\"claim\">{_e(study.claim.text)}<div class=\"numbers\">{_e(study.claim.numbers)}</div>"
            f"<div class=\"where\">{_e(study.claim.where)}</div></td>"
            f"<td class=\"effect\">{_e(m.effect)}</td><td class=\"verdict\">{_e(m.verdict)}</td>"
            f"<td class=\"agreement {_e(m.agreement.replace(' ', '-'))}\">{_e(m.agreement)}</td>"
            f"<td class=\"why\">{_e(m.why)}</td>")


def _claim_table(rows: Iterable[str], extra_header: str = "") -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in CLAIM_COLUMNS) + extra_header
    return f"<table class=\"claims\"><thead><tr>{head}</tr></thead><tbody>\n" + "\n".join(rows) + "\n</tbody></table>"


def _provenance_of(page: StudyPage) -> list[dict[str, Any]]:
    """Each of the page's stores' provenance read here (so every study shows the same facts, busy share
    included), over what the study itself gave for that store; the study's entries for other stores follow."""
    given = {str(p.get("store")): dict(p) for p in page.provenance if isinstance(p, Mapping)}
    read = [{**given.pop(Path(p).name, {}), **store_provenance(p)} for p in page.stores if Path(p).is_file()]
    return read + list(given.values())


def _frame_html(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, escape=True, na_rep="", border=0, classes="table",
                         float_format=lambda v: f"{v:.4g}")


def _study_page(study: SeedStudy, page: StudyPage, directory: Path, provenance: list[dict[str, Any]],
                reports: Sequence[Path]) -> str:
    """Write the figures and design copies of one study into ``directory``; return its HTML body."""
    parts = ["<p class=\"small\"><a href=\"../index.html\">All seed studies</a></p>",
             f"<h1>{_e(study.key)}: {_e(study.title)}</h1>",
             _claim_table([f"<tr class=\"claim-row\" data-study=\"{_e(study.key)}\">"
                           f"{_claim_cells(study, page, None)}</tr>"])]
    if page.figures:
        parts.append("<h2>Figures</h2>")
    for number, figure in enumerate(page.figures, start=1):
        name = f"fig-{number}.png"
        (directory / name).write_bytes(figure.png)
        parts.append(f"<figure><img src=\"{name}\" alt=\"{_e(figure.alt)}\">"
                     f"<figcaption>Figure {number}. {_e(figure.caption)}</figcaption></figure>")
    if page.tables:
        parts.append("<h2>Tables</h2>")
    for table in page.tables:
        parts.append(f"<div class=\"frame\"><p class=\"caption\"><strong>{_e(table.caption)}</strong></p>"
                     f"{_frame_html(table.frame)}</div>")
    if page.notes:
        parts.append("<h2>Notes</h2><ul>"
                     + "".join(f"<li>{_e(note)}</li>" for note in page.notes) + "</ul>")
    parts.append("<h2>Provenance</h2><ul class=\"provenance\">"
                 + ("".join(f"<li>{_e(provenance_text(p))}</li>" for p in provenance) or "<li>no store read</li>")
                 + "</ul>")
    designs = []
    for design in study.designs:
        design = Path(design)
        if design.is_file():
            shutil.copyfile(design, directory / design.name)
            designs.append(f"<li><a href=\"{_e(design.name)}\">{_e(design.name)}</a> (a copy of designs/seeds/"
                           f"{_e(design.name)})</li>")
        else:
            designs.append(f"<li>{_e(design.name)} (not found when the gallery was built)</li>")
    parts.append("<h2>Designs</h2><ul>" + "".join(designs) + "</ul>")
    if reports:
        parts.append("<h2>Full reports</h2><ul>" + "".join(
            f"<li><a href=\"{_e(Path(os.path.relpath(r, directory)).as_posix())}\">{_e(Path(r).parent.name)}</a>"
            "</li>" for r in reports) + "</ul>")
    return "\n".join(parts)


def write_gallery(studies_and_pages: Sequence[tuple[SeedStudy, StudyPage]], out_dir: str | os.PathLike[str],
                  reports: Mapping[str, Sequence[Path]] | None = None) -> Path:
    """Write ``out_dir/index.html`` (one claim row per study) and ``out_dir/<study.name>/index.html``.

    Parameters
    ----------
    studies_and_pages : each study with its page, in the order of the table.
    out_dir : the gallery's directory (created).
    reports : study name -> the ``index.html`` of each full report built for its stores (linked).

    Returns
    -------
    Path of ``out_dir/index.html``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for study, page in studies_and_pages:
        directory = out / study.name
        directory.mkdir(parents=True, exist_ok=True)
        provenance = _provenance_of(page)
        body = _study_page(study, page, directory, provenance, list((reports or {}).get(study.name, ())))
        (directory / "index.html").write_text(_document(f"{study.key}: {study.title}", body), encoding="utf-8")
        recorded = "<br>".join(_e(provenance_text(p)) for p in provenance) or "no store read"
        rows.append(f"<tr class=\"claim-row\" data-study=\"{_e(study.key)}\">"
                    f"{_claim_cells(study, page, f'{study.name}/index.html')}"
                    f"<td class=\"provenance\">{recorded}</td></tr>")
    body = ("<h1>tunelab: five papers' claims, measured again</h1>"
            "<p>Each row is a source paper: what it claims, in its own numbers, against what tunelab measured in its "
            "lab (effect with a 95 % confidence interval, the verdict, and whether the lab agrees, and why). Open a "
            "paper for its figures, tables, designs and data provenance.</p>"
            + _claim_table(rows, "<th>Recorded</th>")
            + "<p class=\"small\">Busy share: the median and largest share of the machine that other processes used "
              "while a trial's load ran; large shares widen the intervals.</p>")
    index = out / "index.html"
    index.write_text(_document("tunelab seed studies", body), encoding="utf-8")
    return index


# ---- building and recording ---------------------------------------------------------------------------


def select_studies(only: Iterable[str] | None = None) -> list[SeedStudy]:
    """The studies with the keys in ``only`` (all when empty), in key order; SeedError names the known keys."""
    load_studies()
    keys = list(dict.fromkeys(only or ()))
    unknown = [key for key in keys if key not in SEED_STUDIES]
    if unknown:
        raise SeedError(f"unknown seed study {', '.join(map(repr, unknown))}: known studies are "
                        f"{', '.join(SEED_STUDIES.names()) or '(none)'}; pass --only KEY")
    return [SEED_STUDIES.get(key) for key in (sorted(keys) if keys else SEED_STUDIES.names())]


def _check_stores_dir(stores: Path) -> None:
    if not stores.is_dir():
        raise SeedError(f"no stores directory {stores}: record the studies with `tunelab gallery --record --stores "
                        f"{stores}` or point --stores at the recorded ones ({RECORDED})")


def build_gallery(stores: str | os.PathLike[str], out_dir: str | os.PathLike[str], only: Iterable[str] | None = None,
                  full_reports: bool = False, echo: Callable[[str], None] = print) -> Path:
    """Each selected study's page from the recorded ``stores`` (and, with ``full_reports``, each store's
    ``tunelab report`` into ``out_dir/<name>/report/<store stem>/``), then :func:`write_gallery`.

    A missing store is one SeedError line saying how to record it; a full report that cannot be built is
    left out of its study's page (a note on the page says why).
    """
    stores = Path(stores)
    _check_stores_dir(stores)
    studies = select_studies(only)
    pairs: list[tuple[SeedStudy, StudyPage]] = []
    reports: dict[str, list[Path]] = {}
    for study in studies:
        page = study.page(stores)
        if full_reports:
            reports[study.name] = _full_reports(study, page, Path(out_dir), echo)
        pairs.append((study, page))
    return write_gallery(pairs, out_dir, reports)


def _full_reports(study: SeedStudy, page: StudyPage, out_dir: Path, echo: Callable[[str], None]) -> list[Path]:
    import tunelab

    built = []
    for store in page.stores:
        store = Path(store)
        if "screen" not in phases_of(store):
            page.notes.append(f"{store.name} holds no screen trials (a search or a validation, shown on this page), "
                              "so it has no full report of its own.")
            continue
        target = out_dir / study.name / "report" / store.stem
        echo(f"{study.name}: full report of {store.name} -> {target}")
        try:
            built.append(Path(tunelab.report(store, target).index))
        except TunelabError as exc:
            note = f"No full report for {store.name}: {' '.join(str(exc).splitlines())}"
            echo(f"{study.name}: {note}")
            page.notes.append(note)
    return built


def record_studies(stores: str | os.PathLike[str], only: Iterable[str] | None = None, scale: float = 1.0,
                   target: str | None = None, echo: Callable[[str], None] = print) -> list[Path]:
    """Record each selected study into ``stores`` with its ``record`` (stores resume when run again).

    Returns the store paths the studies wrote, in order.
    """
    if not 0 < scale <= 1:
        raise SeedError(f"--scale must be above 0 and at most 1 (1 records the studies as designed), got {scale:g}")
    studies = select_studies(only)
    written: list[Path] = []
    for study in studies:
        echo(f"{study.name}: recording (about {study.minutes:g} lab minutes at scale 1) into {stores}")
        started = time.monotonic()
        ctx = RecordContext(stores=Path(stores), scale=scale, target=target, echo=echo)
        written.extend(Path(p) for p in study.record(ctx))
        echo(f"{study.name}: recorded in {(time.monotonic() - started) / 60:.1f} minutes")
    return written


# ---- the command (tunelab gallery, python -m tunelab.seeds) -------------------------------------------


def gallery_command(args: argparse.Namespace, echo: Callable[[str], None] = print) -> Path:
    """Record (``--record``), then build the gallery (full reports unless ``--quick``); return index.html."""
    select_studies(args.only)                     # an unknown key stops before anything runs
    if args.record:
        record_studies(args.stores, args.only, scale=args.scale, target=args.target, echo=echo)
    return build_gallery(args.stores, args.out, args.only, full_reports=not args.quick, echo=echo)


__all__ = ["CLAIM_COLUMNS", "DEFAULT_OUT", "add_arguments", "build_gallery", "busy_shares", "gallery_command",
           "provenance_text", "record_studies", "select_studies", "store_provenance", "write_gallery"]
