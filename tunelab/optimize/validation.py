"""The ``validate`` verb's sequence (:func:`tunelab.validate` and :func:`tunelab.validate_change` call
:func:`run_request`; ``tunelab validate CHANGE.yaml --plan`` calls :func:`check_request` and
:func:`plan_on_target` too, so "plan accepts" means "validate starts").

1. :func:`check_request`, before anything is built: the target spec, the durations, the blocks, the SESOI;
   the load's profiles, settings (a query file line by line) and metrics; the knobs, a given baseline
   equal to the candidate, host-global knobs; a knob that needs its service restarted and the command
   that restarts it (a change file's ``server.restart`` runs only with ``--allow-design-commands``).
2. Enter the run's owner (:func:`tunelab.run_owner.owned_run`: SIGTERM as Ctrl-C, the run lease, orphaned labs
   removed, a crashed run's live journal refused; interrupted, one line says what was restored), bring the target
   up and :func:`plan_on_target` (:func:`tunelab.optimize.confirm.plan_validation`): ``current`` is read, a
   candidate equal to it is refused; the pre-flight (:func:`change_preflight`). Nothing is applied and no store
   is written until here.
3. Open the store once, measure the ABBA blocks (in rounds for ``blocks: {min, max, until: decided}``,
   :mod:`tunelab.optimize.blocks_in_rounds`), or with ``measurement: duet`` the duet pairs on two targets at
   once (:mod:`tunelab.optimize.duet_confirm`; in the same rounds, counted in pairs; on the two testbeds of
   ``--testbeds FILE``: :func:`duet_testbed_sides`, their files and hosts checked first), and judge them; count
   the failed trials; the load's private directories are removed before the target goes down.
4. On ``improve`` or ``equivalent``, write the sysctl.d file and its rollback
   (:mod:`tunelab.optimize.deploy`), else say why not; the provenance goes to ``--json`` either way.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from tunelab.designs.change import BlockRule, ChangeFile, load_change
from tunelab.designs.schema import DUET_TARGETS, DUET_TESTBED_TARGETS
from tunelab.display import Displayed
from tunelab.duet import DuetError, check_measurement, side_options, sides_on_testbeds
from tunelab.errors import DesignError, SafetyError, TargetError, TunelabError
from tunelab.loads import Load, get_load
from tunelab.model import MeasurementKind, Metric, json_value, level_to_json
from tunelab.optimize.confirm import (EXIT_STATUS, ConfirmResult, ValidationPlan, block_rule, check_durations,
                                      checked_goals, compared_configs, config_digest, plan_validation,
                                      profile_settings, row_text, trial_failures, validation_provenance)
from tunelab.optimize.deploy import SysctlFiles, not_deployable, provenance, write_sysctl_files
from tunelab.optimize.duet_confirm import check_pair_rule, check_pairs, run_duet_validation
from tunelab.optimize.evaluators import RunnerEvaluator
from tunelab.optimize.pilot_noise import pilot_for, pilot_json
from tunelab.optimize.blocks_in_rounds import confirm_in_rounds
from tunelab.preflight import KnobChange, Preflight, exercises_of, preflight
from tunelab.preflight.pilot import check_pilot
from tunelab.runner import bind_knob_ids, check_host_global, cleanup_load, prepare_load
from tunelab.progress import StudyProgress
from tunelab.run_owner import owned_run
from tunelab.store import Store, default_store_path
from tunelab.targets import Target, build_target, check_target_spec
from tunelab.targets.dns_servers import DNS_SERVERS
from tunelab.targets.hostinfo import parse_version
from tunelab.targets.local import ServiceCommandsMixin
from tunelab.testbeds import Testbed, check_testbeds, load_testbeds

PathLike = str | os.PathLike[str]
#: the flag that lets a change file's restart command run
ALLOW_FLAG = "--allow-design-commands"


class CommandsNotAllowed(SafetyError):
    """A change needs its restart command, and ``--allow-design-commands`` was not given."""


@dataclass
class ValidateRun(Displayed):
    """What :func:`tunelab.validate` found: the confirmation (``verdict``, ``table``, ``baseline``,
    ``candidate``, ``failures``), the sysctl.d files written (``sysctl``) or why none were (``sysctl_note``),
    and where and how it was measured (``provenance``).
    In a notebook it shows the verdict, each metric's change with its CI and the blocks needed
    (:mod:`tunelab.report.reprs`); ``plot()`` draws the paired ratio of each ABBA block."""

    target_type: str
    store_path: Path
    #: the ABBA blocks' analysis: verdict, per-metric table, baseline and candidate, failures
    confirmation: ConfirmResult
    #: the sysctl.d files written on a deployable verdict, else None and ``sysctl_note`` says why
    sysctl: SysctlFiles | None = None
    sysctl_note: str | None = None
    #: server, kernel, DNS software and version, query file sha256, load host, date, verdict table
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return self.confirmation.verdict

    @property
    def synthetic(self) -> bool:
        return self.target_type == "simulator"

    @property
    def exit_status(self) -> int:
        """0 improve/equivalent, 3 regress, 4 inconclusive, 5 untestable."""
        return EXIT_STATUS[self.verdict]

    def summary(self) -> str:
        return self.confirmation.summary()

    def __repr__(self) -> str:
        """Three lines: the verdict with the first metric's change and CI, the sysctl.d file, where the rest is."""
        synthetic = " (SYNTHETIC)" if self.synthetic else ""
        files = f"sysctl.d file {self.sysctl.paths['conf']}" if self.sysctl is not None else str(self.sysctl_note)
        return (f"ValidateRun: {self.verdict.upper()} on {self.target_type}{synthetic}; "
                f"{self.confirmation.gain_text()}\n  {files}\n"
                "  .summary() for every metric, .confirmation.table for the table, .plot() for the ratio per block")

    def to_json(self) -> dict[str, Any]:
        """The verdict, both configurations, the table, the failed trials, the sysctl.d files and the provenance
        (``tunelab validate --json``)."""
        c = self.confirmation
        files = self.sysctl.to_json() if self.sysctl is not None else {"written": False, "reason": self.sysctl_note}
        return {"verdict": c.verdict, "baseline": level_to_json(c.baseline), "candidate": level_to_json(c.candidate),
                "table": [json_value(row) for row in c.table.to_dict(orient="records")],
                "failures": c.failures.to_json() if c.failures is not None else None, "sysctl": files,
                "blocks_note": c.note, "provenance": json_value(self.provenance)}


