"""Change files: one candidate change, the server it is meant for and the operator's own load, reviewed like a
design (``tunelab validate CHANGE.yaml``, ``--plan`` to preview it).

Schema (every key is checked; an unknown key, a wrong type, a missing file, a bad ssh spec, a negative
duration... is one :class:`~tunelab.errors.DesignError` line naming the file, the line and the key)::

    name: somaxconn-4096              # store data/validate-<name>.sqlite, sysctl.d file 90-tunelab-validate-<name>.conf
    server:
      ssh: root@192.0.2.10:22         # user@host[:port]
      sudo: false                     # optional; true: a non-root login runs what needs root as `sudo -n --`
      key: ~/.ssh/id_ed25519          # optional
      known_hosts: ~/.ssh/known_hosts # optional (default: ssh's own)
      restart: systemctl restart nsd  # optional; runs after a requires_restart knob, only with --allow-design-commands
      software: nsd                   # optional: recorded in provenance with its version
    load_host:                        # optional; default: this machine runs the load
      ssh: tester@192.0.2.20
    load:
      generator: dnsperf
      query_file: queries.txt         # the operator's own `dnsperf -d` file, relative to the change file
      server_address: 192.0.2.53      # where queries go (default: the ssh host)
      transport: udp                  # udp | tcp (dnsperf's mode)
      profiles:                       # name -> dnsperf settings, or a list of dnsperf's own profile names
        normal: {rate: 2000, clients: 4}
        overload: {clients: 64}
    baseline: current                 # current | a sysctl.d (or YAML) file | {knob: value}
    candidate: candidate.conf         # a sysctl.d (or YAML) file | {net.core.somaxconn: 4096}
    metrics: [qps:max:5, latency_mean_ms:min:5]   # or mappings {name, goal, sesoi}
    blocks: 6                         # or {min: 4, max: 16, step: 4, until: decided, spending: linear}
    measurement: sequential           # or duet: A and B at once on two targets (lab, simulator), then swapped
    pairs: 12                         # duet only: pairs per profile (default twice blocks, at least 4; blocks
                                      # {min, max, step} with a duet count pairs, in rounds)
    cpu_layout: shared                # duet on a lab only: shared | split (docs/duet.md)
    warmup_s: 2
    measure_s: 8
    allow_host_global: false

Instead of ``server`` (and ``load_host``), ``target: {type, options}`` names any target a design can
(``lab``, ``simulator``, ...) to try a change file before production; the simulator measures with its own
load, so ``load`` is left out there. A profile in mapping form starts from the load's defaults plus the
``load`` section's ``query_file``, ``server_address`` and ``transport``; in list form it names the load's own
profiles (dnsperf: ``low``, ``overload``, ``udp_overload``) with those settings on top. Paths are relative to
the change file's directory (``~`` expands), except inside ``target.options``, which are a design's target
options (a lab's ``zone_file``: relative to the working directory, as in a design).

Examples
--------
>>> change = load_change_text('''
... name: somaxconn
... target: {type: lab}
... load: {generator: dnsperf, transport: udp, profiles: {normal: {rate: 2000}}}
... candidate: {net.core.somaxconn: 4096}
... blocks: {min: 4, max: 12}
... ''')
>>> change.study, change.blocks.looks(), dict(change.candidate), dict(change.load.profiles["normal"])
('validate-somaxconn', [4, 8, 12], {'net.core.somaxconn': 4096}, {'mode': 'udp', 'rate': 2000})
"""
from __future__ import annotations

import difflib
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from tunelab.designs.config_files import read_config_file
from tunelab.designs.schema import (MAX_DURATION_S, MAX_FILE_BYTES, MAX_REPLICATES, MEASUREMENTS, Path_, _compose,
                                    _Context, _freeze)
from tunelab.errors import DesignError, TunelabError, quoted
from tunelab.knobs import get_knob
from tunelab.loads import Load, get_load
from tunelab.model import KnobId, MeasurementKind, Metric, ParseError
from tunelab.paths import read_capped_text
from tunelab.store import check_study_name
from tunelab.targets import check_target_spec
from tunelab.targets.ssh import parse_spec

