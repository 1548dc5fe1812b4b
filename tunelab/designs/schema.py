"""The design file (Contract 1): strict YAML parsing into frozen dataclasses.

Every problem becomes one :class:`~tunelab.errors.DesignError` that names the file, the line,
the key path (``knobs[1].levels[0]``), the rule broken and the value given::

    designs/x.yaml:14: knobs[1].levels[0]: value 'abc' is not an integer ...

Unknown keys (at any level) and duplicate keys are errors, so typos never pass silently.
Knob levels are validated and canonicalised by the knob catalogue (``knob.validate``).
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import yaml

from tunelab.designs.constraints import EXCLUDABLE_TYPES, Constraints, design_ranks, matches
from tunelab.designs.generators import GENERATORS, runs_per_replicate
from tunelab.errors import DesignError, KnobError, LoadError, TargetError, quoted
from tunelab.paths import read_capped_text
from tunelab.knobs import Knob, get_knob
from tunelab.knobs.families import check_design_device
from tunelab.loads import Load, get_load
from tunelab.model import (HOSTS, METRIC_SCALES, RANGE_DESIGNS, DesignType, Direction, MeasurementKind, Metric, ParseError,
                           knob_id, level_from_json, level_to_json)
from tunelab.targets import TARGETS, check_target_spec, target_commands

#: target types of Contract 4 (the targets registry may add more)
TARGET_TYPES = ("lab", "local", "ssh", "dry-run", "simulator")
#: load generators of Contract 5 (the loads registry may add more)
LOAD_GENERATORS = ("dnsperf", "iperf3", "fio", "wrk")
DIRECTIONS = tuple(direction.value for direction in Direction)
CORRECTIONS = ("holm", "bonferroni", "fdr_bh", "none")
SCALES = ("linear", "log")
#: a study name: starts with a letter or digit (never an option such as ``--all``), then [a-z0-9_-]
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]*$")

# Limits on untrusted design files (designs/README.md, "Limits and trust"). Each is checked with
# one DesignError naming the key path, the limit and the value, before anything big is built.
#: longest study name (it names data/<name>.sqlite and reports/<name>/)
MAX_NAME_LENGTH = 64
#: largest design file read, in bytes
MAX_FILE_BYTES = 1 << 20
#: most YAML nodes visited while composing (aliases are counted every time they are expanded,
#: so an alias "billion laughs" bomb stops here)
MAX_YAML_NODES = 100_000
#: deepest nesting of YAML collections
MAX_YAML_DEPTH = 32
#: most knobs in one design
MAX_KNOBS = 64
#: most levels per knob (explicit lists and low/high ranges alike)
MAX_LEVELS = 1_000
#: most metrics in one design
MAX_METRICS = 32
#: most replicates (and so blocks, which divide them)
MAX_REPLICATES = 1_000
#: largest warmup_s and measure_s, in seconds
MAX_DURATION_S = 3_600.0
#: most runs in a plan (runs per replicate x replicates), checked before the plan is generated
MAX_PLAN_RUNS = 100_000
#: largest value of a numeric design option (latin_hypercube samples, baseline_runs, baseline_every, runs)
MAX_OPTION_VALUE = 10_000
#: largest seed (numpy accepts any int; a 4000-digit one is no more random)
MAX_SEED = 2**63 - 1
#: longest error message; values quoted in errors are cut to this
MAX_MESSAGE_CHARS = 600

TOP_KEYS = ("name", "description", "target", "load", "warmup_s", "measure_s", "metrics", "knobs", "design", "analysis",
            "noise", "guards", "constraints", "measurement", "preflight")
#: ``measurement:``: one trial at a time, or a duet (tunelab.duet: two targets at once; OAT designs on one target)
MEASUREMENTS = tuple(kind.value for kind in MeasurementKind)
#: the target types a duet can run two of at once on one machine
DUET_TARGETS = ("lab", "simulator", "dry-run")
#: target types a duet design may name that run only as two testbeds of a testbeds file (``--testbeds``: two
#: hosts, the design's target options their defaults)
DUET_TESTBED_TARGETS = ("ssh",)
#: the fewest replicates (pairs) per level a duet screen can judge
DUET_MIN_REPLICATES = 3
KNOB_KEYS = ("name", "host", "device", "levels", "low", "high", "step", "scale", "n", "baseline", "apply_order")
#: keys of the ``constraints`` section (tunelab.designs.constraints)
CONSTRAINT_KEYS = ("exclude", "apply_order")
#: most ``constraints.exclude`` entries
MAX_EXCLUDES = 1_000

Path_ = tuple[Any, ...]
#: what PyYAML's scalar constructors raise for a malformed tagged scalar besides YAMLError:
#: ``!!int abc`` and a 5000-digit integer (ValueError), ``!!bool maybe`` (KeyError), ``!!int ''``
#: (IndexError), ``!!timestamp abc`` (AttributeError), an out-of-range date (ValueError, OverflowError)
_SCALAR_ERRORS = (ValueError, LookupError, AttributeError, TypeError, OverflowError)


def _freeze(value: Any) -> Any:
    """Lists -> tuples and dicts -> read-only mappings, recursively (for frozen dataclasses)."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


# --------------------------------------------------------------------------------------------
# dataclasses


@dataclass(frozen=True)
class KnobSpec:
    """One knob of a design: which knob, on which host/device, and its levels.

    ``levels`` hold canonical values (``knob.validate``); ``low``/``high``/``step``/``scale``
    keep the numeric range when the file gave one (Latin hypercube samples inside it).
    ``family``, ``scope``, ``type`` and ``requires_restart`` are copied from the catalogue.
    """

    name: str
    host: str
    device: str | None
    levels: tuple[Any, ...]
    baseline: Any
    family: str
    scope: str
    type: str
    requires_restart: bool
    low: int | None = None
    high: int | None = None
    step: int | None = None
    scale: str = "linear"
    #: write rank (lower first; :func:`tunelab.designs.constraints.write_rank`): the knob's
    #: ``apply_order`` or its place in ``constraints.apply_order``; None: the built-in default
    apply_order: int | None = None

    @property
    def id(self) -> str:
        """The plan column name (:class:`tunelab.model.KnobId`): ``name``, ``name[device]``, plus ``@client``."""
        return knob_id(self.name, self.host, self.device)

    @property
    def is_range(self) -> bool:
        return self.low is not None

    @property
    def alternative(self) -> Any:
        """The non-baseline level of a two-level knob (coded +1; the baseline is coded -1)."""
        others = [v for v in self.levels if v != self.baseline]
        return others[0]

    def to_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "name": self.name, "host": self.host, "device": self.device,
               "levels": level_to_json(self.levels), "baseline": level_to_json(self.baseline),
               "family": self.family, "scope": self.scope, "type": self.type,
               "requires_restart": self.requires_restart}
        if self.is_range:
            out.update(low=self.low, high=self.high, step=self.step, scale=self.scale)
        if self.apply_order is not None:       # only when set: designs without it keep their hash
            out["apply_order"] = self.apply_order
        return out


@dataclass(frozen=True)
class LoadSpec:
    """The load generator, its named profile(s) and overrides of the profiles' settings.

    ``profiles`` lists the load profiles the plan crosses with the knob levels: one name (or none)
    for a single-load design, two or more distinct names when ``load.profile`` is a list (each
    run then names its profile in the plan column ``profile``). ``profile`` is the single
    profile, or the first of the list: the load a single-load phase (refine, validate) uses.
    """

    generator: str
    profile: str | None
    settings: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    profiles: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.profiles and self.profile is not None:
            object.__setattr__(self, "profiles", (self.profile,))

    @property
    def crossed(self) -> bool:
        """True when the plan crosses two or more load profiles with the knob levels."""
        return len(self.profiles) > 1


@dataclass(frozen=True)
class TargetSpec:
    """Where trials run; host-global knobs are refused by the runner unless ``allow_host_global``."""

    type: str
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    allow_host_global: bool = False


@dataclass(frozen=True)
class AnalysisSpec:
    """Significance level, multiplicity correction and the model's interactions for the screen.

    ``interactions``: ``auto`` (the two-factor interactions the design can estimate), ``none``,
    ``all``, or a tuple of knob-id pairs.
    """

    alpha: float = 0.05
    correction: str = "holm"
    interactions: Any = "auto"


