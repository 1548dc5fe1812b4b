"""Shared helpers for the design tests: a small fake knob catalogue (Contract 3 subset) so the
generator and plan tests do not depend on the real catalogue, plus a YAML writer."""
from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from tunelab.designs import Design, load_design_text, parse_design
from tunelab.errors import KnobError


@dataclass(frozen=True)
class FakeKnob:
    """Validates like a catalogue knob: ints in [minimum, maximum], enums, 3-int triplets."""

    name: str
    type: str = "int"
    family: str = "sysctl"
    scope: str = "netns"
    requires_restart: bool = False
    minimum: int = 0
    maximum: int = 2**31 - 1
    choices: tuple[str, ...] = ()

    def validate(self, value: Any) -> Any:
        if self.type == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise KnobError(f"{self.name}: value {value!r} is not an integer")
            if not self.minimum <= value <= self.maximum:
                raise KnobError(f"{self.name}: value {value} is outside {self.minimum}..{self.maximum}")
            return value
        if self.type == "enum":
            if value not in self.choices:
                raise KnobError(f"{self.name}: value {value!r} is not one of {self.choices}")
            return value
        if self.type == "triplet":
            if not isinstance(value, (list, tuple)) or len(value) != 3:
                raise KnobError(f"{self.name}: value {value!r} is not three integers")
            return tuple(int(v) for v in value)
        raise KnobError(f"{self.name}: unsupported type {self.type}")


FAKE_KNOBS = {k.name: k for k in [
    FakeKnob("net.core.somaxconn", requires_restart=True),
    FakeKnob("net.ipv4.tcp_fin_timeout", minimum=1, maximum=600),
    FakeKnob("net.ipv4.tcp_syncookies", minimum=0, maximum=2),
    FakeKnob("net.ipv4.tcp_abort_on_overflow", minimum=0, maximum=1),
    FakeKnob("net.ipv4.tcp_rmem", type="triplet"),
    FakeKnob("net.core.rmem_max", scope="host"),
    FakeKnob("block.queue.scheduler", type="enum", family="block", choices=("none", "mq-deadline", "bfq", "kyber")),
    FakeKnob("block.queue.read_ahead_kb", family="block", maximum=65536),
] + [FakeKnob(f"fake.k{i:02d}") for i in range(30)]}


def fake_lookup(name: str) -> FakeKnob:
    try:
        return FAKE_KNOBS[name]
    except KeyError:
        raise KnobError(f"unknown knob {name!r}") from None


def base_design(**overrides: Any) -> dict[str, Any]:
    """A minimal valid design as a dict; keyword arguments replace top-level keys."""
    data: dict[str, Any] = {
        "name": "t",
        "target": {"type": "dry-run"},
        "load": {"generator": "dnsperf", "profile": "overload", "settings": {}},
        "warmup_s": 1,
        "measure_s": 2,
        "metrics": [{"name": "qps", "direction": "maximize", "sesoi_pct": 5}],
        "knobs": [{"name": "net.core.somaxconn", "levels": [4096, 16]}],
        "design": {"type": "oat", "replicates": 1, "seed": 1},
    }
    data.update(overrides)
    return data


def two_level_knobs(k: int) -> list[dict[str, Any]]:
    return [{"name": f"fake.k{i:02d}", "levels": [10, 20]} for i in range(k)]


@pytest.fixture
def make_design() -> Callable[..., Design]:
    """Build a Design from keyword overrides of :func:`base_design` via the YAML text path."""
    def build(**overrides: Any) -> Design:
        return load_design_text(yaml.safe_dump(base_design(**overrides)), source="test.yaml", knob_lookup=fake_lookup)
    return build


@pytest.fixture
def write_yaml(tmp_path: Path) -> Callable[[str], Path]:
    def write(text: str, name: str = "design.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path
    return write


@pytest.fixture
def two_level() -> Callable[[int], list[dict[str, Any]]]:
    """``two_level(k)``: k fake two-level knobs (levels 10 = baseline, 20)."""
    return two_level_knobs


@pytest.fixture
def lookup() -> Callable[[str], FakeKnob]:
    return fake_lookup


@pytest.fixture
def base() -> Callable[..., dict[str, Any]]:
    return base_design
