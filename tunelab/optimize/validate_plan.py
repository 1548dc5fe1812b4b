"""``tunelab validate CHANGE.yaml --plan``: every command a validation will run, where, as whom, in what order,
and how long it will take, without applying or running anything.

The preview runs :func:`tunelab.optimize.validation.check_request` (every check ``validate`` makes before
it builds anything) and, unless ``offline``, brings the target up and runs
:func:`tunelab.optimize.validation.plan_on_target` as ``validate`` does: over ssh that connects (host keys
checked), checks each host (:meth:`tunelab.targets.ssh.SshTarget.check_access`: a command through the exec
channel, root on the server or ``sudo -n true``, the load's tools) and reads the knobs' current values, nothing
else; on the lab it builds the lab's namespaces.
So a preview that passes is a validation that starts.

Estimated time per profile: ``blocks x 4 trials (A B B A) x (warm-up + measured time + overhead)``, the
overhead being :data:`TRIAL_OVERHEAD_S` (knobs applied, verified and restored, the load started) plus
:data:`RESTART_S` per trial when the service restarts (an assumption: a real server may take longer). A duet
(``measurement: duet``) takes ``pairs x (warm-up + measured time + overhead)`` per profile: both sides of a
pair measure at once; in rounds (``blocks: {min, max, step}``, counted in pairs) from ``min`` to ``max`` pairs.
"""
from __future__ import annotations

import os
import shlex
import socket
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from tunelab.designs.change import BlockRule
from tunelab.errors import TunelabError
from tunelab.formatting import level_label
from tunelab.loads import Load
from tunelab.optimize.confirm import ValidationPlan
from tunelab.optimize.blocks_in_rounds import block_looks
from tunelab.optimize.trial_time import RESTART_S, TRIAL_OVERHEAD_S, TRIALS_PER_BLOCK
from tunelab.optimize.validation import (ALLOW_FLAG, CheckedRequest, CommandsNotAllowed, ValidateRequest,
                                         change_preflight, check_request, plan_on_target, version_argv)
from tunelab.preflight import PreflightError
from tunelab.runner.binding import bind_knob_ids
from tunelab.targets import build_target
from tunelab.targets.ssh import SUDO, parse_spec

#: where the private query-file directory will be (``mktemp -d`` chooses the name on the load host)
PRIVATE_DIR = "$TMPDIR/tunelab-dnsperf.XXXXXXXXXX"


@dataclass(frozen=True)
class ValidatePreview:
    """What a validation would do: ``lines`` to print, the estimated seconds (fewest and most blocks) and
    whether the target was reached (``online``)."""

    lines: list[str]
    estimate_s: tuple[float, float]
    online: bool
    commands: list[dict[str, str]] = field(default_factory=list)
    #: why ``validate`` would refuse to start (a restart command without --allow-design-commands, a change the
    #: pre-flight says cannot act), or None
    refusal: str | None = None
    #: the pre-flight's findings (:meth:`tunelab.preflight.Preflight.to_json`)
    preflight: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        return "\n".join(self.lines)

    def to_json(self) -> dict[str, Any]:
        return {"online": self.online, "commands": self.commands, "refusal": self.refusal, "preflight": self.preflight,
                "estimate_s": {"min": self.estimate_s[0], "max": self.estimate_s[1]}, "lines": self.lines}


def places(spec: Mapping[str, Any]) -> dict[str, str]:
    """``{"server": ..., "load host": ...}``: where each role's commands run and as whom."""
    options = spec.get("options") or {}
    here = f"this machine: {socket.gethostname()}, as {'root' if os.geteuid() == 0 else 'user ' + str(os.geteuid())}"
    if spec.get("type") != "ssh":
        kind = {"lab": "the lab's server namespace on this machine", "simulator": "nowhere (SYNTHETIC simulator)"}
        return {"server": kind.get(str(spec.get("type")), here), "load host": here if spec.get("type") != "lab"
                else "the lab's client namespace on this machine", "this machine": here}

    def remote(text: str, sudo: bool) -> str:
        user, host, port = parse_spec(text)
        whom = "as root" if user == "root" else f"as {user or 'your ssh user'}" + (
            f", root through `{' '.join(SUDO)}`" if sudo else
            " (knob writes need root: log in as root, or set server.sudo: true)" if sudo is False else "")
        return f"{host}:{port} over ssh, {whom}"

    return {"server": remote(options["server"], bool(options.get("sudo"))),
            "load host": remote(options["client"], None) if options.get("client") else here,     # never needs root
            "this machine": here}


