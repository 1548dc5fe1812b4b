"""SYNTHETIC response surfaces and the ``simulator`` target that serves them.

Nothing here measures a real machine. A :class:`Surface` is a seeded, known function from a
knob configuration to metric values (the *truth*) plus heteroscedastic multiplicative noise,
so searches and statistical procedures can be scored against the truth:

``simple``    3 knobs, 54 configurations, one optimum, a somaxconn x abort_on_overflow interaction
``null``      the same knobs, every configuration identical (no knob matters)
``hard512``   5 knobs (int, enum, bool, candidate triplets, bool), 512 configurations, interactions
              and a decoy local optimum; only the optimum is within 2 % of it (0.2 % of the space)
``tradeoff``  two objectives that conflict (qps up, p99 latency up with the backlog): for NSGA-II

Two ways to use a surface:

* :class:`SimulatorEvaluator` -- the fast path for searches and benchmarks (no store, no runner);
* :class:`SimulatorTarget` (registered as ``"simulator"``) with :class:`SimulatorLoad` -- knob
  "files" live in memory, the load's command is answered from the current knob values, so the
  real runner (apply, verify, record, restore) and store are exercised end to end.

Noise: each configuration has its own coefficient of variation ``cv * 2**(2u-1)`` (``u`` a
stable hash of the configuration in [0, 1), so CVs range from ``cv/2`` to ``2 cv``); each draw
is seeded by ``(seed, key)`` so the same evaluation key always returns the same value (resume).

Examples
--------
>>> surface = get_surface("simple")
>>> best = surface.optimum()
>>> round(surface.truth(best)["qps"])
10600
>>> draw = SimulatorEvaluator(surface, seed=1).evaluate(best, 0, key="x")
>>> draw == SimulatorEvaluator(surface, seed=1).evaluate(best, 0, key="x")
True
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from tunelab.errors import LoadError, TargetError
from tunelab.registry import Registry
from tunelab.targets.base import TARGETS, CommandResult, Target

#: argv[0] of the simulated load's command (answered by :class:`SimulatorTarget`, never executed)
SIMULATE_COMMAND = "tunelab-simulate"


def _stable_unit(*parts: Any) -> float:
    """A number in [0, 1) determined only by ``parts`` (sha256 of their repr)."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def _stable_seed(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big")


