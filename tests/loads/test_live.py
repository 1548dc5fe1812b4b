"""Each load run for real on loopback through the Load classes and the ``local`` target (<= 4 s each)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tunelab.loads import get_load
from tunelab.targets.local import LocalTarget

pytestmark = pytest.mark.lab


def run_load(name: str, profile: str | None, overrides: dict, duration_s: float, warmup_s: float):
    """What the runner does: settings, prepare, command, run, clean up, parse."""
    load = get_load(name)()
    target = LocalTarget()
    missing = [tool for tool in load.tools if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (Debian package)")
    settings = load.settings(profile, overrides)
    try:
        settings.update(load.prepare(target, settings))
        argv = load.command(settings, duration_s, target.address("server"))
        result = target.run(load.runs_on, argv, timeout_s=duration_s + 10)
    finally:
        load.cleanup(target)                  # dnsperf's private directory of the query file
    return load, load.parse(result, settings, warmup_s)


def test_dnsperf_low_udp_live(nsd_port):
    load, r = run_load("dnsperf", "low", {"port": nsd_port, "per_query_latency": True}, 3, 1)
    assert r.status == "ok", r.reason
    assert r.metrics["qps"] == pytest.approx(2000, rel=0.1)  # the requested rate, far from saturation
    assert r.metrics["lost"] == 0
    assert 0 < r.metrics["latency_p50_ms"] <= r.metrics["latency_p99_ms"]
    # a line per second of the 3 s run; the third is printed only when dnsperf's last second ends before it stops
    # (timer jitter on a busy machine), so 2 or 3 lines, about a second apart
    assert len(r.series) in (2, 3) and set(r.metrics) <= set(load.metrics), r.series
    assert r.series["t_s"].diff().dropna().between(0.9, 1.1).all(), r.series


def test_dnsperf_tcp_overload_live(nsd_port):
    load, r = run_load("dnsperf", "overload", {"port": nsd_port, "clients": 50}, 3, 1)
    assert r.status == "ok", r.reason
    assert r.metrics["qps"] > 2000  # overload: well above the low profile's fixed rate
    assert r.metrics["conn_latency_mean_ms"] > 0 and r.metrics["reconnections"] > 0


def test_iperf3_live(iperf3_port):
    load, r = run_load("iperf3", "bulk", {"port": iperf3_port, "omit": 1}, 3, 1)
    assert r.status == "ok", r.reason
    assert r.metrics["throughput_mbps"] > 100
    assert r.metrics["rtt_mean_ms"] > 0 and r.metrics["cpu_host_pct"] > 0
    assert len(r.series) == 2


def test_fio_live_on_a_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("tunelab.loads.fio.SCRATCH_DIR", tmp_path)   # fio files must live in the scratch dir
    load, r = run_load("fio", "randread", {"filename": str(tmp_path / "fio.dat"), "size": "16M",
                                           "direct": False, "iodepth": 4}, 3, 1)
    assert r.status == "ok", r.reason
    assert r.metrics["iops"] > 0 and r.metrics["bw_mibps"] > 0
    assert 0 < r.metrics["lat_p50_us"] <= r.metrics["lat_p99_us"] <= r.metrics["lat_p999_us"]
    assert len(r.series) >= 2


def test_wrk_live(http_port):
    load, r = run_load("wrk", "light", {"port": http_port, "path": "/index.html"}, 2, 0)
    assert r.status == "ok", r.reason
    assert r.metrics["requests_per_s"] > 0 and r.metrics["transfer_mbps"] > 0
    assert 0 < r.metrics["latency_p50_ms"] <= r.metrics["latency_p99_ms"]
