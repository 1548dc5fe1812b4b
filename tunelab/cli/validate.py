"""``tunelab validate``: is a candidate configuration better than the baseline on this target?

The baseline (A) and the candidate (B) are measured in interleaved ABBA blocks per load profile; the % change
of each metric gets a 95 % CI from the block-paired log ratios, and a TOST against ±SESOI decides equivalence.
Trials are recorded in the store (phase ``validate``) and an interrupted validation resumes.

Examples::

    tunelab validate --target lab --load dnsperf --baseline current --candidate net.core.somaxconn=4096 \\
        --candidate net.ipv4.tcp_abort_on_overflow=1 --metric qps:max:5 --profile low --profile overload
    tunelab validate --target simulator --surface simple --candidate winner.conf --metric qps:max

``--baseline`` and ``--candidate`` take ``current`` (baseline only), ``KNOB=VALUE`` (repeatable) or a file: a
sysctl.d file (``name = value`` lines) or YAML/JSON mapping knob id -> value. A knob the baseline sets and the
candidate does not keeps the baseline's value in both arms.

Checked before anything is applied or stored (one error line, exit status 2): a warm-up < 0 s, a measured
time <= 0 s, fewer than 2 blocks, an unknown profile, metric or load setting (each load's own rules, as for
`tunelab run`), a host-global knob without --allow-host-global, a candidate equal to the baseline.

On IMPROVE or EQUIVALENT (no metric in any profile worse, inconclusive or untestable) the candidate is written
as a sysctl.d file with its rollback (the baseline as measured), both with a provenance header:
DIR/90-tunelab-validate-<target>.conf and DIR/90-tunelab-validate-<target>.conf.rollback, DIR from
--write-sysctl (default: next to the store, STORE-sysctl/, e.g. data/validate-lab-sysctl/). Block and link knobs are comments
naming the command that sets them. On any other verdict no file is written and a line says why.

Exit status: 0 improve or equivalent, 3 regress, 4 inconclusive (the output says how many blocks would decide),
5 untestable (too few usable blocks, e.g. every trial failed: the output gives the first failure's reason),
2 errors.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import tunelab
from tunelab.cli import render
from tunelab.cli.parsing import parse_baseline, parse_config, parse_options


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("validate", help="candidate vs baseline in ABBA blocks: improve/regress/equivalent",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--target", required=True, metavar="TYPE", help="lab, local, ssh, simulator")
    add("--target-option", action="append", default=[], metavar="KEY=VALUE", help="target option, e.g. surface=hard512")
    add("--surface", help="simulator surface (same as --target-option surface=NAME)")
    add("--load", metavar="GENERATOR", help="load generator (dnsperf, iperf3, fio, wrk); the simulator uses its own")
    add("--load-setting", action="append", default=[], metavar="KEY=VALUE", help="override a load profile setting")
    add("--baseline", action="append", default=[], metavar="current|FILE|KNOB=VALUE", help="baseline (default: current)")
    add("--candidate", action="append", default=[], required=True, metavar="FILE|KNOB=VALUE", help="candidate config")
    add("--metric", action="append", default=[], metavar="NAME:max|min[:SESOI]", help="default: the load's first metric")
    add("--sesoi", type=float, metavar="PCT", help="smallest effect of interest in %% for every metric")
    add("--profile", action="append", default=[], help="load profile (repeatable; default overload)")
    add("--blocks", type=int, default=6, help="ABBA blocks per profile (default 6)")
    add("--measurement", choices=("sequential", "duet"), default="sequential", help="sequential ABBA blocks on one "
        "target, or duet: two targets measure A and B at once, then swap sides (docs/duet.md)")
    add("--pairs", type=int, metavar="N", help="duet pairs per profile (default: twice --blocks)")
    add("--cpu-layout", choices=("shared", "split"), help="how two duet labs share the CPUs (default shared)")
    add("--warmup", type=float, default=2.0, metavar="S", help="warm-up seconds per trial")
    add("--measure", type=float, default=8.0, metavar="S", help="measured seconds per trial")
    add("--allow-host-global", action="store_true", help="permit host-global knobs")
    add("--store", type=Path, metavar="PATH", help="trial store (default data/validate-<target>.sqlite)")
    add("--write-sysctl", type=Path, metavar="DIR", help="where the sysctl.d file and its rollback go on improve or "
        "equivalent (default: next to the store, STORE-sysctl/, e.g. data/validate-lab-sysctl/)")
    add("--json", type=Path, metavar="OUT", help="write the verdict table, failures, sysctl.d files and provenance "
        "as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = tunelab.validate(args.target, parse_config(args.candidate), baseline=parse_baseline(args.baseline),
                              metrics=args.metric, target_options=parse_options(args.target_option),
                              surface=args.surface, load=args.load,
                              load_settings=parse_options(args.load_setting, "--load-setting"),
                              sesoi_pct=args.sesoi, profiles=args.profile,
                              blocks=args.blocks, warmup_s=args.warmup, measure_s=args.measure, store=args.store,
                              allow_host_global=args.allow_host_global, write_sysctl=args.write_sysctl,
                              measurement=args.measurement, pairs=args.pairs, cpu_layout=args.cpu_layout)
    print(render.validate_text(result))
    render.write_outputs((args.json, "--json", lambda: render.dumps(result.to_json())))
    return result.exit_status
