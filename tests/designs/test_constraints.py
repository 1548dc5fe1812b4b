"""Knob constraints (issue 15): the order knobs are written in, exclusions dropped from the plan,
and the plan-time feasibility probe on a fake target whose kernel refuses a coupled value.

The expected counts and orders are worked out by hand in each test (a 2^3 factorial has 8 cells;
excluding scheduler=none with nr_requests=256 removes the 2 cells of the read-ahead levels), never
taken from the code under test.
"""
from __future__ import annotations

import itertools
import sys
import textwrap
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))

from runner_fakes import INITIAL, FakeKnob, FakeLoad, FileTarget, fake_design, make_knobs  # noqa: E402

import tunelab  # noqa: E402
from tunelab.constraints import probe_config, probe_design  # noqa: E402
from tunelab.designs import Design, load_design_text, make_plan, plan_summary  # noqa: E402
from tunelab.designs.constraints import entry_text, write_rank  # noqa: E402
from tunelab.errors import DesignError, SafetyError, TargetError  # noqa: E402
from tunelab.journal import restore_journal  # noqa: E402
from tunelab.runner.binding import bind_knobs  # noqa: E402
from tunelab.runner.trials import run_trial  # noqa: E402
from tunelab.store import Store  # noqa: E402


@pytest.fixture
def target(tmp_path: Path) -> FileTarget:
    t = FileTarget(tmp_path / "machine")
    t.seed(INITIAL)
    t.seed(INITIAL, host="client")
    return t


@pytest.fixture
def store(tmp_path: Path):
    s = Store.open(tmp_path / "data" / "fake-study.sqlite", study="fake-study", design_hash="hash-1",
                   design_text="name: fake-study\n", target_spec={"type": "file-fake", "options": {}})
    try:
        yield s
    finally:
        s.close()

SCHED, RA, NR = "block.queue.scheduler[@disk]", "block.queue.read_ahead_kb[@disk]", "block.queue.nr_requests[@disk]"

DISK = textwrap.dedent("""
    name: disk-c
    target: {type: lab, allow_host_global: true}
    load: {generator: fio, profile: randread}
    measure_s: 2
    metrics: [{name: iops, direction: maximize, sesoi_pct: 5}]
    knobs:
      - {name: block.queue.scheduler, device: "@disk", levels: [mq-deadline, none]}
      - {name: block.queue.read_ahead_kb, device: "@disk", levels: [128, 4096]}
      - {name: block.queue.nr_requests, device: "@disk", levels: [256, 64]}
    design: {type: full_factorial, replicates: 2, blocks: 2, seed: 2}
""")
EXCLUDE = ('constraints:\n  exclude:\n'
           '    - {"block.queue.scheduler[@disk]": none, "block.queue.nr_requests[@disk]": 256}\n')


def _design(extra: str = "", base: str = DISK):
    return load_design_text(base + extra, source="disk-c.yaml")


# ---- exclusions in the plan ------------------------------------------------------------------------


def test_exclusion_drops_the_matching_factorial_cells_and_renumbers_the_runs():
    plan = make_plan(_design(EXCLUDE))
    cells = [c for c in itertools.product(["mq-deadline", "none"], [128, 4096], [256, 64])
             if not (c[0] == "none" and c[2] == 256)]
    assert len(cells) == 6
    assert len(plan) == 6 * 2                                        # 6 cells x 2 replicates
    assert sorted(plan["run_id"]) == list(range(12)) and sorted(plan["run_order"]) == list(range(12))
    assert set(map(tuple, plan[[SCHED, RA, NR]].itertuples(index=False, name=None))) == set(cells)
    assert plan["config_id"].nunique() == 6


def test_plan_summary_says_how_many_runs_were_excluded_and_by_which_entry():
    design = _design(EXCLUDE)
    summary = plan_summary(design, make_plan(design))
    assert summary["runs"] == 12
    assert summary["excluded"]["runs"] == 4 and summary["excluded"]["planned_without"] == 16
    assert summary["excluded"]["entries"][0]["runs"] == 4
    assert summary["excluded"]["entries"][0]["exclude"] == {SCHED: "none", NR: 256}