TOP_KEYS = ("name", "description", "server", "load_host", "target", "load", "baseline", "candidate", "metrics",
            "blocks", "warmup_s", "measure_s", "allow_host_global", "measurement", "pairs", "cpu_layout")
SERVER_KEYS = ("ssh", "sudo", "key", "known_hosts", "restart", "software")
LOAD_HOST_KEYS = ("ssh", "key", "known_hosts")
LOAD_KEYS = ("generator", "query_file", "server_address", "transport", "profiles")
BLOCK_KEYS = ("min", "max", "step", "until", "spending")
METRIC_KEYS = ("name", "goal", "sesoi")
TRANSPORTS = ("udp", "tcp")
#: ``blocks: {until: ...}``: the only stopping rule
UNTIL = ("decided",)
#: alpha-spending functions ``blocks: {spending: ...}`` may name (those of :mod:`tunelab.stats.rounds`)
SPENDING_NAMES = ("linear", "obrien-fleming", "pocock")
DEFAULT_SPENDING = "linear"
#: the first block count of a sequential validation: ABBA needs 2 blocks for a variance
MIN_BLOCKS = 2


@dataclass(frozen=True)
class BlockRule:
    """How many ABBA blocks per profile: ``min`` first, then ``step`` more per round while a metric is
    undecided, never beyond ``max``; a fixed count has ``min == max`` (one look at the full alpha)."""

    min: int
    max: int
    step: int
    until: str = "decided"
    spending: str = DEFAULT_SPENDING

    @classmethod
    def fixed(cls, blocks: int) -> "BlockRule":
        return cls(blocks, blocks, blocks)

    @property
    def in_rounds(self) -> bool:
        return self.max > self.min

    def looks(self) -> list[int]:
        """The block counts at which the blocks are judged: ``min, min + step, ..., max``.

        >>> BlockRule(4, 10, 4).looks(), BlockRule.fixed(6).looks()
        ([4, 8, 10], [6])
        """
        counts = list(range(self.min, self.max, self.step)) + [self.max]
        return sorted(set(counts))


@dataclass(frozen=True)
class SshHost:
    """A machine reached by ssh: ``user@host[:port]``, its key file and known_hosts file (absolute, or None)."""

    ssh: str
    key: str | None = None
    known_hosts: str | None = None


@dataclass(frozen=True)
class LoadChange:
    """The load: its generator, the operator's query file (absolute path) and each profile's settings."""

    generator: str
    profiles: Mapping[str, Mapping[str, Any]]
    query_file: str | None = None
    server_address: str | None = None


@dataclass(frozen=True)
class ChangeFile:
    """A parsed, checked change file (:func:`load_change`); ``source`` is the file it came from."""

    name: str
    source: str
    target_type: str
    target_options: Mapping[str, Any]
    load: LoadChange | None
    baseline: Mapping[str, Any] | str
    candidate: Mapping[str, Any]
    metrics: tuple[Metric, ...]
    blocks: BlockRule
    warmup_s: float
    measure_s: float
    allow_host_global: bool = False
    server: SshHost | None = None
    load_host: SshHost | None = None
    restart: tuple[str, ...] | None = None
    software: str | None = None
    #: ``measurement``: ``sequential`` or ``duet``; ``pairs`` and ``cpu_layout`` of a duet (None: the defaults)
    measurement: MeasurementKind = MeasurementKind.SEQUENTIAL
    pairs: int | None = None
    cpu_layout: str | None = None

    @property
    def study(self) -> str:
        """The study of the store and of the sysctl.d file: ``validate-<name>``."""
        return f"validate-{self.name}"

    def target_spec(self, service: str | None = None) -> dict[str, Any]:
        """``{"type", "options"}`` for :func:`tunelab.targets.build_target`; with ``service`` (the load's, e.g.
        ``dns``) the restart command becomes the target's ``service_commands`` for it."""
        options = thaw(self.target_options)
        if service and self.restart:
            options["service_commands"] = {service: list(self.restart)}
        return {"type": self.target_type, "options": options}


