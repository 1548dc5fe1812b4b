"""``tunelab validate``: is a candidate configuration better than the baseline on this target?

The baseline (A) and the candidate (B) are measured in interleaved ABBA blocks per load profile;
the % change of each metric gets a 95 % CI from the block-paired log ratios, and a TOST against
±SESOI decides equivalence. Trials are recorded in the store (phase ``validate``) and an
interrupted validation resumes.

Examples::

    tunelab validate --target lab --load dnsperf --baseline current \\
        --candidate net.core.somaxconn=4096 --candidate net.ipv4.tcp_abort_on_overflow=1 \\
        --metric qps:max:5 --profile low --profile overload --blocks 6
    tunelab validate --target simulator --surface simple --candidate winner.conf --metric qps:max

``--baseline`` and ``--candidate`` take ``current`` (baseline only), ``KNOB=VALUE`` (repeatable) or a
file: a sysctl.d file (``name = value`` lines) or YAML/JSON mapping knob id -> value.

Exit status: 0 improve, 0 equivalent, 3 regress, 4 inconclusive (the output says how many blocks
would decide), 2 on errors.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tunelab.errors import DesignError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("validate", help="candidate vs baseline in ABBA blocks: improve/regress/equivalent",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", required=True, metavar="TYPE", help="lab, local, ssh, simulator")
    parser.add_argument("--target-option", action="append", default=[], metavar="KEY=VALUE",
                        help="target constructor option (repeatable), e.g. surface=hard512 for the simulator")
    parser.add_argument("--surface", help="simulator surface (same as --target-option surface=NAME)")
    parser.add_argument("--load", metavar="GENERATOR", help="load generator (dnsperf, iperf3, fio, wrk); the "
                                                            "simulator uses its own")
    parser.add_argument("--load-setting", action="append", default=[], metavar="KEY=VALUE",
                        help="override a setting of the load profile (repeatable)")
    parser.add_argument("--baseline", action="append", default=[], metavar="current|FILE|KNOB=VALUE",
                        help="baseline config (default: current)")
    parser.add_argument("--candidate", action="append", default=[], required=True, metavar="FILE|KNOB=VALUE",
                        help="candidate config (repeatable KNOB=VALUE, or a file)")
    parser.add_argument("--metric", action="append", default=[], metavar="NAME:max|min[:SESOI]",
                        help="metric to judge (repeatable; default: the load's first metric)")
    parser.add_argument("--sesoi", type=float, metavar="PCT", help="smallest effect of interest in %% for every metric")
    parser.add_argument("--profile", action="append", default=[], help="load profile (repeatable; default overload)")
    parser.add_argument("--blocks", type=int, default=6, help="ABBA blocks per profile (default 6)")
    parser.add_argument("--warmup", type=float, default=2.0, metavar="S", help="warm-up seconds per trial")
    parser.add_argument("--measure", type=float, default=8.0, metavar="S", help="measured seconds per trial")
    parser.add_argument("--allow-host-global", action="store_true", help="permit host-global knobs")
    parser.add_argument("--store", type=Path, metavar="PATH", help="trial store (default data/validate-<target>.sqlite)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the verdict table as JSON")
    parser.set_defaults(func=run)


def _value(text: str) -> Any:
    """``"4096"`` -> 4096; ``"4096 131072 6291456"`` stays text (the knob's validate parses it)."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        return text


def parse_config(items: list[str]) -> dict[str, Any]:
    """KNOB=VALUE items and/or files -> knob id -> value (values validated later by the knobs).

    >>> parse_config(["net.core.somaxconn=4096", "net.ipv4.tcp_congestion_control=bbr"])
    {'net.core.somaxconn': 4096, 'net.ipv4.tcp_congestion_control': 'bbr'}
    """
    config: dict[str, Any] = {}
    for item in items:
        if "=" in item and not Path(item).exists():
            name, _, value = item.partition("=")
            if not name.strip():
                raise DesignError(f"{item!r} must look like KNOB=VALUE, e.g. net.core.somaxconn=4096")
            config[name.strip()] = _value(value)
        else:
            config.update(read_config_file(Path(item)))
    return config


def read_config_file(path: Path) -> dict[str, Any]:
    """A sysctl.d file (``name = value``) or a YAML/JSON mapping (or a design fragment's ``knobs:`` baselines)."""
    import yaml

    if not path.exists():
        raise DesignError(f"config file {path} does not exist; give KNOB=VALUE or an existing file")
    text = path.read_text()
    if path.suffix in (".yaml", ".yml", ".json"):
        data = yaml.safe_load(text) if path.suffix != ".json" else json.loads(text)
        if isinstance(data, dict) and "knobs" in data:
            out = {}
            for entry in data["knobs"]:
                kid = entry["name"] + (f"[{entry['device']}]" if entry.get("device") else "")
                kid += "@client" if entry.get("host") == "client" else ""
                out[kid] = tuple(entry["baseline"]) if isinstance(entry["baseline"], list) else entry["baseline"]
            return out
        if not isinstance(data, dict):
            raise DesignError(f"{path} must hold a mapping knob id -> value")
        return {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    out = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if "=" not in line:
            raise DesignError(f"{path}:{number}: {line!r} is not 'name = value'")
        name, _, value = line.partition("=")
        out[name.strip()] = _value(value)
    return out


def _options(items: list[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise DesignError(f"--target-option {item!r} must look like KEY=VALUE")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def run(args: argparse.Namespace) -> int:
    from tunelab.optimize.confirm import EXIT_STATUS, MetricGoal, validate
    from tunelab.store import Store, default_store_path
    from tunelab.targets import build_target, check_target_spec

    import tunelab.simulator  # noqa: F401  (registers the simulator target)

    options = _options(args.target_option)
    if args.surface:
        options["surface"] = args.surface
    # --target-option values are typed by the user on this command line (not read from a design),
    # so options that carry commands are the user's own: checked by the target's schema, allowed.
    target_spec = {"type": args.target, "options": options}
    check_target_spec(target_spec, allow_commands=True)
    candidate = parse_config(args.candidate)
    baseline: Any = "current"
    if args.baseline and args.baseline != ["current"]:
        baseline = parse_config([b for b in args.baseline if b != "current"])
    profiles = args.profile or ["overload"]
    path = args.store or default_store_path(f"validate-{args.target}")
    with build_target(target_spec, allow_commands=True) as target:
        if args.target == "simulator":
            load = target.load()
            warmup, measure = 0.0, 1.0
        else:
            from tunelab.loads import get_load

            if not args.load:
                raise DesignError("--load is required on a real target (dnsperf, iperf3, fio, wrk)")
            load = get_load(args.load)()
            warmup, measure = args.warmup, args.measure
        overrides = _options(args.load_setting)
        if overrides:
            base_settings = load.settings
            load.settings = lambda profile, extra=None: base_settings(profile, {**overrides, **(extra or {})})
        metrics = args.metric or [f"{name}:{'max' if info.direction == 'maximize' else 'min'}"
                                  for name, info in list(load.metrics.items())[:1]]
        goals = [MetricGoal.coerce(m) for m in metrics]
        design_text = json.dumps({"validate": args.target, "options": options}, sort_keys=True, default=str)
        import hashlib

        with Store.open(path, study=f"validate-{args.target}", design_hash=hashlib.sha256(design_text.encode()).hexdigest(),
                        design_text=design_text, target_spec={"type": args.target, "options": options}) as store:
            result = validate(target, load, baseline, candidate, goals, store, blocks=args.blocks,
                              sesoi_pct=args.sesoi, profiles=profiles, warmup_s=warmup, measure_s=measure,
                              allow_host_global=args.allow_host_global)
    if args.target == "simulator":
        print("NOTE: SYNTHETIC results from the simulator target; no real kernel was measured")
    print(f"baseline:  {result.baseline}\ncandidate: {result.candidate}")
    print(result.summary())
    if args.json:
        args.json.write_text(json.dumps({"verdict": result.verdict, "baseline": _plain(result.baseline),
                                         "candidate": _plain(result.candidate),
                                         "table": json.loads(result.table.to_json(orient="records"))}, indent=2) + "\n")
    return EXIT_STATUS[result.verdict]


def _plain(config: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in config.items()}
