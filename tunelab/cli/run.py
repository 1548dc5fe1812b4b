"""``tunelab run DESIGN``: run a design's plan on a target and record every trial in the store.

The store is ``data/<study>.sqlite`` unless ``--store`` says otherwise. Running the same design
again resumes: trials already recorded (ok, flagged or failed) are skipped, trials cut short by
a crash or Ctrl-C are run again. Host-global knobs (vm.*, fs.*, kernel.*, most net.core.*) are
refused unless the design sets ``target: {allow_host_global: true}`` or ``--allow-host-global``
is given. Ctrl-C (or SIGTERM) puts the current trial's knobs back before exiting; after a hard
crash (kill -9, power cut), the next ``tunelab run`` of the study puts back what the crashed run
left changed before its first snapshot (or stops, naming ``tunelab restore STUDY``), and removes
labs whose run died. ``--target dry-run`` records nothing: the study's store is not touched.

Exit status: 0 when no trial failed, 1 when some did (the summary names them), 2 on errors,
130 when interrupted by Ctrl-C or SIGTERM (the trial in flight is recorded ``interrupted``, its
knobs are put back, one line says which, and the lab is removed; running the design again resumes).

With ``--testbeds FILE`` the plan runs on several testbeds at once (dask.distributed: a
LocalCluster with one worker per testbed, or ``--scheduler`` for an existing cluster). Each trial
records its testbed and the screen treats the testbed as a block; a lost worker's trial runs
again elsewhere, a testbed whose trials keep failing is quarantined, and Ctrl-C restores every
testbed. Afterwards `tunelab restore --testbeds FILE` puts back what a lost testbed left changed.
A ``measurement: duet`` design runs on exactly two testbeds of one kind instead (side 0 on the
first, side 1 on the second, both at once from this process, no Dask; docs/duet.md).
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import tunelab


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("run", help="run a design's trials on a target into the store",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("design", metavar="DESIGN", help="design file (YAML)")
    parser.add_argument("--target", metavar="TYPE",
                        help="override the design's target type (lab, local, ssh, dry-run); the design's target "
                             "options are used only when the type is the same")
    parser.add_argument("--allow-host-global", action="store_true",
                        help="permit host-global knobs (they change the whole machine; all changes are journalled)")
    parser.add_argument("--allow-design-commands", action="store_true",
                        help="let the design's target options run commands as root (e.g. service_commands); "
                             "review them first with `tunelab plan DESIGN --allow-design-commands`")
    parser.add_argument("--store", metavar="PATH", type=Path, help="trial store (default: data/<study>.sqlite)")
    parser.add_argument("--retry-failed", action="store_true", help="on resume, run the trials recorded as failed "
                        "again (they stay in the store, set aside as superseded)")
    parser.add_argument("--force", action="store_true", help="run although the pre-flight says a knob cannot act "
                        "under the design's load (wrong transport, the wrong end of the traffic, a server limit)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--repeat-busy", metavar="PCT", type=float,
                        help="measure a trial again when other processes used more than PCT %% of the machine during "
                             "it (overrides the design's noise.repeat_busy_pct; the busy attempt stays in the store, "
                             "set aside)")
    parser.add_argument("--testbeds", metavar="FILE", type=Path,
                        help="run the plan across the testbeds this file names, one trial per testbed at a time, "
                             "on a Dask LocalCluster (examples/testbeds-2labs.yaml; docs/scale-out.md)")
    parser.add_argument("--scheduler", metavar="tcp://HOST:8786",
                        help="with --testbeds: use this running Dask scheduler, whose workers are named after the "
                             "testbeds (`dask worker ADDR --name TESTBED --nthreads 1 --resources testbed=1`)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    summary = tunelab.run(args.design, target=args.target, store=args.store, allow_host_global=args.allow_host_global,
                          progress=not args.no_progress, retry_failed=args.retry_failed, force=args.force,
                          allow_design_commands=args.allow_design_commands, repeat_busy_pct=args.repeat_busy,
                          testbeds=args.testbeds, scheduler=args.scheduler)
    if summary.skipped:
        print(f"resumed: {summary.skipped} of {summary.planned} trials were already done and were skipped")
    print(summary)
    return 1 if summary.failed else 0
