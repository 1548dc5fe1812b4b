"""dnsperf's open-loop profile: a fixed rate (-Q) with every answer's latency (-v), so percentiles are metrics."""
from __future__ import annotations

from tunelab.loads import get_load
from tunelab.loads.dnsperf import REMOTE_QUERY_FILE


def test_open_loop_asks_a_fixed_rate_with_per_query_latencies():
    load = get_load("dnsperf")()
    settings = load.settings("open_loop", {})
    argv = load.command({**settings, REMOTE_QUERY_FILE: "/q"}, 10, "10.77.0.1")
    assert argv[argv.index("-Q") + 1] == "5000" and "-v" in argv and argv[argv.index("-m") + 1] == "udp"
    # outstanding queries never limit the rate: 1000 allowed, ~1 in flight at 5000 qps and ~0.1 ms each
    assert int(argv[argv.index("-q") + 1]) >= 100
    assert {"latency_p50_ms", "latency_p95_ms", "latency_p99_ms"} <= set(load.metrics)
