"""The one metric schema every load reports into: a metric name means the same thing everywhere.

Loads pick their metrics from :data:`METRICS` with :func:`pick`, so ``latency_mean_ms`` from
dnsperf and from wrk have the same unit, direction and meaning (mean request latency).
"""
from __future__ import annotations

from typing import Mapping

from tunelab.loads.base import MetricInfo
from tunelab.model import Direction

_MAX, _MIN = Direction.MAXIMIZE.value, Direction.MINIMIZE.value

METRICS: Mapping[str, MetricInfo] = {
    # request/response rates
    "qps": MetricInfo("1/s", _MAX, "answered DNS queries per second, mean of the per-second rates after warm-up"),
    "qps_summary": MetricInfo("1/s", _MAX, "answered queries per second over the whole run (dnsperf's own figure)"),
    "requested_qps": MetricInfo("1/s", _MAX, "the query rate that was asked for (-Q); a setting, echoed for context"),
    "achieved_qps": MetricInfo("1/s", _MAX, "queries sent per second over the whole run (what the generator offered)"),
    "requests_per_s": MetricInfo("1/s", _MAX, "completed HTTP requests per second over the run"),
    # latencies of a request/query (milliseconds), timed on the answered queries / completed requests only
    "latency_mean_ms": MetricInfo("ms", _MIN, "mean request/query latency", on_survivors=True),
    "latency_stddev_ms": MetricInfo("ms", _MIN, "standard deviation of request/query latency", on_survivors=True),
    "latency_max_ms": MetricInfo("ms", _MIN, "largest request/query latency", on_survivors=True),
    "latency_p50_ms": MetricInfo("ms", _MIN, "median request/query latency", on_survivors=True),
    "latency_p99_ms": MetricInfo("ms", _MIN, "99th percentile of request/query latency", on_survivors=True),
    # the server's own cost, far less noisy than closed-loop throughput on a shared machine (tunelab.counters)
    "server_cpu_per_query": MetricInfo("us", _MIN, "CPU microseconds the server's processes spent per answered query "
                                       "over the measured window (their /proc CPU time over qps)"),
    "conn_latency_mean_ms": MetricInfo("ms", _MIN, "mean TCP connection set-up latency (dnsperf -m tcp)",
                                       on_survivors=True),
    # losses and errors
    # losses and errors are often 0 at the baseline, so their SESOI is a difference (sesoi_abs):
    # 10 lost queries is 0.1 % of a 1 s run at 10k QPS; 0.1 percentage point of those sent
    "lost": MetricInfo("count", _MIN, "queries/datagrams sent but never answered/received", sesoi_abs=10),
    "lost_pct": MetricInfo("%", _MIN, "lost as a percentage of those sent", sesoi_abs=0.1),
    "errors": MetricInfo("count", _MIN, "failed requests: socket errors (connect/read/write/timeout) + non-2xx/3xx",
                         sesoi_abs=1),
    "reconnections": MetricInfo("count", _MIN, "TCP connections opened again during the run (dnsperf -m tcp)"),
    # bulk transfer (iperf3, wrk)
    "throughput_mbps": MetricInfo("Mbit/s", _MAX, "payload bits received per second, in 10^6 bit/s"),
    "transfer_mbps": MetricInfo("Mbit/s", _MAX, "HTTP bytes read per second, in 10^6 bit/s"),
    # 100 segments: 0.1 % of the ~86,000 full-size segments of one second at 1 Gbit/s, above the few dozen
    # start-up retransmissions of a clean run (tests/loads/recorded/iperf3_tcp.json: 50); as a difference
    # because a clean link's baseline is often 0
    "retransmits": MetricInfo("count", _MIN, "TCP segments retransmitted by the sender", sesoi_abs=100),
    "rtt_mean_ms": MetricInfo("ms", _MIN, "mean of the sender streams' smoothed TCP round-trip times"),
    "rtt_max_ms": MetricInfo("ms", _MIN, "largest TCP round-trip time seen by any sender stream"),
    "jitter_ms": MetricInfo("ms", _MIN, "UDP packet delay variation seen by the receiver (iperf3 -u)"),
    "cpu_host_pct": MetricInfo("%", _MIN, "CPU used by the iperf3 client process (user+system, % of one CPU)"),
    "cpu_remote_pct": MetricInfo("%", _MIN, "CPU used by the iperf3 server process (user+system, % of one CPU)"),
    # block I/O (fio; microseconds, completion latency)
    "iops": MetricInfo("1/s", _MAX, "I/O operations completed per second after warm-up"),
    "bw_mibps": MetricInfo("MiB/s", _MAX, "I/O bandwidth after warm-up, in 2^20 bytes/s"),
    "lat_mean_us": MetricInfo("us", _MIN, "mean I/O completion latency (fio clat) after warm-up"),
    "lat_p50_us": MetricInfo("us", _MIN, "median I/O completion latency (fio clat histogram)"),
    "lat_p99_us": MetricInfo("us", _MIN, "99th percentile I/O completion latency (fio clat histogram)"),
    "lat_p999_us": MetricInfo("us", _MIN, "99.9th percentile I/O completion latency (fio clat histogram)"),
}


#: guard metrics in plain words: (what the metric counts, why a metric conditional on it is then not
#: comparable); the report and the screen's reasons use them when a guard trips
GUARD_WORDS: Mapping[str, tuple[str, str]] = {
    "qps": ("answered queries per second", "only the queries still answered were timed"),
    "qps_summary": ("answered queries per second", "only the queries still answered were timed"),
    "requests_per_s": ("completed requests per second", "only the requests that still completed were timed"),
    "lost": ("lost queries or datagrams", "the lost ones were never timed"),
    "lost_pct": ("the share of queries or datagrams lost", "the lost ones were never timed"),
    "errors": ("failed requests", "failed requests were never timed"),
    "retransmits": ("TCP retransmissions", "the throughput and round-trip times there were bought with "
                    "retransmitted segments"),
}


def pick(*names: str) -> dict[str, MetricInfo]:
    """The schema entries for ``names`` (KeyError for a name that is not in :data:`METRICS`).

    >>> pick("qps")["qps"].unit
    '1/s'
    """
    return {name: METRICS[name] for name in names}