@dataclass(frozen=True)
class Measurement:
    """How validate measures: ``sequential`` ABBA blocks on one target, or ``duet`` pairs on two at once
    (:mod:`tunelab.duet`; ``pairs`` per profile, default twice a fixed blocks count: as many trials; blocks in
    rounds count pairs; ``cpu_layout`` of two labs, default :data:`tunelab.duet.DEFAULT_CPU_LAYOUT`)."""

    kind: MeasurementKind = MeasurementKind.SEQUENTIAL
    pairs: int | None = None
    cpu_layout: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", check_measurement(self.kind))     # the text of a flag or an API call

    def pair_rule(self, rule: BlockRule) -> BlockRule:
        """A duet's pairs per profile as a rule: ``pairs`` fixed (checked by
        :func:`tunelab.optimize.duet_confirm.check_pairs`), else ``rule`` in rounds counted in pairs, else twice
        the fixed blocks; rounds and a fixed ``pairs`` together are one DuetError line.

        >>> duet = Measurement("duet")
        >>> duet.pair_rule(BlockRule.fixed(6)).looks(), duet.pair_rule(BlockRule(4, 8, 4)).looks()
        ([12], [4, 8])
        """
        if self.pairs is not None and rule.in_rounds:
            raise DuetError(f"give a duet's rounds in blocks: {{min: {rule.min}, max: {rule.max}, step: {rule.step}}} "
                            f"(counted in pairs) or a fixed pairs: {self.pairs}, not both")
        if self.pairs is not None:
            return BlockRule.fixed(check_pairs(self.pairs))
        return rule if rule.in_rounds else BlockRule.fixed(2 * rule.max)

    def pairs_json(self, rule: BlockRule) -> Any:
        """The pairs for the provenance: a count, or the rounds ``{min, max, step, spending}``."""
        pairs = self.pair_rule(rule)
        return pairs.max if not pairs.in_rounds else {"min": pairs.min, "max": pairs.max, "step": pairs.step,
                                                        "spending": pairs.spending}


