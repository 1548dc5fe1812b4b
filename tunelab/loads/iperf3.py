"""iperf3 (JSON mode) against the lab's iperf3 server: TCP bulk transfer or UDP at a bitrate.

iperf3 can leave out its own warm-up: with ``omit: N`` the command becomes ``-O N -t duration-N``
(same wall time) and iperf3's end totals (``sum_received``, CPU) cover only the measured seconds.
Set ``omit`` to the design's ``warmup_s``. When the warm-up given to :meth:`parse` is longer than
``omit``, throughput, retransmits and RTT come from the per-second intervals after the warm-up
instead (sender-side bytes, which for TCP equal the received bytes up to what is in flight), and the
CPU figures still span the whole run.

Example
-------
>>> Iperf3Load().command({"omit": 2, "parallel": 4}, 10, "10.0.0.1")
['iperf3', '-c', '10.0.0.1', '-p', '5201', '-J', '-t', '8', '-O', '2', '-P', '4']
"""
from __future__ import annotations

import json
import math
from typing import Any, Mapping

import numpy as np
import pandas as pd

from tunelab.errors import LoadError
from tunelab.loads import _common as c
from tunelab.loads.base import LOADS, Load, LoadResult
from tunelab.loads.metrics import pick
from tunelab.model import Traffic
from tunelab.targets.base import CommandResult

#: iperf3 sizes and rates: digits with an optional K/M/G/T suffix (bitrate may add /burst)
_SIZE = r"[0-9]{1,12}(\.[0-9]{1,6})?[KMGTkmgt]?"
SETTINGS = {
    "parallel": c.positive_int(maximum=128),  # iperf3's own limit
    "congestion": c.Setting((str,), "a congestion control name such as cubic or bbr",
                            lambda v: v.isidentifier() and v.isascii() and len(v) <= 16, optional=True),
    "reverse": c.Setting((bool,), "true or false"),
    "udp": c.Setting((bool,), "true or false"),
    "bitrate": c.pattern(_SIZE + r"(/[0-9]{1,9})?", "an iperf3 bitrate such as 100M or 1G", optional=True,
                         types=(str, int)),
    "port": c.port(),
    "omit": c.Setting((int,), "a whole number of seconds from 0 to 3600",
                      lambda v: not isinstance(v, bool) and 0 <= v <= 3600),
    "window": c.pattern(_SIZE, "a socket buffer size such as 256K", optional=True, types=(str, int)),
}
DEFAULTS: dict[str, Any] = {"parallel": 1, "congestion": None, "reverse": False, "udp": False, "bitrate": None,
                            "port": 5201, "omit": 0, "window": None}


@LOADS.register("iperf3")
class Iperf3Load(Load):
    """Bulk TCP (``bulk``, ``parallel4``) or UDP at a fixed bitrate (``udp``) through the lab's link."""

    name = "iperf3"
    tools = ("iperf3",)
    service = "iperf3"
    runs_on = "client"
    profiles = {
        "bulk": {"parallel": 1},
        "parallel4": {"parallel": 4},
        "udp": {"udp": True, "bitrate": "100M"},
    }
    metrics = pick("throughput_mbps", "retransmits", "rtt_mean_ms", "rtt_max_ms", "cpu_host_pct",
                   "cpu_remote_pct", "jitter_ms", "lost", "lost_pct")
    #: throughput and RTT bought with many more retransmitted segments are not a like-for-like comparison
    conditional_on = {name: ("retransmits",) for name in ("throughput_mbps", "rtt_mean_ms", "rtt_max_ms")}

    rate_metrics = ("throughput_mbps",)

    def traffic(self, settings: Mapping[str, Any]) -> frozenset[Traffic]:
        """A UDP stream with ``udp``, else TCP."""
        return frozenset({Traffic.UDP if self._settings(settings)["udp"] else Traffic.TCP})

    def rate_cap(self, settings: Mapping[str, Any]) -> str | None:
        """UDP always has a bitrate (iperf3's default 1M); TCP only with ``bitrate``."""
        s = self._settings(settings)
        if s["udp"] or s["bitrate"] is not None:
            return f"bitrate {s['bitrate'] or '1M'}bit/s"
        return None

    def service_port(self, settings: Mapping[str, Any]) -> int | None:
        return int(self._settings(settings)["port"])

    def _settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        c.check_settings(self.name, settings, SETTINGS)
        return {**DEFAULTS, **settings}

    def validate_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        return self._settings(settings)

    def command(self, settings: Mapping[str, Any], duration_s: float, server_address: str) -> list[str]:
        s = self._settings(settings)
        measure = int(round(duration_s)) - s["omit"]
        if measure < 1:
            raise LoadError(f"iperf3: duration {duration_s:g} s leaves {measure} s after omit={s['omit']} s; "
                            "iperf3 needs at least 1 measured second: lengthen measure_s or lower omit")
        argv = ["iperf3", "-c", server_address, "-p", str(s["port"]), "-J", "-t", str(measure)]
        if s["omit"]:
            argv += ["-O", str(s["omit"])]
        if s["parallel"] != 1:
            argv += ["-P", str(s["parallel"])]
        if s["congestion"]:
            argv += ["-C", s["congestion"]]
        if s["reverse"]:
            argv.append("-R")
        if s["udp"]:
            argv += ["-u", "-b", str(s["bitrate"] or "1M")]
        elif s["bitrate"] is not None:
            argv += ["-b", str(s["bitrate"])]
        if s["window"] is not None:
            argv += ["-w", str(s["window"])]
        return argv

    def parse(self, result: CommandResult, settings: Mapping[str, Any], warmup_s: float) -> LoadResult:
        try:
            data = json.loads(result.stdout)
        except ValueError:
            return c.failed(f"iperf3 printed no JSON; {c.exit_reason('iperf3', result)}", result)
        if not isinstance(data, dict):
            return c.failed("iperf3 printed JSON that is not an object", result)
        if data.get("error"):
            return c.failed(f"iperf3: {data['error']}", result)
        end = data.get("end") or {}
        if not end.get("sum_received") and not end.get("sum"):
            return c.failed(f"iperf3 printed no end totals; {c.exit_reason('iperf3', result)}", result)
        omit = float(((data.get("start") or {}).get("test_start") or {}).get("omit", 0) or 0)
        series = interval_series(data, omit)
        if warmup_s <= omit + 0.25:
            metrics = end_metrics(end)
        else:
            metrics = {**end_metrics(end), **interval_metrics(data, omit, warmup_s)}
        problems = [] if result.ok else [c.exit_reason("iperf3", result)]
        if not metrics.get("throughput_mbps", math.nan) > 0:
            return c.failed("iperf3 moved no data after the warm-up", result)
        return c.result("flagged" if problems else "ok", "; ".join(problems) or None, metrics, series, result)