#: what ``replicates: {until: ...}`` may say: keep adding rounds until every verdict is decided
SEQUENTIAL_UNTIL = ("decided",)
#: the alpha-spending functions of ``tunelab.stats.rounds`` a design may name (kept in step by a test)
SPENDING_FUNCTIONS = ("obrien-fleming", "pocock", "linear")


@dataclass(frozen=True)
class RoundsSpec:
    """``replicates: {min, max, step, until: decided}``: replicates added in rounds until decided.

    Round 1 runs ``min`` replicates of every level; each later round runs ``step`` more of the
    levels whose knob is still ``inconclusive`` (with fresh baseline runs), until every verdict is
    decided, a knob level has ``max`` replicates, or ``budget_trials`` / ``budget_minutes`` (of the
    whole study) would be exceeded. ``spending`` names the alpha-spending function of the looks
    (``tunelab.stats.rounds``); None takes its default.
    """

    min: int
    max: int
    step: int
    until: str = "decided"
    budget_trials: int | None = None
    budget_minutes: float | None = None
    spending: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"min": self.min, "max": self.max, "step": self.step, "until": self.until,
                "budget_trials": self.budget_trials, "budget_minutes": self.budget_minutes,
                "spending": self.spending}


#: most repeats of one busy trial (``noise.max_repeats``)
MAX_BUSY_REPEATS = 10
#: most A/A calibration trials (``noise.calibration_runs``)
MAX_CALIBRATION_RUNS = 1_000


@dataclass(frozen=True)
class NoiseSpec:
    """``noise: {repeat_busy_pct, max_repeats, calibration_runs}``: noise control of a study's trials.

    ``repeat_busy_pct``: repeat a trial while other processes used more than this percentage of
    the machine during it (None: never), at most ``max_repeats`` times; the busy attempts are kept
    in the store, marked repeated. ``calibration_runs``: baseline-only A/A trials (phase
    ``calibrate``) run before the study's own, whose spread gives the noise CV (0: none).
    """

    repeat_busy_pct: float | None = None
    max_repeats: int = 2
    calibration_runs: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"repeat_busy_pct": self.repeat_busy_pct, "max_repeats": self.max_repeats,
                "calibration_runs": self.calibration_runs}


@dataclass(frozen=True)
class Design:
    """A parsed, validated design file. ``design_hash`` identifies it for provenance.

    ``replicates`` is the fixed number of replicates, or for a sequential design (``sequential``
    set) the replicates of its first round (``sequential.min``).
    """

    name: str
    description: str
    target: TargetSpec
    load: LoadSpec
    warmup_s: float
    measure_s: float
    metrics: tuple[Metric, ...]
    knobs: tuple[KnobSpec, ...]
    design_type: DesignType
    replicates: int
    blocks: int
    seed: int
    options: Mapping[str, Any]
    analysis: AnalysisSpec
    source: str = "<string>"
    #: replicates in rounds until decided (``replicates: {min, max, ...}``), else None
    rounds: RoundsSpec | None = None
    noise: NoiseSpec = NoiseSpec()
    guards: "GuardSpec" = field(default_factory=lambda: GuardSpec())
    #: ``constraints:`` (exclusions and the design-level apply order; tunelab.designs.constraints)
    constraints: Constraints = Constraints()
    #: ``measurement:`` ``sequential`` (one trial at a time) or ``duet`` (each trial beside a concurrent baseline)
    measurement: MeasurementKind = MeasurementKind.SEQUENTIAL
    #: ``preflight: {controls: [KNOB_ID, ...]}``: negative controls, knobs kept although (or because) their mechanism
    #: cannot act under this load; the pre-flight notes them instead of refusing (:mod:`tunelab.preflight`)
    controls: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # the edge for designs built in Python (Design(design_type="oat")): the kinds as members from here on
        object.__setattr__(self, "design_type", DesignType.parse(self.design_type))
        object.__setattr__(self, "measurement", MeasurementKind.parse(self.measurement))

    @property
    def knob_ids(self) -> list[str]:
        return [k.id for k in self.knobs]

    @property
    def baseline(self) -> dict[str, Any]:
        """Knob id -> baseline level (the argument ``tunelab.stats.screen`` takes)."""
        return {k.id: k.baseline for k in self.knobs}

    @property
    def host_global_knobs(self) -> list[str]:
        return [k.id for k in self.knobs if k.scope == "host"]

    def to_dict(self) -> dict[str, Any]:
        """The canonical, JSON-able form (defaults filled in, levels canonical)."""
        return {
            "name": self.name,
            "description": self.description,
            "target": {"type": self.target.type, "options": level_to_json(self.target.options),
                       "allow_host_global": self.target.allow_host_global},
            "load": {"generator": self.load.generator,
                     # a list only for profile-crossed designs, so single-profile designs keep their hash
                     "profile": list(self.load.profiles) if self.load.crossed else self.load.profile,
                     "settings": level_to_json(self.load.settings)},
            "warmup_s": self.warmup_s,
            "measure_s": self.measure_s,
            "metrics": [m.to_json() for m in self.metrics],
            "knobs": [k.to_dict() for k in self.knobs],
            "design": {"type": self.design_type.value,
                       "replicates": self.rounds.to_dict() if self.rounds else self.replicates,
                       "blocks": self.blocks, "seed": self.seed, "options": level_to_json(self.options)},
            "analysis": {"alpha": self.analysis.alpha, "correction": self.analysis.correction},
            # only when set: a design without a noise section keeps its canonical form
            **({"noise": self.noise.to_dict()} if self.noise != NoiseSpec() else {}),
            # only when declared: a design that keeps its load's default guards keeps its hash
            **({"guards": self.guards.to_dict()} if self.guards.declared else {}),
            # only when given: a design without constraints keeps its hash
            **({"constraints": self.constraints.to_dict()} if self.constraints else {}),
            # only for a duet: a design measured one trial at a time keeps its hash
            **({"measurement": self.measurement.value} if self.measurement is not MeasurementKind.SEQUENTIAL else {}),
            **({"preflight": {"controls": list(self.controls)}} if self.controls else {}),
        }

    @property
    def design_hash(self) -> str:
        """sha256 of the canonical design (everything but ``description``, ``noise``, ``preflight`` and the file path).

        ``noise`` only decides which attempts are kept and adds calibration trials of their own
        phase, never what a screen trial measures, so turning it on resumes the same study; ``preflight``
        only decides whether the study starts.
        """
        canonical = self.to_dict()
        canonical.pop("description")
        canonical.pop("noise", None)
        canonical.pop("preflight", None)
        text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------------------------