def root_prefix(spec: Mapping[str, Any]) -> str:
    """``sudo -n -- `` when the server's commands that need root go through sudo (``ssh`` with ``sudo``), else ``''``."""
    options = spec.get("options") or {}
    return " ".join(SUDO) + " " if spec.get("type") == "ssh" and options.get("sudo") else ""


def knob_lines(request: ValidateRequest, plan: ValidationPlan | None) -> list[str]:
    """The compared values and the files each trial writes."""
    base = plan.baseline if plan is not None else request.baseline
    cand = plan.candidate if plan is not None else request.candidate
    shown = {"current": "current (read from the server when it starts; --offline did not read it)"}
    lines = [f"baseline: {shown['current'] if isinstance(base, str) else text_of(base)}"
             + (" (read just now, read-only)" if plan is not None and plan.baseline_source == "current" else ""),
             f"candidate: {text_of(cand)}"]
    for knob in bind_knob_ids(cand):
        try:
            path = knob.knob.path(None, knob.device)     # type: ignore[arg-type]
        except (TunelabError, AttributeError, TypeError):
            path = knob.id
        lines.append(f"  knob {knob.id}: written to {path} on the {knob.host}"
                     + ("; needs the service restarted" if getattr(knob.knob, "requires_restart", False) else ""))
    return lines


def label(role: str, where: Mapping[str, str]) -> str:
    """``server (db1:22 over ssh, as root)``; this machine is named once."""
    place = where.get(role, role)
    return place if role == "this machine" else f"{role} ({place})"


def text_of(config: Mapping[str, Any]) -> str:
    return ", ".join(f"{kid}={level_label(value)}" for kid, value in config.items())


def load_commands(load: Load | None, settings: Mapping[str, Mapping[str, Any]], address: str,
                  duration_s: float) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """``(where, command)`` of the load before the first trial (its private directory, the query file copy)
    and in each trial (each profile's command)."""
    if load is None:
        return [], [("this machine", "the simulator's own SYNTHETIC load (nothing runs)")]
    dnsperf = getattr(load, "name", "") == "dnsperf"
    setup: list[tuple[str, str]] = []
    if dnsperf:
        setup.append(("load host", f"mktemp -d -t tunelab-dnsperf.XXXXXXXXXX  (a private directory, mode 0700: "
                                   f"{PRIVATE_DIR})"))
        for path in sorted({str(s["query_file"]) for s in settings.values() if s.get("query_file")}):
            setup.append(("load host", f"copy {path} to {PRIVATE_DIR}/queries (streamed into `dd` through the "
                                       "load host's ssh exec channel, or a local write; checked line by line first, "
                                       "its sha256 recorded)"))
    trial = []
    for profile, own in settings.items():
        extra = {"remote_query_file": f"{PRIVATE_DIR}/queries"} if dnsperf else {}
        argv = load.command({**own, **extra}, duration_s, address)
        trial.append(("load host", f"[profile {profile}] {shlex.join(argv)}"))
    return setup, trial


def rounds_text(rule: BlockRule, unit: str) -> str:
    """``blocks per profile: 4 first, then 4 more per round ...`` (a duet: ``pairs per profile``).

    >>> rounds_text(BlockRule(4, 8, 4), "pairs")
    'pairs per profile: 4 first, then 4 more per round while a metric is undecided, at most 8; looks at 4 (alpha 0.025), 8 (alpha 0.025) (linear alpha spending)'
    """
    looks = ", ".join(f"{n} (alpha {a:.3g})" for n, a in block_looks(rule))
    return f"{unit} per profile: {rule.min}" + (f" first, then {rule.step} more per round while a metric is "
                                                 f"undecided, at most {rule.max}; looks at {looks} "
                                                 f"({rule.spending} alpha spending)" if rule.in_rounds else "")


