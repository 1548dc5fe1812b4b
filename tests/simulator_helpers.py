"""The design text of a small one-at-a-time study on the SYNTHETIC simulator target, shared by tests
that need a real run without a lab (``from simulator_helpers import simulator_design``)."""
from __future__ import annotations

import textwrap

SOMAXCONN_KNOB = "{name: net.core.somaxconn, levels: [128, 16], baseline: 128}"
CONGESTION_KNOB = "{name: net.ipv4.tcp_congestion_control, levels: [cubic, bbr], baseline: cubic}"


def simulator_design(name: str, *, cv: float, knobs: tuple[str, ...] = (SOMAXCONN_KNOB,), sesoi_pct: float = 5,
                     replicates: str = "2", seed: int = 5, extra: str = "") -> str:
    """YAML of an OAT study ``name`` on the simulator's ``simple`` surface (noise ``cv``), dnsperf overload,
    1 s trials, qps with ``sesoi_pct``; ``replicates`` is YAML (``3`` or ``{min: 3, max: 18, ...}``) and
    ``extra`` more top-level keys."""
    knob_lines = "\n".join(f"  - {knob}" for knob in knobs)
    text = textwrap.dedent(f"""\
        name: {name}
        target: {{type: simulator, options: {{surface: simple, cv: {cv}}}}}
        load: {{generator: dnsperf, profile: overload}}
        measure_s: 1
        metrics: [{{name: qps, direction: maximize, sesoi_pct: {sesoi_pct}}}]
        knobs:
        """)
    return text + knob_lines + f"\ndesign: {{type: oat, replicates: {replicates}, seed: {seed}}}\n" + extra
