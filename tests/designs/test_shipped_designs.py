"""Every shipped design (designs/*.yaml, designs/seeds/*.yaml, found by glob so new ones are covered)
plans, passes the preflight on its declared target and runs one trial there that ends ok, or is refused
with the documented reason (host-global knobs without ``allow_host_global``: the error names them and
the design's header comment says so).

To stay quick (one trial per design, ~90 s for the file) each design runs from a derived copy in
``tmp_path`` whose ONLY change is the timing: ``warmup_s`` and ``measure_s`` are shortened to the lab's
minimum (1 s and 2 s; dnsperf needs no less). The test asserts that the copy plans exactly as the
original. The first planned run goes through the runner's own path (:func:`tunelab.runner.run_design`
with a one-row plan: journal, preflight, apply, measure, record, restore); designs with the same target
spec share one target, and every target is torn down at the end of the module, also after a failure.
"""
from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

import tunelab
from tunelab.designs import load_design, make_plan
from tunelab.errors import SafetyError
from tunelab.runner.design_access import target_spec_of
from tunelab.runner.plans import prepare_run, run_design
from tunelab.store import Store
from tunelab.targets import build_target

ROOT = Path(__file__).resolve().parents[2]
DESIGNS = sorted([*(ROOT / "designs").glob("*.yaml"), *(ROOT / "designs" / "seeds").glob("*.yaml")])
#: the lab's shortest usable trial (dnsperf needs warmup_s >= 1 and measure_s >= 2)
MIN_WARMUP_S, MIN_MEASURE_S = 1, 2
#: the load generators each target type needs on the machine
TOOLS = {"dnsperf": ("dnsperf", "nsd"), "iperf3": ("iperf3",), "fio": ("fio",), "wrk": ("wrk", "nginx")}

pytestmark = pytest.mark.lab


def shortened(text: str) -> str:
    """The design text with top-level ``warmup_s``/``measure_s`` lowered to the lab minimum (comments kept).

    >>> shortened("warmup_s: 2   # discarded\\nmeasure_s: 0.5\\n")
    'warmup_s: 1   # discarded\\nmeasure_s: 0.5\\n'
    """
    def lower(match: re.Match[str]) -> str:
        minimum = MIN_WARMUP_S if match["key"] == "warmup_s" else MIN_MEASURE_S
        value = float(match["value"])
        return f"{match['key']}: {minimum if value > minimum else match['value']}"

    return re.sub(r"^(?P<key>warmup_s|measure_s):[ \t]*(?P<value>[0-9.]+)", lower, text, flags=re.M)


def header(text: str) -> str:
    """The comment lines before the first key of a design file."""
    lines = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            break
        lines.append(line.lstrip("# "))
    return " ".join(lines)


@pytest.fixture(scope="module")
def targets() -> Iterator[dict[str, Any]]:
    """Live targets by spec, shared by the designs of this module; all torn down at the end, whatever happened."""
    with contextlib.ExitStack() as stack:
        live: dict[str, Any] = {"_stack": stack}
        yield live


def _target(targets: dict[str, Any], spec: dict[str, Any]) -> Any:
    key = repr(sorted((k, repr(v)) for k, v in spec.items()))
    if key not in targets:
        targets[key] = targets["_stack"].enter_context(build_target(spec))
    return targets[key]


def _tools_or_skip(design: Any) -> None:
    if design.target.type != "lab":
        return
    missing = [tool for tool in TOOLS.get(design.load.generator, ()) if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{design.name} needs Debian's {', '.join(missing)}")


@pytest.mark.parametrize("path", DESIGNS, ids=[str(p.relative_to(ROOT / "designs")) for p in DESIGNS])
def test_shipped_design_runs_one_trial_on_its_target(path: Path, tmp_path: Path, targets: dict[str, Any]) -> None:
    original = tunelab.plan(path)                       # validates and plans the shipped file itself
    derived = tmp_path / path.name
    derived.write_text(shortened(path.read_text()))
    design = load_design(derived)
    plan = make_plan(design)
    assert plan.equals(original.plan), "the derived copy must differ from the shipped design in its timing only"
    assert design.warmup_s <= MIN_WARMUP_S or design.warmup_s == original.design.warmup_s
    spec = target_spec_of(design)
    try:
        prepare_run(design, None)
    except SafetyError as exc:
        host_global = [k.name for k in original.design.knobs if k.scope == "host"]
        assert host_global and not spec["allow_host_global"], str(exc)
        assert all(name in str(exc) for name in host_global[:3]), str(exc)
        assert re.search(r"host-global|allow_host_global", header(path.read_text())), \
            f"{path.name} is refused for host-global knobs but its header comment does not say so"
        return
    _tools_or_skip(design)
    target = _target(targets, spec)
    with Store.open(tmp_path / f"{design.name}.sqlite", study=design.name, design_hash=design.design_hash,
                    design_text=derived.read_text(), target_spec={"type": spec["type"],
                                                                  "options": spec["options"]}) as store:
        summary = run_design(design, target, store, plan=plan.head(1), progress=False)
        assert store.unrestored() == [], "a knob of the trial was not put back"
        trials = store.trials()
    assert summary.planned == 1 and summary.failed == 0, summary.failures
    # a design with noise.repeat_busy_pct measures the run again while other processes are busy: the attempts
    # set aside say so, and the run's last attempt is the one that counts
    *set_aside, last = trials.to_dict("records")
    assert all(t["status"] == "interrupted" and t["reason"].startswith("repeated:") for t in set_aside), set_aside
    assert last["status"] == "ok", (last["status"], last["reason"])
    measured = {m.name: last["metrics"].get(m.name) for m in design.metrics}
    assert any(v is not None for v in measured.values()), f"none of the design's metrics was measured: {last['metrics']}"