def test_oat_exclusion_removes_the_varied_run_and_the_baseline_runs_it_no_longer_needs():
    text = textwrap.dedent("""
        name: oat-c
        load: {generator: dnsperf, profile: low}
        metrics: [{name: qps}]
        knobs:
          - {name: net.core.somaxconn, levels: [4096, 16, 128]}
          - {name: net.ipv4.tcp_fin_timeout, levels: [60, 10, 30]}
        design: {type: oat, replicates: 1, seed: 1}
    """)
    # 4 varied runs need ceil(4 / 2) = 2 baseline runs (baseline_every 2); 3 varied runs still need 2,
    # 2 varied runs need 1
    assert len(make_plan(load_design_text(text))) == 6
    one = load_design_text(text + "constraints: {exclude: [{net.core.somaxconn: 16}]}\n")
    assert len(make_plan(one)) == 5
    two = load_design_text(text + "constraints: {exclude: [{net.core.somaxconn: 16}, {net.core.somaxconn: 128}]}\n")
    plan = make_plan(two)
    assert len(plan) == 3 and set(plan["net.core.somaxconn"]) == {4096}
    summary = plan_summary(two, plan)
    assert summary["excluded"]["runs"] == 3 and summary["excluded"]["fewer_baseline_runs"] == 1


def test_a_design_without_constraints_keeps_its_canonical_form():
    canonical = _design().to_dict()
    assert "constraints" not in canonical
    assert all("apply_order" not in knob for knob in canonical["knobs"])
    assert _design(EXCLUDE).design_hash != _design().design_hash


@pytest.mark.parametrize("extra, fragment", [
    ('constraints: {exclude: [{"block.queue.nr_requests": 256}]}\n',
     "constraints.exclude[0]: 'block.queue.nr_requests' is not a knob id of this design"),
    ('constraints: {exclude: [{"block.queue.nr_requests[@disk]": 128}]}\n',
     "is not a level of block.queue.nr_requests[@disk]; its levels are [256, 64]"),
    ('constraints: {exclude: [{"block.queue.scheduler[@disk]": mq-deadline}]}\n',
     "excludes the baseline configuration"),
    ("constraints: {exclude: [{}]}\n", "constraints.exclude[0]: must be a mapping knob id -> level"),
    ("constraints: {exclude: {a: 1}}\n", "constraints.exclude: must be a list"),
    ("constraints: {forbid: []}\n", "unknown key 'forbid'"),
    ('constraints: {apply_order: ["block.queue.scheduler[@disk]", "block.queue.scheduler[@disk]"]}\n',
     "is listed twice"),
    ('constraints: {apply_order: [nope]}\n', "'nope' is not a knob id of this design"),
])
def test_bad_constraints_are_one_design_error_line(extra, fragment):
    with pytest.raises(DesignError) as info:
        _design(extra)
    message = str(info.value)
    assert fragment in message and "\n" not in message and message.startswith("disk-c.yaml")


def test_exclusions_are_refused_for_designs_whose_runs_are_balanced_as_a_whole():
    text = DISK.replace("type: full_factorial, replicates: 2, blocks: 2", "type: plackett_burman, replicates: 1")
    with pytest.raises(DesignError, match="plackett_burman design cannot leave runs out"):
        _design(EXCLUDE, base=text)


def test_apply_order_per_knob_and_in_a_list_cannot_be_mixed():
    text = DISK.replace("levels: [256, 64]}", "levels: [256, 64], apply_order: 1}")
    with pytest.raises(DesignError, match="also has its own `apply_order`"):
        _design(f'constraints: {{apply_order: ["{NR}"]}}\n', base=text)


# ---- the order of application -----------------------------------------------------------------------


def test_the_built_in_order_writes_the_block_scheduler_first():
    assert write_rank("block.queue.scheduler") < write_rank("block.queue.nr_requests") == 0
    line = '  - {name: block.queue.scheduler, device: "@disk", levels: [mq-deadline, none]}\n'
    design = _design(base=DISK.replace(line, "").replace("design:", line + "design:"))
    assert design.knob_ids == [RA, NR, SCHED]                          # listed last ...
    summary = plan_summary(design, make_plan(design))
    assert [k["id"] for k in summary["apply_order"]] == [SCHED, RA, NR]   # ... written first


