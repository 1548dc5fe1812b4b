"""``tunelab run DESIGN``: run a design's plan on a target and record every trial in the store.

The store is ``data/<study>.sqlite`` unless ``--store`` says otherwise. Running the same design
again resumes: trials already recorded (ok, flagged or failed) are skipped, trials cut short by
a crash or Ctrl-C are run again. Host-global knobs (vm.*, fs.*, kernel.*, most net.core.*) are
refused unless the design sets ``target: {allow_host_global: true}`` or ``--allow-host-global``
is given. Ctrl-C (or SIGTERM) puts the current trial's knobs back before exiting; after a hard
crash, ``tunelab restore STUDY`` does it.

Exit status: 0 when no trial failed, 1 when some did (the summary names them), 2 on errors.
"""
from __future__ import annotations

import argparse
import signal
from pathlib import Path
from typing import Any

from tunelab.store import Store, default_store_path


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("run", help="run a design's trials on a target into the store",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("design", metavar="DESIGN", help="design file (YAML)")
    parser.add_argument("--target", metavar="TYPE",
                        help="override the design's target type (lab, local, ssh, dry-run); the design's target "
                             "options are used only when the type is the same")
    parser.add_argument("--allow-host-global", action="store_true",
                        help="permit host-global knobs (they change the whole machine; all changes are journalled)")
    parser.add_argument("--store", metavar="PATH", type=Path, help="trial store (default: data/<study>.sqlite)")
    parser.add_argument("--retry-failed", action="store_true", help="run failed trials again on resume")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def target_spec_for(design: Any, override: str | None) -> dict[str, Any]:
    """The target to build: the design's, or ``override`` (keeping options only for the same type)."""
    from tunelab.runner import target_spec_of

    spec = target_spec_of(design)
    if override and override != spec["type"]:
        spec = {"type": override, "options": {}, "allow_host_global": spec["allow_host_global"]}
    return spec


def _sigterm_as_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    from tunelab.designs import load_design
    from tunelab.runner import run_design
    from tunelab.targets import get_target

    design = load_design(args.design)
    spec = target_spec_for(design, args.target)
    target_cls = get_target(spec["type"])
    path = args.store or default_store_path(design.name)
    previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        with Store.open(path, study=design.name, design_hash=design.design_hash,
                        design_text=Path(args.design).read_text(),
                        target_spec={"type": spec["type"], "options": spec["options"]}) as store:
            with target_cls(**spec["options"]) as target:
                summary = run_design(design, target, store, allow_host_global=args.allow_host_global,
                                     progress=not args.no_progress, retry_failed=args.retry_failed)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if summary.skipped:
        print(f"resumed: {summary.skipped} of {summary.planned} trials were already done and were skipped")
    print(summary)
    return 1 if summary.failed else 0
