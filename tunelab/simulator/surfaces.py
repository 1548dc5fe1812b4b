"""The SYNTHETIC surfaces, registered in :data:`SURFACES` (``get_surface(name, cv)``):

``simple``    3 knobs, 54 configurations, one optimum, a somaxconn x abort_on_overflow interaction
``null``      the same knobs, every configuration identical (no knob matters)
``hard512``   5 knobs (int, enum, bool, candidate triplets, bool), 512 configurations, interactions
              and a decoy local optimum; only the optimum is within 2 % of it (0.2 % of the space)
``tradeoff``  two objectives that conflict (qps up, p99 latency up with the backlog): for NSGA-II
``smooth``    4 ordinal integer knobs on log/linear grids, 1512 configurations, one smooth peak whose
              position moves with the other knobs (the best somaxconn grows with rmem_max, the best
              backlog with somaxconn); 7 configurations within 2 % of the optimum
``wide27``    the 27 knobs of seed 000's Table 2 (2-4 levels each, 6.2e10 configurations, baseline
              = kernel defaults), sparse: 5 knobs with main effects, 2 interactions (tcp_rmem x
              tcp_window_scaling, busy_read x busy_poll), the rest tiny or none. Too large to
              enumerate: it is an :class:`AdditiveSurface`, whose optimum, best configurations and
              share within a tolerance are computed from its terms

:func:`best_configs` and :func:`count_within` answer for every surface (exhaustively where the
space is small, from the terms of an :class:`AdditiveSurface`).

Examples
--------
>>> SURFACES.names()
['hard512', 'null', 'simple', 'smooth', 'tradeoff', 'wide27']
>>> get_surface("simple").cv, get_surface("simple", cv=0.1).cv
(0.03, 0.1)
>>> wide = get_surface("wide27")
>>> wide.within(wide.optimum()), wide.within(wide.baseline)
(True, False)
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from tunelab.errors import TargetError
from tunelab.model import Direction, DirectionName, level_value
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


_RMEM_MAX = "net.core.rmem_max"
_BACKLOG = "net.core.netdev_max_backlog"
_FIN = "net.ipv4.tcp_fin_timeout"
_SMOOTH_SPACE = {
    _SOMAXCONN: {"kind": "int", "low": 16, "high": 4096, "scale": "log", "n": 9},         # 16 .. 4096
    _RMEM_MAX: {"kind": "int", "low": 262144, "high": 16777216, "scale": "log", "n": 7},  # 256 KiB .. 16 MiB
    _BACKLOG: {"kind": "int", "low": 250, "high": 8000, "scale": "log", "n": 6},          # 250 .. 8000
    _FIN: {"kind": "int", "low": 15, "high": 60, "step": 15},                             # 15 .. 60 s
}
_SMOOTH_BASELINE = {_SOMAXCONN: 128, _RMEM_MAX: 262144, _BACKLOG: 1000, _FIN: 60}


def _smooth_distance(config: Mapping[str, Any]) -> float:
    """Squared distance (>= 0) of ``config`` from the peak, in log2 units of the sizes; the peak of
    somaxconn moves with rmem_max and the peak of the backlog with somaxconn (pairwise interactions)."""
    x1 = math.log2(max(config[_SOMAXCONN], 1))         # 4 .. 12
    x2 = math.log2(max(config[_RMEM_MAX], 1))          # 18 .. 24
    x3 = math.log2(max(config[_BACKLOG], 1))           # ~8 .. 13
    fin = float(config[_FIN])
    return (1.1 * (x1 - (9.3 + 0.6 * (x2 - 21.0))) ** 2 + 0.9 * (x2 - 22.6) ** 2
            + 1.0 * (x3 - (10.2 + 0.5 * (x1 - 9.0))) ** 2 + 1.2 * ((fin - 33.0) / 15.0) ** 2)


def _smooth_truth(config: Mapping[str, Any], scale: float) -> dict[str, float]:
    pct = 12.0 - 45.0 * (1.0 - math.exp(-_smooth_distance(config) / 15.0))   # peak +12 %, floor -33 %
    qps = 10_000.0 * (1.0 + scale * pct / 100.0)
    return {"qps": qps, "latency_mean_ms": 1000.0 * 4.0 / qps}


class AdditiveTruth:
    """The truth of an :class:`AdditiveSurface`: a score in % that is a sum of main effects and pair effects.

    ``qps = 10000 (1 + scale * score / 100)`` and ``latency_mean_ms = 4000 / qps``, so both metrics
    are best at the highest score. Levels a term does not list contribute 0.

    Parameters
    ----------
    mains : knob id -> {level: effect in %}
    pairs : (knob id, knob id) -> {(level, level): effect in %} (on top of the main effects)

    Examples
    --------
    >>> truth = AdditiveTruth({"a": {1: 2.0}}, {("a", "b"): {(1, True): 1.0}})
    >>> truth.score({"a": 1, "b": True}), truth({"a": 0, "b": True}, 1.0)["qps"]
    (3.0, 10000.0)
    """

    metrics: dict[str, DirectionName] = {"qps": "maximize", "latency_mean_ms": "minimize"}

    def __init__(self, mains: Mapping[str, Mapping[Any, float]],
                 pairs: Mapping[tuple[str, str], Mapping[tuple[Any, Any], float]] = ()) -> None:
        self.mains = {k: {level_value(v): float(e) for v, e in table.items()} for k, table in mains.items()}
        self.pairs = {tuple(ks): {tuple(level_value(v) for v in vs): float(e) for vs, e in table.items()}
                      for ks, table in dict(pairs).items()}

    def score(self, config: Mapping[str, Any]) -> float:
        """The score (in %) of ``config``."""
        total = sum(table.get(level_value(config[k]), 0.0) for k, table in self.mains.items())
        for (a, b), table in self.pairs.items():
            total += table.get((level_value(config[a]), level_value(config[b])), 0.0)
        return float(total)

    @staticmethod
    def values(score: float, scale: float = 1.0) -> dict[str, float]:
        """The metric values of a configuration with ``score``."""
        qps = 10_000.0 * (1.0 + scale * score / 100.0)
        return {"qps": qps, "latency_mean_ms": 1000.0 * 4.0 / qps}

    def __call__(self, config: Mapping[str, Any], scale: float) -> dict[str, float]:
        return self.values(self.score(config), scale)


#: decimals scores are rounded to, so equal sums of terms compare equal whatever the order of the additions
_SCORE_DIGITS = 9


@dataclass(frozen=True)
class AdditiveSurface(Surface):
    """A surface too large to enumerate whose ``truth_fn`` is an :class:`AdditiveTruth` over choice knobs.

    Knobs linked by a pair term form a group; groups are independent, so the optimum, the best
    configurations and the number within a tolerance follow from each group's few level
    combinations without enumerating the space (:meth:`optimum`, :meth:`best`, :meth:`count_within`).
    Ties are broken towards the baseline: the configuration that changes fewest knobs wins.
    """

    def __post_init__(self) -> None:
        if not isinstance(self.truth_fn, AdditiveTruth):
            raise TargetError(f"surface {self.name!r}: an AdditiveSurface needs an AdditiveTruth as its truth")
        if dict(self.metrics) != AdditiveTruth.metrics:
            raise TargetError(f"surface {self.name!r}: an AdditiveSurface has the metrics {AdditiveTruth.metrics}")
        kinds = {k: spec.get("kind", "choice") for k, spec in self.space.items()}
        if any(kind != "choice" for kind in kinds.values()):
            raise TargetError(f"surface {self.name!r}: every knob of an AdditiveSurface must be a choice; "
                              f"not {[k for k, kind in kinds.items() if kind != 'choice']}")
        named = set(self.truth_fn.mains) | {k for pair in self.truth_fn.pairs for k in pair}
        if named - set(self.space):
            raise TargetError(f"surface {self.name!r}: terms name knobs outside its space: "
                              f"{sorted(named - set(self.space))}")

    def groups(self) -> list[list[tuple[float, int, dict[str, Any]]]]:
        """Per group of linked knobs: ``(score, changed knobs, levels)`` of every level combination."""
        if "groups" not in self._cache:
            parent = {k: k for k in self.space}

            def root(k: str) -> str:
                while parent[k] != k:
                    k = parent[k]
                return k

            for a, b in self.truth_fn.pairs:
                parent[root(a)] = root(b)
            members: dict[str, list[str]] = {}
            for k in self.space:
                members.setdefault(root(k), []).append(k)
            baseline = {k: level_value(v) for k, v in self.baseline.items()}
            out = []
            for knobs in members.values():
                levels = [[level_value(v) for v in self.space[k]["values"]] for k in knobs]
                rows = []
                for combo in itertools.product(*levels):
                    part = dict(zip(knobs, combo))
                    full = {**baseline, **part}
                    score = sum(self.truth_fn.mains.get(k, {}).get(part[k], 0.0) for k in knobs)
                    score += sum(table.get((full[a], full[b]), 0.0) for (a, b), table in self.truth_fn.pairs.items()
                                 if a in part)
                    rows.append((round(score, _SCORE_DIGITS), sum(part[k] != baseline[k] for k in knobs), part))
                out.append(rows)
            self._cache["groups"] = out
        return self._cache["groups"]

    def best(self, k: int = 1) -> list[dict[str, Any]]:
        """The configurations of the ``k`` best distinct scores, best first (each the one changing fewest knobs)."""
        partial: list[tuple[float, int, dict[str, Any]]] = [(0.0, 0, {})]
        for rows in self.groups():
            merged: dict[float, tuple[float, int, dict[str, Any]]] = {}
            for score, changed, levels in partial:
                for s, c, part in rows:
                    total = round(score + s, _SCORE_DIGITS)
                    if total not in merged or changed + c < merged[total][1]:
                        merged[total] = (total, changed + c, {**levels, **part})
            partial = sorted(merged.values(), key=lambda row: -row[0])[:k]
        return [{kid: row[2][kid] for kid in self.space} for row in partial]

    def optimum(self, metric: str | None = None) -> dict[str, Any]:
        """The best configuration (every metric is best at the highest score)."""
        return self.best(1)[0]

    def table(self, metric: str | None = None, profile: str = "overload") -> pd.DataFrame:
        raise TargetError(f"surface {self.name!r} has {self.search_space().size:.3g} configurations, too many to "
                          "tabulate; use best_configs() and count_within()")

    def count_within(self, tolerance_pct: float = 2.0, metric: str | None = None) -> int:
        """How many configurations are truly within ``tolerance_pct`` % of the optimum (exact)."""
        metric = metric or next(iter(self.metrics))
        counts: dict[float, int] = {0.0: 1}
        for rows in self.groups():
            merged: dict[float, int] = {}
            for score, n in counts.items():
                for s, _, _ in rows:
                    total = round(score + s, _SCORE_DIGITS)
                    merged[total] = merged.get(total, 0) + n
            counts = merged
        best = AdditiveTruth.values(max(counts))[metric]
        return sum(n for score, n in counts.items()
                   if is_within(AdditiveTruth.values(score)[metric], best, self.metrics[metric], tolerance_pct))


def is_within(value: Any, best: float, direction: DirectionName, tolerance_pct: float = 2.0) -> Any:
    """Whether ``value`` (a number or array) is within ``tolerance_pct`` % of ``best`` (as :meth:`Surface.within`).

    >>> is_within(98.5, 100.0, "maximize"), is_within(103.0, 100.0, "minimize")
    (True, False)
    """
    if direction == Direction.MAXIMIZE:
        return value >= best * (1 - tolerance_pct / 100)
    return value <= best * (1 + tolerance_pct / 100)


def best_configs(surface: Surface, k: int = 5, metric: str | None = None) -> list[dict[str, Any]]:
    """The configurations of ``surface``'s ``k`` best distinct true values of ``metric`` (default the first),
    best first; among equal values the one changing fewest knobs from the baseline.

    >>> [c["net.core.somaxconn"] for c in best_configs(get_surface("smooth"), 3)]
    [1024, 2048, 1024]
    """
    if isinstance(surface, AdditiveSurface):
        return surface.best(k)
    metric = metric or next(iter(surface.metrics))
    table = surface.table().copy()
    baseline = {kid: level_value(v) for kid, v in surface.baseline.items()}
    table["_changed"] = [sum(level_value(row[kid]) != baseline[kid] for kid in surface.space)
                         for row in table[list(surface.space)].to_dict("records")]
    table["_value"] = table[metric].round(_SCORE_DIGITS)
    ascending = surface.metrics[metric] != Direction.MAXIMIZE
    table = table.sort_values(["_value", "_changed"], ascending=[ascending, True], kind="stable")
    top = table.drop_duplicates("_value").head(k)
    return [{kid: level_value(row[kid]) for kid in surface.space} for row in top.to_dict("records")]


def count_within(surface: Surface, tolerance_pct: float = 2.0, metric: str | None = None) -> int:
    """How many configurations of ``surface`` are truly within ``tolerance_pct`` % of its optimum.

    >>> count_within(get_surface("hard512")), count_within(get_surface("smooth"))
    (1, 7)
    """
    if isinstance(surface, AdditiveSurface):
        return surface.count_within(tolerance_pct, metric)
    metric = metric or next(iter(surface.metrics))
    values = surface.table()[metric].to_numpy(float)
    best = values.max() if surface.metrics[metric] == Direction.MAXIMIZE else values.min()
    return int(np.sum(is_within(values, best, surface.metrics[metric], tolerance_pct)))


# Seed 000's Table 2: 27 knobs, each with its kernel default first (the baseline) and 1-3 tuned values.
_T_MEM = [(94011, 125351, 188022), (188022, 250702, 376044), (376044, 501404, 752088)]
_T_RMEM = [(4096, 131072, 6291456), (4096, 262144, 16777216), (8192, 262144, 33554432), (4096, 65536, 4194304)]
_T_WMEM = [(4096, 16384, 4194304), (4096, 65536, 16777216), (8192, 131072, 33554432)]
_WS = "net.ipv4.tcp_window_scaling"
_BUSY_READ, _BUSY_POLL = "net.core.busy_read", "net.core.busy_poll"
_MTU, _TXQ = "link.mtu[eth0]", "link.txqueuelen[eth0]"
_WIDE_LEVELS: dict[str, list[Any]] = {
    "net.ipv4.tcp_mem": _T_MEM,
    "net.ipv4.tcp_rmem": _T_RMEM,
    "net.ipv4.tcp_wmem": _T_WMEM,
    "net.ipv4.tcp_moderate_rcvbuf": [True, False],
    "net.ipv4.tcp_no_metrics_save": [False, True],
    "net.ipv4.tcp_timestamps": [1, 0, 2],
    _WS: [True, False],
    "net.ipv4.tcp_sack": [True, False],
    "net.ipv4.tcp_tw_reuse": [2, 1, 0],
    "net.ipv4.tcp_keepalive_probes": [9, 3],
    "net.ipv4.tcp_keepalive_intvl": [75, 15],
    "net.ipv4.tcp_fin_timeout": [60, 30, 15],
    "net.core.wmem_max": [212992, 4194304, 16777216],
    "net.core.rmem_max": [212992, 4194304, 16777216],
    "net.core.rmem_default": [212992, 1048576],
    "net.core.wmem_default": [212992, 1048576],
    _BACKLOG: [1000, 300, 5000, 30000],
    "net.core.bpf_jit_enable": [1, 0],
    "net.core.dev_weight": [64, 16, 128, 256],
    "net.core.rps_sock_flow_entries": [0, 32768],
    "net.core.optmem_max": [20480, 81920],
    _SOMAXCONN: [4096, 128, 1024],
    _BUSY_READ: [0, 50],
    _BUSY_POLL: [0, 50],
    "net.core.tstamp_allow_data": [True, False],
    _MTU: [1500, 4000, 9000],
    _TXQ: [1000, 500, 10000],
}
_WIDE_SPACE = {k: {"kind": "choice", "values": v} for k, v in _WIDE_LEVELS.items()}
_WIDE_BASELINE = {k: v[0] for k, v in _WIDE_LEVELS.items()}
_WIDE_TRUTH = AdditiveTruth(
    mains={   # five knobs that matter (effects in % of qps) ...
        "net.ipv4.tcp_rmem": dict(zip(_T_RMEM, [0.0, 6.0, 7.5, -3.0])),
        "net.ipv4.tcp_wmem": dict(zip(_T_WMEM, [0.0, 2.0, 4.0])),
        _MTU: {4000: 3.5, 9000: 6.0},
        _BACKLOG: {300: -2.5, 5000: 2.5, 30000: 1.5},
        _WS: {False: -12.0},
        # ... two that matter only together (below), each alone costs a little CPU ...
        _BUSY_READ: {50: -0.5},
        _BUSY_POLL: {50: -0.5},
        # ... and tiny effects (the other 14 knobs: none)
        "net.ipv4.tcp_sack": {False: -0.3},
        "net.ipv4.tcp_timestamps": {0: 0.1, 2: -0.05},
        _TXQ: {500: -0.1, 10000: 0.2},
        "net.core.dev_weight": {16: -0.2, 128: 0.1},
        "net.ipv4.tcp_no_metrics_save": {True: 0.05},
        _SOMAXCONN: {128: -0.15, 1024: -0.05},
    },
    pairs={   # large receive buffers need window scaling; busy polling needs both knobs
        ("net.ipv4.tcp_rmem", _WS): {(_T_RMEM[1], False): -6.0, (_T_RMEM[2], False): -7.5},
        (_BUSY_READ, _BUSY_POLL): {(50, 50): 3.5},
    })


def _register(name: str, description: str, space: Mapping[str, Mapping[str, Any]], baseline: Mapping[str, Any],
              metrics: Mapping[str, DirectionName], truth: Callable[[Mapping[str, Any], float], dict[str, float]],
              kind: type[Surface] = Surface) -> None:
    """Register the factory ``cv -> Surface`` of one surface under ``name`` (``kind``: Surface or a subclass)."""
    def factory(cv: float = 0.03) -> Surface:
        return kind(name, description, space, baseline, metrics, truth, cv)

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
    ("smooth", "SYNTHETIC smooth surface: 4 ordinal knobs, one peak that moves with the other knobs", _SMOOTH_SPACE,
     _SMOOTH_BASELINE, _QPS_AND_LATENCY, _smooth_truth),   # 7 of 1512 configurations within 2 % of the optimum
    ("wide27", "SYNTHETIC wide surface: seed 000's 27 Table-2 knobs, sparse effects, two interactions", _WIDE_SPACE,
     _WIDE_BASELINE, _QPS_AND_LATENCY, _WIDE_TRUTH, AdditiveSurface),
]
for _row in _TABLE:
    _register(*_row)


def get_surface(name: str, cv: float = 0.03) -> Surface:
    """The SYNTHETIC surface called ``name`` with noise ``cv`` (TargetError listing known ones)."""
    if not 0 <= cv < 0.5:
        raise TargetError(f"simulator noise cv must be in [0, 0.5), got {cv!r}; e.g. 0.03 for 3 %")
    return SURFACES.get(name)(cv=cv)
