"""``tunelab validate``: is a candidate configuration better than the baseline on this target?

The baseline (A) and the candidate (B) are measured in interleaved ABBA blocks per load profile; the % change
of each metric gets a 95 % CI from the block-paired log ratios, and a TOST against ±SESOI decides equivalence.
Trials are recorded in the store (phase ``validate``) and an interrupted validation resumes.

A change file says it all in one reviewed file (server, load host, the operator's query file, profiles,
baseline, candidate, metrics, blocks; docs/operators.md, tunelab/designs/change.py)::

    tunelab validate somaxconn.yaml --plan        # every command, where, as whom, the estimated time
    tunelab validate somaxconn.yaml --allow-design-commands

With a change file the flags that describe the validation (--target ... --allow-host-global) are refused:
the file says those; --store, --write-sysctl, --json, --plan, --offline, --retry-failed and --allow-design-commands
apply. An interrupted validation resumes where it stopped; --retry-failed measures its failed trials again (e.g.
after fixing the load host), the failed ones kept in the store as superseded.
The file's ``server.restart`` runs only with --allow-design-commands; a change whose knob needs the DNS
server restarted (somaxconn) is refused without it, before anything runs. ``blocks: {min, max, until:
decided}`` runs blocks in rounds and stops when every metric in every profile is decided (the screen's
alpha spending); the output says at which looks.

``--measurement duet`` (a change file's ``measurement: duet``) measures A and B at the same moment on two
targets of the same spec (a lab or the simulator), then swaps sides, ``--pairs`` pairs per profile (default
twice --blocks); two labs share the CPUs as ``--cpu-layout`` says (docs/duet.md). A change file's ``blocks: {min,
max, step}`` with a duet counts pairs (even numbers; multiples of 4 keep each round's crossover whole): pairs in
rounds, stopped when every metric is decided, as for blocks.
``--testbeds FILE`` (instead of --target) puts the duet's
sides on the file's two testbeds, of one kind (two labs, two simulators, two ssh hosts): side 0 on the first,
side 1 on the second; anything else is one error line (docs/duet.md, docs/scale-out.md).

With flags::

    tunelab validate --target lab --load dnsperf --baseline current --candidate net.core.somaxconn=4096 \\
        --candidate net.ipv4.tcp_abort_on_overflow=1 --metric qps:max:5 --profile low --profile overload
    tunelab validate --target simulator --surface simple --candidate winner.conf --metric qps:max

``--baseline`` and ``--candidate`` take ``current`` (baseline only), ``KNOB=VALUE`` (repeatable) or a file: a
sysctl.d file (``name = value`` lines) or YAML/JSON mapping knob id -> value. A knob the baseline sets and the
candidate does not keeps the baseline's value in both arms.

Checked before anything is applied or stored (one error line, exit status 2; the same checks for ``--plan``):
a bad change file (its file, line and key), a warm-up < 0 s, a measured
time <= 0 s, fewer than 2 blocks, an unknown profile, metric or load setting (each load's own rules, as for
`tunelab run`), a host-global knob without --allow-host-global, a candidate equal to the baseline.

On IMPROVE or EQUIVALENT (no metric in any profile worse, inconclusive or untestable) the candidate is written
as a sysctl.d file with its rollback (the baseline as measured), both with a provenance header:
DIR/90-tunelab-validate-<target>.conf and DIR/90-tunelab-validate-<target>.conf.rollback, DIR from
--write-sysctl (default: next to the store, STORE-sysctl/, e.g. data/validate-lab-sysctl/). Block and link knobs are comments
naming the command that sets them. On any other verdict no file is written and a line says why.

Exit status: 0 improve or equivalent, 3 regress, 4 inconclusive (the output says how many blocks would decide),
5 untestable (too few usable blocks, e.g. every trial failed: the output gives the first failure's reason),
2 errors, 130 when interrupted by Ctrl-C or SIGTERM (the trial in flight is put back and one line says which knobs
were restored; running it again resumes).
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import tunelab
from tunelab.cli import render
from tunelab.cli.parsing import parse_baseline, parse_config, parse_options
from tunelab.errors import TunelabError
from tunelab.model import MeasurementKind


#: flags that describe the validation itself: with a change file the file says these, so they are refused
CHANGE_FILE_SETS = {"target": "--target", "target_option": "--target-option", "surface": "--surface", "load": "--load",
                    "load_setting": "--load-setting", "baseline": "--baseline", "candidate": "--candidate",
                    "metric": "--metric", "sesoi": "--sesoi", "profile": "--profile", "blocks": "--blocks",
                    "warmup": "--warmup", "measure": "--measure", "allow_host_global": "--allow-host-global",
                    "measurement": "--measurement", "pairs": "--pairs", "cpu_layout": "--cpu-layout",
                    "testbeds": "--testbeds"}
#: the defaults of those flags without a change file
FLAG_DEFAULTS = {"blocks": 6, "warmup": 2.0, "measure": 8.0}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("validate", help="candidate vs baseline in ABBA blocks: improve/regress/equivalent",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("change", nargs="?", type=Path, metavar="CHANGE.yaml", help="a change file (docs/operators.md); without "
        "one, the flags below say what to validate")
    add("--plan", action="store_true", help="print every command that would run, where and as whom, and the "
        "estimated time; apply and run nothing (over ssh it connects and reads the knobs' current values)")
    add("--offline", action="store_true", help="with --plan: do not contact the target (its knobs are read when "
        "validate starts)")
    add("--allow-design-commands", action="store_true", help="let a change file's server.restart command run on "
        "the server (a knob such as somaxconn needs the DNS server restarted)")
    add("--target", metavar="TYPE", help="lab, local, ssh, simulator (required without a change file)")
    add("--target-option", action="append", default=[], metavar="KEY=VALUE", help="target option, e.g. surface=hard512")
    add("--surface", help="simulator surface (same as --target-option surface=NAME)")
    add("--load", metavar="GENERATOR", help="load generator (dnsperf, iperf3, fio, wrk); the simulator uses its own")
    add("--load-setting", action="append", default=[], metavar="KEY=VALUE", help="override a load profile setting")
    add("--baseline", action="append", default=[], metavar="current|FILE|KNOB=VALUE", help="baseline (default: current)")
    add("--candidate", action="append", default=[], metavar="FILE|KNOB=VALUE",
        help="candidate config (required without a change file)")
    add("--metric", action="append", default=[], metavar="NAME:max|min[:SESOI]", help="default: the load's first metric")
    add("--sesoi", type=float, metavar="PCT", help="smallest effect of interest in %% for every metric")
    add("--profile", action="append", default=[], help="load profile (repeatable; default overload)")
    add("--blocks", type=int, help="ABBA blocks per profile (default 6)")
    add("--measurement", choices=[kind.value for kind in MeasurementKind],
        help="sequential ABBA blocks on one target (default), "
        "or duet: two targets measure A and B at once, then swap sides (docs/duet.md)")
    add("--pairs", type=int, metavar="N", help="duet pairs per profile (default: twice --blocks)")
    add("--cpu-layout", choices=("shared", "split"), help="how two duet labs share the CPUs (default shared)")
    add("--testbeds", type=Path, metavar="FILE", help="with --measurement duet, instead of --target: the duet's two "
        "sides on this testbeds file's two testbeds of one kind (side 0 on the first; docs/duet.md)")
    add("--warmup", type=float, metavar="S", help="warm-up seconds per trial (default 2)")
    add("--measure", type=float, metavar="S", help="measured seconds per trial (default 8)")
    add("--allow-host-global", action="store_true", help="permit host-global knobs")
    add("--force", action="store_true", help="measure although the pre-flight says the change cannot act under this "
        "load (wrong transport, a server limit below the levels) or a metric cannot show it (qps on a capped rate)")
    add("--pilot", type=float, metavar="SECONDS", help="before the first trial, a baseline window of SECONDS: does the "
        "knob's mechanism bind (its counters move), is the load generator saturated, the noise and the blocks it needs")
    add("--store", type=Path, metavar="PATH", help="trial store (default data/validate-<target>.sqlite, or "
        "data/validate-<name>.sqlite for a change file)")
    add("--write-sysctl", type=Path, metavar="DIR", help="where the sysctl.d file and its rollback go on improve or "
        "equivalent (default: next to the store, STORE-sysctl/, e.g. data/validate-lab-sysctl/)")
    add("--retry-failed", action="store_true", help="on resume, measure again the trials recorded as failed (they "
        "stay in the store, set aside as superseded)")
    add("--json", type=Path, metavar="OUT", help="write the verdict table, failures, sysctl.d files and provenance "
        "as JSON (with --plan: the commands and the estimate)")
    parser.set_defaults(func=run)


def flag_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The flags as :func:`tunelab.validate`'s parameters (one error line for a missing --target or --candidate;
    --testbeds stands for --target)."""
    for needed in ("target", "candidate"):
        if not getattr(args, needed) and not (needed == "target" and args.testbeds is not None):
            raise TunelabError(f"--{needed} is required without a change file; give CHANGE.yaml (docs/operators.md) "
                               f"or --{needed}")
    given = {key: getattr(args, key) if getattr(args, key) is not None else default
             for key, default in FLAG_DEFAULTS.items()}
    return dict(target=args.target, candidate=parse_config(args.candidate), baseline=parse_baseline(args.baseline),
                metrics=args.metric, target_options=parse_options(args.target_option), surface=args.surface,
                load=args.load, load_settings=parse_options(args.load_setting, "--load-setting"),
                sesoi_pct=args.sesoi, profiles=args.profile, blocks=given["blocks"], warmup_s=given["warmup"],
                measure_s=given["measure"], allow_host_global=args.allow_host_global,
                measurement=MeasurementKind.parse(args.measurement or MeasurementKind.SEQUENTIAL), pairs=args.pairs,
                cpu_layout=args.cpu_layout,
                **({"testbeds": args.testbeds} if args.testbeds is not None else {}))