# strict YAML with line numbers


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader used only to compose nodes and construct scalars."""


def _yaml_error(exc: yaml.YAMLError, source: str) -> DesignError:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}" if mark else source
        return DesignError(f"{where}: malformed YAML: {exc.problem or exc.context} "
                           f"(line {mark.line + 1 if mark else '?'}, column {mark.column + 1 if mark else '?'}); "
                           "fix the syntax at that position")
    return DesignError(f"{source}: malformed YAML: {' '.join(str(exc).split())}")


class _Composer:
    """Turns composed YAML nodes into plain Python, counting nodes and depth against the limits."""

    def __init__(self, loader: _StrictLoader, source: str) -> None:
        self.loader = loader
        self.source = source
        self.lines: dict[Path_, int] = {}
        self.visited = 0

    def _where(self, node: yaml.Node) -> str:
        return f"{self.source}:{node.start_mark.line + 1}"

    def convert(self, node: yaml.Node, path: Path_, depth: int = 0) -> Any:
        self.visited += 1
        if self.visited > MAX_YAML_NODES:
            raise DesignError(f"{self._where(node)}: {_fmt(path) or '(top level)'}: the file expands to more than "
                              f"MAX_YAML_NODES={MAX_YAML_NODES} YAML nodes (aliases count each time they are used); "
                              "a design needs far fewer: remove repeated aliases")
        if depth > MAX_YAML_DEPTH:
            raise DesignError(f"{self._where(node)}: {_fmt(path) or '(top level)'}: nesting deeper than "
                              f"MAX_YAML_DEPTH={MAX_YAML_DEPTH} levels (or a recursive alias); flatten the file")
        self.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            return [self.convert(item, path + (i,), depth + 1) for i, item in enumerate(node.value)]
        try:
            return self.loader.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            raise _yaml_error(exc, self.source) from None
        except _SCALAR_ERRORS as exc:
            raise DesignError(f"{self._where(node)}: {_fmt(path) or '(top level)'}: cannot read the value "
                              f"{quoted(node.value)} ({' '.join(str(exc).split())[:200]})") from None

    def _mapping(self, node: yaml.MappingNode, path: Path_, depth: int) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.convert(key_node, path + ("<key>",), depth + 1)
            try:
                hash(key)
            except TypeError:
                key = [key]
            if isinstance(key, (list, dict)):
                raise DesignError(f"{self._where(key_node)}: {_fmt(path) or '(top)'}: "
                                  f"a key must be a plain string, got {quoted(key)}")
            if key in out:
                raise DesignError(f"{self._where(key_node)}: {_fmt(path + (key,))}: "
                                  f"duplicate key {quoted(key)}; each key may appear once")
            out[key] = self.convert(value_node, path + (key,), depth + 1)
        return out


def _compose(text: str, source: str) -> tuple[Any, dict[Path_, int]]:
    """Parse YAML into plain Python plus a map key-path -> line; duplicate keys are errors.

    Bounded: at most :data:`MAX_YAML_NODES` nodes visited (aliases included) and
    :data:`MAX_YAML_DEPTH` levels of nesting; every YAML problem is one DesignError.
    """
    try:
        loader = _StrictLoader(text)            # the reader already refuses NUL and control characters
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source) from None
    composer = _Composer(loader, source)
    try:
        try:
            node = loader.get_single_node()
            data = composer.convert(node, ()) if node is not None else None
        except yaml.YAMLError as exc:
            raise _yaml_error(exc, source) from None
        except RecursionError:
            raise DesignError(f"{source}: malformed YAML: nesting too deep (limit MAX_YAML_DEPTH={MAX_YAML_DEPTH}); "
                              "flatten the file") from None
    finally:
        loader.dispose()
    return data, composer.lines


def _fmt(path: Path_) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


class _Context:
    """Builds DesignErrors that name the file, line and key path."""

    def __init__(self, source: str, lines: Mapping[Path_, int]) -> None:
        self.source = source
        self.lines = lines

    def error(self, path: Path_, message: str) -> DesignError:
        line = None
        for cut in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:cut]))
            if line is not None:
                break
        where = f"{self.source}:{line}" if line else self.source
        text = " ".join(f"{where}: {_fmt(path) or '(top level)'}: {message}".split())
        if len(text) > MAX_MESSAGE_CHARS:
            text = text[:MAX_MESSAGE_CHARS] + "..."
        return DesignError(text)

    # typed getters ---------------------------------------------------------------------------

    def mapping(self, value: Any, path: Path_, allowed: Iterable[str]) -> dict[str, Any]:
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise self.error(path, f"must be a mapping (key: value), got {type(value).__name__} {quoted(value)}")
        allowed = tuple(allowed)
        for key in value:
            if key not in allowed:
                raise self.error(path + (key,), f"unknown key {quoted(key)}; allowed keys: {', '.join(allowed)}")
        return value

    def string(self, value: Any, path: Path_, choices: Iterable[str] | None = None) -> str:
        if not isinstance(value, str) or not value:
            raise self.error(path, f"must be a non-empty string, got {quoted(value)}")
        if choices is not None and value not in tuple(choices):
            raise self.error(path, f"unknown value {quoted(value)}; choose one of {', '.join(choices)}")
        return value

    def integer(self, value: Any, path: Path_, minimum: int | None = None,
                maximum: tuple[str, int] | None = None) -> int:
        """An int >= ``minimum``; ``maximum`` is ``(CONSTANT_NAME, limit)`` of a documented limit."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(path, f"must be an integer, got {quoted(value)}")
        if minimum is not None and value < minimum:
            raise self.error(path, f"must be >= {minimum}, got {quoted(value)}")
        if maximum is not None and value > maximum[1]:
            raise self.limit(path, maximum, value)
        return value

    def number(self, value: Any, path: Path_, minimum: float, strict: bool = False,
               maximum: tuple[str, float] | None = None) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(path, f"must be a number, got {quoted(value)}")
        try:
            value = float(value)
        except OverflowError:
            raise self.error(path, f"must be a finite number, got {quoted(value)}") from None
        if not math.isfinite(value):
            raise self.error(path, f"must be a finite number, got {quoted(value)}")
        if value < minimum or (strict and value == minimum):
            raise self.error(path, f"must be {'>' if strict else '>='} {minimum}, got {value:g}")
        if maximum is not None and value > maximum[1]:
            raise self.limit(path, maximum, value)
        return value

    def limit(self, path: Path_, limit: tuple[str, float], value: Any) -> DesignError:
        """The error for a value above a documented limit: names the key path, the limit and the value."""
        name, bound = limit
        shown = f"{value:g}" if isinstance(value, float) else quoted(value)
        return self.error(path, f"{shown} exceeds the limit {name}={bound:g}; use a smaller value "
                                "(tunelab refuses designs this large; see designs/README.md, Limits and trust)")

    def boolean(self, value: Any, path: Path_) -> bool:
        if not isinstance(value, bool):
            raise self.error(path, f"must be true or false, got {value!r}")
        return value


# --------------------------------------------------------------------------------------------
# parsing


def _default_knob_lookup(name: str) -> Knob:
    """The catalogue knob called ``name`` (tests replace this to use fake knobs)."""
    return get_knob(name)


def _validate_level(ctx: _Context, knob: Knob, value: Any, path: Path_) -> Any:
    """``value`` as the knob's canonical, hashable level; a DesignError at ``path`` when invalid."""
    try:
        return level_from_json(knob.validate(value))
    except KnobError as exc:
        text = str(exc)
        if knob.name not in text:
            text = f"value {value!r} is not valid for {knob.name}: {text}"
        raise ctx.error(path, text) from None


def _range_levels(ctx: _Context, path: Path_, knob: Knob, raw: dict[str, Any]) -> tuple[list[int], dict[str, Any]]:
    """Levels from low/high (+ step | + scale: log + n) for an integer knob."""
    if getattr(knob, "type", "int") != "int":
        raise ctx.error(path + ("low",), f"low/high/step ranges need an integer knob; {knob.name} is of type "
                        f"{knob.type!r}; list its values under `levels` instead")
    for key in ("low", "high"):
        if key not in raw:
            raise ctx.error(path, f"`low` and `high` go together; `{key}` is missing")
    low = ctx.integer(raw["low"], path + ("low",))
    high = ctx.integer(raw["high"], path + ("high",))
    low = _validate_level(ctx, knob, low, path + ("low",))
    high = _validate_level(ctx, knob, high, path + ("high",))
    if not low < high:
        raise ctx.error(path, f"`low < high` must hold, but got low={low}, high={high}")
    scale = ctx.string(raw.get("scale", "linear"), path + ("scale",), SCALES)
    if "step" in raw and ("n" in raw or scale == "log"):
        raise ctx.error(path + ("step",), "give either `step` (linear grid) or `n` (+ `scale`), not both")
    if "step" in raw:
        step = ctx.integer(raw["step"], path + ("step",), minimum=1)
        count = (high - low) // step + 1
        if count > MAX_LEVELS:
            raise ctx.error(path + ("step",), f"low={low}, high={high}, step={step} give {count} levels, above the "
                            f"limit MAX_LEVELS={MAX_LEVELS}; use a larger step")
        levels = list(range(low, high + 1, step))
    else:
        step = None
        n = ctx.integer(raw.get("n", 2), path + ("n",), minimum=2, maximum=("MAX_LEVELS", MAX_LEVELS))
        if scale == "log":
            if low <= 0:
                raise ctx.error(path + ("low",), f"scale: log needs low > 0, got low={low}")
            points = np.geomspace(low, high, n)
        else:
            points = np.linspace(low, high, n)
        levels = sorted({int(round(p)) for p in points})
        if len(levels) < n:
            raise ctx.error(path + ("n",), f"n={n} {scale} points between {low} and {high} round to only "
                            f"{len(levels)} distinct integers; lower n or widen the range")
    levels = [_validate_level(ctx, knob, v, path + ("levels",)) for v in levels]
    return levels, {"low": low, "high": high, "step": step, "scale": scale}