@dataclass(frozen=True)
class ValidateRequest:
    """One validation as asked, from the CLI's flags (:func:`run_validate`) or a change file
    (:func:`request_of_change`); ``allow_commands`` is the user's ``--allow-design-commands`` for a change
    file (the flags' own ``service_commands`` are the user's: allowed)."""

    spec: Mapping[str, Any]
    candidate: Mapping[str, Any]
    baseline: Mapping[str, Any] | str = "current"
    metrics: tuple[Any, ...] = ()
    sesoi_pct: float | None = None
    load: str | None = None
    profiles: tuple[str, ...] | Mapping[str, Mapping[str, Any]] = ()
    load_settings: Mapping[str, Any] = field(default_factory=dict)
    blocks: BlockRule | int = 6
    warmup_s: float = 2.0
    measure_s: float = 8.0
    allow_host_global: bool = False
    allow_commands: bool = True
    study: str = ""
    store: Path | None = None
    write_sysctl: PathLike | bool | None = None
    software: str | None = None
    #: the change file it came from (errors are prefixed with it), or None for flags
    source: str | None = None
    measurement: Measurement = Measurement()
    #: a duet's two testbeds (``--testbeds FILE``: side 0 on the first, side 1 on the second), else empty
    testbeds: tuple[Testbed, ...] = ()
    #: ``--force``: measure although the pre-flight says the change cannot act (:mod:`tunelab.preflight`)
    force: bool = False
    #: ``--pilot SECONDS``: a baseline window before the first trial (:mod:`tunelab.preflight.pilot`), or None
    pilot_s: float | None = None
    #: on resume, measure again the trials recorded as failed (``--retry-failed``)
    retry_failed: bool = False

    @property
    def target_type(self) -> str:
        return str(self.spec.get("type"))

    @property
    def store_path(self) -> Path:
        return Path(self.store) if self.store is not None else default_store_path(self.study)


@dataclass(frozen=True)
class CheckedRequest:
    """A request that passed :func:`check_request`: the spec to build (the restart command only when a knob
    needs it), the load (None on the simulator until it is up), each profile's settings or names, the goals
    and whether each trial restarts the load's service."""

    request: ValidateRequest
    spec: Mapping[str, Any]
    load: Load | None
    profiles: tuple[str, ...] | Mapping[str, Mapping[str, Any]]
    goals: list[Any]
    restarts: bool
    rule: BlockRule
    #: a duet's two sides: the spec of each (side 0 is built as the target), else empty
    sides: tuple[Mapping[str, Any], ...] = ()
    #: the testbed of each side of a duet on testbeds, else empty
    side_names: tuple[str, ...] = ()

    @property
    def build_spec(self) -> Mapping[str, Any]:
        """The spec of the target ``validate`` brings up (a duet's side 0)."""
        return self.sides[0] if self.sides else self.spec


def request_of_change(change: ChangeFile, *, allow_commands: bool = False, store: PathLike | None = None,
                      write_sysctl: PathLike | bool | None = None, force: bool = False,
                      pilot_s: float | None = None, retry_failed: bool = False) -> ValidateRequest:
    """The :class:`ValidateRequest` of a parsed change file (``allow_commands``: ``--allow-design-commands``;
    ``force``, ``pilot_s``, ``retry_failed``: ``--force``, ``--pilot``, ``--retry-failed``)."""
    service = get_load(change.load.generator).service if change.load else None
    return ValidateRequest(
        spec=change.target_spec(service), candidate=dict(change.candidate),
        baseline=change.baseline if isinstance(change.baseline, str) else dict(change.baseline),
        metrics=tuple(change.metrics), load=change.load.generator if change.load else None,
        profiles={name: dict(s) for name, s in change.load.profiles.items()} if change.load else (),
        blocks=change.blocks, warmup_s=change.warmup_s, measure_s=change.measure_s,
        allow_host_global=change.allow_host_global, allow_commands=allow_commands, study=change.study,
        store=Path(store) if store is not None else None, write_sysctl=write_sysctl, software=change.software,
        source=change.source, measurement=Measurement(change.measurement, change.pairs, change.cpu_layout),
        force=force, pilot_s=pilot_s, retry_failed=retry_failed)


@contextlib.contextmanager
def named(source: str | None) -> Iterator[None]:
    """Prefix a TunelabError's one line with the change file it concerns (unless it already names it)."""
    try:
        yield
    except TunelabError as exc:
        text = str(exc)
        if source and not text.startswith(source):
            exc.args = (f"{source}: {text}", *exc.args[1:])
        raise


def default_goals(load: Any) -> list[str]:
    """The load's first metric in its better direction (``qps:max``) when no metric is named."""
    return [str(Metric(name, info.direction)).rpartition(":")[0] for name, info in list(load.metrics.items())[:1]]