@dataclass(frozen=True)
class Surface:
    """A SYNTHETIC response surface with known truth.

    Parameters
    ----------
    name : registry name
    space : ``{knob id: {"kind": ..., ...}}`` (see :func:`tunelab.optimize.space.space_from_spec`)
    baseline : the "default" configuration
    metrics : metric name -> ``"maximize"`` | ``"minimize"``
    truth_fn : config -> {metric: true value}
    cv : median coefficient of variation of the noise
    low_load_scale : effects are multiplied by this under the ``low`` load profile (defaults are
        fine at low load, as seed 001 found)
    """

    name: str
    description: str
    space: Mapping[str, Mapping[str, Any]]
    baseline: Mapping[str, Any]
    metrics: Mapping[str, str]
    truth_fn: Callable[[Mapping[str, Any], float], dict[str, float]]
    cv: float = 0.03
    low_load_scale: float = 0.1
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def truth(self, config: Mapping[str, Any], profile: str = "overload") -> dict[str, float]:
        """The noise-free metric values of ``config``."""
        scale = self.low_load_scale if profile == "low" else 1.0
        return self.truth_fn(config, scale)

    def config_cv(self, config: Mapping[str, Any]) -> float:
        """This configuration's noise CV: ``cv * 2**(2u - 1)`` (heteroscedastic, from cv/2 to 2 cv)."""
        key = tuple(sorted((k, repr(v)) for k, v in config.items()))
        return self.cv * 2.0 ** (2.0 * _stable_unit(self.name, key) - 1.0)

    def draw(self, config: Mapping[str, Any], rng: np.random.Generator, profile: str = "overload") -> dict[str, float]:
        """One noisy measurement (multiplicative Gaussian noise, floored at 0)."""
        cv = self.config_cv(config)
        return {m: max(0.0, v * (1.0 + cv * rng.standard_normal())) for m, v in self.truth(config, profile).items()}

    def search_space(self) -> Any:
        from tunelab.optimize.space import space_from_spec

        if "space" not in self._cache:
            self._cache["space"] = space_from_spec(self.space)
        return self._cache["space"]

    def table(self, metric: str | None = None, profile: str = "overload") -> pd.DataFrame:
        """Every configuration with its true metric values (exhaustive; for small spaces)."""
        key = ("table", profile)
        if key not in self._cache:
            configs = self.search_space().all_configs()
            rows = [{**c, **self.truth(c, profile)} for c in configs]
            self._cache[key] = pd.DataFrame(rows)
        return self._cache[key]

    def optimum(self, metric: str | None = None) -> dict[str, Any]:
        """The configuration with the best true value of ``metric`` (default: the first metric)."""
        metric = metric or next(iter(self.metrics))
        table = self.table()
        ids = list(self.space)
        index = table[metric].idxmax() if self.metrics[metric] == "maximize" else table[metric].idxmin()
        return {k: _plain(table.at[index, k]) for k in ids}

    def within(self, config: Mapping[str, Any], tolerance_pct: float = 2.0, metric: str | None = None) -> bool:
        """Whether ``config`` is truly within ``tolerance_pct`` % of the optimum."""
        metric = metric or next(iter(self.metrics))
        best = self.truth(self.optimum(metric))[metric]
        value = self.truth(config)[metric]
        if self.metrics[metric] == "maximize":
            return value >= best * (1 - tolerance_pct / 100)
        return value <= best * (1 + tolerance_pct / 100)


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    return value.item() if isinstance(value, np.generic) else value


#: surface factories: ``SURFACES.get(name)(cv=...) -> Surface``
SURFACES: Registry[Callable[..., Surface]] = Registry("simulated surface")

_SOMAXCONN = "net.core.somaxconn"
_ABORT = "net.ipv4.tcp_abort_on_overflow"
_CC = "net.ipv4.tcp_congestion_control"
_RMEM = "net.ipv4.tcp_rmem"
_SSAI = "net.ipv4.tcp_slow_start_after_idle"

_SIMPLE_SPACE = {
    _SOMAXCONN: {"kind": "int", "low": 16, "high": 4096, "scale": "log", "n": 9},
    _ABORT: {"kind": "choice", "values": [False, True]},
    _CC: {"kind": "choice", "values": ["cubic", "reno", "bbr"]},
}
_SIMPLE_BASELINE = {_SOMAXCONN: 128, _ABORT: False, _CC: "cubic"}


def _simple_truth(config: Mapping[str, Any], scale: float) -> dict[str, float]:
    level = math.log2(config[_SOMAXCONN])              # 4 .. 12
    pct = -1.5 * (level - 10.0) ** 2                   # peak at somaxconn = 1024
    pct += {"cubic": 0.0, "reno": -4.0, "bbr": 3.0}[config[_CC]]
    if config[_ABORT]:
        pct += 3.0 if level >= 9 else -2.0             # interaction: helps only with a deep backlog
    qps = 10_000.0 * (1.0 + scale * pct / 100.0)
    return {"qps": qps, "latency_mean_ms": 1000.0 * 4.0 / qps}


@SURFACES.register("simple")
def simple_surface(cv: float = 0.03) -> Surface:
    """SYNTHETIC: 54 configurations, optimum somaxconn=1024, bbr, abort_on_overflow=1 (+6 % over cubic)."""
    return Surface("simple", "SYNTHETIC simple surface: one optimum, one interaction", _SIMPLE_SPACE,
                   _SIMPLE_BASELINE, {"qps": "maximize", "latency_mean_ms": "minimize"}, _simple_truth, cv)