def _parse_knob(ctx: _Context, raw: Any, path: Path_, lookup: Callable[[str], Knob]) -> KnobSpec:
    """One knob: a catalogue name, its host and device, its levels (a list or a range) and its baseline."""
    raw = ctx.mapping(raw, path, KNOB_KEYS)
    if "name" not in raw:
        raise ctx.error(path, "every knob needs a `name` (a catalogue name, see `tunelab knobs`)")
    name = ctx.string(raw["name"], path + ("name",))
    try:
        knob = lookup(name)
    except KnobError as exc:
        text = str(exc) if "unknown knob" in str(exc) else f"unknown knob {name!r}: {exc}"
        raise ctx.error(path + ("name",), text) from None
    host = ctx.string(raw.get("host", "server"), path + ("host",), HOSTS)
    family = getattr(knob, "family", "sysctl")
    device = raw.get("device")
    if family in ("block", "link"):
        if device is None:
            raise ctx.error(path, f"{name} is a {family} knob and needs a `device` "
                            f"(e.g. {'loop0 or @disk' if family == 'block' else 'veth0 or @link'})")
        device = ctx.string(device, path + ("device",))
        try:
            check_design_device(name, device)       # the name check every write makes (tunelab.knobs.families)
        except KnobError as exc:
            raise ctx.error(path + ("device",), str(exc)) from None
    elif device is not None:
        raise ctx.error(path + ("device",), f"{name} is a {family} knob and takes no device; remove `device: {device}`")

    has_levels = "levels" in raw
    has_range = any(k in raw for k in ("low", "high", "step", "scale", "n"))
    if has_levels and has_range:
        raise ctx.error(path, "give either `levels` or a `low`/`high` range, not both")
    range_info: dict[str, Any] = {}
    if has_levels:
        values = raw["levels"]
        if not isinstance(values, list):
            raise ctx.error(path + ("levels",), f"must be a list of values, got {quoted(values)}")
        if not values:
            raise ctx.error(path + ("levels",), f"empty levels for {name}; list at least one value")
        if len(values) > MAX_LEVELS:
            raise ctx.error(path + ("levels",), f"{len(values)} levels exceed the limit MAX_LEVELS={MAX_LEVELS}")
        levels = [_validate_level(ctx, knob, v, path + ("levels", i)) for i, v in enumerate(values)]
        for i, value in enumerate(levels):
            if value in levels[:i]:
                raise ctx.error(path + ("levels", i), f"level {values[i]!r} repeats level {levels.index(value)} "
                                f"({values[levels.index(value)]!r}); list each level once")
    elif has_range:
        levels, range_info = _range_levels(ctx, path, knob, raw)
    else:
        raise ctx.error(path, f"{name} has no levels; give `levels: [...]` or `low`/`high` (+ `step` or `n`)")

    if "baseline" in raw:
        baseline = _validate_level(ctx, knob, raw["baseline"], path + ("baseline",))
        in_range = range_info and range_info["low"] <= baseline <= range_info["high"]
        if baseline not in levels and not in_range:
            raise ctx.error(path + ("baseline",), f"baseline {raw['baseline']!r} is not one of the levels "
                            f"{level_to_json(levels)}; add it to the levels or pick one of them")
    else:
        baseline = levels[0]
    apply_order = None
    if "apply_order" in raw:
        apply_order = ctx.integer(raw["apply_order"], path + ("apply_order",), minimum=-MAX_KNOBS,
                                  maximum=("MAX_KNOBS", MAX_KNOBS))
    return KnobSpec(
        name=name, host=host, device=device, levels=tuple(levels), baseline=baseline,
        family=family, scope=getattr(knob, "scope", "netns"), type=getattr(knob, "type", "int"),
        requires_restart=bool(getattr(knob, "requires_restart", False)),
        low=range_info.get("low"), high=range_info.get("high"), step=range_info.get("step"),
        scale=range_info.get("scale", "linear"), apply_order=apply_order,
    )


def _load_class(generator: str) -> type[Load] | None:
    """The registered load class, or None when no load is registered as ``generator``."""
    try:
        return get_load(generator)
    except LoadError:
        return None


def _parse_load(ctx: _Context, raw: Any) -> LoadSpec:
    """``load``: a registered generator, one of its profiles, and settings its own schema accepts."""
    path: Path_ = ("load",)
    raw = ctx.mapping(raw, path, ("generator", "profile", "settings"))
    if "generator" not in raw:
        raise ctx.error(path, f"`generator` is required; one of {', '.join(LOAD_GENERATORS)}")
    generator = ctx.string(raw["generator"], path + ("generator",))
    load_cls = _load_class(generator)
    if load_cls is None and generator not in LOAD_GENERATORS:
        raise ctx.error(path + ("generator",), f"unknown load generator {generator!r}; "
                        f"choose one of {', '.join(LOAD_GENERATORS)}")
    profiles = _parse_profiles(ctx, raw.get("profile"), generator, load_cls)
    settings = raw.get("settings", {}) or {}
    if not isinstance(settings, dict):
        raise ctx.error(path + ("settings",), f"must be a mapping of setting: value, got {quoted(settings)}")
    if load_cls is not None:
        for profile in profiles or (None,):
            _check_load_settings(ctx, load_cls, profile, settings)
    return LoadSpec(generator=generator, profile=profiles[0] if profiles else None, settings=_freeze(settings),
                    profiles=profiles)


def _parse_profiles(ctx: _Context, raw: Any, generator: str, load_cls: type[Load] | None) -> tuple[str, ...]:
    """``load.profile``: one profile name, or a list of at least two distinct ones (a profile-crossed
    design); each must be one of the load's ``profiles``. Empty when no profile is given."""
    path: Path_ = ("load", "profile")
    if raw is None:
        return ()
    if isinstance(raw, list):
        if len(raw) < 2:
            raise ctx.error(path, f"a list of load profiles crosses two or more of them with the knob levels, got "
                            f"{quoted(raw)}; give one name (profile: NAME) or at least two (profile: [low, overload])")
        names = [ctx.string(item, path + (i,)) for i, item in enumerate(raw)]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise ctx.error(path + (i,), f"profile {name!r} is listed twice; list each load profile once")
        items = list(enumerate(names))
    else:
        items = [(None, ctx.string(raw, path))]
    known = getattr(load_cls, "profiles", None) if load_cls is not None else None
    for i, name in items:
        if known and name not in known:
            raise ctx.error(path + ((i,) if i is not None else ()), f"{generator} has no profile {name!r}; "
                            f"known: {', '.join(sorted(known))}")
    return tuple(name for _, name in items)


def _check_load_settings(ctx: _Context, load_cls: type[Load], profile: str | None,
                         settings: Mapping[str, Any]) -> None:
    """Validate ``load.settings`` by the load's own schema, as the runner will use them (profile merged)."""
    load = load_cls()
    path: Path_ = ("load", "settings")
    try:
        for key, value in settings.items():          # one key at a time, so the error names it
            load.validate_settings({key: value})
        load.validate_settings(load.settings(profile, settings))
    except LoadError as exc:
        key = getattr(exc, "setting", None)
        where = path + (key,) if key is not None and key in settings else (path if settings else ("load", "profile"))
        raise ctx.error(where, str(exc)) from None


def _parse_metrics(ctx: _Context, raw: Any, load: LoadSpec) -> tuple[Metric, ...]:
    """``metrics``: each a name the load reports, its better direction and its SESOI (%)."""
    path: Path_ = ("metrics",)
    if not isinstance(raw, list) or not raw:
        raise ctx.error(path, f"must be a non-empty list of {{name, direction, sesoi_pct}}, got {quoted(raw)}")
    if len(raw) > MAX_METRICS:
        raise ctx.error(path, f"{len(raw)} metrics exceed the limit MAX_METRICS={MAX_METRICS}")
    load_cls = _load_class(load.generator)
    known = dict(getattr(load_cls, "metrics", {}) or {}) if load_cls is not None else {}
    metrics: list[Metric] = []
    for i, item in enumerate(raw):
        item = ctx.mapping(item, path + (i,), ("name", "direction", "sesoi_pct", "sesoi_abs", "scale",
                                               "conditional_on"))
        if "name" not in item:
            raise ctx.error(path + (i,), "every metric needs a `name`")
        name = ctx.string(item["name"], path + (i, "name"))
        if known and name not in known:
            raise ctx.error(path + (i, "name"), f"{load.generator} reports no metric {name!r}; "
                            f"known: {', '.join(sorted(known))}")
        if "direction" in item:
            direction = ctx.string(item["direction"], path + (i, "direction"), DIRECTIONS)
        elif name in known:
            direction = known[name].direction
        else:
            raise ctx.error(path + (i,), f"metric {name!r} needs `direction`: maximize or minimize")
        if "sesoi_pct" in item and "sesoi_abs" in item:
            raise ctx.error(path + (i, "sesoi_abs"), "give sesoi_pct (a % of the baseline) or sesoi_abs (a difference "
                            "in the metric's units), not both")
        sesoi = ctx.number(item.get("sesoi_pct", 5), path + (i, "sesoi_pct"), 0.0, strict=True)
        scale = ctx.string(item.get("scale", "auto"), path + (i, "scale"), METRIC_SCALES)
        default_abs = (getattr(known[name], "sesoi_abs", None)
                       if name in known and "sesoi_pct" not in item and scale != "log" else None)
        sesoi_abs = (ctx.number(item["sesoi_abs"], path + (i, "sesoi_abs"), 0.0, strict=True)
                     if "sesoi_abs" in item else default_abs)
        if any(m.name == name for m in metrics):
            raise ctx.error(path + (i, "name"), f"metric {name!r} is listed twice")
        try:
            metrics.append(Metric(name=name, direction=direction, sesoi_pct=sesoi, sesoi_abs=sesoi_abs, scale=scale))
        except ParseError as exc:
            raise ctx.error(path + (i, "sesoi_abs" if "sesoi_abs" in str(exc) else "sesoi_pct"), str(exc)) from None
    return tuple(metrics)


