"""Load generators (dnsperf, iperf3, fio, wrk) reporting into one metric schema.

``get_load(name)()`` gives a :class:`Load`; see :mod:`tunelab.loads.base` for the interface and
each module for its settings, profiles and failure rules. A metric name means the same thing in
every load (:data:`tunelab.loads.metrics.METRICS` is the single source):

=====================  ======  ========  ==============  ==================================================
metric                 unit    better    reported by     meaning
=====================  ======  ========  ==============  ==================================================
qps                    1/s     maximize  dnsperf         answered queries/s, mean of per-second rates after warm-up
qps_summary            1/s     maximize  dnsperf         answered queries/s over the whole run (dnsperf's figure)
requested_qps          1/s     maximize  dnsperf         the requested rate (-Q), echoed for context
achieved_qps           1/s     maximize  dnsperf         queries sent/s over the whole run
requests_per_s         1/s     maximize  wrk             completed HTTP requests/s
latency_mean_ms        ms      minimize  dnsperf, wrk    mean request/query latency
latency_stddev_ms      ms      minimize  dnsperf, wrk    standard deviation of request/query latency
latency_max_ms         ms      minimize  dnsperf, wrk    largest request/query latency
latency_p50_ms         ms      minimize  dnsperf*, wrk   median latency (*dnsperf: with per_query_latency)
latency_p99_ms         ms      minimize  dnsperf*, wrk   99th percentile latency (*idem)
conn_latency_mean_ms   ms      minimize  dnsperf         mean TCP connection set-up latency (TCP mode)
reconnections          count   minimize  dnsperf         TCP connections re-opened (TCP mode)
server_cpu_per_query   us      minimize  dnsperf**       server processes' CPU per answered query (**counters)
lost                   count   minimize  dnsperf, iperf3 queries/datagrams never answered/received
lost_pct               %       minimize  dnsperf, iperf3 lost as a percentage of those sent
errors                 count   minimize  wrk             socket errors + non-2xx/3xx responses
throughput_mbps        Mbit/s  maximize  iperf3          payload received, 10^6 bit/s
transfer_mbps          Mbit/s  maximize  wrk             HTTP bytes read, 10^6 bit/s
retransmits            count   minimize  iperf3          TCP retransmitted segments
rtt_mean_ms            ms      minimize  iperf3          mean of the sender streams' smoothed RTT
rtt_max_ms             ms      minimize  iperf3          largest RTT of any sender stream
jitter_ms              ms      minimize  iperf3          UDP delay variation at the receiver
cpu_host_pct           %       minimize  iperf3          client CPU (user+system, % of one CPU)
cpu_remote_pct         %       minimize  iperf3          server CPU (user+system, % of one CPU)
iops                   1/s     maximize  fio             I/Os completed/s after warm-up
bw_mibps               MiB/s   maximize  fio             bandwidth after warm-up, 2^20 bytes/s
lat_mean_us            us      minimize  fio             mean completion latency (clat) after warm-up
lat_p50_us             us      minimize  fio             median clat after warm-up (fio histogram)
lat_p99_us             us      minimize  fio             99th percentile clat after warm-up
lat_p999_us            us      minimize  fio             99.9th percentile clat after warm-up
=====================  ======  ========  ==============  ==================================================

``server_cpu_per_query`` comes from the trial's kernel counters (:mod:`tunelab.counters`): the CPU
time of the server's processes over the measured window, divided by the answered queries; only
targets that know the server's processes report it (the lab; local and ssh with ``server_cgroup``).

Every load's ``series`` has a ``t_s`` column (end of each one-second interval, seconds since the
start) plus per-second metric columns; wrk prints no per-second figures, so its series is empty.
"""
from tunelab.loads.base import LOADS, Load, LoadResult, MetricInfo, SettingError, get_load
from tunelab.loads import dnsperf, fio, iperf3, wrk  # noqa: F401,E402 - registers the loads
from tunelab.loads.metrics import METRICS

__all__ = ["LOADS", "METRICS", "Load", "LoadResult", "MetricInfo", "SettingError", "get_load"]