def thaw(value: Any) -> Any:
    """Read-only mappings and tuples (as :func:`parse_change` freezes them) back to dicts and lists.

    >>> thaw(MappingProxyType({"a": (1, MappingProxyType({"b": 2}))}))
    {'a': [1, {'b': 2}]}
    """
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


class ChangeContext(_Context):
    """The design parser's error context, with ``did you mean`` for an unknown key."""

    def mapping(self, value: Any, path: Path_, allowed: Iterable[str]) -> dict[str, Any]:
        allowed = tuple(allowed)
        for key in value if isinstance(value, dict) else ():
            if key not in allowed:
                close = difflib.get_close_matches(str(key), allowed, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise self.error(path + (key,), f"unknown key {quoted(key)}; {hint}allowed keys: {', '.join(allowed)}")
        return super().mapping(value, path, allowed)

    def file(self, value: Any, path: Path_, base: Path, what: str) -> str:
        """An existing regular file named relative to ``base`` (``~`` expanded): its absolute path."""
        text = self.string(value, path)
        full = Path(os.path.expanduser(text))
        full = full if full.is_absolute() else base / full
        if not full.is_file():
            problem = "does not exist" if not full.exists() else "is not a regular file"
            raise self.error(path, f"{what} {str(full)!r} {problem}; paths are relative to the change file's folder")
        return str(full.resolve())


def _ssh_host(ctx: ChangeContext, raw: Any, path: Path_, keys: tuple[str, ...], base: Path) -> dict[str, Any]:
    raw = ctx.mapping(raw, path, keys)
    if "ssh" not in raw:
        raise ctx.error(path, "`ssh` is required: user@host[:port], e.g. ssh: root@192.0.2.10:22")
    try:
        parse_spec(ctx.string(raw["ssh"], path + ("ssh",)))
    except TunelabError as exc:
        raise ctx.error(path + ("ssh",), str(exc)) from None
    out = {"ssh": raw["ssh"]}
    for key, what in (("key", "ssh key file"), ("known_hosts", "known_hosts file")):
        out[key] = ctx.file(raw[key], path + (key,), base, what) if raw.get(key) is not None else None
    return {**raw, **out}


def _restart(ctx: ChangeContext, raw: Any) -> tuple[str, ...] | None:
    path = ("server", "restart")
    if raw is None:
        return None
    try:
        argv = shlex.split(raw) if isinstance(raw, str) else raw
    except ValueError as exc:
        raise ctx.error(path, f"cannot split {quoted(raw)} into words ({exc}); check the quotes") from None
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) and a and "\0" not in a for a in argv):
        raise ctx.error(path, f"must be a command line such as 'systemctl restart nsd' (or a list of words), got "
                              f"{quoted(raw)}")
    return tuple(argv)