def restart_spec(request: ValidateRequest, load: Load | None) -> tuple[dict[str, Any], bool]:
    """The spec to build and whether each trial restarts the load's service: a knob that needs a restart
    (``requires_restart``, e.g. somaxconn) with no way to restart is refused, and so is a change file's restart
    command without ``--allow-design-commands``; a restart command no knob needs is left out (never runs)."""
    spec = {"type": request.spec.get("type"), "options": dict(request.spec.get("options") or {})}
    knobs = bind_knob_ids({**(request.baseline if isinstance(request.baseline, Mapping) else {}),
                           **request.candidate})
    service = getattr(load, "service", None)
    needs = bool(service) and any(getattr(k.knob, "requires_restart", False) for k in knobs)
    commands = dict(spec["options"].get("service_commands") or {})
    if not needs:
        spec["options"].pop("service_commands", None)
        return spec, False
    which = ", ".join(k.id for k in knobs if getattr(k.knob, "requires_restart", False))
    cls = check_target_spec(spec, allow_commands=True)
    if issubclass(cls, ServiceCommandsMixin) and service not in commands:
        where = "server.restart" if request.source else f"--target-option service_commands={{{service}: [...]}}"
        raise TargetError(f"{which} takes effect only after the {service} service restarts, and the "
                          f"{request.target_type} target has no command for that; give one in {where}, e.g. "
                          "systemctl restart nsd")
    if commands and not request.allow_commands:
        raise CommandsNotAllowed(f"{which} needs the {service} service restarted with server.restart "
                                 f"(`{' '.join(commands[service])}`), which runs on the server; review it with "
                                 f"`tunelab validate {request.source} --plan` and pass {ALLOW_FLAG} to run it")
    return spec, True


def check_request(request: ValidateRequest) -> CheckedRequest:
    """Every check that needs no target (see the module docstring); one error line, nothing built."""
    with named(request.source):
        check_target_spec(request.spec, allow_commands=True)
        if not isinstance(request.candidate, Mapping) or not (isinstance(request.baseline, Mapping)
                                                               or request.baseline == "current"):
            raise DesignError("validate takes the candidate (and baseline) as a mapping knob id -> value, e.g. "
                              "{'net.core.somaxconn': 1024}; for KNOB=VALUE text use tunelab.cli.parsing.parse_config")
        check_durations(request.warmup_s, request.measure_s)
        check_pilot(request.pilot_s)
        rule = block_rule(request.blocks)
        load: Load | None = None
        profiles = request.profiles or ("overload",)
        if request.target_type != "simulator":
            if not request.load:
                raise DesignError("--load is required on a real target (dnsperf, iperf3, fio, wrk)")
            load = get_load(request.load)()
            profile_settings(load, profiles, dict(request.load_settings))
            checked_goals(list(request.metrics) or default_goals(load), request.sesoi_pct, load)
        if isinstance(request.baseline, Mapping) and request.baseline:
            specs, _, _ = compared_configs(None, request.baseline, request.candidate)   # type: ignore[arg-type]
        else:
            specs = bind_knob_ids(request.candidate) if request.candidate else []
        check_host_global(specs, request.allow_host_global)
        spec, restarts = restart_spec(request, load)
        sides, names = duet_sides(request.measurement, spec, rule, bool(request.testbeds)), ()
        if request.testbeds:
            sides, names = duet_testbed_sides(request, load)
    return CheckedRequest(request, spec, load, profiles, list(request.metrics), restarts, rule, sides, names)


def duet_sides(how: Measurement, spec: Mapping[str, Any], rule: BlockRule,
               testbeds: bool = False) -> tuple[Mapping[str, Any], ...]:
    """The spec of each side of a duet (empty for ``sequential``), after its checks: a target type two of
    which run on this machine at once (unless the sides are ``testbeds``: :func:`duet_testbed_sides`), enough
    pairs (rounds in even numbers of pairs) and a CPU layout that fits the options."""
    check_measurement(how.kind)
    if how.kind is not MeasurementKind.DUET and testbeds:
        raise DuetError("--testbeds goes with --measurement duet (its two testbeds measure A and B at once); a "
                        "sequential validation runs on one target: give --target instead of --testbeds")
    if how.kind is not MeasurementKind.DUET:
        if how.pairs is not None or how.cpu_layout is not None:
            raise DuetError("pairs and cpu_layout go with measurement duet; add --measurement duet "
                            "(measurement: duet) or drop them")
        return ()
    kind = str(spec.get("type"))
    if kind not in DUET_TARGETS and not testbeds:
        hint = f" (or, without a change file, --testbeds FILE naming two {kind} testbeds)" \
            if kind in DUET_TESTBED_TARGETS else ""
        raise DuetError(f"a duet runs two targets of one spec at once on this machine: {', '.join(DUET_TARGETS)}, "
                        f"not {kind!r}; use measurement sequential{hint}")
    check_pair_rule(how.pair_rule(rule))
    zero, one = side_options(kind, spec.get("options") or {}, how.cpu_layout)
    return {**spec, "options": zero}, {**spec, "options": one}