def run(args: argparse.Namespace) -> int:
    if args.offline and not args.plan:
        raise TunelabError("--offline goes with --plan (a validation needs its target); add --plan or drop --offline")
    if args.change is not None:
        clash = [flag for key, flag in CHANGE_FILE_SETS.items() if getattr(args, key) not in (None, [], False)]
        if clash:
            raise TunelabError(f"{clash[0]} cannot be combined with a change file: {args.change} says what to "
                               f"validate; change it there (or leave out CHANGE.yaml to use the flags)")
    if args.plan:
        flags = {} if args.change is not None else flag_arguments(args)
        preview = tunelab.preview_validate(args.change, offline=args.offline,
                                           allow_design_commands=args.allow_design_commands, store=args.store,
                                           force=args.force, **flags)
        print(preview.text())
        render.write_outputs((args.json, "--json", lambda: render.dumps(preview.to_json())))
        if preview.refusal:               # shown in full, but validate would not start: the same error
            raise TunelabError(preview.refusal)
        return 0
    if args.change is not None:
        result = tunelab.validate_change(args.change, allow_design_commands=args.allow_design_commands,
                                         store=args.store, write_sysctl=args.write_sysctl, force=args.force,
                                         pilot_s=args.pilot, retry_failed=args.retry_failed)
    else:
        result = tunelab.validate(**flag_arguments(args), store=args.store, write_sysctl=args.write_sysctl,
                                  allow_design_commands=args.allow_design_commands, force=args.force,
                                  pilot_s=args.pilot, retry_failed=args.retry_failed)
    print(render.validate_text(result))
    render.write_outputs((args.json, "--json", lambda: render.dumps(result.to_json())))
    return result.exit_status
