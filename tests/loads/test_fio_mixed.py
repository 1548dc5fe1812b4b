"""fio's write and mixed profiles: settings, command line, and metrics of a recorded randrw run.

``recorded/fio_randrw.json`` is real output of fio-3.33 on this machine:
``fio --name=tl --filename=/tmp/.../fio.dat --size=64M --rw=randrw --rwmixread=70 --bs=4k --iodepth=16
--numjobs=1 --group_reporting --ioengine=libaio --direct=1 --time_based --runtime=3 --output-format=json+
--status-interval=1`` (exit 0). Expected numbers are fio's own, read off the recorded text.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tunelab.errors import LoadError
from tunelab.loads import get_load
from tunelab.targets.base import CommandResult

RECORDED = Path(__file__).parent / "recorded"
fio = get_load("fio")()
LOOP = {"filename": "/dev/loop7", "device_from_target": "/dev/loop7", "ioengine": "psync"}


def randrw() -> CommandResult:
    return CommandResult(("recorded",), 0, (RECORDED / "fio_randrw.json").read_text(), "", 3.0)


def test_profiles_cover_random_and_sequential_read_write_and_mixed():
    assert set(fio.profiles) >= {"randread", "randwrite", "seqread", "seqwrite", "randrw"}
    assert fio.profiles["seqwrite"] == {"rw": "write", "bs": "1M", "iodepth": 4}
    assert fio.profiles["randrw"]["rwmixread"] == 70


def test_mixed_profile_passes_its_read_share_and_others_do_not():
    mixed = fio.command({**fio.profiles["randrw"], **LOOP}, 5, "x")
    assert "--rw=randrw" in mixed and "--rwmixread=70" in mixed
    write = fio.command({**fio.profiles["seqwrite"], **LOOP}, 5, "x")
    assert "--rw=write" in write and "--bs=1M" in write and not any(a.startswith("--rwmixread") for a in write)


@pytest.mark.parametrize("value", [-1, 101, 70.5, True, "70"])
def test_rwmixread_outside_0_to_100_is_refused(value):
    with pytest.raises(LoadError, match="rwmixread"):
        fio.validate_settings({"rw": "randrw", "rwmixread": value})


@pytest.mark.parametrize("value", [0, 100])
def test_rwmixread_bounds_are_accepted(value):
    assert fio.validate_settings({"rw": "randrw", "rwmixread": value})["rwmixread"] == value


def test_mixed_iops_is_read_plus_write_from_fios_own_report():
    r = fio.parse(randrw(), {}, warmup_s=0)
    assert r.status == "ok"
    # final report: job_runtime 3000 ms; read total_ios 110989 (iops 36984.005), write 47469 (iops 15817.727)
    assert r.metrics["iops"] == pytest.approx(36984.005332 + 15817.727424, rel=1e-3)
    assert r.metrics["iops"] == pytest.approx((110989 + 47469) / 3.0)
    # latency over all I/Os: N-weighted mean of fio's read and write clat means
    mean_ns = (110989 * 275293.491571 + 47469 * 342383.003581) / (110989 + 47469)
    assert r.metrics["lat_mean_us"] == pytest.approx(mean_ns / 1000)


def test_mixed_metrics_after_warmup_difference_both_directions():
    r = fio.parse(randrw(), {}, warmup_s=1)
    # status at job_runtime 756 ms: read 25581 + write 10949 I/Os
    ios = (110989 + 47469) - (25581 + 10949)
    assert r.metrics["iops"] == pytest.approx(ios / ((3000 - 756) / 1000))
