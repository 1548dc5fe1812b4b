"""The ``simulator`` target: a kernel whose knob files live in memory and whose load is a surface.

The load's command is answered from the current knob values, so the real runner (apply,
verify, record, restore) and store are exercised end to end without touching a machine.

Examples
--------
>>> target = SimulatorTarget("simple", seed=1)
>>> path = "/proc/sys/net/core/somaxconn"
>>> target.read_text("server", path)
'128\\n'
>>> target.write_text("server", path, "1024")
>>> target.current_config()["net.core.somaxconn"]
1024
>>> target.run("server", ["true"], timeout_s=1).returncode
127
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Mapping, Sequence

import numpy as np

from tunelab.errors import TargetError
from tunelab.knobs import Knob, get_knob
from tunelab.model import KnobId
from tunelab.targets.base import TARGETS, CommandResult, Target
from tunelab.simulator.load import SIMULATE_COMMAND, SimulatorLoad
from tunelab.simulator.surface import stable_seed
from tunelab.simulator.surfaces import get_surface


def _share(name: str, value: Any) -> float:
    """``value`` as a share between 0 and 1; TargetError naming the option otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise TargetError(f"simulator {name} must be a number between 0 and 1, got {value!r}")
    return float(value)


@TARGETS.register("simulator")
class SimulatorTarget(Target):
    """A target whose kernel is a SYNTHETIC surface: knob files in memory, metrics from the surface.

    Parameters
    ----------
    surface : name of a surface in :data:`~tunelab.simulator.SURFACES` (default ``"simple"``)
    cv : noise coefficient of variation (default 0.03)
    seed : noise seed; a measurement with a given ``--key`` (else the n-th one) is always the same
    delay_s : seconds each measurement takes (default 0: answered at once); benchmarks of dispatch
        over many testbeds use it to stand in for a real load's duration
    fail_after : after this many measurements every further one fails (exit 1), as a testbed that
        breaks mid-study does (default None: never); rehearses quarantine on many testbeds
    busy_p : probability that other processes are busy during a measurement (default 0: never); a busy
        one reports ``busy_share`` of the machine as foreign CPU (:meth:`foreign_cpu_s`), so the runner's
        busy rule (``noise.repeat_busy_pct``) sets it aside and measures again. Drawn from ``seed`` and
        the measurement's number, so the same measurements are busy on every run
    busy_share : the share of the machine (0..1) other processes use during a busy measurement (default 0.6)
    """

    name = "simulator"
    hosts = ("server", "client")
    cannot = {
        "run": f"only the simulated load's command ({SIMULATE_COMMAND}) and `ip link set` of its links run here; "
               "other commands exit 127",
        "client_files": "only the server's knob files exist (the surface's knobs)",
    }

    def __init__(self, surface: str = "simple", cv: float = 0.03, seed: int = 0, delay_s: float = 0.0,
                 fail_after: int | None = None, busy_p: float = 0.0, busy_share: float = 0.6) -> None:
        if isinstance(delay_s, bool) or not 0 <= float(delay_s) <= 3600:
            raise TargetError(f"simulator delay_s must be between 0 and 3600 seconds, got {delay_s!r}")
        self.surface = get_surface(surface, cv)
        self.seed = int(seed)
        self.delay_s = float(delay_s)
        if fail_after is not None and (isinstance(fail_after, bool) or not isinstance(fail_after, int) or fail_after < 0):
            raise TargetError(f"simulator fail_after must be a number of measurements >= 0, got {fail_after!r}")
        self.fail_after = fail_after
        self.busy_p, self.busy_share = _share("busy_p", busy_p), _share("busy_share", busy_share)
        self.measurements = 0
        self._foreign_cpu_s = 0.0
        self._files: dict[tuple[str, str], str] = {}
        self.up()

    @classmethod
    def paired_load(cls, options: Mapping[str, Any], profile: str | None) -> tuple[SimulatorLoad, dict[str, Any]]:
        """The simulated load of the surface ``options`` names, with the settings of ``profile``
        (``overload`` when the simulated load has no such profile)."""
        load = SimulatorLoad(get_surface(options.get("surface", "simple"), options.get("cv", 0.03)))
        return load, load.settings(profile if profile in load.profiles else "overload")

    def up(self) -> None:
        """Fill the knob files with the surface's baseline (once; a second call changes nothing)."""
        if self._files:
            return
        for knob_id, value in self.surface.baseline.items():
            knob, where = self._knob_file(knob_id)
            self._files[where] = knob.to_text(value) + "\n"

    def _knob_file(self, knob_id: str) -> tuple[Knob, tuple[str, str]]:
        """The catalogue knob of a surface knob id and the ``(host, path)`` of its in-memory file."""
        kid = KnobId.parse(knob_id)
        knob = get_knob(kid.name)
        return knob, (kid.host, knob.path(self, kid.device))

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
        out = {}
        for knob_id in self.surface.space:
            knob, where = self._knob_file(knob_id)
            out[knob_id] = knob.from_text(self._files[where])
        return out

    def run(self, host: str, argv: Sequence[str], timeout_s: float, cpu: int | None = None) -> CommandResult:
        """Answer the simulated load's command with one draw of the surface at the current knob values."""
        self.check_host(host)
        argv = tuple(argv)
        if argv[:3] == ("ip", "link", "set"):
            return self.link_set(host, argv)
        if not argv or argv[0] != SIMULATE_COMMAND:
            return CommandResult(argv, 127, "", f"simulator: only {SIMULATE_COMMAND} runs here, not {argv[:1]}", 0.0)
        profile = argv[argv.index("--profile") + 1] if "--profile" in argv else "overload"
        if self.fail_after is not None and self.measurements >= self.fail_after:
            self.measurements += 1
            return CommandResult(argv, 1, "", f"simulator: this testbed broke after {self.fail_after} measurements "
                                              "(option fail_after)", 0.0)
        ident = argv[argv.index("--key") + 1] if "--key" in argv else self.measurements
        rng = np.random.default_rng(stable_seed(self.seed, self.surface.name, profile, ident))
        self.measurements += 1
        metrics = self.surface.draw(self.current_config(), rng, profile)
        self._foreign_cpu_s = self._busy_cpu_s(float(argv[argv.index("--duration") + 1]) if "--duration" in argv else 0.0)
        if self.delay_s:
            time.sleep(self.delay_s)
        return CommandResult(argv, 0, json.dumps(metrics), "", 0.0)

    def _busy_cpu_s(self, duration_s: float) -> float:
        """Foreign CPU seconds during the measurement just made: ``busy_share`` of the machine with
        probability ``busy_p`` (drawn from the seed and the measurement's number), else none."""
        if not self.busy_p:
            return 0.0
        draw = np.random.default_rng(stable_seed(self.seed, "busy", self.measurements)).random()
        return self.busy_share * (os.cpu_count() or 1) * duration_s if draw < self.busy_p else 0.0

    def foreign_cpu_s(self) -> float:
        """CPU seconds other processes used since the previous call: a busy measurement's (option ``busy_p``)."""
        used, self._foreign_cpu_s = self._foreign_cpu_s, 0.0
        return used

    def link_set(self, host: str, argv: tuple[str, ...]) -> CommandResult:
        """``ip link set dev D mtu|txqueuelen V`` on a simulated link: writes its in-memory sysfs file
        (how the link knob family applies MTU and txqueuelen); anything else exits 2 as ``ip`` would."""
        files = {"mtu": "mtu", "txqueuelen": "tx_queue_len"}
        if len(argv) != 7 or argv[3] != "dev" or argv[5] not in files:
            return CommandResult(argv, 2, "", f"simulator: cannot parse {' '.join(argv)}", 0.0)
        path = f"/sys/class/net/{argv[4]}/{files[argv[5]]}"
        if (host, path) not in self._files:
            return CommandResult(argv, 1, "", f"simulator: no link {argv[4]!r} with {argv[5]} on {host}", 0.0)
        self._files[(host, path)] = argv[6].strip() + "\n"
        return CommandResult(argv, 0, "", "", 0.0)

    def describe(self) -> dict[str, Any]:
        return {"target": self.name, "surface": self.surface.name, "cv": self.surface.cv, "seed": self.seed,
                "delay_s": self.delay_s, **({"busy_p": self.busy_p, "busy_share": self.busy_share} if self.busy_p else {}),
                "note": "SYNTHETIC: no real kernel was measured"}