def estimate_line(seconds: tuple[float, float], count: str, per: str, warmup_s: float, measure_s: float,
                  restarts: bool) -> str:
    """``estimated time: LOW to HIGH (COUNT x (warm-up + measured + overhead) per PER)``."""
    low, high = seconds
    return (f"estimated time: {fmt_duration(low)}" + (f" to {fmt_duration(high)}" if high > low else "")
            + f" ({count} x ({warmup_s:g} s warm-up + {measure_s:g} s measured + {TRIAL_OVERHEAD_S:g} s overhead"
            + (f" + {RESTART_S:g} s restart, assumed" if restarts else "") + f") per {per})")


def time_lines(checked: CheckedRequest, profiles: int, warmup_s: float, measure_s: float) -> tuple[list[str], tuple[float, float]]:
    """The blocks' order and the estimated time for the fewest and the most blocks (a duet: its pairs)."""
    rule: BlockRule = checked.rule
    per_trial = warmup_s + measure_s + TRIAL_OVERHEAD_S + (RESTART_S if checked.restarts else 0.0)
    if checked.sides:
        return duet_time_lines(checked, profiles, per_trial, warmup_s, measure_s)
    low, high = (TRIALS_PER_BLOCK * n * profiles * per_trial for n in (rule.min, rule.max))
    lines = [rounds_text(rule, "blocks") if rule.in_rounds else f"blocks per profile: {rule.min} first",
             "order: each profile in turn; within a block A B B A (A = baseline, B = candidate), every trial "
             "applies its configuration, warms up, measures and puts the knobs back",
             estimate_line((low, high), f"blocks x {profiles} profile(s) x {TRIALS_PER_BLOCK} trials", "trial",
                           warmup_s, measure_s, checked.restarts)]
    return lines, (low, high)


def duet_time_lines(checked: CheckedRequest, profiles: int, per_trial: float, warmup_s: float,
                    measure_s: float) -> tuple[list[str], tuple[float, float]]:
    """A duet's two targets, its pairs (in rounds, if so) and its estimated time for the fewest and the most
    pairs (both sides of a pair measure at once)."""
    rule = checked.request.measurement.pair_rule(checked.rule)
    low, high = (n * profiles * per_trial for n in (rule.min, rule.max))
    names = [f" (testbed {name})" for name in checked.side_names] or ["", ""]
    sides = "; ".join(f"side {n}{names[n]}: {checked.spec.get('type')} "
                      f"{text_of(side.get('options') or {}) or '(as given)'}" for n, side in enumerate(checked.sides))
    lines = [f"measurement: duet on two {checked.spec.get('type')} targets of the same spec ({sides})",
             rounds_text(rule, "pairs") + "; each pair measures A on one side and B on the other at the same "
             "moment, then the next swaps sides (0 1 1 0 ...), so a fixed difference between the sides cancels",
             estimate_line((low, high), f"pairs x {profiles} profile(s)", "pair", warmup_s, measure_s,
                           checked.restarts)]
    return lines, (low, high)


def fmt_duration(seconds: float) -> str:
    """``95 s`` or ``12 min 40 s``.

    >>> fmt_duration(95), fmt_duration(760)
    ('95 s', '12 min 40 s')
    """
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{seconds:.0f} s" if minutes < 2 else f"{minutes} min {rest} s"


def preview_request(request: ValidateRequest, offline: bool = False) -> ValidatePreview:
    """The preview of ``request`` (see the module docstring); every refusal is the one ``validate`` gives. A
    restart command not allowed yet is shown, and ``refusal`` says validate would not start without the flag."""
    refusal = None
    try:
        checked = check_request(request)
    except CommandsNotAllowed as exc:
        refusal = str(exc)
        checked = check_request(replace(request, allow_commands=True))
    plan, load, warmup_s, measure_s, address = None, checked.load, request.warmup_s, request.measure_s, None
    if offline:
        checks = change_preflight(checked, None, load)
    else:
        with build_target(checked.build_spec, allow_commands=True) as live:
            load, plan, warmup_s, measure_s = plan_on_target(checked, live)
            address = live.address("server")
            checks = change_preflight(checked, plan, load, live)
    options = checked.spec.get("options") or {}
    if address is None:
        address = parse_spec(options["server"])[1] if options.get("server") else "SERVER_ADDRESS"
    settings = plan.profiles if plan is not None else (dict(checked.profiles) if isinstance(checked.profiles, Mapping)
                                                       else {name: {} for name in checked.profiles})
    preview = assemble(checked, plan, load, settings, address, warmup_s, measure_s, online=not offline,
                       allowed=refusal is None)
    if refusal is None and checks.refusals and not request.force:
        try:
            checks.check(force=False)
        except PreflightError as exc:
            refusal = f"{request.source}: {exc}" if request.source else str(exc)
    lines = preview.lines[:2] + checks.lines() + preview.lines[2:]
    return replace(preview, lines=lines, refusal=refusal, preflight=checks.to_json())


