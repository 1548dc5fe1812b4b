"""The Load interface: build a load generator's command and parse its output into one schema.

A load's metric schema is ``{name: MetricInfo(unit, direction, description)}``: the unit and the
one-line meaning belong to the load, the better direction is the shared vocabulary of
:mod:`tunelab.model` (``"maximize"``/``"minimize"``, also written ``max``/``min``), so a metric
reads the same in a load, a design and a refinement.

Examples
--------
>>> MetricInfo("1/s", "max").direction
'maximize'
>>> MetricInfo("ms", "minimize", "mean latency").metric("latency_mean_ms", sesoi_pct=10)
Metric(name='latency_mean_ms', direction='minimize', sesoi_pct=10.0)
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

import pandas as pd

from tunelab.errors import LoadError
from tunelab.model import DEFAULT_SESOI_PCT, Direction, DirectionName, Metric, Traffic
from tunelab.registry import Registry
from tunelab.targets.base import CommandResult, Target

Status = Literal["ok", "flagged", "failed"]


class SettingError(LoadError):
    """A load setting is unknown or breaks its rule; ``setting`` names it (None: a combination)."""

    def __init__(self, message: str, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


@dataclass(frozen=True)
class MetricInfo:
    """One metric a load reports: unit, which direction is better, and a one-line description.

    ``direction`` is read with :meth:`tunelab.model.Direction.parse` (``max``, ``minimize``, ...)
    and kept as its full word, ``"maximize"`` or ``"minimize"``.
    """

    unit: str
    direction: DirectionName
    description: str = ""
    #: the default smallest effect of interest as a difference (counts whose baseline is often 0)
    sesoi_abs: float | None = None
    #: measured only on the work that survived (latency of the answered queries, of the completed
    #: requests): where a related metric (the load's ``conditional_on``) degrades, this one is not
    #: comparable (a guard); a metric not measured on survivors shows the related one as a trade-off
    on_survivors: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "direction", Direction.parse(self.direction).value)

    def metric(self, name: str, sesoi_pct: float = DEFAULT_SESOI_PCT) -> Metric:
        """This metric as the shared :class:`tunelab.model.Metric` (for a design, a screen or a search)."""
        return Metric(name, self.direction, sesoi_pct)


@dataclass
class LoadResult:
    """The parsed outcome of one measurement.

    ``status`` is ``"ok"``, ``"flagged"`` (usable but suspicious, e.g. achieved far below the
    requested rate) or ``"failed"`` (no usable measurement); ``reason`` says why for the latter two.
    ``series`` has one row per second (column ``t_s`` plus metric columns).
    """

    status: Status
    reason: str | None
    metrics: dict[str, float]
    series: pd.DataFrame = field(default_factory=pd.DataFrame)
    raw: str = ""


class Load(abc.ABC):
    """Base class of load generators; subclasses are registered in :data:`LOADS`."""

    name: str = "abstract"
    tools: tuple[str, ...] = ()
    service: str | None = None
    runs_on: str = "client"
    profiles: Mapping[str, Mapping[str, Any]] = {}
    metrics: Mapping[str, MetricInfo] = {}
    #: metric -> the metrics it is related to. For a metric measured on survivors
    #: (:attr:`MetricInfo.on_survivors`: latency is timed on answered queries only) they are guards: at a
    #: level where a guard degrades beyond its SESOI the screen reports the metric as ``not comparable``.
    #: For any other metric they are trade-offs, shown beside its verdict (iperf3's throughput is goodput,
    #: already net of retransmissions: the retransmits are a cost, not a selection of what was measured).
    #: They keep their :class:`MetricInfo` direction and SESOI; a design may override both.
    conditional_on: Mapping[str, tuple[str, ...]] = {}
    #: ``(metric, rate metric)``: report the server processes' CPU time per answered request as ``metric``
    #: (microseconds), from the trial's counters and the load's rate of answers (dnsperf:
    #: ``("server_cpu_per_query", "qps")``); None: not reported
    server_cpu_metric: tuple[str, str] | None = None

    def settings(self, profile: str | None, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Merge a named profile with overrides: LoadError for an unknown profile, :class:`SettingError`
        for an unknown or broken setting (:meth:`validate_settings`), so no setting is silently ignored."""
        base: dict[str, Any] = {}
        if profile is not None:
            if profile not in self.profiles:
                raise LoadError(f"{self.name}: no load profile {profile!r}; known: {', '.join(sorted(self.profiles))}")
            base = dict(self.profiles[profile])
        base.update(overrides or {})
        self.validate_settings(base)
        return base

    def validate_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """Check settings a design gives (profile merged with overrides) as ``command`` would.

        Pure: no target is touched. Keys that only :meth:`prepare` may add are refused here.
        Returns the settings with defaults filled in; :class:`SettingError` otherwise.
        """
        return dict(settings)

    #: metrics that count work done per second: under a rate cap they equal the offered rate whatever a knob
    #: does, so the pre-flight refuses them on a capped profile (:meth:`rate_cap`)
    rate_metrics: tuple[str, ...] = ()

    def traffic(self, settings: Mapping[str, Any]) -> frozenset[Traffic]:
        """What these settings put through the kernel (TCP, UDP, disk reads and writes): the pre-flight checks a
        knob's mechanism needs one of them. Empty (the default): unknown, nothing is checked."""
        return frozenset()

    def rate_cap(self, settings: Mapping[str, Any]) -> str | None:
        """The offered rate these settings cap the load at, in words (``'rate 2000 queries/s'``), or None when
        the load runs as fast as the server lets it (the default)."""
        return None

    def service_port(self, settings: Mapping[str, Any]) -> int | None:
        """The port of the service the load drives on the server (dnsperf: 53), or None (no service: fio)."""
        return None

    def prepare(self, target: Target, settings: Mapping[str, Any]) -> dict[str, Any]:
        """Write helper files on the host the load runs on; return settings to add (default none)."""
        return {}

    def counted_device(self, settings: Mapping[str, Any]) -> str | None:
        """The block device this load drives, as the target names it (its counters are recorded), from
        the settings :meth:`prepare` completed; None (the default) when it drives none."""
        return None

    def cleanup(self, target: Target) -> None:  # noqa: B027 - optional hook
        """Remove what :meth:`prepare` left on the target (private temporary files); no-op by default."""

    @abc.abstractmethod
    def command(self, settings: Mapping[str, Any], duration_s: float, server_address: str) -> list[str]:
        """The argv that runs this load for ``duration_s`` seconds against ``server_address``."""

    @abc.abstractmethod
    def parse(self, result: CommandResult, settings: Mapping[str, Any], warmup_s: float) -> LoadResult:
        """Turn the tool's output into a :class:`LoadResult`; never raise on bad output, fail the trial."""


#: the registered load generators; ``LOADS.get(name)`` raises LoadError listing the known ones
LOADS: Registry[type[Load]] = Registry("load generator", error=LoadError)


def get_load(name: str) -> type[Load]:
    """Return the load class registered as ``name`` (LoadError listing known ones otherwise)."""
    return LOADS.get(name)