def duet_testbed_sides(request: ValidateRequest,
                       load: Load | None) -> tuple[tuple[Mapping[str, Any], ...], tuple[str, ...]]:
    """A duet's two sides on the request's two testbeds (:func:`tunelab.duet.sides_on_testbeds`, the CPU layout for two
    labs), each spec with its restart command as :func:`restart_spec` decides for it; and the testbeds' names."""
    sides = sides_on_testbeds(request.testbeds, None, request.measurement.cpu_layout)
    specs = tuple(restart_spec(replace(request, spec=side.spec), load)[0] for side in sides)
    return specs, tuple(side.name for side in sides)


def request_testbeds(path: PathLike, target: str | None, options: Mapping[str, Any],
                     allow_commands: bool) -> tuple[tuple[Testbed, ...], dict[str, Any]]:
    """The testbeds of ``--testbeds FILE`` (the file checked, nothing reached) and the first one's spec, the
    request's; the file names each testbed's target, so ``--target`` and its options do not mix with it."""
    if target is not None or options:
        raise TargetError("--target, --target-option and --surface do not mix with --testbeds: the testbeds file "
                          "names each testbed's target and options; drop them (or drop --testbeds)")
    beds = tuple(load_testbeds(path, allow_commands=allow_commands))
    return beds, beds[0].spec()


def plan_on_target(checked: CheckedRequest, live: Target) -> tuple[Load, ValidationPlan, float, float]:
    """The checks on the up target (``current`` read, nothing applied): the load, the plan and the durations
    (the simulator measures with its own load, in no time)."""
    request, load = checked.request, checked.load
    warmup_s, measure_s = request.warmup_s, request.measure_s
    if load is None:
        load, warmup_s, measure_s = live.load(), 0.0, 1.0     # type: ignore[attr-defined]
    base: Any = dict(request.baseline) if isinstance(request.baseline, Mapping) and request.baseline else "current"
    with named(request.source):
        check_access = getattr(live, "check_access", None)     # ssh: exec channel, root for writes, the load's tools
        if check_access is not None:
            check_access({load.runs_on: tuple(getattr(load, "tools", ()))})
        plan = plan_validation(live, load, base, dict(request.candidate), checked.goals or default_goals(load),
                               blocks=checked.rule, sesoi_pct=request.sesoi_pct, profiles=checked.profiles,
                               load_settings=dict(request.load_settings), warmup_s=warmup_s, measure_s=measure_s,
                               allow_host_global=request.allow_host_global)
    return load, plan, warmup_s, measure_s


def change_preflight(checked: CheckedRequest, plan: ValidationPlan | None, load: Load | None,
                     target: Target | None = None) -> Preflight:
    """The pre-flight of a validation (:mod:`tunelab.preflight`): can the change act under each profile, can each
    metric show it; with the ``target`` up, the server's own limits are read too. Each profile is its own verdict,
    so each is judged on its own. ``plan`` None (``--plan --offline``): from the request alone."""
    if load is None:
        return Preflight()
    if plan is not None:
        specs, baseline, candidate, profiles = plan.specs, plan.baseline, plan.candidate, plan.profiles
        goals = [goal.name for goal in plan.goals]
    else:
        request = checked.request
        baseline = dict(request.baseline) if isinstance(request.baseline, Mapping) else {}
        candidate = dict(request.candidate)
        specs = bind_knob_ids({**baseline, **candidate})
        profiles = profile_settings(load, checked.profiles, dict(request.load_settings))
        goals = [goal.name for goal in checked_goals(list(checked.goals) or default_goals(load), request.sesoi_pct,
                                                     load)]
    changes = [KnobChange(spec.knob, spec.host, tuple(dict.fromkeys(
        value for value in (baseline.get(spec.id), candidate.get(spec.id)) if value is not None)), spec.id)
        for spec in specs]
    return preflight(changes, exercises_of(load, profiles, goals), target, per_profile=True)


