"""Small fakes for the runner tests: a file-backed target, integer sysctl-like knobs, a load.

The target keeps each host's "/proc/sys" as real files under a temporary directory, so a test
(or a crashed subprocess) leaves state on disk that restore can be checked against.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from tunelab.designs import AnalysisSpec, Design, KnobSpec, LoadSpec, TargetSpec
from tunelab.designs.schema import NoiseSpec
from tunelab.errors import KnobError, TargetError
from tunelab.loads.base import Load, LoadResult, MetricInfo
from tunelab.model import Metric
from tunelab.targets.base import CommandResult, Target

#: the knobs of the fake study and their values before anything is tuned
INITIAL = {"net.fake.alpha": 128, "net.fake.beta": 1000, "net.fake.gamma": 7}


class FileTarget(Target):
    """A target whose hosts' files live under ``root/<host>/``; records every write and command."""

    name = "file-fake"
    cannot = {"run": "a fake: every command 'measures' the knob files (or returns load_stdout)"}

    def __init__(self, root: str | Path, on_run: Callable[[], None] | None = None,
                 load_rc: int = 0, load_stdout: str | None = None) -> None:
        self.root = Path(root)
        self.on_run = on_run
        self.load_rc = load_rc
        self.load_stdout = load_stdout
        self.writes: list[tuple[str, str, str]] = []
        self.commands: list[tuple[str, ...]] = []
        self.restarts: list[str] = []
        self.resets = 0

    def _file(self, host: str, path: str) -> Path:
        self.check_host(host)
        return self.root / host / path.lstrip("/")

    def seed(self, values: Mapping[str, int], host: str = "server") -> None:
        for name, value in values.items():
            file = self._file(host, FakeKnob.path_of(name))
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(f"{value}\n")

    def values(self, host: str = "server") -> dict[str, int]:
        base = self.root / host / "proc" / "sys"
        return {".".join(p.relative_to(base).parts): int(p.read_text()) for p in sorted(base.rglob("*")) if p.is_file()}

    def read_text(self, host: str, path: str) -> str:
        try:
            return self._file(host, path).read_text()
        except FileNotFoundError:
            raise TargetError(f"{host}: no such file {path}") from None

    def write_text(self, host: str, path: str, text: str) -> None:
        self.writes.append((host, path, text))
        file = self._file(host, path)
        if not file.exists():
            raise TargetError(f"{host}: no such file {path}")
        file.write_text(text)

    def run(self, host: str, argv: Sequence[str], timeout_s: float, cpu: int | None = None) -> CommandResult:
        self.check_host(host)
        self.commands.append(tuple(argv))
        if self.on_run is not None:
            self.on_run()
        start = time.perf_counter()
        stdout = self.load_stdout if self.load_stdout is not None else json.dumps(self.values("server"))
        return CommandResult(tuple(argv), self.load_rc, stdout if self.load_rc == 0 else "", "boom" if self.load_rc else "",
                             time.perf_counter() - start)

    def restart_service(self, name: str) -> None:
        self.restarts.append(name)

    def reset(self) -> None:
        self.resets += 1