def _target(ctx: ChangeContext, data: Mapping[str, Any], base: Path) -> dict[str, Any]:
    """``server`` (+ ``load_host``) as an ssh target, or ``target: {type, options}``."""
    if "target" in data:
        if "server" in data or "load_host" in data:
            raise ctx.error(("target",), "give either server (and load_host), or target, not both")
        raw = ctx.mapping(data["target"], ("target",), ("type", "options"))
        spec = {"type": ctx.string(raw.get("type"), ("target", "type")),
                "options": ctx.mapping(raw.get("options"), ("target", "options"), tuple(raw.get("options") or {}))}
        try:
            check_target_spec(spec, allow_commands=True)
        except TunelabError as exc:
            raise ctx.error(("target",), str(exc)) from None
        return {"target_type": spec["type"], "target_options": spec["options"]}
    if "server" not in data:
        raise ctx.error((), "`server` is required (ssh: user@host[:port]), or `target` to try the change elsewhere")
    server = _ssh_host(ctx, data["server"], ("server",), SERVER_KEYS, base)
    host = _ssh_host(ctx, data["load_host"], ("load_host",), LOAD_HOST_KEYS, base) if data.get("load_host") else None
    keys = [h["key"] for h in (server, host) if h and h["key"]]
    options: dict[str, Any] = {"server": server["ssh"]}
    if host:
        options["client"] = host["ssh"]
    if keys:
        options["connect_kwargs"] = {"key_filename": keys[0] if len(keys) == 1 else keys}
    if server["known_hosts"]:
        options["known_hosts"] = server["known_hosts"]
    if ctx.boolean(server.get("sudo", False), ("server", "sudo")):
        options["sudo"] = True                                   # the load host never needs root
    if host and host["known_hosts"] and host["known_hosts"] != server["known_hosts"]:
        options["client_known_hosts"] = host["known_hosts"]      # the load host's own trusted keys
    software = server.get("software")
    return {"target_type": "ssh", "target_options": options, "restart": _restart(ctx, server.get("restart")),
            "software": None if software is None else ctx.string(software, ("server", "software")),
            "server": SshHost(server["ssh"], server["key"], server["known_hosts"]),
            "load_host": SshHost(host["ssh"], host["key"], host["known_hosts"]) if host else None}


def _checked_settings(ctx: ChangeContext, load: Load, settings: dict[str, Any], path: Path_,
                      own: Mapping[str, Path_]) -> dict[str, Any]:
    """``settings`` checked by the load's own rules (query file line by line); an error names the key's line."""
    for key, value in settings.items():
        try:
            load.validate_settings({key: value})
        except TunelabError as exc:
            raise ctx.error(own.get(key, path + (key,)), str(exc)) from None
    try:
        load.validate_settings(settings)
    except TunelabError as exc:
        raise ctx.error(path, str(exc)) from None
    return settings


def _profiles(ctx: ChangeContext, raw: Any, load: Load, common: dict[str, Any],
              own: Mapping[str, Path_]) -> dict[str, dict[str, Any]]:
    path = ("load", "profiles")
    if isinstance(raw, list) and raw:
        out = {}
        for i, name in enumerate(raw):
            name = ctx.string(name, path + (i,), tuple(load.profiles))
            out[name] = _checked_settings(ctx, load, {**load.profiles[name], **common}, path + (i,), own)
        return out
    if not isinstance(raw, dict) or not raw:
        raise ctx.error(path, "name one or more profiles: a mapping name -> settings, e.g. "
                              "{normal: {rate: 2000, clients: 4}}, or a list of the load's own profiles "
                              f"({', '.join(load.profiles)})")
    out = {}
    for name, settings in raw.items():
        if not isinstance(name, str) or not name.replace("-", "_").isidentifier():
            raise ctx.error(path + (name,), f"a profile name is letters, digits, '-' and '_', got {quoted(name)}")
        given = ctx.mapping(settings, path + (name,), tuple(settings or {}))
        out[name] = _checked_settings(ctx, load, {**common, **given}, path + (name,), own)
    return out


def _load(ctx: ChangeContext, raw: Any, base: Path, target_type: str) -> LoadChange | None:
    if target_type == "simulator":
        if raw is not None:
            raise ctx.error(("load",), "the simulator target measures with its own load; leave `load` out")
        return None
    raw = ctx.mapping(raw, ("load",), LOAD_KEYS)
    generator = ctx.string(raw.get("generator"), ("load", "generator"))
    try:
        load = get_load(generator)()
    except TunelabError as exc:
        raise ctx.error(("load", "generator"), str(exc)) from None
    common: dict[str, Any] = {}
    own: dict[str, Path_] = {}
    if raw.get("query_file") is not None:
        common["query_file"] = ctx.file(raw["query_file"], ("load", "query_file"), base, "query file")
        own["query_file"] = ("load", "query_file")
    if raw.get("transport") is not None:
        common["mode"] = ctx.string(raw["transport"], ("load", "transport"), TRANSPORTS)
        own["mode"] = ("load", "transport")
    if raw.get("server_address") is not None:
        common["server_address"] = raw["server_address"]
        own["server_address"] = ("load", "server_address")
    profiles = _profiles(ctx, raw.get("profiles"), load, common, own)
    frozen = MappingProxyType({name: MappingProxyType(s) for name, s in profiles.items()})
    return LoadChange(generator, frozen, common.get("query_file"), common.get("server_address"))