def end_metrics(end: Mapping[str, Any]) -> dict[str, float]:
    """Metrics from iperf3's end totals (which exclude the ``-O`` seconds)."""
    received = end.get("sum_received") or end.get("sum") or {}
    out = {"throughput_mbps": received.get("bits_per_second", math.nan) / 1e6}
    sent = end.get("sum_sent") or {}
    if "retransmits" in sent:
        out["retransmits"] = float(sent["retransmits"])
    senders = [stream["sender"] for stream in end.get("streams", []) if "mean_rtt" in (stream.get("sender") or {})]
    if senders:
        out["rtt_mean_ms"] = float(np.mean([s["mean_rtt"] for s in senders])) / 1000
        out["rtt_max_ms"] = float(max(s["max_rtt"] for s in senders)) / 1000
    if "jitter_ms" in received:
        out["jitter_ms"] = float(received["jitter_ms"])
        out["lost_pct"] = float(received.get("lost_percent", math.nan))
        out["lost"] = float(received.get("lost_packets", math.nan))
    cpu = end.get("cpu_utilization_percent") or {}
    if cpu:
        out["cpu_host_pct"] = float(cpu["host_total"])
        out["cpu_remote_pct"] = float(cpu["remote_total"])
    return out


def _measured_intervals(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [i for i in data.get("intervals", []) if not i.get("sum", {}).get("omitted")]


def interval_series(data: Mapping[str, Any], omit: float) -> pd.DataFrame:
    """One row per reported interval after iperf3's omit: ``t_s`` (end, since start), throughput, TCP figures."""
    rows = []
    for interval in _measured_intervals(data):
        total = interval["sum"]
        row = {"t_s": round(omit + float(total["end"]), 3), "throughput_mbps": total["bits_per_second"] / 1e6}
        if "retransmits" in total:
            row["retransmits"] = float(total["retransmits"])
        rtts = [s["rtt"] for s in interval.get("streams", []) if "rtt" in s]
        if rtts:
            row["rtt_mean_ms"] = float(np.mean(rtts)) / 1000
        rows.append(row)
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=["t_s", "throughput_mbps"])


def interval_metrics(data: Mapping[str, Any], omit: float, warmup_s: float) -> dict[str, float]:
    """Throughput/retransmits/RTT over the intervals that start at or after ``warmup_s``."""
    kept = [i for i in _measured_intervals(data) if omit + float(i["sum"]["start"]) >= warmup_s - 0.25]
    seconds = sum(float(i["sum"]["seconds"]) for i in kept)
    if not kept or seconds <= 0:
        return {"throughput_mbps": math.nan}
    out = {"throughput_mbps": sum(float(i["sum"]["bytes"]) for i in kept) * 8 / seconds / 1e6}
    if all("retransmits" in i["sum"] for i in kept):
        out["retransmits"] = float(sum(i["sum"]["retransmits"] for i in kept))
    rtts = [s["rtt"] for i in kept for s in i.get("streams", []) if "rtt" in s]
    if rtts:
        out["rtt_mean_ms"] = float(np.mean(rtts)) / 1000
        out["rtt_max_ms"] = float(np.max(rtts)) / 1000
    return out
