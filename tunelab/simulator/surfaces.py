"""The SYNTHETIC surfaces, registered in :data:`SURFACES` (``get_surface(name, cv)``):

``simple``    3 knobs, 54 configurations, one optimum, a somaxconn x abort_on_overflow interaction
``null``      the same knobs, every configuration identical (no knob matters)
``hard512``   5 knobs (int, enum, bool, candidate triplets, bool), 512 configurations, interactions
              and a decoy local optimum; only the optimum is within 2 % of it (0.2 % of the space)
``tradeoff``  two objectives that conflict (qps up, p99 latency up with the backlog): for NSGA-II

Examples
--------
>>> SURFACES.names()
['hard512', 'null', 'simple', 'tradeoff']
>>> get_surface("simple").cv, get_surface("simple", cv=0.1).cv
(0.03, 0.1)
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from tunelab.errors import TargetError
from tunelab.model import DirectionName
from tunelab.registry import Registry
from tunelab.simulator.surface import Surface

#: surface factories: ``SURFACES.get(name)(cv=...) -> Surface`` (TargetError for an unknown name)
SURFACES: Registry[Callable[..., Surface]] = Registry("simulated surface", error=TargetError)

_SOMAXCONN = "net.core.somaxconn"
_ABORT = "net.ipv4.tcp_abort_on_overflow"
_CC = "net.ipv4.tcp_congestion_control"
_RMEM = "net.ipv4.tcp_rmem"
_SSAI = "net.ipv4.tcp_slow_start_after_idle"
_QPS_AND_LATENCY: dict[str, DirectionName] = {"qps": "maximize", "latency_mean_ms": "minimize"}

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


def _null_truth(config: Mapping[str, Any], scale: float) -> dict[str, float]:
    return {"qps": 10_000.0, "latency_mean_ms": 0.4}


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


def _register(name: str, description: str, space: Mapping[str, Mapping[str, Any]], baseline: Mapping[str, Any],
              metrics: Mapping[str, DirectionName], truth: Callable[[Mapping[str, Any], float], dict[str, float]],
              ) -> None:
    """Register the factory ``cv -> Surface`` of one surface under ``name``."""
    def factory(cv: float = 0.03) -> Surface:
        return Surface(name, description, space, baseline, metrics, truth, cv)

    factory.__doc__ = description
    SURFACES.add(name, factory)


#: name, description, space, baseline, metrics, truth
_TABLE = [
    ("simple", "SYNTHETIC simple surface: one optimum, one interaction", _SIMPLE_SPACE, _SIMPLE_BASELINE,
     _QPS_AND_LATENCY, _simple_truth),   # optimum somaxconn=1024, bbr, abort_on_overflow=1 (+6 % over cubic)
    ("null", "SYNTHETIC null surface: every configuration performs the same", _SIMPLE_SPACE, _SIMPLE_BASELINE,
     _QPS_AND_LATENCY, _null_truth),
    ("hard512", "SYNTHETIC hard surface: 512 configurations, interactions, a decoy", _HARD_SPACE, _HARD_BASELINE,
     _QPS_AND_LATENCY, _hard_truth),     # only the optimum is within 2 % of it (<= 1 % of the space)
    ("tradeoff", "SYNTHETIC trade-off surface: throughput vs tail latency", _SIMPLE_SPACE, _SIMPLE_BASELINE,
     {"qps": "maximize", "latency_p99_ms": "minimize"}, _tradeoff_truth),
]
for _row in _TABLE:
    _register(*_row)


def get_surface(name: str, cv: float = 0.03) -> Surface:
    """The SYNTHETIC surface called ``name`` with noise ``cv`` (TargetError listing known ones)."""
    if not 0 <= cv < 0.5:
        raise TargetError(f"simulator noise cv must be in [0, 0.5), got {cv!r}; e.g. 0.03 for 3 %")
    return SURFACES.get(name)(cv=cv)
