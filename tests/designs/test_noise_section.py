"""The design's ``noise:`` section and ``tunelab run --repeat-busy``: defaults, one error line per bad value."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tunelab.designs import load_design
from tunelab.designs.schema import NoiseSpec, parse_design
from tunelab.errors import DesignError

DEFAULT = Path(__file__).resolve().parents[2] / "designs" / "default.yaml"


def with_noise(noise):
    data = yaml.safe_load(DEFAULT.read_text())
    data["noise"] = noise
    return parse_design(data, "d.yaml")


def test_no_section_means_no_noise_control_and_an_unchanged_hash():
    data = yaml.safe_load(DEFAULT.read_text())
    data.pop("noise", None)
    design = parse_design(data, "d.yaml")
    assert design.noise == NoiseSpec(repeat_busy_pct=None, max_repeats=2, calibration_runs=0)
    assert "noise" not in design.to_dict()
    assert load_design(DEFAULT).noise == NoiseSpec(repeat_busy_pct=25.0, max_repeats=2, calibration_runs=4)
    noisy = with_noise({"repeat_busy_pct": 20, "max_repeats": 3, "calibration_runs": 8})
    assert noisy.noise == NoiseSpec(repeat_busy_pct=20.0, max_repeats=3, calibration_runs=8)
    assert noisy.to_dict()["noise"]["calibration_runs"] == 8
    assert noisy.design_hash == design.design_hash       # noise control does not change what is measured


@pytest.mark.parametrize("noise, message", [
    ({"repeat_busy_pct": 0}, "noise.repeat_busy_pct: must be > 0"),
    ({"repeat_busy_pct": 100}, "noise.repeat_busy_pct: must be a percentage of the machine below 100"),
    ({"repeat_busy_pct": "lots"}, "noise.repeat_busy_pct: must be a number"),
    ({"max_repeats": 0}, "noise.max_repeats: must be >= 1"),
    ({"max_repeats": 11}, "MAX_BUSY_REPEATS=10"),
    ({"calibration_runs": 1}, "noise.calibration_runs: must be 0 (no calibration) or at least 2"),
    ({"calibration_runs": -3}, "noise.calibration_runs: must be >= 0"),
    ({"calibrate": 5}, "noise.calibrate: unknown key"),
    ([5], "noise: must be a mapping"),
])
def test_bad_noise_values_are_one_design_error(noise, message):
    with pytest.raises(DesignError) as caught:
        with_noise(noise)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_repeat_busy_flag_out_of_range_is_one_error_line_and_nothing_runs(capsys, tmp_path):
    from tunelab.cli import main

    store = tmp_path / "s.sqlite"
    status = main(["run", str(DEFAULT), "--target", "dry-run", "--store", str(store), "--repeat-busy", "150",
                   "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "--repeat-busy must be a percentage" in err[0]
    assert not store.exists()