@dataclass(frozen=True)
class GuardSpec:
    """What a design says about guard metrics (see :mod:`tunelab.stats.guards`).

    ``guards``: the top-level ``guards:`` entries (metrics that must not degrade, with their SESOI);
    ``conditional_on``: the metrics entries' own ``conditional_on`` (metric -> guard names), which
    replace the load's default (:attr:`tunelab.loads.Load.conditional_on`). Empty: the load's
    defaults alone; :func:`design_guards` resolves both into what the screen takes.
    """

    guards: tuple[Metric, ...] = ()
    conditional_on: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def declared(self) -> bool:
        return bool(self.guards or self.conditional_on)

    def to_dict(self) -> dict[str, Any]:
        return {"guards": [m.to_json() for m in self.guards],
                "conditional_on": {name: list(names) for name, names in self.conditional_on.items()}}


def _parse_guards(ctx: _Context, data: Mapping[str, Any], load: LoadSpec) -> GuardSpec:
    """Top-level ``guards:`` (names or ``{name, sesoi_pct | sesoi_abs}``) and each metric's ``conditional_on:``.

    Every name must be a metric the load reports: DesignError naming it and the load's metrics.
    """
    load_cls = _load_class(load.generator)
    known = dict(getattr(load_cls, "metrics", {}) or {}) if load_cls is not None else {}

    def check_name(value: Any, path: Path_, role: str) -> str:
        name = ctx.string(value, path)
        if known and name not in known:
            raise ctx.error(path, f"{role} {name!r} is not a metric {load.generator} reports; its metrics: "
                            f"{', '.join(known)}")
        return name

    raw = data.get("guards", [])
    if not isinstance(raw, list) or len(raw) > MAX_METRICS:
        raise ctx.error(("guards",), f"must be a list of at most MAX_METRICS={MAX_METRICS} metric names or "
                        f"{{name, sesoi_pct | sesoi_abs}}, got {quoted(raw)}")
    guards: list[Metric] = []
    for i, item in enumerate(raw):
        path: Path_ = ("guards", i)
        item = {"name": item} if isinstance(item, str) else ctx.mapping(item, path, ("name", "sesoi_pct", "sesoi_abs"))
        if "name" not in item:
            raise ctx.error(path, "every guard needs a `name`, e.g. {name: lost_pct, sesoi_abs: 0.1}")
        name = check_name(item["name"], path if isinstance(raw[i], str) else path + ("name",), "guard")
        if any(g.name == name for g in guards):
            raise ctx.error(path, f"guard {name!r} is listed twice")
        if "sesoi_pct" in item and "sesoi_abs" in item:
            raise ctx.error(path + ("sesoi_abs",), "give sesoi_pct (a % of the baseline) or sesoi_abs (a difference "
                            "in the metric's units), not both")
        info = known.get(name)
        sesoi = ctx.number(item.get("sesoi_pct", 5), path + ("sesoi_pct",), 0.0, strict=True)
        sesoi_abs = (ctx.number(item["sesoi_abs"], path + ("sesoi_abs",), 0.0, strict=True) if "sesoi_abs" in item
                     else getattr(info, "sesoi_abs", None) if "sesoi_pct" not in item else None)
        try:
            guards.append(Metric(name, info.direction if info else "maximize", sesoi, sesoi_abs))
        except ParseError as exc:
            raise ctx.error(path + ("sesoi_abs" if "sesoi_abs" in str(exc) else "sesoi_pct",), str(exc)) from None
    conditional: dict[str, tuple[str, ...]] = {}
    for i, item in enumerate(data["metrics"]):
        if "conditional_on" not in item:
            continue
        path = ("metrics", i, "conditional_on")
        names = item["conditional_on"]
        if not isinstance(names, list):
            raise ctx.error(path, f"must be a list of guard metric names such as [qps, lost_pct] ([] for none), "
                            f"got {quoted(names)}")
        checked = tuple(dict.fromkeys(check_name(name, path + (j,), "conditional_on") for j, name in enumerate(names)))
        if item["name"] in checked:
            raise ctx.error(path, f"metric {item['name']!r} cannot be conditional on itself")
        conditional[item["name"]] = checked
    return GuardSpec(guards=tuple(guards), conditional_on=_freeze(conditional))


def design_guards(design: "Design") -> dict[str, Any]:
    """The guards a screen of ``design`` applies: ``{"guards": [spec, ...], "conditional_on": {metric: [guard]},
    "trade_offs": {metric: [other]}}``.

    Every metric the load reports is conditional on its metrics entry's ``conditional_on`` or else on
    the load's default (:attr:`tunelab.loads.Load.conditional_on`) when the load's schema says it is
    measured on survivors (:attr:`tunelab.loads.base.MetricInfo.on_survivors`); otherwise the load's
    related metrics are its trade-offs, shown beside its verdict. A ``guards:`` entry that no metric
    is conditional on guards every metric that is not itself a guard and has no ``conditional_on`` of
    its own. A guard's direction and SESOI come from its ``guards:`` entry, else from the design's
    metrics entry of that name, else from the load's schema (``sesoi_abs`` or 5 %); each spec adds
    the guard's ``unit`` and plain ``words`` (:data:`tunelab.loads.metrics.GUARD_WORDS`).

    >>> design = parse_design({"name": "d", "load": {"generator": "dnsperf"}, "metrics": [{"name": "qps"}],
    ...                        "knobs": [{"name": "net.core.somaxconn", "levels": [4096, 16]}],
    ...                        "design": {"type": "oat"}})
    >>> design_guards(design)["conditional_on"]["latency_mean_ms"]
    ['qps', 'lost_pct']
    """
    from tunelab.loads.metrics import GUARD_WORDS

    load_cls = _load_class(design.load.generator)
    known = dict(getattr(load_cls, "metrics", {}) or {}) if load_cls is not None else {}
    defaults = dict(getattr(load_cls, "conditional_on", {}) or {}) if load_cls is not None else {}
    explicit = design.guards.conditional_on
    names = list(dict.fromkeys([*known, *(m.name for m in design.metrics)]))
    related = {name: list(explicit.get(name, defaults.get(name, ()))) for name in names}
    # the load's relations are guards for a metric measured on survivors, trade-offs otherwise (the schema says)
    on_survivors = {name: name in explicit or getattr(known.get(name), "on_survivors", True) for name in names}
    conditional = {name: guards if on_survivors[name] else [] for name, guards in related.items()}
    trade_offs = {name: others for name, others in related.items() if not on_survivors[name] and others}
    named = dict.fromkeys(g for guards in conditional.values() for g in guards)
    declared = {m.name: m for m in design.guards.guards}
    active = list(dict.fromkeys([*named, *declared, *(o for others in trade_offs.values() for o in others)]))
    unattached = [g for g in declared if g not in named]
    for name, guards in conditional.items():
        if name not in explicit and name not in active:
            guards.extend(g for g in unattached if g != name and g not in guards)
    metrics = {m.name: m for m in design.metrics}
    specs = []
    for name in active:
        info = known.get(name)
        metric = declared.get(name) or metrics.get(name) or Metric(
            name, info.direction if info else "maximize", sesoi_abs=getattr(info, "sesoi_abs", None))
        spec = {**metric.to_json(), **({"unit": info.unit} if info else {})}
        if name in GUARD_WORDS:
            spec["words"] = list(GUARD_WORDS[name])
        specs.append(spec)
    return {"guards": specs, "conditional_on": {name: guards for name, guards in conditional.items() if guards},
            "trade_offs": trade_offs}