def software_version(target: Target, software: str | None) -> dict[str, str] | None:
    """``{"software", "version"}`` of the DNS server named in a change file, asked on the server (read-only:
    e.g. ``nsd -v``); the version is left out for software tunelab does not know how to ask."""
    if not software:
        return None
    argv = version_argv(software)
    if argv is None:
        return {"software": software}
    try:                          # after the measurements: a failure here must not lose the verdict
        result = target.run("server", list(argv), timeout_s=15)
    except TunelabError:
        return {"software": software}
    version = parse_version(result.stdout + "\n" + result.stderr)
    return {"software": software, **({"version": version} if version else {})}


def version_argv(software: str) -> tuple[str, ...] | None:
    """The command that prints ``software``'s version (a lab DNS server's name or daemon), or None.

    >>> version_argv("bind9"), version_argv("named"), version_argv("powerdns")
    (('named', '-v'), ('named', '-v'), None)
    """
    for name in DNS_SERVERS:
        server = DNS_SERVERS.get(name)
        if software in (server.name, server.tool):
            return tuple(server.version_argv)
    return None


def run_request(request: ValidateRequest) -> ValidateRun:
    """Check, build, plan, measure, judge and (on a deployable verdict) write the sysctl.d files; everything from
    the target coming up to the last trial runs under the run's owner (:func:`tunelab.run_owner.owned_run`)."""
    checked = check_request(request)
    path = request.store_path
    if request.testbeds:
        check_testbeds(request.testbeds)      # key files, known_hosts, each host reachable; nothing applied
    with owned_run(path) as owner, build_target(checked.build_spec, allow_commands=True) as live:
        load, plan, _, _ = plan_on_target(checked, live)
        with named(request.source):
            checks = change_preflight(checked, plan, load, live)
            checks.check(request.force)                      # before the store opens
        for line in checks.shown(request.force):
            print(line, file=sys.stderr)
        opened = owner.open_store(study=request.study, **_store_identity(checked))
        try:
            pilot = _pilot(request, checked, plan, load, live, opened)
            result = measured(checked, plan, live, load, opened)
        finally:
            cleanup_load(load, live)
        description = {**live.describe()}
        software = software_version(live, request.software)
        if software:
            description["dns_server"] = software
    facts = provenance(checked.spec, description, load, plan.profiles, result.verdict,
                       [row_text(row) for row in result.table.itertuples()], knobs=list(result.candidate))
    facts.update(pilot_json(pilot), preflight=checks.to_json())
    if checked.sides:
        facts["measurement"] = {"kind": "duet", "pairs": request.measurement.pairs_json(checked.rule),
                                "sides": [dict(side.get("options") or {}) for side in checked.sides],
                                **({"testbeds": list(checked.side_names)} if checked.side_names else {})}
    return judged_run(request, path, result, facts)


def _store_identity(checked: CheckedRequest) -> dict[str, Any]:
    """The study row a validation's store is opened with: its design text (the target type and options), that
    text's SHA-256 and the target spec."""
    text = json.dumps({"validate": checked.request.target_type, "options": checked.spec.get("options")},
                      sort_keys=True, default=str)
    return {"design_hash": hashlib.sha256(text.encode()).hexdigest(), "design_text": text,
            "target_spec": dict(checked.spec)}


def _pilot(request: ValidateRequest, checked: CheckedRequest, plan: ValidationPlan, load: Load, live: Target,
           store: Store) -> Any:
    """The pilot (``--pilot SECONDS``, :func:`tunelab.optimize.pilot_noise.pilot_for`), the load's files put on
    its host first and journalled in ``store`` (:func:`tunelab.runner.prepare_load`), so the private directory
    the pilot's load makes is removed with the run's, or by ``tunelab restore`` after a crash."""
    if request.pilot_s is not None:
        prepare_load(live, load, plan.profiles.values(), store)
    return pilot_for(request.pilot_s, plan, load, live, checked.restarts)  # informs, never refuses


def judged_run(request: ValidateRequest, path: Path, result: ConfirmResult, facts: dict[str, Any]) -> ValidateRun:
    """The :class:`ValidateRun` of a measured validation: on a deployable verdict (unless ``write_sysctl=False``)
    the sysctl.d file and its rollback are written, else the note says why not."""
    note = not_deployable(result.verdict)
    if note is None and request.write_sysctl is False:
        note = f"no sysctl.d file written: the verdict is {result.verdict.upper()}, but write_sysctl=False"
    if note is not None:
        return ValidateRun(request.target_type, path, result, None, note, facts)
    chosen = request.write_sysctl
    directory = path.with_name(f"{path.stem}-sysctl") if chosen in (None, True) else Path(chosen)  # type: ignore[arg-type]
    files = write_sysctl_files(directory, request.study, result.baseline, result.candidate, facts)
    return ValidateRun(request.target_type, path, result, files, None, facts)


