"""The gallery of seed studies: one HTML table of the five papers' claims against what the lab measured.

``reports/seeds/index.html`` has one row per study (the paper, its claim and numbers, tunelab's effect
with its 95 % CI, verdict, agreement and why, and where the data came from); each study has its own page
``<study.name>/index.html`` with the figures (PNG files next to it), tables, notes, provenance, a copy of
each design it ran and, when built, a link to each store's full ``tunelab report``. Every link is
relative, the CSS is inline and there is no JavaScript, so the directory can be moved or served as is.
The pages are rendered from the Jinja2 templates ``gallery_index.html.j2`` and ``gallery_study.html.j2``
(:mod:`tunelab.report.rendering`, autoescaped), every number through :mod:`tunelab.formatting`.

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
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd
from markupsafe import Markup

from tunelab.errors import SeedError, TunelabError
from tunelab.formatting import fmt_number, fmt_sig
from tunelab.progress import StudyProgress
from tunelab.report.loading import foreign_load
from tunelab.report.rendering import render, table_html
from tunelab.report.tables import cell_texts
from tunelab.seeds import load_studies
from tunelab.seeds.arguments import DEFAULT_OUT, RECORDED, add_arguments
from tunelab.seeds.contract import SEED_STUDIES, FigureImage, RecordContext, SeedStudy, StudyPage, Table
from tunelab.store import Store
from tunelab.model import MeasurementKind, Phase, TrialStatus
#: the claim row's columns, on the index and on each study page
CLAIM_COLUMNS = ("Paper", "The paper's claim", "tunelab measured (95 % CI)", "Verdict", "Agreement", "Why")

# ---- provenance -------------------------------------------------------------------------------------


def busy_shares(trials: pd.DataFrame, nproc: int | None) -> pd.Series:
    """Per trial, the share of the machine (0..1) that other processes used while its load ran.

    ``foreign_cpu_s`` (the runner's window spans the load) over ``nproc`` CPUs times the load's own duration
    (the trial's ``timings["load"]``, else its wall time), through :func:`tunelab.report.loading.foreign_load`.
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
    (the trials' wall time: summed, except that the trials of duet pairs, which run at the same moment, count
    the wall-clock time they cover once: :func:`covered_seconds`), ``kernel``, ``nproc``, ``cpu_model`` (from the recorded target
    description, or a duet's sides), ``busy_pct``/``busy_max_pct`` (median and largest % of the machine other
    processes used during a trial's load), ``busy_trials`` (trials with a known share) and ``duet_trials``
    (trials of duet pairs: each side's foreign CPU time includes its partner's, so they have no share).
    """
    path = Path(path)
    with Store(path, readonly=True) as store:
        trials = store.trials()
        targets = store.run_targets()
        study = store.study.name if store.study else path.stem
    described = [side for t in targets if isinstance(t, Mapping) for side in (t, *(t.get("sides") or ()))
                 if isinstance(side, Mapping)]           # a duet's run describes each of its two sides
    machine = next((t for t in reversed(described) if t.get("kernel") or t.get("nproc")), {})
    nproc = machine.get("nproc") if isinstance(machine.get("nproc"), int) else None
    started = pd.to_datetime(trials["started_at"], utc=True, errors="coerce") if not trials.empty else pd.Series()
    ended = pd.to_datetime(trials["ended_at"], utc=True, errors="coerce") if not trials.empty else pd.Series()
    by_phase: dict[str, dict[str, int]] = {}
    for (phase, status), n in (trials.groupby(["phase", "status"]).size().items() if not trials.empty else ()):
        by_phase.setdefault(str(phase), {})[str(status)] = int(n)
    duet = trials["provenance"].map(lambda p: isinstance(p, Mapping) and MeasurementKind.DUET.value in p) if not trials.empty \
        else pd.Series(dtype=bool)
    share = busy_shares(trials[~duet.astype(bool)] if not trials.empty else trials, nproc)
    wall_s = (ended - started).dt.total_seconds() if not trials.empty else pd.Series(dtype=float)
    lab_s = float(wall_s[~duet.astype(bool)].sum()) + covered_seconds(started[duet.astype(bool)],
                                                                       ended[duet.astype(bool)])
    statuses = trials["status"].value_counts() if not trials.empty else pd.Series(dtype=int)
    return {
        "store": path.name, "study": study, "trials": int(len(trials)), "by_phase": by_phase,
        "ok": int(statuses.get("ok", 0)), "failed": int(statuses.get("failed", 0)),
        "first": started.min().isoformat() if started.notna().any() else None,
        "last": ended.max().isoformat() if ended.notna().any() else None,
        "lab_minutes": round(lab_s / 60, 2),
        "kernel": machine.get("kernel"), "nproc": nproc, "cpu_model": machine.get("cpu_model"),
        "busy_pct": round(100 * float(share.median()), 1) if not share.empty else None,
        "busy_max_pct": round(100 * float(share.max()), 1) if not share.empty else None,
        "busy_trials": int(len(share)), "duet_trials": int(duet.sum()),
    }


def covered_seconds(started: pd.Series, ended: pd.Series) -> float:
    """Seconds of wall-clock time the intervals ``[started, ended]`` cover, overlaps counted once (the two
    trials of a duet pair run at the same moment); intervals without both times are left out.

    >>> t = pd.to_datetime(pd.Series(["2026-01-02T10:00:00Z", "2026-01-02T10:00:01Z", "2026-01-02T10:01:00Z"]))
    >>> covered_seconds(t, t + pd.to_timedelta([10, 10, 5], unit="s"))
    16.0
    """
    frame = pd.DataFrame({"start": started, "end": ended}).dropna().sort_values("start")
    total, reach = 0.0, None
    for start, end in zip(frame["start"], frame["end"]):
        if reach is None or start > reach:
            total, reach = total + (end - start).total_seconds(), end
        elif end > reach:
            total, reach = total + (end - reach).total_seconds(), end
    return total


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
    phases = "; ".join(f"{phase}: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items(), key=lambda kv: (kv[0] != TrialStatus.OK, kv[0])))
                       for phase, counts in (prov.get("by_phase") or {}).items())
    text = f"{prov.get('store', '?')}: {prov.get('trials', 0)} trials" + (f" ({phases})" if phases else "")
    if prov.get("lab_minutes") is not None:
        text += f", {fmt_sig(prov['lab_minutes'])} lab minutes"
    if prov.get("first"):
        text += f", recorded {_when(prov['first'])} to {_when(prov.get('last') or prov['first'])} UTC"
    if prov.get("kernel"):
        text += f" on Linux {prov['kernel']}" + (f" ({prov['nproc']} CPUs)" if prov.get("nproc") else "")
    if prov.get("busy_pct") is not None:
        text += (f"; busy share: other processes used a median {fmt_number(prov['busy_pct'], 0)} % of the machine "
                 f"during a trial (max {fmt_number(prov.get('busy_max_pct', prov['busy_pct']), 0)} %)")
    elif prov.get("duet_trials"):
        text += "; busy share: not measured in duet pairs (each side's foreign CPU time includes its partner's)"
    else:
        text += "; busy share: not recorded"
    return text


def _when(iso: str) -> str:
    stamp = pd.Timestamp(iso)
    stamp = stamp.tz_convert("UTC") if stamp.tzinfo else stamp
    return stamp.strftime("%Y-%m-%d %H:%M")


# ---- HTML (templates gallery_index.html.j2, gallery_study.html.j2 in tunelab/report/templates) ----------


def _claim_row(study: SeedStudy, page: StudyPage, href: str | None = None,
               provenance: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """What the claim row shows for ``study`` (text only; the template escapes it)."""
    m = page.measured
    return {"key": study.key, "name": f"{study.key}: {study.title}", "title": study.title, "href": href,
            "paper": study.paper, "claim": study.claim.text, "numbers": study.claim.numbers,
            "where": study.claim.where, "effect": m.effect, "verdict": m.verdict, "agreement": m.agreement,
            "why": m.why, "provenance": [provenance_text(p) for p in provenance]}


def _provenance_of(page: StudyPage) -> list[dict[str, Any]]:
    """Each of the page's stores' provenance read here (so every study shows the same facts, busy share
    included), over what the study itself gave for that store; the study's entries for other stores follow."""
    given = {str(p.get("store")): dict(p) for p in page.provenance if isinstance(p, Mapping)}
    read = [{**given.pop(Path(p).name, {}), **store_provenance(p)} for p in page.stores if Path(p).is_file()]
    return read + list(given.values())


def frame_html(frame: pd.DataFrame) -> str:
    """A study page's table: every number through :mod:`tunelab.formatting` (significant digits, p-values,
    rounding noise as 0), in the report's table template."""
    return str(table_html(frame.columns, cell_texts(frame)))


def _figure_file(directory: Path, number: int, figure: FigureImage) -> dict[str, Any]:
    """Write ``figure`` as ``fig-<number>.png`` in ``directory``; what the template shows of it."""
    name = f"fig-{number}.png"
    (directory / name).write_bytes(figure.png)
    return {"src": name, "number": number, "alt": figure.alt, "caption": figure.caption}


def _tables(tables: Iterable[Table]) -> list[dict[str, Any]]:
    return [{"caption": t.caption, "html": Markup(frame_html(t.frame))} for t in tables]


def _study_page(study: SeedStudy, page: StudyPage, directory: Path, provenance: list[dict[str, Any]],
                reports: Sequence[Path]) -> str:
    """Write the figures and design copies of one study into ``directory``; return its page."""
    shown = [*page.figures, *(figure for section in page.sections for figure in section.figures)]
    images = [_figure_file(directory, number, figure) for number, figure in enumerate(shown, start=1)]
    figures, rest = images[:len(page.figures)], iter(images[len(page.figures):])
    sections = [{"title": section.title, "paragraphs": list(section.paragraphs),
                 "figures": [next(rest) for _ in section.figures], "tables": _tables(section.tables)}
                for section in page.sections]
    recorded = recorded_designs(page.stores)
    designs = [_copy_design(design, recorded, directory) for design in map(Path, study.designs)]
    return str(render(
        "gallery_study.html.j2", title=f"{study.key}: {study.title}", columns=CLAIM_COLUMNS,
        row=_claim_row(study, page), figures=figures, designs=designs, notes=list(page.notes),
        tables=_tables(page.tables), sections=sections, provenance=[provenance_text(p) for p in provenance],
        reports=[{"href": Path(os.path.relpath(r, directory)).as_posix(), "name": Path(r).parent.name}
                 for r in reports]))


def recorded_designs(stores: Iterable[str | os.PathLike[str]]) -> dict[str, tuple[str, str]]:
    """Study name -> (the design text it recorded, the store's file name), for each store that holds a YAML
    design (a validate store keeps JSON instead), read without changing it."""
    out: dict[str, tuple[str, str]] = {}
    for path in map(Path, stores):
        if not path.is_file():
            continue
        with Store(path, readonly=True) as store:
            info = store.study
        if info is not None and info.design_text.strip() and not info.design_text.lstrip().startswith("{"):
            out.setdefault(info.name, (info.design_text, path.name))
    return out


def _copy_design(design: Path, recorded: Mapping[str, tuple[str, str]], directory: Path) -> dict[str, Any]:
    """Put a study's design beside its page: as a store recorded it (what the page's numbers come from; the file in
    designs/seeds may have changed since), else the file itself; the template's row for it."""
    name = _design_name(design)
    if name in recorded:
        text, store = recorded[name]
        (directory / design.name).write_text(text, encoding="utf-8")
        return {"name": design.name, "copied": True, "source": f"the design as recorded in {store}"}
    if design.is_file():
        shutil.copyfile(design, directory / design.name)
        return {"name": design.name, "copied": True, "source": f"a copy of designs/seeds/{design.name}"}
    return {"name": design.name, "copied": False, "source": ""}


def _design_name(design: Path) -> str | None:
    """The ``name:`` of a design file (None when it cannot be read)."""
    import yaml

    try:
        data = yaml.safe_load(design.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    return str(data.get("name")) if isinstance(data, Mapping) and data.get("name") is not None else None


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
        html = _study_page(study, page, directory, provenance, list((reports or {}).get(study.name, ())))
        (directory / "index.html").write_text(html, encoding="utf-8")
        rows.append(_claim_row(study, page, f"{study.name}/index.html", provenance))
    index = out / "index.html"
    index.write_text(str(render("gallery_index.html.j2", title="tunelab seed studies", columns=CLAIM_COLUMNS,
                                rows=rows)), encoding="utf-8")
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
    with StudyProgress("gallery", expected=[len(studies)], units="pages", statuses=()) as shown:
        for study in studies:
            page = study.page(stores)
            if full_reports:
                reports[study.name] = _full_reports(study, page, Path(out_dir), echo)
            pairs.append((study, page))
            shown.step(f"{study.name} built")
    return write_gallery(pairs, out_dir, reports)


def _full_reports(study: SeedStudy, page: StudyPage, out_dir: Path, echo: Callable[[str], None]) -> list[Path]:
    import tunelab

    built = []
    for store in page.stores:
        store = Path(store)
        if Phase.SCREEN not in phases_of(store):
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


__all__ = ["CLAIM_COLUMNS", "DEFAULT_OUT", "add_arguments", "build_gallery", "busy_shares", "covered_seconds",
           "gallery_command", "provenance_text", "record_studies", "select_studies", "store_provenance", "write_gallery"]