def _parse_identity(ctx: _Context, data: Mapping[str, Any]) -> dict[str, str]:
    """``name`` (it names data/<name>.sqlite, so it is checked strictly) and ``description``."""
    name = ctx.string(data["name"], ("name",))
    if len(name) > MAX_NAME_LENGTH:
        raise ctx.error(("name",), f"study name of {len(name)} characters exceeds the limit "
                        f"MAX_NAME_LENGTH={MAX_NAME_LENGTH}: {quoted(name)}")
    if not NAME_PATTERN.match(name):
        raise ctx.error(("name",), f"study name {quoted(name)} must start with a letter or digit and use only "
                        "a-z, 0-9, '_' and '-' (it names data/<name>.sqlite)")
    description = data.get("description") or ""
    if not isinstance(description, str):
        raise ctx.error(("description",), f"must be text, got {quoted(description)}")
    return {"name": name, "description": description}


def _parse_target(ctx: _Context, raw: Any) -> TargetSpec:
    """``target``: a known type, options its class accepts, and the host-global permission."""
    raw = ctx.mapping(raw, ("target",), ("type", "options", "allow_host_global"))
    target_type = ctx.string(raw.get("type", "lab"), ("target", "type"))
    known_targets = set(TARGET_TYPES) | set(TARGETS.names())
    if target_type not in known_targets:
        raise ctx.error(("target", "type"), f"unknown target type {target_type!r}; choose one of "
                        f"{', '.join(sorted(known_targets))}")
    options = raw.get("options", {}) or {}
    if not isinstance(options, dict):
        raise ctx.error(("target", "options"), f"must be a mapping, got {quoted(options)}")
    _check_target_options(ctx, target_type, options)
    allow_host_global = ctx.boolean(raw.get("allow_host_global", False), ("target", "allow_host_global"))
    return TargetSpec(type=target_type, options=_freeze(options), allow_host_global=allow_host_global)


def _parse_durations(ctx: _Context, data: Mapping[str, Any]) -> dict[str, float]:
    """``warmup_s`` (>= 0) and ``measure_s`` (> 0), each at most MAX_DURATION_S."""
    limit = ("MAX_DURATION_S", MAX_DURATION_S)
    return {"warmup_s": ctx.number(data.get("warmup_s", 2), ("warmup_s",), 0.0, maximum=limit),
            "measure_s": ctx.number(data.get("measure_s", 8), ("measure_s",), 0.0, strict=True, maximum=limit)}


def _parse_knobs(ctx: _Context, raw: Any, lookup: Callable[[str], Knob]) -> tuple[KnobSpec, ...]:
    """``knobs``: at most MAX_KNOBS, each parsed by :func:`_parse_knob`, their ids unique."""
    if not isinstance(raw, list) or not raw:
        raise ctx.error(("knobs",), f"must be a non-empty list of knobs, got {quoted(raw)}")
    if len(raw) > MAX_KNOBS:
        raise ctx.error(("knobs",), f"{len(raw)} knobs exceed the limit MAX_KNOBS={MAX_KNOBS}")
    knobs: list[KnobSpec] = []
    for i, item in enumerate(raw):
        spec = _parse_knob(ctx, item, ("knobs", i), lookup)
        for j, other in enumerate(knobs):
            if other.id == spec.id:
                raise ctx.error(("knobs", i), f"duplicate knob {spec.id!r} (same as knobs[{j}]); each knob id "
                                "(name, device, host) may appear once")
        knobs.append(spec)
    return tuple(knobs)


def _parse_design_section(ctx: _Context, raw: Any) -> dict[str, Any]:
    """``design``: a registered type, replicates, blocks dividing them, the seed and the type's options."""
    raw = ctx.mapping(raw, ("design",), ("type", "replicates", "blocks", "seed", "options"))
    if "type" not in raw:
        raise ctx.error(("design",), f"`type` is required; one of {', '.join(GENERATORS.names())}")
    design_type = DesignType(ctx.string(raw["type"], ("design", "type"), GENERATORS.names()))
    rounds = None
    if isinstance(raw.get("replicates"), dict):
        rounds = _parse_rounds(ctx, raw["replicates"])
        replicates = rounds.min
    else:
        replicates = ctx.integer(raw.get("replicates", 1), ("design", "replicates"), minimum=1,
                                 maximum=("MAX_REPLICATES", MAX_REPLICATES))
    blocks = ctx.integer(raw.get("blocks", 1), ("design", "blocks"), minimum=1,
                         maximum=("MAX_REPLICATES", MAX_REPLICATES))
    if replicates % blocks:
        raise ctx.error(("design", "blocks"), f"blocks={blocks} must divide replicates={replicates} "
                        "(each block holds whole replicates); change one of them")
    seed = ctx.integer(raw.get("seed", 0), ("design", "seed"), minimum=0, maximum=("MAX_SEED", MAX_SEED))
    options = ctx.mapping(raw.get("options", {}), ("design", "options"), GENERATORS.get(design_type).options)
    for key, value in options.items():
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_OPTION_VALUE:
            raise ctx.limit(("design", "options", key), ("MAX_OPTION_VALUE", MAX_OPTION_VALUE), value)
    if rounds is not None and design_type is not DesignType.OAT:
        raise ctx.error(("design", "replicates"), f"sequential replicates add runs to the undecided levels of a "
                        f"one-at-a-time (oat) design; a {design_type} design is read through one model of all its "
                        "runs, so give it a fixed number: replicates: N")
    if rounds is not None and blocks != 1:
        raise ctx.error(("design", "blocks"), "a sequential design (replicates: {min, max, ...}) blocks by round "
                        "itself; leave `blocks` out")
    return {"design_type": design_type, "replicates": replicates, "blocks": blocks, "seed": seed,
            "options": _freeze(options), "rounds": rounds}


def _parse_rounds(ctx: _Context, raw: dict[str, Any]) -> RoundsSpec:
    """``replicates: {min, max, step, until: decided, budget_trials, budget_minutes, spending}``."""
    path = ("design", "replicates")
    raw = ctx.mapping(raw, path, ("min", "max", "step", "until", "budget_trials", "budget_minutes", "spending"))
    for key in ("min", "max"):
        if key not in raw:
            raise ctx.error(path, f"`{key}` is required in the sequential form, e.g. "
                            "replicates: {min: 3, max: 20, until: decided}")
    limit = ("MAX_REPLICATES", MAX_REPLICATES)
    low = ctx.integer(raw["min"], path + ("min",), minimum=2, maximum=limit)
    high = ctx.integer(raw["max"], path + ("max",), minimum=1, maximum=limit)
    if low > high:
        raise ctx.error(path, f"min={low} is larger than max={high}; the study starts with `min` replicates and "
                        "adds rounds up to `max`")
    step = ctx.integer(raw.get("step", low), path + ("step",), minimum=1, maximum=limit)
    until = ctx.string(raw.get("until", "decided"), path + ("until",), SEQUENTIAL_UNTIL)
    budget_trials = None if raw.get("budget_trials") is None else ctx.integer(
        raw["budget_trials"], path + ("budget_trials",), minimum=1, maximum=("MAX_PLAN_RUNS", MAX_PLAN_RUNS))
    budget_minutes = None if raw.get("budget_minutes") is None else ctx.number(
        raw["budget_minutes"], path + ("budget_minutes",), 0.0, strict=True)
    spending = None if raw.get("spending") is None else ctx.string(raw["spending"], path + ("spending",),
                                                                    SPENDING_FUNCTIONS)
    return RoundsSpec(min=low, max=high, step=step, until=until, budget_trials=budget_trials,
                          budget_minutes=budget_minutes, spending=spending)


