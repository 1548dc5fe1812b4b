"""Bad design files: one clear DesignError each, exit status 2 from `tunelab plan`, nothing on stdout.

The knob catalogue is replaced by the fake one from conftest so the messages checked here are
this area's own; tests/designs/test_design_files.py covers the real catalogue.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import tunelab.designs.schema as schema
from tunelab.cli import main


@pytest.fixture(autouse=True)
def fake_catalogue(monkeypatch: pytest.MonkeyPatch, lookup) -> None:
    monkeypatch.setattr(schema, "_default_knob_lookup", lookup)


@pytest.fixture
def plan_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """Run `tunelab plan` on a file; assert exit 2, empty stdout; return the error line."""
    def run(content: str | dict) -> str:
        path = tmp_path / "bad.yaml"
        path.write_text(content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False))
        status = main(["plan", str(path), "--format", "json"])
        out, err = capsys.readouterr()
        assert status == 2
        assert out == ""
        assert err.startswith("tunelab: error: ") and str(path) in err
        return err
    return run


def test_malformed_yaml_names_the_line(plan_error) -> None:
    err = plan_error("name: x\nload:\n  generator: dnsperf\nknobs: [\n  {name: a\n")
    assert "malformed YAML" in err and "line" in err
    assert "bad.yaml:6" in err or "bad.yaml:5" in err


def test_unknown_knob(plan_error, base) -> None:
    err = plan_error(base(knobs=[{"name": "net.core.somaxcon", "levels": [1, 2]}]))
    assert "knobs[0].name" in err and "unknown knob 'net.core.somaxcon'" in err


def test_value_out_of_range(plan_error, base) -> None:
    err = plan_error(base(knobs=[{"name": "net.ipv4.tcp_syncookies", "levels": [1, 7]}]))
    assert "knobs[0].levels[1]" in err and "7" in err and "0..2" in err


def test_value_of_wrong_type(plan_error, base) -> None:
    err = plan_error(base(knobs=[{"name": "net.ipv4.tcp_fin_timeout", "levels": [60, "abc"]}]))
    assert "knobs[0].levels[1]" in err and "'abc'" in err and "not an integer" in err


def test_duplicate_knob_id(plan_error, base) -> None:
    knobs = [{"name": "net.core.somaxconn", "levels": [4096, 16]}, {"name": "net.ipv4.tcp_syncookies", "levels": [1, 0]},
             {"name": "net.core.somaxconn", "host": "server", "levels": [128]}]
    err = plan_error(base(knobs=knobs))
    assert "knobs[2]" in err and "duplicate knob 'net.core.somaxconn'" in err and "knobs[0]" in err


def test_same_knob_on_both_hosts_is_not_a_duplicate(tmp_path: Path, base, capsys) -> None:
    knobs = [{"name": "net.core.somaxconn", "levels": [4096, 16]},
             {"name": "net.core.somaxconn", "host": "client", "levels": [4096, 16]}]
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(base(knobs=knobs)))
    assert main(["plan", str(path), "--format", "csv"]) == 0
    assert "net.core.somaxconn@client" in capsys.readouterr().out


def test_empty_levels(plan_error, base) -> None:
    err = plan_error(base(knobs=[{"name": "net.core.somaxconn", "levels": []}]))
    assert "knobs[0].levels" in err and "empty levels" in err


def test_triplet_with_two_numbers(plan_error, base) -> None:
    err = plan_error(base(knobs=[{"name": "net.ipv4.tcp_rmem", "levels": [[4096, 131072, 6291456], [4096, 131072]]}]))
    assert "knobs[0].levels[1]" in err and "[4096, 131072]" in err and "three integers" in err


def test_fractional_factorial_unreachable_resolution(plan_error, base, two_level) -> None:
    err = plan_error(base(knobs=two_level(9), design={"type": "fractional_factorial", "seed": 1,
                                                      "options": {"runs": 16, "resolution": 4}}))
    assert "design" in err and "k=9" in err and "16 runs" in err and "resolution 4" in err


def test_plackett_burman_more_knobs_than_runs_minus_one(plan_error, base, two_level) -> None:
    err = plan_error(base(knobs=two_level(12), design={"type": "plackett_burman", "seed": 1, "options": {"runs": 12}}))
    assert "12 runs holds at most 11" in err and "12 were given" in err


def test_unknown_top_level_key(plan_error, base) -> None:
    err = plan_error({**base(), "replicate": 3})
    assert "unknown key 'replicate'" in err and "allowed keys" in err


def test_duplicate_yaml_key(plan_error) -> None:
    err = plan_error("name: a\nname: b\n")
    assert "bad.yaml:2" in err and "duplicate key 'name'" in err


def test_baseline_not_among_levels(plan_error, base) -> None:
    err = plan_error(base(knobs=[{"name": "net.core.somaxconn", "levels": [128, 16], "baseline": 4096}]))
    assert "knobs[0].baseline" in err and "4096" in err and "not one of the levels" in err


def test_two_level_design_with_three_levels(plan_error, base) -> None:
    err = plan_error(base(knobs=[{"name": "net.core.somaxconn", "levels": [4096, 128, 16]}],
                          design={"type": "plackett_burman", "seed": 1}))
    assert "net.core.somaxconn" in err and "3 levels" in err and "exactly 2" in err


def test_unknown_design_option(plan_error, base) -> None:
    err = plan_error(base(design={"type": "oat", "seed": 1, "options": {"baseline_evry": 2}}))
    assert "design.options.baseline_evry" in err and "baseline_every" in err


def test_block_knob_without_device(plan_error, base) -> None:
    err = plan_error(base(knobs=[{"name": "block.queue.scheduler", "levels": ["none", "bfq"]}]))
    assert "knobs[0]" in err and "needs a `device`" in err


def test_blocks_must_divide_replicates(plan_error, base) -> None:
    err = plan_error(base(design={"type": "oat", "replicates": 3, "blocks": 2, "seed": 1}))
    assert "design.blocks" in err and "blocks=2 must divide replicates=3" in err


def test_range_with_log_scale_and_step(plan_error, base) -> None:
    err = plan_error(base(knobs=[{"name": "net.core.somaxconn", "low": 16, "high": 4096, "step": 16, "scale": "log"}]))
    assert "knobs[0].step" in err and "not both" in err


def test_missing_file_exits_2(capsys, tmp_path: Path) -> None:
    assert main(["plan", str(tmp_path / "nope.yaml")]) == 2
    assert "no such design file" in capsys.readouterr().err


def test_guard_the_load_does_not_produce(plan_error, base) -> None:
    err = plan_error(base(guards=["lost_pct", "timeouts"]))
    assert err.count("\n") == 1, err                     # one line
    assert "guards[1]" in err and "'timeouts'" in err and "dnsperf" in err
    assert "its metrics: qps" in err and "lost_pct" in err


def test_conditional_on_a_metric_the_load_does_not_produce(plan_error, base) -> None:
    metrics = [{"name": "latency_mean_ms", "direction": "minimize", "conditional_on": ["qps", "answered"]}]
    err = plan_error(base(metrics=metrics))
    assert err.count("\n") == 1, err
    assert "metrics[0].conditional_on[1]" in err and "'answered'" in err and "its metrics: qps" in err


def test_guard_with_both_sesois(plan_error, base) -> None:
    err = plan_error(base(guards=[{"name": "lost_pct", "sesoi_pct": 5, "sesoi_abs": 0.1}]))
    assert "guards[0].sesoi_abs" in err and "not both" in err


#: device names `tunelab run` refuses when it writes a knob (tunelab.knobs.families.check_device_name):
#: a path, shell syntax, a bare dot-name, an overlong name, an empty one
RUN_REFUSES = ["../../../tmp/x", ";", "$()", "`id`", "a b", "..", ".", "x" * 65, "", "sda/../../etc", "eth0;reboot"]


@pytest.mark.parametrize("device", [*RUN_REFUSES, "@foo"])   # '@foo': a symbolic device no target resolves
def test_a_device_name_run_would_refuse_is_refused_at_plan(plan_error, base, device: str) -> None:
    err = plan_error(base(knobs=[{"name": "block.queue.scheduler", "device": device, "levels": ["none", "bfq"]}]))
    assert err.count("\n") == 1, err
    assert "knobs[0].device" in err or ("knobs[0]" in err and device == ""), err


@pytest.mark.parametrize("device", RUN_REFUSES)
def test_the_device_names_plan_refuses_are_the_ones_a_knob_write_refuses(device: str) -> None:
    from tunelab.errors import KnobError
    from tunelab.knobs.families import check_device_name

    # the run-time check (every knob read or write, after the target resolved '@disk'/'@link') refuses each too
    with pytest.raises(KnobError):
        check_device_name("block.queue.scheduler", device)


@pytest.mark.parametrize("device", ["loop0", "@disk", "@link", "nvme0n1", "veth0", "dm-0", "eth0.100"])
def test_real_and_symbolic_device_names_pass_plan(tmp_path: Path, base, capsys, device: str) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(base(knobs=[{"name": "block.queue.scheduler", "device": device,
                                                "levels": ["none", "bfq"]}]), sort_keys=False))
    assert main(["plan", str(path), "--format", "json"]) == 0, capsys.readouterr().err