def measured(checked: CheckedRequest, plan: ValidationPlan, live: Target, load: Load, store: Store) -> ConfirmResult:
    """Measure a checked plan the way the request says: ABBA blocks on ``live`` (:func:`run_validation`), or duet
    pairs on ``live`` and a second target of side 1's spec, with its own instance of the load."""
    request = checked.request
    if not checked.sides:
        return run_validation(plan, live, load, store, allow_host_global=request.allow_host_global,
                              retry_failed=request.retry_failed)
    other = checked.sides[1]
    with build_target(other, allow_commands=True) as partner:
        paired = type(partner).paired_load(dict(other.get("options") or {}), None)  # the simulator's own load
        partner_load = paired[0] if paired is not None else type(load)()
        try:
            return run_duet_validation(plan, [live, partner], [load, partner_load], store,
                                       pairs=request.measurement.pair_rule(checked.rule),
                                       allow_host_global=request.allow_host_global, testbeds=checked.side_names)
        finally:
            cleanup_load(partner_load, partner)


def run_validation(plan: ValidationPlan, target: Target, load: Load, store: Store, *, allow_host_global: bool = False,
                   alpha: float = 0.05, phase: str = "validate", retry_failed: bool = False,
                   progress: bool = True) -> ConfirmResult:
    """Measure a checked :class:`ValidationPlan` (trials recorded in ``store``; blocks in rounds by its rule)
    and judge it, counting failed trials. The load's files are put on its host and checked first, before any
    knob is applied or service restarted (:func:`tunelab.runner.prepare_load`); with ``retry_failed`` the
    trials recorded as failed are measured again. With ``progress`` each look of the blocks is a round of a
    :class:`tunelab.progress.StudyProgress` on stderr."""
    prepare_load(target, load, plan.profiles.values(), store)
    digest = config_digest(plan.baseline, plan.candidate)
    evaluators = {profile: RunnerEvaluator(target, load, plan.specs, store, phase=phase, warmup_s=plan.warmup_s,
                                           measure_s=plan.measure_s, load_settings=settings,
                                           allow_host_global=allow_host_global,
                                           provenance=validation_provenance(plan, profile, alpha),
                                           retry_failed=retry_failed)
                  for profile, settings in plan.profiles.items()}
    with StudyProgress(store.study.name if store.study else phase, enabled=progress) as tracker:
        for evaluator in evaluators.values():
            evaluator.progress = tracker
        result = confirm_in_rounds(evaluators, plan.baseline, plan.candidate, plan.goals, plan.blocks, alpha=alpha,
                                   key_prefix=lambda profile: f"{profile}:{digest}:", progress=tracker)
    keys = [f"{phase}:{key}" for key in result.measurements["key"]]
    return replace(result, failures=trial_failures(store, keys, phase))


def run_validate(target: str, candidate: Mapping[str, Any], *, baseline: Mapping[str, Any] | str = "current",
                 metrics: Sequence[str] = (), target_options: Mapping[str, Any] | None = None,
                 surface: str | None = None, load: str | None = None, load_settings: Mapping[str, Any] | None = None,
                 sesoi_pct: float | None = None, profiles: Sequence[str] = (), blocks: int | BlockRule = 6,
                 warmup_s: float = 2.0, measure_s: float = 8.0, allow_host_global: bool = False,
                 store: PathLike | None = None, write_sysctl: PathLike | bool | None = None,
                 measurement: str = "sequential", pairs: int | None = None, cpu_layout: str | None = None,
                 testbeds: PathLike | None = None, allow_design_commands: bool = False, force: bool = False,
                 pilot_s: float | None = None, retry_failed: bool = False) -> ValidateRun:
    """:func:`tunelab.validate`'s sequence from its parameters (see the module docstring)."""
    return run_request(flags_request(target, candidate, baseline=baseline, metrics=metrics,
                                     target_options=target_options, surface=surface, load=load,
                                     load_settings=load_settings, sesoi_pct=sesoi_pct, profiles=profiles,
                                     blocks=blocks, warmup_s=warmup_s, measure_s=measure_s,
                                     allow_host_global=allow_host_global, store=store, write_sysctl=write_sysctl,
                                     measurement=measurement, pairs=pairs, cpu_layout=cpu_layout,
                                     testbeds=testbeds, allow_design_commands=allow_design_commands,
                                     force=force, pilot_s=pilot_s, retry_failed=retry_failed))


