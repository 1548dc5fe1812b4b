"""The load paired with the simulator target: its command is answered from the simulated knob state."""
from __future__ import annotations

import json
from typing import Any, Mapping

import pandas as pd

from tunelab.errors import LoadError
from tunelab.loads.base import Load, LoadResult, MetricInfo
from tunelab.simulator.surface import Surface
from tunelab.targets.base import CommandResult

#: argv[0] of the simulated load's command (answered by the simulator target, never executed)
SIMULATE_COMMAND = "tunelab-simulate"


class SimulatorLoad(Load):
    """The load paired with :class:`~tunelab.simulator.SimulatorTarget`: it measures the surface.

    A :class:`~tunelab.loads.Load` (Contract 5) that is not a registered load generator: it only
    makes sense on the simulator. Profiles ``low`` (effects scaled down) and ``overload``.

    Examples
    --------
    >>> from tunelab.simulator.surfaces import get_surface
    >>> load = SimulatorLoad(get_surface("simple"))
    >>> load.command(load.settings("low", {"key": "screen:3"}), 2, "unused")
    ['tunelab-simulate', '--profile', 'low', '--duration', '2', '--key', 'screen:3']
    """

    name = "simulated"
    tools: tuple[str, ...] = ()
    service = None
    runs_on = "server"
    profiles = {"low": {"profile": "low"}, "overload": {"profile": "overload"}}
    #: the runner evaluator passes the run key as setting ``key`` so noise is seeded per evaluation
    wants_key = True
    #: the settings a design may give (``key`` is added by the runner's evaluator)
    known_settings = ("profile", "key")
    #: set by a duet for each side (tunelab.duet): the pair's time slot and the side (tunelab.simulator.noise)
    internal_settings = ("slot", "side")

    def __init__(self, surface: Surface) -> None:
        self.surface = surface
        self.metrics = {m: MetricInfo(unit="", direction=d, description=f"SYNTHETIC {m}")
                        for m, d in surface.metrics.items()}

    def settings(self, profile: str | None, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The named profile (default ``overload``) merged with ``overrides``."""
        if profile is not None and profile not in self.profiles:
            raise LoadError(f"simulated: no load profile {profile!r}; known: low, overload")
        out = dict(self.profiles[profile or "overload"])
        out.update(overrides or {})
        return out

    def validate_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """Refuse settings the simulated load does not know (``profile``; ``key``, ``slot`` and ``side`` are set by tunelab)."""
        unknown = sorted(str(k) for k in settings if k not in (*self.known_settings, *self.internal_settings))
        if unknown:
            raise LoadError(f"simulated: unknown load setting {unknown[0]!r}; known settings: "
                            f"{', '.join(self.known_settings)}")
        return dict(settings)

    def command(self, settings: Mapping[str, Any], duration_s: float, server_address: str) -> list[str]:
        """``tunelab-simulate --profile P --duration D [--key K]``."""
        argv = [SIMULATE_COMMAND, "--profile", str(settings.get("profile", "overload")), "--duration", f"{duration_s:g}"]
        for name in ("key", "slot", "side"):          # slot and side: a duet pair's (tunelab.simulator.noise)
            if settings.get(name) is not None:
                argv += [f"--{name}", str(settings[name])]
        return argv

    def parse(self, result: CommandResult, settings: Mapping[str, Any], warmup_s: float) -> LoadResult:
        """The metrics the simulator printed as JSON; a failed command or bad output fails the trial."""
        if not result.ok:
            return LoadResult("failed", f"simulator returned {result.returncode}: {result.stderr}", {}, raw=result.stderr)
        try:
            metrics = {k: float(v) for k, v in json.loads(result.stdout).items()}
        except (ValueError, TypeError, AttributeError) as exc:
            return LoadResult("failed", f"simulator output is not a JSON object of numbers ({exc})", {},
                              raw=result.stdout)
        series = pd.DataFrame({"t_s": [0.0], **{k: [v] for k, v in metrics.items()}})
        return LoadResult("ok", None, metrics, series, raw=result.stdout)