def assemble(checked: CheckedRequest, plan: ValidationPlan | None, load: Load | None,
             settings: Mapping[str, Mapping[str, Any]], address: str, warmup_s: float, measure_s: float,
             online: bool, allowed: bool = True) -> ValidatePreview:
    """The preview's lines from what was checked."""
    request, where, sudo = checked.request, places(checked.spec), root_prefix(checked.spec)
    reach = ("offline: the server was not contacted (its knobs and current values are checked when validate starts)"
             if not online else "connected (host keys checked), ran a command on each host through ssh's exec "
             f"channel, checked that the server can write as root{' (sudo -n true)' if sudo else ''} and that the "
             "load's tools exist, and read the knobs' current values"
             if request.target_type == "ssh" else "brought the target up and read the knobs' current values")
    write = (f" (`{sudo}dd of=FILE`, the value on its stdin through ssh's exec channel)"
             if request.target_type == "ssh" else "")
    setup, trial = load_commands(load, settings, address, warmup_s + measure_s)
    commands: list[tuple[str, str]] = []
    if request.target_type == "ssh":
        commands.append(("this machine", f"ssh to the server{' and the load host' if 'client' in checked.spec['options'] else ''} "
                                         "(host keys checked against known_hosts; unknown keys refused)"))
    commands += [("server", "read each knob's current value (cat); nothing is written before it is journalled"),
                 *setup, ("server", f"per trial: journal, then write the knobs{write} and read them back")]
    restart = (checked.spec.get("options") or {}).get("service_commands") or {}
    for service, argv in restart.items():
        why = f"runs because {ALLOW_FLAG} was given" if allowed else \
            f"NOT allowed yet: validate refuses to start without {ALLOW_FLAG}"
        commands.append(("server", f"per trial, after the knobs: {sudo}{shlex.join(argv)} (restarts {service}; "
                                   f"{why})"))
    if checked.restarts and not restart:
        commands.append(("server", f"per trial, after the knobs: the target restarts its "
                                   f"{getattr(load, 'service', None) or ''} service itself (no command of yours)"))
    commands += [(role, f"per trial: {text}") for role, text in trial]
    commands.append(("server", f"per trial: put every knob back to the value read before it{write}"))
    if request.software and version_argv(request.software):
        commands.append(("server", f"{sudo}{shlex.join(version_argv(request.software) or ())} (the version, for "
                                   "provenance)"))
    if load is not None and getattr(load, "name", "") == "dnsperf":
        commands.append(("load host", f"rm -rf -- {PRIVATE_DIR} (at the end)"))
    times, estimate = time_lines(checked, len(settings), warmup_s, measure_s)
    lines = [f"plan of {request.study}" + (f" ({request.source})" if request.source else "")
             + ": nothing has been applied or run", f"checks: passed; {reach}",
             *[f"{role}: {text}" for role, text in where.items() if role != "this machine"],
             *(knob_lines(request, plan)), "commands, in order (where: what):",
             *[f"  {n}. {label(role, where)}: {text}" for n, (role, text) in enumerate(commands, 1)],
             *times, f"store: {request.store_path} (journal of every change: `tunelab restore {request.store_path}` "
             "puts the knobs back after a crash)"]
    return ValidatePreview(lines, estimate, online, [{"where": role, "runs_on": where.get(role, role), "command": text}
                                                     for role, text in commands])


__all__ = ["ValidatePreview", "preview_request"]
