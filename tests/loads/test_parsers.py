"""Parsers against real output recorded on this machine (tests/loads/recorded/README.md lists the commands).

Expected numbers are read off the recorded text by hand, not produced by the parser.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tunelab.errors import LoadError
from tunelab.loads import LOADS, METRICS, get_load
from tunelab.loads import __doc__ as loads_doc
from tunelab.loads._common import after_warmup, histogram_percentile
from tunelab.loads.fio import json_objects
from tunelab.targets.base import CommandResult

RECORDED = Path(__file__).parent / "recorded"


def recorded(stdout: str, returncode: int = 0, stderr: str | None = None) -> CommandResult:
    err = (RECORDED / stderr).read_text() if stderr else ""
    out = (RECORDED / stdout).read_text() if stdout else ""
    return CommandResult(("recorded",), returncode, out, err, 3.0)


dnsperf = get_load("dnsperf")()
iperf3 = get_load("iperf3")()
fio = get_load("fio")()
wrk = get_load("wrk")()


# --- schema -----------------------------------------------------------------------------------------

def test_every_load_is_registered_and_uses_the_shared_schema():
    assert LOADS.names() == ["dnsperf", "fio", "iperf3", "wrk"]
    for name in LOADS.names():
        load = LOADS.get(name)()
        assert load.metrics, name
        for metric, info in load.metrics.items():
            assert METRICS[metric] is info, (name, metric)


def test_package_docstring_documents_every_metric():
    for metric in METRICS:
        assert f"\n{metric} " in loads_doc, metric


def test_unknown_load_and_profile_and_setting_are_errors_that_name_the_fix():
    with pytest.raises(LoadError, match="known: dnsperf, fio, iperf3, wrk"):
        get_load("ab")
    with pytest.raises(LoadError, match="no load profile 'nope'"):
        dnsperf.settings("nope")
    with pytest.raises(LoadError, match="unknown load setting 'qps'.*known settings"):
        dnsperf.command({"qps": 5, "remote_query_file": "/q"}, 5, "127.0.0.1")
    with pytest.raises(LoadError, match="clients=0 must be an integer from 1 to"):
        dnsperf.command({"clients": 0, "remote_query_file": "/q"}, 5, "127.0.0.1")
    with pytest.raises(LoadError, match="call prepare"):
        dnsperf.command({}, 5, "127.0.0.1")


# --- dnsperf ----------------------------------------------------------------------------------------

def test_dnsperf_command_has_stats_time_limit_rate_and_tcp_options():
    argv = dnsperf.command(dnsperf.settings("overload", {"port": 5353}) | {"remote_query_file": "/tmp/q"}, 10, "10.1.0.1")
    assert argv[:5] == ["dnsperf", "-m", "tcp", "-s", "10.1.0.1"]
    pairs = dict(zip(argv[1::2], argv[2::2]))
    assert pairs["-S"] == "1" and pairs["-l"] == "10" and pairs["-p"] == "5353" and pairs["-d"] == "/tmp/q"
    assert pairs["-c"] == "200" and pairs["-q"] == "10000"
    assert argv[argv.index("-O") + 1] == "num-queries-per-conn=100"
    assert "-Q" not in argv
    low = dnsperf.command(dnsperf.settings("low") | {"remote_query_file": "/q"}, 2.5, "127.0.0.1")
    assert low[low.index("-Q") + 1] == "2000" and low[low.index("-l") + 1] == "2.5" and "-O" not in low


def test_dnsperf_low_udp_summary_and_series():
    r = dnsperf.parse(recorded("dnsperf_low_udp.out"), dnsperf.settings("low"), warmup_s=1)
    assert r.status == "ok" and r.reason is None
    assert r.metrics["qps_summary"] == pytest.approx(1999.900005)
    assert r.metrics["latency_mean_ms"] == pytest.approx(0.097)
    assert r.metrics["latency_max_ms"] == pytest.approx(7.959)
    assert r.metrics["latency_stddev_ms"] == pytest.approx(0.417)
    assert r.metrics["lost"] == 0 and r.metrics["lost_pct"] == 0
    assert r.metrics["requested_qps"] == 2000
    assert r.metrics["achieved_qps"] == pytest.approx(6000 / 3.000150)
    assert r.series["qps"].tolist() == pytest.approx([2000.073966, 1999.752278])
    assert r.series["t_s"].tolist() == pytest.approx([1.0, 2.001], abs=1e-3)
    # warm-up of 1 s discards the first second: qps is the second line alone
    assert r.metrics["qps"] == pytest.approx(1999.752278)
    assert "conn_latency_mean_ms" not in r.metrics and "latency_p99_ms" not in r.metrics


def test_dnsperf_warmup_zero_keeps_every_second():
    r = dnsperf.parse(recorded("dnsperf_low_udp.out"), {"rate": 2000}, warmup_s=0)
    assert r.metrics["qps"] == pytest.approx((2000.073966 + 1999.752278) / 2)


def test_dnsperf_tcp_overload_has_connection_statistics_and_discards_ramp_up():
    r = dnsperf.parse(recorded("dnsperf_over_tcp.out"), dnsperf.settings("overload"), warmup_s=2)
    assert r.status == "ok"
    assert r.metrics["qps_summary"] == pytest.approx(31880.670870)
    assert r.metrics["latency_mean_ms"] == pytest.approx(254.533)
    assert r.metrics["conn_latency_mean_ms"] == pytest.approx(6.316)  # not the query latency
    assert r.metrics["reconnections"] == 1334
    assert len(r.series) == 4
    assert r.metrics["qps"] == pytest.approx((46888.470433 + 46317.888438) / 2)  # ramp 10.6k, 26.3k dropped
    assert "requested_qps" not in r.metrics


def test_dnsperf_low_tcp_is_not_flagged_and_reports_connections():
    r = dnsperf.parse(recorded("dnsperf_low_tcp.out"), dnsperf.settings("low", {"mode": "tcp"}), warmup_s=1)
    assert r.status == "ok"
    assert r.metrics["conn_latency_mean_ms"] == pytest.approx(0.169)
    assert r.metrics["latency_mean_ms"] == pytest.approx(2.016)


def test_dnsperf_udp_overload_drops_the_empty_first_second():
    r = dnsperf.parse(recorded("dnsperf_over_udp.out"), dnsperf.settings("udp_overload"), warmup_s=1)
    assert r.series["qps"].iloc[0] == pytest.approx(0.000031)
    assert r.metrics["qps"] == pytest.approx((52389.437810 + 45838.460899) / 2)
    assert r.metrics["qps_summary"] == pytest.approx(51160.532383)


def test_dnsperf_rate_far_below_request_is_flagged():
    r = dnsperf.parse(recorded("dnsperf_low_udp.out"), {"rate": 5000}, warmup_s=1)
    assert r.status == "flagged" and "below 50% of the requested 5000 qps" in r.reason
    assert r.metrics["qps"] == pytest.approx(1999.752278)


def test_dnsperf_bind_failure_is_salvaged_from_per_second_lines_and_flagged():
    r = dnsperf.parse(recorded("dnsperf_bind_tcp.out", 1, "dnsperf_bind_tcp.err"), {"mode": "tcp"}, warmup_s=1)
    assert r.status == "flagged"
    assert "bind: Address already in use" in r.reason
    assert r.metrics == {"qps": pytest.approx(495.455)}
    assert len(r.series) == 2


def test_dnsperf_bind_failure_within_warmup_fails():
    r = dnsperf.parse(recorded("dnsperf_bind_tcp.out", 1, "dnsperf_bind_tcp.err"), {"mode": "tcp"}, warmup_s=3)
    assert r.status == "failed" and "bind: Address already in use" in r.reason and r.metrics == {}


def test_dnsperf_crash_fails_with_the_last_stderr_line():
    r = dnsperf.parse(recorded("dnsperf_refused_tcp.out", 134, "dnsperf_refused_tcp.err"), {}, warmup_s=0)
    assert r.status == "failed" and r.metrics == {}
    assert "signal 6" in r.reason and "Assertion `sock_b' failed" in r.reason


def test_dnsperf_no_answers_is_a_failure_not_a_zero():
    r = dnsperf.parse(recorded("dnsperf_noserver_udp.out"), {"port": 15999}, warmup_s=0)
    assert r.status == "failed" and r.metrics == {}
    assert "no query was answered (20 sent, 20 lost)" in r.reason


def test_dnsperf_no_output_at_all_fails():
    r = dnsperf.parse(CommandResult(("dnsperf",), 1, "", "dnsperf: No such file: /q\n", 0.01), {}, warmup_s=0)
    assert r.status == "failed" and "No such file: /q" in r.reason


def test_dnsperf_per_query_percentiles_skip_warmup_answers():
    result = recorded("dnsperf_low_udp_verbose.out")
    r = dnsperf.parse(result, {"rate": 2000, "per_query_latency": True}, warmup_s=1)
    latencies = [float(line.split()[-1]) * 1000 for line in result.stdout.splitlines() if line.startswith("> ")]
    assert len(latencies) == 8000  # "Queries completed: 8000"
    skip = round(1999.880127)  # answers completed in the warm-up second (first -S line)
    assert r.metrics["latency_p99_ms"] == pytest.approx(np.percentile(latencies[skip:], 99))
    assert r.metrics["latency_p50_ms"] == pytest.approx(np.median(latencies[skip:]))
    assert r.metrics["latency_p95_ms"] == pytest.approx(np.percentile(latencies[skip:], 95))
    assert r.metrics["latency_p50_ms"] <= r.metrics["latency_p99_ms"] <= 7.614  # max in the summary


def test_dnsperf_prepare_writes_one_query_per_record_in_a_private_directory():
    written, ran = {}, []

    class Recorder:
        def run(self, host, argv, timeout_s, cpu=None):
            ran.append((host, list(argv)))
            out = "/tmp/tunelab-dnsperf.AbC123xyz0\n" if argv[0] == "mktemp" else ""
            return CommandResult(tuple(argv), 0, out, "", 0.01)

        def write_text(self, host, path, text):
            written[(host, path)] = text

    target = Recorder()
    load = type(dnsperf)()
    extra = load.prepare(target, {"records": 3})
    ((host, path), text), = written.items()
    assert host == "client" and extra == {"remote_query_file": path}
    assert path == "/tmp/tunelab-dnsperf.AbC123xyz0/queries-3"        # mktemp -d: 0700, unpredictable
    assert ran == [("client", ["mktemp", "-d", "-t", "tunelab-dnsperf.XXXXXXXXXX"])]
    assert text.splitlines() == ["r0.tunelab.test. A", "r1.tunelab.test. A", "r2.tunelab.test. A"]
    load.prepare(target, {"records": 3})                               # the directory is made once per target
    assert len(ran) == 1
    load.cleanup(target)
    assert ran[-1] == ("client", ["rm", "-rf", "--", "/tmp/tunelab-dnsperf.AbC123xyz0"])


# --- iperf3 -----------------------------------------------------------------------------------------

def test_iperf3_tcp_end_totals_exclude_the_omitted_second():
    r = iperf3.parse(recorded("iperf3_tcp.json"), {"omit": 1, "parallel": 2}, warmup_s=1)
    assert r.status == "ok"
    assert r.metrics["throughput_mbps"] == pytest.approx(59102750524.6289 / 1e6)
    assert r.metrics["retransmits"] == 6  # sum_sent, not the 44 of the omitted second
    assert r.metrics["rtt_mean_ms"] == pytest.approx((95 + 68) / 2 / 1000)
    assert r.metrics["rtt_max_ms"] == pytest.approx(0.309)
    assert r.metrics["cpu_host_pct"] == pytest.approx(93.65203560292896)
    assert r.metrics["cpu_remote_pct"] == pytest.approx(78.20659091886293)
    assert r.series["t_s"].tolist() == pytest.approx([2.000429, 3.000095, 3.999924], abs=1e-3)
    assert r.series["retransmits"].tolist() == [2, 1, 3]


def test_iperf3_warmup_longer_than_omit_uses_the_later_intervals():
    r = iperf3.parse(recorded("iperf3_tcp.json"), {"omit": 1}, warmup_s=2)
    kept_bytes = 6900940800 + 10008657920  # intervals 1.0-2.0 and 2.0-3.0 after omit
    kept_seconds = 0.9996659755706787 + 0.9998289942741394
    assert r.metrics["throughput_mbps"] == pytest.approx(kept_bytes * 8 / kept_seconds / 1e6, rel=1e-5)
    assert r.metrics["retransmits"] == 4


def test_iperf3_udp_reports_jitter_and_loss():
    r = iperf3.parse(recorded("iperf3_udp.json"), iperf3.settings("udp"), warmup_s=0)
    assert r.status == "ok"
    assert r.metrics["throughput_mbps"] == pytest.approx(200.00267182365963)  # receiver side
    assert r.metrics["jitter_ms"] == pytest.approx(0.246491451162715)
    assert r.metrics["lost_pct"] == 0 and r.metrics["lost"] == 0
    assert "retransmits" not in r.metrics and len(r.series) == 3


def test_iperf3_error_key_fails_with_its_message():
    r = iperf3.parse(recorded("iperf3_refused.json"), {}, warmup_s=0)
    assert r.status == "failed" and r.reason == "iperf3: unable to connect to server: Connection refused"


def test_iperf3_garbage_fails():
    r = iperf3.parse(CommandResult(("iperf3",), 1, "iperf3: error", "iperf3: boom\n", 0.1), {}, 0)
    assert r.status == "failed" and "boom" in r.reason


def test_iperf3_command_splits_duration_into_omit_and_measure():
    argv = iperf3.command({"omit": 2, "congestion": "bbr", "reverse": True, "udp": True, "bitrate": "50M"}, 10, "h")
    assert argv[argv.index("-t") + 1] == "8" and argv[argv.index("-O") + 1] == "2"
    assert argv[argv.index("-C") + 1] == "bbr" and "-R" in argv and argv[argv.index("-b") + 1] == "50M"
    with pytest.raises(LoadError, match="at least 1 measured second"):
        iperf3.command({"omit": 5}, 5, "h")


# --- fio --------------------------------------------------------------------------------------------

FIO_FIRST = dict(runtime_ms=1776, ios=53144, bytes=217305088)
FIO_FINAL = dict(runtime_ms=8000, ios=241525, bytes=989286400)


def test_fio_reads_concatenated_status_objects():
    objects = list(json_objects((RECORDED / "fio_randread.json").read_text()))
    assert len(objects) == 5
    assert [o["jobs"][0]["job_runtime"] for o in objects] == [1776, 3774, 5776, 7774, 8000]


def test_fio_metrics_are_differenced_after_warmup():
    r = fio.parse(recorded("fio_randread.json"), {"numjobs": 2}, warmup_s=1)
    assert r.status == "ok"
    seconds = (FIO_FINAL["runtime_ms"] - FIO_FIRST["runtime_ms"]) / 2 / 1000  # job_runtime sums 2 jobs
    assert r.metrics["iops"] == pytest.approx((FIO_FINAL["ios"] - FIO_FIRST["ios"]) / seconds)
    assert r.metrics["bw_mibps"] == pytest.approx((FIO_FINAL["bytes"] - FIO_FIRST["bytes"]) / seconds / 2**20)
    mean_ns = (241525 * 523766.110866 - 53112 * 529596.242657) / (241525 - 53112)
    assert r.metrics["lat_mean_us"] == pytest.approx(mean_ns / 1000)
    assert r.metrics["lat_p50_us"] <= r.metrics["lat_p99_us"] <= r.metrics["lat_p999_us"]


def test_fio_without_warmup_matches_fios_own_percentiles():
    r = fio.parse(recorded("fio_randread.json"), {"numjobs": 2}, warmup_s=0)
    final = list(json_objects((RECORDED / "fio_randread.json").read_text()))[-1]["jobs"][0]["read"]["clat_ns"]
    assert r.metrics["lat_p50_us"] == final["percentile"]["50.000000"] / 1000
    assert r.metrics["lat_p99_us"] == final["percentile"]["99.000000"] / 1000
    assert r.metrics["lat_p999_us"] == final["percentile"]["99.900000"] / 1000
    assert r.metrics["iops"] == pytest.approx(241525 / 4.0)


def test_fio_series_is_per_interval():
    r = fio.parse(recorded("fio_randread.json"), {"numjobs": 2}, warmup_s=1)
    assert r.series["t_s"].tolist() == pytest.approx([0.888, 1.887, 2.888, 3.887])  # final 4.0 merged away
    assert r.series["iops"].iloc[1] == pytest.approx((115147 - 53144) / ((3774 - 1776) / 2000))


def test_fio_job_error_fails_with_stderr():
    r = fio.parse(recorded("fio_error.json", 1, "fio_error.err"), {}, warmup_s=0)
    assert r.status == "failed" and "error 20" in r.reason and "Not a directory" in r.reason


def test_fio_refuses_a_device_not_from_the_target():
    for rw in ("randwrite", "randread"):
        with pytest.raises(LoadError, match="filename='/dev/sda' is outside tunelab's scratch directory"):
            fio.command({"rw": rw, "filename": "/dev/sda", "ioengine": "psync"}, 5, "x")
    with pytest.raises(LoadError, match="outside tunelab's scratch directory"):   # a forged marker
        fio.command({"rw": "randwrite", "filename": "/dev/sda", "ioengine": "psync", "device_from_target": True},
                    5, "x")
    argv = fio.command({"rw": "randwrite", "filename": "/dev/loop7", "ioengine": "psync",
                        "device_from_target": "/dev/loop7"}, 5, "x")
    assert "--filename=/dev/loop7" in argv and "--runtime=5" in argv and "--status-interval=1" in argv


def test_fio_prepare_resolves_disk_and_engine():
    class Target:
        def resolve_device(self, device):
            assert device == "@disk"
            return "loop3"

        def run(self, host, argv, timeout_s, cpu=None):
            assert host == "server" and argv == ["fio", "--enghelp"]
            return CommandResult(tuple(argv), 0, "Available IO engines:\n\tpsync\n\tlibaio\n", "", 0.01)

    assert fio.prepare(Target(), {}) == {"filename": "/dev/loop3", "device_from_target": "/dev/loop3",
                                         "ioengine": "libaio"}


# --- wrk --------------------------------------------------------------------------------------------

def test_wrk_report_with_latency_distribution():
    r = wrk.parse(recorded("wrk_ok.out"), {}, warmup_s=0)
    assert r.status == "ok"
    assert r.metrics["requests_per_s"] == 1457.20
    assert r.metrics["latency_mean_ms"] == pytest.approx(4.13)
    assert r.metrics["latency_max_ms"] == pytest.approx(26.31)
    assert r.metrics["latency_p50_ms"] == pytest.approx(3.72)
    assert r.metrics["latency_p99_ms"] == pytest.approx(12.89)
    assert r.metrics["transfer_mbps"] == pytest.approx(2.19 * 2**20 * 8 / 1e6)
    assert r.metrics["errors"] == 0


def test_wrk_socket_errors_are_counted_and_units_converted():
    r = wrk.parse(recorded("wrk_errors.out"), {}, warmup_s=0)
    assert r.status == "ok" and r.metrics["errors"] == 15
    assert r.metrics["latency_p99_ms"] == pytest.approx(450.20)


def test_wrk_microsecond_stddev_and_all_non2xx_fails():
    r = wrk.parse(recorded("wrk_404.out"), {"path": "/missing"}, warmup_s=0)
    assert r.status == "failed" and "all 3814 responses were non-2xx" in r.reason and "/missing" in r.reason


def test_wrk_connection_refused_fails():
    r = wrk.parse(recorded("", 1, "wrk_refused.err"), {}, warmup_s=0)
    assert r.status == "failed" and "Connection refused" in r.reason


def test_wrk_command_brackets_ipv6():
    assert wrk.command({"port": 8080, "path": "/x"}, 3, "fd00::1")[-1] == "http://[fd00::1]:8080/x"
    with pytest.raises(LoadError, match="connections .* must be >= threads"):
        wrk.command({"threads": 4, "connections": 2}, 3, "h")


# --- helpers ----------------------------------------------------------------------------------------

def test_histogram_percentile_matches_numpy_on_expanded_samples():
    rng = np.random.default_rng(7)
    values = np.sort(rng.choice(np.arange(1, 500), size=40, replace=False)).astype(float)
    counts = rng.integers(1, 30, size=40)
    samples = np.repeat(values, counts)
    for pct in (1, 50, 90, 99, 99.9):
        assert histogram_percentile(values, counts, pct) == np.percentile(samples, pct, method="inverted_cdf")


def test_after_warmup_tolerates_timer_jitter():
    import pandas as pd

    s = pd.DataFrame({"t_s": [1.0, 2.001, 2.999, 4.002]})
    assert after_warmup(s, 2).t_s.tolist() == [2.999, 4.002]


@pytest.mark.parametrize("module", ["tunelab.loads.dnsperf", "tunelab.loads.iperf3", "tunelab.loads.fio",
                                    "tunelab.loads.wrk", "tunelab.loads._common", "tunelab.loads.metrics"])
def test_docstring_examples_run(module):
    import doctest
    import importlib

    outcome = doctest.testmod(importlib.import_module(module))
    assert outcome.attempted > 0 and outcome.failed == 0