def flags_request(target: str | None, candidate: Mapping[str, Any], *, baseline: Mapping[str, Any] | str = "current",
                  metrics: Sequence[str] = (), target_options: Mapping[str, Any] | None = None,
                  surface: str | None = None, **rest: Any) -> ValidateRequest:
    """The :class:`ValidateRequest` of :func:`tunelab.validate`'s parameters (the CLI's flags); with ``testbeds``
    (a testbeds file: :func:`request_testbeds`) the first testbed's spec is the request's."""
    options = {**(target_options or {}), **({"surface": surface} if surface else {})}
    beds_file, allow_commands = rest.pop("testbeds", None), bool(rest.pop("allow_design_commands", False))
    beds: tuple[Testbed, ...] = ()
    spec = {"type": target, "options": options}
    if beds_file is not None:
        beds, spec = request_testbeds(beds_file, target, options, allow_commands)
    base = dict(baseline) if isinstance(baseline, Mapping) else baseline
    settings = dict(rest.pop("load_settings", None) or {})
    store = rest.pop("store", None)
    how = Measurement(rest.pop("measurement", None) or MeasurementKind.SEQUENTIAL, rest.pop("pairs", None),
                      rest.pop("cpu_layout", None))
    return ValidateRequest(spec=spec, candidate=candidate, baseline=base,
                           metrics=tuple(metrics), profiles=tuple(rest.pop("profiles", ()) or ()),
                           load_settings=settings, study=f"validate-{spec['type']}",
                           store=Path(store) if store is not None else None, measurement=how, testbeds=beds, **rest)


def validate_change(path: PathLike | ChangeFile, *, allow_design_commands: bool = False,
                    store: PathLike | None = None, write_sysctl: PathLike | bool | None = None, force: bool = False,
                    pilot_s: float | None = None, retry_failed: bool = False) -> ValidateRun:
    """Validate the change a change file describes (:mod:`tunelab.designs.change`)."""
    change = path if isinstance(path, ChangeFile) else load_change(path)
    return run_request(request_of_change(change, allow_commands=allow_design_commands, store=store,
                                         write_sysctl=write_sysctl, force=force, pilot_s=pilot_s,
                                         retry_failed=retry_failed))


def validate(target: Target, load: Load, baseline: Mapping[str, Any] | str, candidate: Mapping[str, Any],
             metrics: Sequence[Metric | Mapping[str, Any] | str], store: Store, *, blocks: int | BlockRule = 6,
             sesoi_pct: float | None = None, profiles: Sequence[str] = ("overload",), warmup_s: float = 2.0,
             measure_s: float = 8.0, allow_host_global: bool = False, alpha: float = 0.05,
             knob_lookup: Any = None, phase: str = "validate",
             load_settings: Mapping[str, Any] | None = None) -> ConfirmResult:
    """Is ``candidate`` better than ``baseline`` on ``target`` under ``load``? (real trials, recorded)

    Parameters
    ----------
    target : an up Target
    load : a Load instance (its ``settings(profile, load_settings)`` gives each profile's settings)
    baseline : knob id -> value, or ``"current"``: the values the target holds now for the
        candidate's knobs (read before anything is applied)
    candidate : knob id -> value (knob ids per Contract 1: ``name``, ``name[device]``, ``@client``)
    metrics : goals, e.g. ``["qps:max:5", "latency_mean_ms:min:10"]``
    store : the :class:`tunelab.store.Store` trials are recorded in (phase ``validate``);
        finished run keys are reused, so an interrupted validation resumes
    blocks : ABBA blocks per profile, or a :class:`~tunelab.designs.change.BlockRule` (rounds until decided);
        sesoi_pct overrides every metric's SESOI
    profiles : load profiles to validate under (e.g. ``("low", "overload")``); each gets its own blocks
    load_settings : overrides of every profile's load settings (checked by the load's rules)

    Returns
    -------
    ConfirmResult with one table row per (profile, metric), the overall verdict and the failed trials.
    Everything :func:`plan_validation` refuses is refused before the first trial.
    """
    plan = plan_validation(target, load, baseline, candidate, metrics, blocks=blocks, sesoi_pct=sesoi_pct,
                           profiles=profiles, load_settings=load_settings, warmup_s=warmup_s, measure_s=measure_s,
                           allow_host_global=allow_host_global, knob_lookup=knob_lookup)
    return run_validation(plan, target, load, store, allow_host_global=allow_host_global, alpha=alpha, phase=phase)