def _parse_analysis(ctx: _Context, raw: Any) -> AnalysisSpec:
    """``analysis``: alpha in (0, 1), a multiplicity correction and the model's interactions."""
    raw = ctx.mapping(raw, ("analysis",), ("alpha", "correction", "interactions"))
    alpha = ctx.number(raw.get("alpha", 0.05), ("analysis", "alpha"), 0.0, strict=True)
    if alpha >= 1:
        raise ctx.error(("analysis", "alpha"), f"must be between 0 and 1, got {alpha}")
    interactions = raw.get("interactions", "auto")
    path = ("analysis", "interactions")
    if isinstance(interactions, str):
        interactions = ctx.string(interactions, path, ("auto", "none", "all"))
    elif isinstance(interactions, list):
        pairs = []
        for i, pair in enumerate(interactions):
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
                raise ctx.error(path + (i,), f"must be a pair of knob ids like [net.core.somaxconn, "
                                f"net.ipv4.tcp_abort_on_overflow], got {quoted(pair)}")
            pairs.append((pair[0], pair[1]))
        interactions = tuple(pairs)
    else:
        raise ctx.error(path, f"must be auto, none, all or a list of knob pairs, got {quoted(interactions)}")
    return AnalysisSpec(alpha=alpha, correction=ctx.string(raw.get("correction", "holm"), ("analysis", "correction"),
                                                           CORRECTIONS), interactions=interactions)


def _parse_noise(ctx: _Context, raw: Any) -> NoiseSpec:
    """``noise: {repeat_busy_pct, max_repeats, calibration_runs}`` (all optional; see :class:`NoiseSpec`)."""
    path: Path_ = ("noise",)
    raw = ctx.mapping(raw, path, ("repeat_busy_pct", "max_repeats", "calibration_runs"))
    busy = raw.get("repeat_busy_pct")
    if busy is not None:
        busy = ctx.number(busy, path + ("repeat_busy_pct",), 0.0, strict=True)
        if busy >= 100:
            raise ctx.error(path + ("repeat_busy_pct",), f"must be a percentage of the machine below 100, got {busy:g} "
                            "(e.g. 20: repeat a trial when other processes used more than 20 % of the CPUs)")
    repeats = ctx.integer(raw.get("max_repeats", NoiseSpec.max_repeats), path + ("max_repeats",), minimum=1,
                          maximum=("MAX_BUSY_REPEATS", MAX_BUSY_REPEATS))
    runs = ctx.integer(raw.get("calibration_runs", 0), path + ("calibration_runs",), minimum=0,
                       maximum=("MAX_CALIBRATION_RUNS", MAX_CALIBRATION_RUNS))
    if runs == 1:
        raise ctx.error(path + ("calibration_runs",), "must be 0 (no calibration) or at least 2: one run has no "
                        "spread to measure; 5 to 10 give a usable noise CV")
    return NoiseSpec(repeat_busy_pct=busy, max_repeats=repeats, calibration_runs=runs)


def _parse_controls(ctx: _Context, raw: Any, design: Design) -> tuple[str, ...]:
    """``preflight: {controls: [KNOB_ID, ...]}``: knob ids of the design kept as negative controls."""
    path: Path_ = ("preflight",)
    raw = ctx.mapping(raw, path, ("controls",))
    controls = raw.get("controls", [])
    if not isinstance(controls, list) or not all(isinstance(c, str) for c in controls):
        raise ctx.error(path + ("controls",), "must be a list of the design's knob ids, e.g. [net.ipv4.tcp_tw_reuse]")
    for index, knob in enumerate(controls):
        if knob not in design.knob_ids:
            raise ctx.error(path + ("controls", index), f"{quoted(knob)} is not a knob of this design; its knob ids: "
                            f"{', '.join(design.knob_ids)}")
    return tuple(dict.fromkeys(controls))


def _check_model_size(ctx: _Context, design: Design) -> None:
    """The screen's model must leave residual degrees of freedom (or be a saturated two-level design)."""
    interactions = design.analysis.interactions
    if design.design_type == DesignType.OAT or interactions in ("auto", "none"):
        return
    ids = design.knob_ids
    levels = {k.id: len(k.levels) for k in design.knobs}
    if interactions == "all":
        pairs = list(itertools.combinations(ids, 2))
    else:
        for i, pair in enumerate(interactions):
            for knob in pair:
                if knob not in levels:
                    raise ctx.error(("analysis", "interactions", i), f"{knob!r} is not a knob of this design; its "
                                    f"knobs are {', '.join(ids)}")
        pairs = list(interactions)
    parameters = 1 + sum(n - 1 for n in levels.values()) + sum((levels[a] - 1) * (levels[b] - 1) for a, b in pairs)
    profiles = len(design.load.profiles)
    if profiles > 1:     # the screen adds the profile and its interaction with every knob
        parameters += (profiles - 1) * (1 + sum(n - 1 for n in levels.values()))
    runs = plan_runs_per_replicate(design) * design.replicates
    if parameters >= runs:
        raise ctx.error(("analysis", "interactions"), f"the screen's model would have {parameters} parameters (main "
                        f"effects and {len(pairs)} interactions) but the design has only {runs} runs, so nothing is "
                        "left to test them; use interactions: auto, fewer interactions, or more replicates")


def plan_runs_per_replicate(design: Design) -> int:
    """The runs one replicate of the plan holds: the design's runs times its load profiles."""
    return runs_per_replicate(design) * max(1, len(design.load.profiles))


#: design types whose screen reads knob ranges (regression, elementary effects): no profile factor there
_RANGE_TYPES = RANGE_DESIGNS


def _check_profiles(ctx: _Context, design: Design) -> None:
    """A list of load profiles crosses level-based designs only (the range screen has no load factor)."""
    if design.load.crossed and design.design_type in _RANGE_TYPES:
        raise ctx.error(("load", "profile"), f"a list of load profiles is not supported by {design.design_type} "
                        "designs (their screen models knob ranges, with no load factor); give one profile and run "
                        "one study per load, or use a full/fractional factorial or oat design")


def parse_design(data: Any, source: str = "<string>", lines: Mapping[Path_, int] | None = None,
                 knob_lookup: Callable[[str], Knob] | None = None) -> Design:
    """Validate a design already loaded from YAML into plain Python (see :func:`load_design`).

    The sections are checked in file order, each by its own phase, so the first problem in the
    file is the one reported; then the plan size and the design type's own rules.

    Examples
    --------
    >>> design = parse_design({"name": "demo", "load": {"generator": "dnsperf", "profile": "low"},
    ...                        "metrics": [{"name": "qps"}],
    ...                        "knobs": [{"name": "net.core.somaxconn", "levels": [128, 4096]}],
    ...                        "design": {"type": "oat"}})
    >>> design.knob_ids, design.metrics[0]
    (['net.core.somaxconn'], Metric(name='qps', direction='maximize', sesoi_pct=5.0))
    """
    ctx = _Context(source, lines or {})
    data = ctx.mapping(data, (), TOP_KEYS)
    for key in ("name", "load", "metrics", "knobs", "design"):
        if key not in data:
            raise ctx.error((), f"required key `{key}` is missing")
    identity = _parse_identity(ctx, data)
    target = _parse_target(ctx, data.get("target", {"type": "lab"}))
    load = _parse_load(ctx, data["load"])
    durations = _parse_durations(ctx, data)
    metrics = _parse_metrics(ctx, data["metrics"], load)
    guards = _parse_guards(ctx, data, load)
    knobs = _parse_knobs(ctx, data["knobs"], knob_lookup or _default_knob_lookup)
    section = _parse_design_section(ctx, data["design"])
    analysis = _parse_analysis(ctx, data.get("analysis", {}))
    noise = _parse_noise(ctx, data.get("noise", {}))
    constraints, knobs = _parse_constraints(ctx, data.get("constraints"), knobs, knob_lookup or _default_knob_lookup)
    design = Design(**identity, target=target, load=load, **durations, metrics=metrics, knobs=knobs, **section,
                    analysis=analysis, source=source, noise=noise, guards=guards, constraints=constraints,
                    measurement=_parse_measurement(ctx, data.get("measurement", MeasurementKind.SEQUENTIAL.value),
                                                                section, target))
    design = replace(design, controls=_parse_controls(ctx, data.get("preflight", {}), design))
    _check_exclusions(ctx, design)
    _check_plan_size(ctx, design)
    _check_profiles(ctx, design)
    GENERATORS.get(design.design_type).check(design, ctx)
    _check_model_size(ctx, design)
    return design


