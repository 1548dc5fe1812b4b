"""Load generators: dnsperf, iperf3, fio, wrk; one metric schema."""
from tunelab.loads.base import LOADS, Load, LoadResult, MetricInfo, get_load

__all__ = ["LOADS", "Load", "LoadResult", "MetricInfo", "get_load"]