@SURFACES.register("null")
def null_surface(cv: float = 0.03) -> Surface:
    """SYNTHETIC: the simple surface's knobs, but no knob changes anything (truth is constant)."""
    return Surface("null", "SYNTHETIC null surface: every configuration performs the same", _SIMPLE_SPACE,
                   _SIMPLE_BASELINE, {"qps": "maximize", "latency_mean_ms": "minimize"},
                   lambda config, scale: {"qps": 10_000.0, "latency_mean_ms": 0.4}, cv)


_RMEM_CANDIDATES = [(4096, 87380, 6291456), (4096, 131072, 6291456), (8192, 262144, 16777216),
                    (4096, 16384, 4194304)]
_HARD_SPACE = {
    _SOMAXCONN: {"kind": "int", "low": 16, "high": 2048, "scale": "log", "n": 8},
    _CC: {"kind": "choice", "values": ["cubic", "reno", "bbr", "htcp"]},
    _ABORT: {"kind": "choice", "values": [False, True]},
    _RMEM: {"kind": "choice", "values": _RMEM_CANDIDATES},
    _SSAI: {"kind": "choice", "values": [True, False]},
}
_HARD_BASELINE = {_SOMAXCONN: 128, _CC: "cubic", _ABORT: False, _RMEM: _RMEM_CANDIDATES[0], _SSAI: True}
_HARD_SOMAXCONN_PCT = {16: -20.0, 32: -12.0, 64: -6.0, 128: -2.5, 256: 0.0, 512: -3.0, 1024: -7.0, 2048: -12.0}


def _hard_truth(config: Mapping[str, Any], scale: float) -> dict[str, float]:
    somaxconn, cc, abort = config[_SOMAXCONN], config[_CC], config[_ABORT]
    rmem, ssai = tuple(config[_RMEM]), config[_SSAI]
    grid = sorted(_HARD_SOMAXCONN_PCT)  # off-grid values (design ranges) interpolate in log2
    pct = float(np.interp(math.log2(max(somaxconn, 1)), [math.log2(g) for g in grid],
                          [_HARD_SOMAXCONN_PCT[g] for g in grid]))
    pct += {"cubic": 0.0, "reno": -4.0, "bbr": 3.0, "htcp": -2.0}[cc]
    if abort:                                          # interaction with the backlog depth
        pct += 2.5 if somaxconn <= 256 else -1.0
    pct += {0: -5.0, 1: 0.0, 2: -2.5, 3: -8.0}[_RMEM_CANDIDATES.index(rmem)]
    if ssai and cc == "bbr":                           # interaction: slow start after idle hurts bbr
        pct -= 3.0
    if cc == "reno" and rmem == _RMEM_CANDIDATES[3]:   # decoy: a local optimum 5 % below the best
        pct += 9.5
    qps = 10_000.0 * (1.0 + scale * pct / 100.0)
    return {"qps": qps, "latency_mean_ms": 1000.0 * 4.0 / qps}


@SURFACES.register("hard512")
def hard_surface(cv: float = 0.03) -> Surface:
    """SYNTHETIC: 512 configurations; only the optimum is within 2 % of it (<= 1 % of the space)."""
    return Surface("hard512", "SYNTHETIC hard surface: 512 configurations, interactions, a decoy", _HARD_SPACE,
                   _HARD_BASELINE, {"qps": "maximize", "latency_mean_ms": "minimize"}, _hard_truth, cv)


def _tradeoff_truth(config: Mapping[str, Any], scale: float) -> dict[str, float]:
    level = math.log2(config[_SOMAXCONN])              # 4 .. 12
    saturation = 1.0 - math.exp(-(level - 3.0) / 2.5)  # more backlog: fewer drops, more qps ...
    qps = 10_000.0 * (1.0 + scale * 0.25 * saturation)
    latency = 2.0 * (1.0 + scale * 0.12 * (level - 4.0))  # ... but longer queues: higher p99
    if config[_ABORT]:
        qps *= 1.0 - scale * 0.02
        latency *= 1.0 - scale * 0.15
    if config[_CC] == "bbr":
        latency *= 1.0 - scale * 0.05
    elif config[_CC] == "reno":
        qps *= 1.0 - scale * 0.03
    return {"qps": qps, "latency_p99_ms": latency}