def test_a_design_level_list_puts_its_knobs_first_in_its_order():
    design = _design(f'constraints: {{apply_order: ["{NR}", "{RA}"]}}\n')
    assert [k["id"] for k in plan_summary(design, make_plan(design))["apply_order"]] == [NR, RA, SCHED]


class CoupledKnob(FakeKnob):
    """An integer knob the 'kernel' refuses above ``cap`` while knob ``gate`` holds ``gate_value``
    (as the block layer refuses nr_requests=256 once the scheduler is none)."""

    def __init__(self, name: str, gate: str, gate_value: int, cap: int, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self.gate, self.gate_value, self.cap = gate, gate_value, cap

    def write(self, target, host, value, device=None):
        gate = int(target.read_text(host, self.path_of(self.gate)))
        if gate == self.gate_value and value > self.cap:
            raise TargetError(f"write {self.path_of(self.name)}: [Errno 22] Invalid argument")
        super().write(target, host, value, device)


def _coupled_lookup():
    return make_knobs(**{"net.fake.beta": CoupledKnob("net.fake.beta", gate="net.fake.alpha", gate_value=16,
                                                      cap=1000)})


def _write_order(target: FileTarget) -> list[tuple[str, str]]:
    return [(path.rsplit("/", 1)[-1], text) for _, path, text in target.writes]


def test_the_runner_writes_in_apply_order_and_restores_in_reverse(target: FileTarget, store: Store):
    design = fake_design(knobs=["net.fake.alpha", "net.fake.beta"],
                         apply_order={"net.fake.alpha": 2})     # alpha after beta, though listed first
    specs = bind_knobs(design, make_knobs())
    outcome = run_trial(target, FakeLoad(), specs, {"net.fake.alpha": 16, "net.fake.beta": 5000}, "screen:0",
                        "screen", store, 0, 1)
    assert outcome.status == "ok"
    assert _write_order(target) == [("beta", "5000"), ("alpha", "16"), ("alpha", "128"), ("beta", "1000")]
    assert target.values() == INITIAL


@pytest.mark.parametrize("beta_rank, status", [(None, "ok"), (-5, "failed")])
def test_the_write_order_decides_whether_a_coupled_value_is_taken(target: FileTarget, store: Store, beta_rank, status):
    # from (alpha 16, beta 100) to (alpha 128, beta 5000): beta=5000 is taken only once alpha is no longer 16
    target.seed({"net.fake.alpha": 16, "net.fake.beta": 100})
    design = fake_design(knobs=["net.fake.alpha", "net.fake.beta"], apply_order={"net.fake.beta": beta_rank})
    specs = bind_knobs(design, _coupled_lookup())
    outcome = run_trial(target, FakeLoad(), specs, {"net.fake.alpha": 128, "net.fake.beta": 5000}, "screen:0",
                        "screen", store, 0, 1)
    assert outcome.status == status
    if status == "failed":
        assert "Invalid argument" in outcome.reason
    assert target.values()["net.fake.alpha"] == 16 and target.values()["net.fake.beta"] == 100


def test_restore_retries_a_knob_refused_until_its_coupled_knob_is_back(target: FileTarget, store: Store):
    # beta is 5000 now; alpha=16 caps beta at 1000: written alpha then beta, restoring in reverse would
    # write beta=5000 under alpha=16 first (refused), so it is tried again once alpha is back
    target.seed({"net.fake.beta": 5000})
    design = fake_design(knobs=["net.fake.alpha", "net.fake.beta"])
    specs = bind_knobs(design, _coupled_lookup())
    outcome = run_trial(target, FakeLoad(), specs, {"net.fake.alpha": 16, "net.fake.beta": 100}, "screen:0",
                        "screen", store, 0, 1)
    assert outcome.status == "ok"
    assert target.values()["net.fake.alpha"] == 128 and target.values()["net.fake.beta"] == 5000
    assert store.unrestored() == []


class ResettingKnob(FakeKnob):
    """A knob whose every write resets knob ``resets`` to ``to`` (as writing the block scheduler resets
    nr_requests to the new scheduler's default)."""

    def __init__(self, name: str, resets: str, to: int, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self.resets, self.to = resets, to

    def write(self, target, host, value, device=None):
        super().write(target, host, value, device)
        target.write_text(host, self.path_of(self.resets), f"{self.to}\n")


def _one_device_design() -> Design:
    # one device: alpha's write resets beta there; alpha (the "scheduler") first
    return fake_design(knobs=["net.fake.alpha", "net.fake.beta"], device="disk0", apply_order={"net.fake.alpha": -1})


def test_a_knob_at_its_level_that_a_coupled_write_reset_is_written_too_and_put_back(target: FileTarget,
                                                                                      store: Store):
    # beta already holds its planned 1000; writing alpha resets it to 256: the runner must write beta again,
    # and after the restore of alpha resets it once more, put it back to 1000
    target.seed({"net.fake.alpha": 128, "net.fake.beta": 1000})
    lookup = make_knobs(**{"net.fake.alpha": ResettingKnob("net.fake.alpha", resets="net.fake.beta", to=256)})
    specs = bind_knobs(_one_device_design(), lookup)
    outcome = run_trial(target, FakeLoad(), specs, {"net.fake.alpha[disk0]": 16, "net.fake.beta[disk0]": 1000},
                        "screen:0", "screen", store, 0, 1)
    assert outcome.status == "ok", outcome.reason
    assert [name for name, _ in _write_order(target)][:2] == ["alpha", "beta"]
    assert target.values()["net.fake.alpha"] == 128 and target.values()["net.fake.beta"] == 1000
    assert store.unrestored() == []


def test_the_probe_accepts_a_configuration_whose_coupled_knob_is_written_again(target: FileTarget, store: Store):
    target.seed({"net.fake.alpha": 128, "net.fake.beta": 1000})
    lookup = make_knobs(**{"net.fake.alpha": ResettingKnob("net.fake.alpha", resets="net.fake.beta", to=256)})
    specs = bind_knobs(_one_device_design(), lookup)
    assert probe_config(target, store, specs, {"net.fake.alpha[disk0]": 16, "net.fake.beta[disk0]": 1000}) is None
    assert target.values()["net.fake.alpha"] == 128 and target.values()["net.fake.beta"] == 1000
    assert store.unrestored() == []


def test_tunelab_restore_retries_a_journal_entry_refused_until_its_coupled_knob_is_back(target: FileTarget,
                                                                                       store: Store):
    # a crashed run left alpha=16 and beta=100 (journalled alpha 128 -> 16, then beta 5000 -> 100); replaying
    # newest first writes beta=5000 while alpha is still 16 (refused), so it is tried again after alpha is back
    target.seed({"net.fake.alpha": 16, "net.fake.beta": 100})
    store.journal_apply(None, "server", "net.fake.alpha", None, "128", "16")
    store.journal_apply(None, "server", "net.fake.beta", None, "5000", "100")
    report = restore_journal(store, target, knob_lookup=_coupled_lookup(), remove_orphans=False)
    assert report.ok and report.failed == [] and len(report.restored) == 2
    assert target.values()["net.fake.alpha"] == 128 and target.values()["net.fake.beta"] == 5000
    assert store.unrestored() == []


def test_tunelab_restore_reports_a_value_refused_twice(target: FileTarget, store: Store):
    target.seed({"net.fake.alpha": 16, "net.fake.beta": 100})
    store.journal_apply(None, "server", "net.fake.beta", None, "5000", "100")   # alpha stays 16: never taken
    report = restore_journal(store, target, knob_lookup=_coupled_lookup(), remove_orphans=False)
    assert not report.ok and len(report.failed) == 1 and "Invalid argument" in report.failed[0]
    assert [e.knob_id for e in store.unrestored()] == ["net.fake.beta"]


# ---- the feasibility probe --------------------------------------------------------------------------


def _factorial_plan() -> pd.DataFrame:
    cells = list(itertools.product([128, 16], [1000, 5000]))
    return pd.DataFrame({"run_id": range(4), "config_id": range(4), "run_order": range(4),
                         "net.fake.alpha": [a for a, _ in cells], "net.fake.beta": [b for _, b in cells]})


def test_the_probe_reports_the_refused_combination_and_the_entry_to_paste(target: FileTarget, store: Store):
    design = fake_design(knobs=["net.fake.alpha", "net.fake.beta"])
    result = probe_design(design, target, store, plan=_factorial_plan(), knob_lookup=_coupled_lookup())
    assert result.configs == 4
    assert [r.line() for r in result.refusals] == [
        "net.fake.beta=5000 is refused when net.fake.alpha=16: write /proc/sys/net/fake/beta: [Errno 22] Invalid argument"]
    assert result.suggested_exclude == [{"net.fake.alpha": 16, "net.fake.beta": 5000}]
    assert "    - {net.fake.alpha: 16, net.fake.beta: 5000}" in result.lines()
    assert target.values() == INITIAL and target.values("client") == INITIAL    # never leaves a knob changed
    assert store.unrestored() == []


def test_the_probe_names_the_smallest_condition_across_configurations(target: FileTarget, store: Store):
    # gamma varies too but does not matter: the condition is alpha alone, as in the hand count below
    knobs = ["net.fake.alpha", "net.fake.beta", "net.fake.gamma"]
    cells = list(itertools.product([128, 16], [1000, 5000], [7, 9]))
    plan = pd.DataFrame({"run_id": range(8), "config_id": range(8), "run_order": range(8),
                         **{k: [c[i] for c in cells] for i, k in enumerate(knobs)}})
    result = probe_design(fake_design(knobs=knobs), target, store, plan=plan, knob_lookup=_coupled_lookup())
    assert len(result.refusals) == 2                                 # (16, 5000, 7) and (16, 5000, 9)
    assert result.suggested_exclude == [{"net.fake.alpha": 16, "net.fake.beta": 5000}]
    assert target.values() == INITIAL


def test_the_probe_refuses_host_global_knobs_before_writing(target: FileTarget, store: Store):
    lookup = make_knobs(**{"net.fake.alpha": FakeKnob("net.fake.alpha", scope="host")})
    with pytest.raises(SafetyError, match="host-global"):
        probe_design(fake_design(knobs=["net.fake.alpha", "net.fake.beta"]), target, store,
                     plan=_factorial_plan(), knob_lookup=lookup)
    assert target.writes == []


def test_entry_text_is_yaml_that_parses_back_to_the_entry():
    import yaml

    entry = {SCHED: "none", NR: 256}
    assert yaml.safe_load(entry_text(entry)) == [entry]


# ---- the API and the command ------------------------------------------------------------------------


SIM = textwrap.dedent("""
    name: probe-sim
    target: {type: simulator, options: {surface: simple}}
    load: {generator: dnsperf, profile: overload}
    measure_s: 1
    metrics: [{name: qps, direction: maximize, sesoi_pct: 10}]
    knobs:
      - {name: net.core.somaxconn, levels: [128, 16]}
      - {name: net.ipv4.tcp_congestion_control, levels: [cubic, bbr]}
    design: {type: full_factorial, replicates: 1, seed: 5}
""")


def test_plan_probe_on_the_simulator_takes_every_configuration(tmp_path: Path):
    path = tmp_path / "probe-sim.yaml"
    path.write_text(SIM)
    result = tunelab.plan(path, probe=True, store=tmp_path / "probe.sqlite")
    probe = result.summary["probe"]
    assert probe["configs"] == 4 and probe["refusals"] == [] and probe["suggested_exclude"] == []
    with Store(tmp_path / "probe.sqlite") as store:
        assert store.unrestored() == []


def test_plan_probe_is_refused_on_the_dry_run_target(tmp_path: Path):
    path = tmp_path / "probe-sim.yaml"
    path.write_text(SIM)
    with pytest.raises(TargetError, match="writes nothing"):
        tunelab.plan(path, probe=True, target="dry-run", store=tmp_path / "probe.sqlite")