def _parse_measurement(ctx: _Context, raw: Any, section: Mapping[str, Any], target: TargetSpec) -> MeasurementKind:
    """``measurement``: ``sequential`` or ``duet``; a duet screens a one-at-a-time design on a lab (or the
    simulator): each level is measured beside a concurrent baseline on a second target of the same spec."""
    if raw not in MEASUREMENTS:
        raise ctx.error(("measurement",), f"must be one of {', '.join(MEASUREMENTS)}, got {quoted(raw)}")
    kind = MeasurementKind(raw)
    if kind is MeasurementKind.SEQUENTIAL:
        return kind
    if section["design_type"] is not DesignType.OAT:
        raise ctx.error(("measurement",), f"duet measures each level against a concurrent baseline, so it needs "
                        f"`design: {{type: oat}}`, not {section['design_type'].value!r}")
    if section["replicates"] < DUET_MIN_REPLICATES:
        raise ctx.error(("measurement",), f"a duet judges each level from its pairs (the effect, the side difference "
                        f"and a variance): it needs at least {DUET_MIN_REPLICATES} replicates per level (4 balance the "
                        f"sides), got {section['replicates']}")
    if target.type not in DUET_TARGETS + DUET_TESTBED_TARGETS:
        raise ctx.error(("measurement",), f"duet runs two targets of one spec at once on this machine: "
                        f"{', '.join(DUET_TARGETS)} (or two ssh testbeds with --testbeds), not {target.type!r}")
    return kind


def _parse_constraints(ctx: _Context, raw: Any, knobs: tuple[KnobSpec, ...],
                       lookup: Callable[[str], Knob]) -> tuple[Constraints, tuple[KnobSpec, ...]]:
    """``constraints``: ``exclude`` entries (knob id -> a level of that knob) and ``apply_order``
    (knob ids); returns the section and the knobs with the list's write ranks."""
    if raw is None:
        return Constraints(), knobs
    raw = ctx.mapping(raw, ("constraints",), CONSTRAINT_KEYS)
    by_id = {k.id: k for k in knobs}
    ids = ", ".join(by_id)

    def knob_of(value: Any, path: Path_) -> KnobSpec:
        if not isinstance(value, str) or value not in by_id:
            raise ctx.error(path, f"{quoted(value)} is not a knob id of this design; its knob ids are {ids}")
        return by_id[value]

    entries = raw.get("exclude", [])
    if not isinstance(entries, list):
        raise ctx.error(("constraints", "exclude"), f"must be a list of partial configurations "
                        f"({{knob id: level, ...}}), got {quoted(entries)}")
    if len(entries) > MAX_EXCLUDES:
        raise ctx.error(("constraints", "exclude"), f"{len(entries)} entries exceed the limit MAX_EXCLUDES={MAX_EXCLUDES}")
    exclude = []
    for i, entry in enumerate(entries):
        path = ("constraints", "exclude", i)
        if not isinstance(entry, dict) or not entry:
            raise ctx.error(path, f"must be a mapping knob id -> level, e.g. {{{next(iter(by_id))}: "
                            f"{level_to_json(knobs[0].levels[-1])}}}, got {quoted(entry)}")
        levels = {}
        for key, value in entry.items():
            spec = knob_of(key, path)
            level = _validate_level(ctx, lookup(spec.name), value, path + (key,))
            if level not in spec.levels:
                raise ctx.error(path + (key,), f"{quoted(value)} is not a level of {spec.id}; its levels are "
                                f"{level_to_json(list(spec.levels))}")
            levels[key] = level
        exclude.append(MappingProxyType(levels))
    order = raw.get("apply_order", [])
    if not isinstance(order, list):
        raise ctx.error(("constraints", "apply_order"), f"must be a list of knob ids, first written first, "
                        f"got {quoted(order)}")
    for i, value in enumerate(order):
        knob_of(value, ("constraints", "apply_order", i))
        if value in order[:i]:
            raise ctx.error(("constraints", "apply_order", i), f"{value!r} is listed twice; list each knob once")
    if order:
        ranked = [k.id for k in knobs if k.apply_order is not None and k.id in order]
        if ranked:
            raise ctx.error(("constraints", "apply_order"), f"{ranked[0]} also has its own `apply_order`; give the "
                            "order either per knob or in this list, not both")
        ranks = design_ranks(order)
        knobs = tuple(replace(k, apply_order=ranks[k.id]) if k.id in ranks else k for k in knobs)
    return Constraints(tuple(exclude), tuple(order)), knobs


def _check_exclusions(ctx: _Context, design: Design) -> None:
    """Exclusions leave out rows of OAT and full factorial designs only, and never the baseline."""
    exclude = design.constraints.exclude
    if not exclude:
        return
    if design.design_type not in EXCLUDABLE_TYPES:
        raise ctx.error(("constraints", "exclude"), f"a {design.design_type} design cannot leave runs out (its runs "
                        f"are balanced as a whole); exclusions work with {' and '.join(map(str, EXCLUDABLE_TYPES))} designs. "
                        "Drop the level that cannot be set, or use one of those types")
    for i, entry in enumerate(exclude):
        if matches(design.baseline, entry):
            raise ctx.error(("constraints", "exclude", i), "this entry excludes the baseline configuration, which "
                            "every other run is compared with; change a knob's `baseline` or narrow the entry")


def _check_plan_size(ctx: _Context, design: Design) -> None:
    """Refuse a plan above MAX_PLAN_RUNS before any of it is generated."""
    per_replicate = plan_runs_per_replicate(design)     # a profile-crossed design: x its profiles
    replicates = design.rounds.max if design.rounds else design.replicates
    runs = per_replicate * replicates
    if runs > MAX_PLAN_RUNS:
        shown = f"{runs}" if runs < 10**12 else f"about 10^{len(str(runs)) - 1}"
        raise ctx.error(("design",), f"the plan would have {shown} runs ({per_replicate} per replicate x "
                        f"{replicates} replicates), above the limit MAX_PLAN_RUNS={MAX_PLAN_RUNS}; use fewer "
                        "levels, knobs or replicates, or a fractional design")


def _check_target_options(ctx: _Context, target_type: str, options: Mapping[str, Any]) -> None:
    """Check target options by the target class's own constructor, without building it.

    Whether command-bearing options may run is decided by the caller (``--allow-design-commands``),
    see :func:`design_commands`; here they only have to be well-formed.
    """
    try:
        check_target_spec({"type": target_type, "options": options}, allow_commands=True)
    except TargetError as exc:
        option = getattr(exc, "option", None)
        path: Path_ = ("target", "options") + ((option,) if option is not None and option in options else ())
        raise ctx.error(path, str(exc)) from None


def design_commands(design: Design) -> list[str]:
    """Every command the design names (one line each: ``target.options.OPTION.KEY: argv``).

    Pure: nothing runs. Empty for designs that name no command; ``tunelab plan
    --allow-design-commands`` prints these lines, and ``run`` refuses them without that flag.
    """
    return target_commands({"type": design.target.type, "options": level_to_json(design.target.options)})


def check_design_commands(design: Design, allow_commands: bool) -> list[str]:
    """The design's commands; :class:`~tunelab.errors.SafetyError` if it names any and ``allow_commands`` is false.

    The error is the one :func:`tunelab.targets.build_target` gives, so plan and run refuse alike.
    """
    check_target_spec({"type": design.target.type, "options": level_to_json(design.target.options)},
                      allow_commands=allow_commands)
    return design_commands(design)


def load_design_text(text: str, source: str = "<string>", knob_lookup: Callable[[str], Knob] | None = None) -> Design:
    """Parse and validate design YAML given as text."""
    if len(text) > MAX_FILE_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        raise DesignError(f"{source}: the design is larger than the limit MAX_FILE_BYTES={MAX_FILE_BYTES} bytes; "
                          "a design file is a few kilobytes")
    data, lines = _compose(text, source)
    return parse_design(data, source=source, lines=lines, knob_lookup=knob_lookup)


def load_design(path: str | Path, knob_lookup: Callable[[str], Knob] | None = None) -> Design:
    """Read, parse and validate a design file.

    Examples
    --------
    >>> design = load_design("designs/default.yaml")      # relative to the repository root
    >>> design.design_type.value, design.knob_ids[:1]
    ('oat', ['net.core.somaxconn'])
    """
    path = Path(path)
    text = read_capped_text(path, MAX_FILE_BYTES, DesignError, "design file", "see designs/ for examples")
    return load_design_text(text, source=str(path), knob_lookup=knob_lookup)