@SURFACES.register("tradeoff")
def tradeoff_surface(cv: float = 0.03) -> Surface:
    """SYNTHETIC: qps and p99 latency conflict along somaxconn (a Pareto front for NSGA-II)."""
    return Surface("tradeoff", "SYNTHETIC trade-off surface: throughput vs tail latency", _SIMPLE_SPACE,
                   _SIMPLE_BASELINE, {"qps": "maximize", "latency_p99_ms": "minimize"}, _tradeoff_truth, cv)


def get_surface(name: str, cv: float = 0.03) -> Surface:
    """The SYNTHETIC surface called ``name`` with noise ``cv`` (TargetError listing known ones)."""
    if not 0 <= cv < 0.5:
        raise TargetError(f"simulator noise cv must be in [0, 0.5), got {cv!r}; e.g. 0.03 for 3 %")
    try:
        return SURFACES.get(name)(cv=cv)
    except KeyError as exc:
        raise TargetError(str(exc.args[0])) from None


class SimulatorEvaluator:
    """Evaluate configurations on a SYNTHETIC surface (the :class:`~tunelab.optimize.Evaluator` protocol).

    Each draw is seeded by ``(seed, key)`` (or ``(seed, config, replicate)`` without a key), so
    an evaluation is reproducible and independent of the order evaluations are made in.
    ``calls`` counts evaluations, ``keys`` lists the keys evaluated.
    """

    def __init__(self, surface: Surface | str, seed: int = 0, profile: str = "overload", cv: float | None = None) -> None:
        self.surface = get_surface(surface, cv if cv is not None else 0.03) if isinstance(surface, str) else surface
        self.seed = int(seed)
        self.profile = profile
        self.calls = 0
        self.keys: list[str] = []

    def evaluate(self, config: Mapping[str, Any], replicate: int = 0, key: str | None = None) -> dict[str, float]:
        self.calls += 1
        if key is not None:
            self.keys.append(key)
        ident = key if key is not None else (tuple(sorted((k, repr(v)) for k, v in config.items())), replicate)
        rng = np.random.default_rng(_stable_seed(self.seed, self.surface.name, self.profile, ident))
        return self.surface.draw(config, rng, self.profile)


# ---- the simulator target -----------------------------------------------------------------------