def _config(ctx: ChangeContext, raw: Any, key: str, base: Path) -> dict[str, Any] | str:
    """``baseline``/``candidate``: ``current`` (baseline only), a file, or a mapping; each knob and value checked."""
    path: Path_ = (key,)
    if key == "baseline" and raw in (None, "current"):
        return "current"
    if isinstance(raw, str):
        file = Path(ctx.file(raw, path, base, f"{key} file"))
        try:
            config = read_config_file(file)
        except TunelabError as exc:
            raise ctx.error(path, str(exc)) from None
    else:
        config = ctx.mapping(raw, path, tuple(raw or {}) if isinstance(raw, dict) else ())
    if not config:
        raise ctx.error(path, f"the {key} sets no knob; give a sysctl.d file or a mapping knob: value")
    for kid, value in config.items():
        try:
            knob = get_knob(KnobId.parse(str(kid)).name)
            knob.validate(value)
        except (TunelabError, ParseError) as exc:
            raise ctx.error(path + (kid,), str(exc)) from None
    return config


def _metric(ctx: ChangeContext, raw: Any, path: Path_, load: Load | None) -> Metric:
    try:
        if isinstance(raw, dict):
            raw = ctx.mapping(raw, path, METRIC_KEYS)
            metric = Metric(ctx.string(raw.get("name"), path + ("name",)),
                            {"max": "maximize", "min": "minimize"}.get(raw.get("goal", "max"), raw.get("goal")),
                            raw.get("sesoi", 5.0))
        else:
            metric = Metric.parse(ctx.string(raw, path))
    except ParseError as exc:
        raise ctx.error(path, f"{exc}; write NAME:max:SESOI or {{name, goal: max|min, sesoi: PCT}}") from None
    known = list(getattr(load, "metrics", {}) or {})
    if known and metric.name not in known:
        close = difflib.get_close_matches(metric.name, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ctx.error(path, f"{load.name} does not report metric {quoted(metric.name)}; {hint}it reports "
                              f"{', '.join(known)}")
    return metric


def _metrics(ctx: ChangeContext, raw: Any, load: Load | None) -> tuple[Metric, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise ctx.error(("metrics",), f"must be a list such as [qps:max:5], got {quoted(raw)}")
    return tuple(_metric(ctx, item, ("metrics", i), load) for i, item in enumerate(raw))


def _blocks(ctx: ChangeContext, raw: Any) -> BlockRule:
    path: Path_ = ("blocks",)
    limit = ("MAX_REPLICATES", MAX_REPLICATES)
    if not isinstance(raw, dict):
        return BlockRule.fixed(ctx.integer(raw, path, minimum=MIN_BLOCKS, maximum=limit))
    raw = ctx.mapping(raw, path, BLOCK_KEYS)
    for key in ("min", "max"):
        if key not in raw:
            raise ctx.error(path, f"`{key}` is required, e.g. blocks: {{min: 4, max: 16, until: decided}}")
    low = ctx.integer(raw["min"], path + ("min",), minimum=MIN_BLOCKS, maximum=limit)
    high = ctx.integer(raw["max"], path + ("max",), minimum=MIN_BLOCKS, maximum=limit)
    if low > high:
        raise ctx.error(path, f"min={low} is larger than max={high}; blocks start at min and grow up to max")
    step = ctx.integer(raw.get("step", low), path + ("step",), minimum=1, maximum=limit)
    return BlockRule(low, high, step, ctx.string(raw.get("until", "decided"), path + ("until",), UNTIL),
                     ctx.string(raw.get("spending", DEFAULT_SPENDING), path + ("spending",), SPENDING_NAMES))


def _measurement(ctx: ChangeContext, data: Mapping[str, Any]) -> dict[str, Any]:
    """``measurement`` (``sequential`` or ``duet``) and a duet's ``pairs`` and ``cpu_layout``; their ranges, the
    layout's name and the target type are checked where the flags' are (validate's own checks)."""
    kind = MeasurementKind(ctx.string(data.get("measurement", MeasurementKind.SEQUENTIAL.value), ("measurement",),
                                      MEASUREMENTS))
    given = [key for key in ("pairs", "cpu_layout") if data.get(key) is not None]
    if given and kind is not MeasurementKind.DUET:
        raise ctx.error((given[0],), f"{given[0]} goes with measurement: duet; add it or leave {given[0]} out")
    pairs = data.get("pairs")
    return {"measurement": kind,
            "pairs": None if pairs is None else ctx.integer(pairs, ("pairs",), minimum=1,
                                                            maximum=("MAX_REPLICATES", MAX_REPLICATES)),
            "cpu_layout": None if data.get("cpu_layout") is None else ctx.string(data["cpu_layout"], ("cpu_layout",))}


def parse_change(data: Any, source: str = "<string>", lines: Mapping[Path_, int] | None = None,
                 base: Path | None = None) -> ChangeFile:
    """A change file's mapping -> :class:`ChangeFile`; the first problem is one DesignError line."""
    ctx = ChangeContext(source, lines or {})
    data = ctx.mapping(data, (), TOP_KEYS)
    base = base if base is not None else Path.cwd()
    name = ctx.string(data.get("name"), ("name",))
    try:
        check_study_name(f"validate-{name}", "name")
    except TunelabError as exc:
        raise ctx.error(("name",), str(exc).replace("validate-", "", 1)) from None
    target = _target(ctx, data, base)
    load = _load(ctx, data.get("load"), base, target["target_type"])
    if "candidate" not in data:
        raise ctx.error((), "`candidate` is required: a sysctl.d file or {knob: value}")
    durations = {key: ctx.number(data.get(key, default), (key,), 0.0, strict=strict,
                                 maximum=("MAX_DURATION_S", MAX_DURATION_S))
                 for key, default, strict in (("warmup_s", 2.0, False), ("measure_s", 8.0, True))}
    target["target_options"] = _freeze(target["target_options"])
    return ChangeFile(
        name=name, source=source, **target, load=load, baseline=_freeze(_config(ctx, data.get("baseline"),
                                                                                  "baseline", base)),
        candidate=_freeze(_config(ctx, data["candidate"], "candidate", base)),
        metrics=_metrics(ctx, data.get("metrics"), get_load(load.generator)() if load else None),
        blocks=_blocks(ctx, data.get("blocks", 6)), **durations, **_measurement(ctx, data),
        allow_host_global=ctx.boolean(data.get("allow_host_global", False), ("allow_host_global",)))


def load_change_text(text: str, source: str = "<string>", base: Path | None = None) -> ChangeFile:
    """Parse and check change-file YAML given as text (paths relative to ``base``, default the working folder)."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        raise DesignError(f"{source}: the change file is larger than MAX_FILE_BYTES={MAX_FILE_BYTES} bytes")
    data, lines = _compose(text, source)
    return parse_change(data, source=source, lines=lines, base=base)


def load_change(path: str | os.PathLike[str]) -> ChangeFile:
    """Read, parse and check a change file; relative paths in it are relative to its folder."""
    path = Path(path)
    text = read_capped_text(path, MAX_FILE_BYTES, DesignError, "change file", "see docs/operators.md for one")
    return load_change_text(text, source=str(path), base=path.resolve().parent)


__all__ = ["BlockRule", "ChangeFile", "LoadChange", "SshHost", "load_change", "load_change_text", "parse_change"]
