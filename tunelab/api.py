"""The Python API: one function per CLI verb, with the same defaults.

The CLI verbs are thin wrappers around these functions, so a notebook or a script gets exactly
what ``tunelab plan|run|screen|report`` print.

Examples
--------
>>> import tunelab
>>> design, plan, summary = tunelab.plan("designs/default.yaml")       # doctest: +SKIP
>>> summary["runs"], summary["estimated_wall_s"]                       # doctest: +SKIP
(45, 422.0)
>>> outcome = tunelab.run("designs/default.yaml")                      # doctest: +SKIP
>>> result = tunelab.screen("default")                                 # doctest: +SKIP
>>> result.verdicts[["knob", "metric", "verdict"]]                     # doctest: +SKIP
>>> tunelab.report("default")                                          # doctest: +SKIP
PosixPath('reports/default/index.html')
"""
from __future__ import annotations

import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, Sequence
from contextlib import contextmanager

import tunelab.simulator  # noqa: F401 - registers the SYNTHETIC "simulator" target
from tunelab.signals import sigterm_interrupts

import pandas as pd

PathLike = str | os.PathLike[str]


def plan(design_path: PathLike) -> tuple[Any, pd.DataFrame, dict[str, Any]]:
    """Validate a design file and return ``(design, plan, summary)`` without touching any machine.

    ``plan`` is the tidy run plan (one row per run, in run order); ``summary`` holds the run
    count, the knobs touched with their scope, restarts and the estimated wall time
    (the JSON of ``tunelab plan --format json``, minus the plan rows).
    """
    from tunelab.designs import load_design, make_plan, plan_summary

    design = load_design(design_path)
    frame = make_plan(design)
    return design, frame, plan_summary(design, frame)


def target_spec_for(design: Any, override: str | None = None) -> dict[str, Any]:
    """The target to build: the design's, or ``override`` (keeping options only for the same type)."""
    from tunelab.runner import target_spec_of

    spec = target_spec_of(design)
    if override and override != spec["type"]:
        spec = {"type": override, "options": {}, "allow_host_global": spec["allow_host_global"]}
    return spec


def run(design_path: PathLike, *, target: str | None = None, store: PathLike | None = None,
        allow_host_global: bool = False, progress: bool = True, retry_failed: bool = False,
        allow_design_commands: bool = False) -> Any:
    """Run a design's plan on its target (or ``target``) and record every trial in the store.

    Resumes: trials already recorded are skipped. Target options that run commands (e.g.
    ``service_commands``) are refused unless ``allow_design_commands`` (``--allow-design-commands``).
    Returns the runner's ``RunSummary`` (counts,
    wall time, store path, failures). See ``tunelab run --help`` for the safety rules.
    """
    from tunelab.designs import load_design
    from tunelab.runner import run_design
    from tunelab.leases import check_crashed_runs, lease, sweep
    from tunelab.journal import remove_orphan_labs
    from tunelab.store import Store, default_store_path
    from tunelab.targets import build_target, check_target_spec

    design = load_design(design_path)
    spec = target_spec_for(design, target)
    target_cls = check_target_spec(spec, allow_commands=allow_design_commands)   # refuses before the store opens
    path = Path(store) if store is not None else default_store_path(design.name)
    dry = bool(getattr(target_cls, "writes_nothing", False))
    with sigterm_interrupts(), _run_store(path, dry) as path, lease(path):
        for name in remove_orphan_labs():
            print(f"removed orphaned lab {name} (its run had died)", file=sys.stderr)
        if not dry:
            check_crashed_runs(own_store=path)
        with Store.open(path, study=design.name, design_hash=design.design_hash,
                        design_text=Path(design_path).read_text(),
                        target_spec={"type": spec["type"], "options": spec["options"]}) as opened:
            with build_target(spec, allow_commands=allow_design_commands) as live:
                summary = run_design(design, live, opened, allow_host_global=allow_host_global,
                                     progress=progress, retry_failed=retry_failed)
        sweep()                       # a crashed run of this study, now recovered, leaves no lease
    summary.recorded = not dry
    return summary


@contextmanager
def _run_store(path: Path, dry: bool) -> Iterator[Path]:
    """The store a run records into: ``path``, or for a dry run a throw-away one in a private temp dir.

    A dry run must never write the real store: its (unmeasured) trials would count as done and
    the later real run would skip them.
    """
    if not dry:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="tunelab-dry-run-") as private:   # mode 0700
        yield Path(private) / path.name


def screen(source: PathLike, *, metrics: Sequence[str] = (), knobs: Sequence[str] = (),
           baselines: Sequence[str] = (), alpha: float | None = None, correction: str | None = None,
           n_boot: int = 1000, seed: int = 0, include_flagged: bool = False,
           data_dir: PathLike = "data") -> Any:
    """Screen a study (name or ``.sqlite`` path) or a tidy CSV; return a ``ScreenResult``.

    ``metrics`` are ``NAME[:max|:min][:SESOI]`` strings, ``baselines`` ``COL=VALUE`` strings, as
    on the command line; for a study they default to the stored design's.
    """
    from tunelab.tidy import screen_inputs
    from tunelab.stats import screen as run_screen

    data, metric_specs, knob_ids, baseline, alpha_used, correction_used = screen_inputs(
        source, metrics=metrics, knobs=knobs, baselines=baselines, alpha=alpha, correction=correction,
        include_flagged=include_flagged, data_dir=data_dir)
    return run_screen(data, metric_specs, knob_ids, baseline, alpha=alpha_used, correction=correction_used,
                      n_boot=n_boot, seed=seed)


def report(study: PathLike, **options: Any) -> Path:
    """Execute the notebooks for a study and write ``reports/<study>/index.html``; return its path.

    Options are those of :func:`tunelab.report.build_report`.
    """
    from tunelab.report import build_report
    from tunelab.store import store_path_for

    return build_report(store_path_for(study, options.pop("data_dir", "data")), **options)