class SimulatorLoad:
    """The load paired with :class:`SimulatorTarget`: its command is answered from the knob state.

    Has the Load interface (Contract 5) but is not a registered load generator: it only makes
    sense on the simulator. Profiles ``low`` (effects scaled down) and ``overload``.
    """

    name = "simulated"
    tools: tuple[str, ...] = ()
    service = None
    runs_on = "server"
    profiles = {"low": {"profile": "low"}, "overload": {"profile": "overload"}}
    #: the runner evaluator passes the run key as setting ``key`` so noise is seeded per evaluation
    wants_key = True

    def __init__(self, surface: Surface) -> None:
        from tunelab.loads.base import MetricInfo

        self.surface = surface
        self.metrics = {m: MetricInfo(unit="", direction=d, description=f"SYNTHETIC {m}")
                        for m, d in surface.metrics.items()}

    def settings(self, profile: str | None, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        if profile is not None and profile not in self.profiles:
            raise LoadError(f"simulated: no load profile {profile!r}; known: low, overload")
        out = dict(self.profiles[profile or "overload"])
        out.update(overrides or {})
        return out

    def prepare(self, target: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
        return {}

    def command(self, settings: Mapping[str, Any], duration_s: float, server_address: str) -> list[str]:
        argv = [SIMULATE_COMMAND, "--profile", str(settings.get("profile", "overload")), "--duration", f"{duration_s:g}"]
        if settings.get("key") is not None:
            argv += ["--key", str(settings["key"])]
        return argv

    def parse(self, result: CommandResult, settings: Mapping[str, Any], warmup_s: float) -> Any:
        from tunelab.loads.base import LoadResult

        if not result.ok:
            return LoadResult("failed", f"simulator returned {result.returncode}: {result.stderr}", {}, raw=result.stderr)
        metrics = {k: float(v) for k, v in json.loads(result.stdout).items()}
        series = pd.DataFrame({"t_s": [0.0], **{k: [v] for k, v in metrics.items()}})
        return LoadResult("ok", None, metrics, series, raw=result.stdout)


@TARGETS.register("simulator")
class SimulatorTarget(Target):
    """A target whose kernel is a SYNTHETIC surface: knob files in memory, metrics from the surface.

    Parameters
    ----------
    surface : name of a surface in :data:`SURFACES` (default ``"simple"``)
    cv : noise coefficient of variation (default 0.03)
    seed : noise seed; a measurement with a given ``--key`` (else the n-th one) is always the same
    """

    name = "simulator"

    def __init__(self, surface: str = "simple", cv: float = 0.03, seed: int = 0) -> None:
        self.surface = get_surface(surface, cv)
        self.seed = int(seed)
        self.measurements = 0
        self._files: dict[tuple[str, str], str] = {}
        self.up()

    def up(self) -> None:
        if self._files:
            return
        from tunelab.knobs import get_knob

        for knob_id, value in self.surface.baseline.items():
            knob = get_knob(knob_id)
            self._files[("server", knob.path(self, None))] = knob.to_text(value) + "\n"

    def load(self) -> SimulatorLoad:
        """The load that measures this target."""
        return SimulatorLoad(self.surface)

    def read_text(self, host: str, path: str) -> str:
        self.check_host(host)
        try:
            return self._files[(host, path)]
        except KeyError:
            raise TargetError(f"simulator: {path} does not exist on {host}; the SYNTHETIC surface "
                              f"{self.surface.name!r} only has knobs {', '.join(self.surface.space)}") from None

    def write_text(self, host: str, path: str, text: str) -> None:
        self.check_host(host)
        if (host, path) not in self._files:
            raise TargetError(f"simulator: cannot write {path} on {host}: no such knob on surface {self.surface.name!r}")
        self._files[(host, path)] = text if text.endswith("\n") else text + "\n"

    def is_writable(self, host: str, path: str) -> bool:
        return (host, path) in self._files

    def has_tool(self, host: str, tool: str) -> bool:
        return tool == SIMULATE_COMMAND

    def current_config(self) -> dict[str, Any]:
        """The knob values the simulated kernel holds now."""
        from tunelab.knobs import get_knob

        out = {}
        for knob_id in self.surface.space:
            knob = get_knob(knob_id)
            out[knob_id] = knob.from_text(self._files[("server", knob.path(self, None))])
        return out

    def run(self, host: str, argv: Sequence[str], timeout_s: float, cpu: int | None = None) -> CommandResult:
        self.check_host(host)
        argv = tuple(argv)
        if not argv or argv[0] != SIMULATE_COMMAND:
            return CommandResult(argv, 127, "", f"simulator: only {SIMULATE_COMMAND} runs here, not {argv[:1]}", 0.0)
        profile = argv[argv.index("--profile") + 1] if "--profile" in argv else "overload"
        ident = argv[argv.index("--key") + 1] if "--key" in argv else self.measurements
        rng = np.random.default_rng(_stable_seed(self.seed, self.surface.name, profile, ident))
        self.measurements += 1
        metrics = self.surface.draw(self.current_config(), rng, profile)
        return CommandResult(argv, 0, json.dumps(metrics), "", 0.0)

    def describe(self) -> dict[str, Any]:
        return {"target": self.name, "surface": self.surface.name, "cv": self.surface.cv, "seed": self.seed,
                "note": "SYNTHETIC: no real kernel was measured"}