class FakeKnob:
    """An integer knob stored at /proc/sys/<dotted/name>; ``clamp_at`` mimics a kernel that caps values."""

    family = "sysctl"
    type = "int"

    def __init__(self, name: str, scope: str = "netns", requires_restart: bool = False,
                 minimum: int = 0, maximum: int = 1_000_000, clamp_at: int | None = None,
                 fail_writes_after: int | None = None) -> None:
        self.name, self.scope, self.requires_restart = name, scope, requires_restart
        self.minimum, self.maximum, self.clamp_at = minimum, maximum, clamp_at
        self.fail_writes_after = fail_writes_after
        self.write_count = 0

    @staticmethod
    def path_of(name: str) -> str:
        return "/proc/sys/" + name.replace(".", "/")

    def validate(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise KnobError(f"{self.name}: {value!r} is not an integer")
        if not self.minimum <= value <= self.maximum:
            raise KnobError(f"{self.name}: {value} is outside {self.minimum}..{self.maximum}")
        return value

    def read(self, target: Target, host: str, device: str | None = None) -> int:
        return self.from_text(target.read_text(host, self.path_of(self.name)))

    def write(self, target: Target, host: str, value: int, device: str | None = None) -> None:
        self.write_count += 1
        if self.fail_writes_after is not None and self.write_count > self.fail_writes_after:
            raise KnobError(f"{self.name}: permission denied writing {value}")
        if self.clamp_at is not None:
            value = min(value, self.clamp_at)
        target.write_text(host, self.path_of(self.name), self.to_text(value))

    def to_text(self, value: int) -> str:
        return str(value)

    def from_text(self, text: str) -> int:
        return int(text.strip())


def expected_qps(values: Mapping[str, int]) -> float:
    """The fake service's throughput as a function of the knob values it actually runs with."""
    return 1000.0 + values["net.fake.alpha"] / 4 + values["net.fake.beta"] / 10 + values.get("net.fake.gamma", 0)


class FakeLoad(Load):
    """Parses the JSON of knob values the FileTarget 'measures' into qps/latency; rc != 0 fails."""

    name = "fake"
    tools = ()
    service = "fake-svc"
    runs_on = "client"
    profiles = {"default": {"rate": 10}}
    metrics = {"qps": MetricInfo("1/s", "maximize"), "latency_mean_ms": MetricInfo("ms", "minimize")}

    def __init__(self, parse_raises: bool = False, flag: bool = False) -> None:
        self.parse_raises, self.flag = parse_raises, flag
        self.prepared = 0

    def prepare(self, target: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
        self.prepared += 1
        return {"queryfile": "/tmp/fake-queries"}

    def command(self, settings: Mapping[str, Any], duration_s: float, server_address: str) -> list[str]:
        return ["fake-load", "-l", str(duration_s), "-s", server_address]

    def parse(self, result: CommandResult, settings: Mapping[str, Any], warmup_s: float) -> LoadResult:
        if self.parse_raises:
            raise ValueError("parser exploded")
        if not result.ok or not result.stdout.strip():
            return LoadResult("failed", f"fake-load exited {result.returncode}: {result.stderr or 'no output'}", {}, raw=result.stderr)
        values = json.loads(result.stdout)
        qps = expected_qps(values)
        series = pd.DataFrame({"t_s": [0, 1, 2], "qps": [qps] * 3})
        status, reason = ("flagged", "achieved 10% of the requested rate") if self.flag else ("ok", None)
        return LoadResult(status, reason, {"qps": qps, "latency_mean_ms": 1e6 / qps}, series, result.stdout)


KNOB_IDS = list(INITIAL)
LEVELS = {"net.fake.alpha": [16, 128, 4096], "net.fake.beta": [100, 1000, 5000], "net.fake.gamma": [7, 9]}
BASELINE = {"net.fake.alpha": 4096, "net.fake.beta": 100, "net.fake.gamma": 9}


def fake_design(name: str = "fake-study", allow_host_global: bool = False, knobs: Sequence[str] = tuple(KNOB_IDS), *,
                apply_order: Mapping[str, int | None] | None = None, device: str | None = None,
                noise: NoiseSpec | None = None, load: LoadSpec | None = None) -> Design:
    """A typed :class:`~tunelab.designs.Design` of the fake knobs (not in the catalogue, so built directly,
    not parsed): ``apply_order`` per knob, one ``device`` for every knob, a ``noise`` section, a ``load``."""
    specs = tuple(KnobSpec(name=k, host="server", device=device, levels=tuple(LEVELS[k]), baseline=BASELINE[k],
                           family="sysctl", scope="netns", type="int", requires_restart=False,
                           apply_order=(apply_order or {}).get(k)) for k in knobs)
    return Design(name=name, description="", target=TargetSpec("file-fake", {}, allow_host_global),
                  load=load or LoadSpec("fake", "default"), warmup_s=0.0, measure_s=1.0,
                  metrics=(Metric("qps", "maximize"),), knobs=specs, design_type="oat", replicates=1, blocks=1,
                  seed=0, options={}, analysis=AnalysisSpec(), noise=noise or NoiseSpec())


def oat_plan(knobs: Sequence[str] = tuple(KNOB_IDS), replicates: int = 1) -> pd.DataFrame:
    """A hand-built OAT plan per Contract 2: the baseline, then each non-baseline level of each knob."""
    configs: list[tuple[dict, str | None]] = [({k: BASELINE[k] for k in knobs}, None)]
    for k in knobs:
        for level in LEVELS[k]:
            if level != BASELINE[k]:
                configs.append(({**{j: BASELINE[j] for j in knobs}, k: level}, k))
    rows = []
    for rep in range(replicates):
        for config_id, (config, varied) in enumerate(configs):
            rows.append({"config_id": config_id, "block": 0, "replicate": rep, "is_baseline": varied is None,
                         "varied_knob": varied, **config})
    plan = pd.DataFrame(rows)
    plan.insert(0, "run_id", range(len(plan)))
    plan.insert(4, "run_order", list(reversed(range(len(plan)))))  # run in reverse to prove run_order is honoured
    return plan.sort_values("run_order").reset_index(drop=True)


def make_knobs(**overrides: FakeKnob) -> Callable[[str], FakeKnob]:
    knobs = {name: FakeKnob(name) for name in INITIAL}
    knobs.update(overrides)

    def lookup(name: str) -> FakeKnob:
        try:
            return knobs[name]
        except KeyError:
            raise KnobError(f"unknown knob {name!r}") from None
    return lookup


def crash_arguments(*positional: str) -> argparse.Namespace:
    """The crash drivers' command line: ``positional`` names, then ``--kill-at NAME --occurrence N``."""
    parser = argparse.ArgumentParser()
    for name in positional:
        parser.add_argument(name)
    parser.add_argument("--kill-at")
    parser.add_argument("--occurrence", type=int, default=1)
    return parser.parse_args()


def killer(kill_at: str | None, occurrence: int) -> Callable[[str], None]:
    """A runner checkpoint that SIGKILLs this process at the ``occurrence``-th ``kill_at`` point."""
    seen: dict[str, int] = {}

    def checkpoint(name: str) -> None:
        seen[name] = seen.get(name, 0) + 1
        if name == kill_at and seen[name] == occurrence:
            os.kill(os.getpid(), signal.SIGKILL)

    return checkpoint
