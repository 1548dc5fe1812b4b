"""wrk (4.x) against an HTTP server on the server host (service ``http``).

In the lab, service ``http`` is nginx on port 80 (:data:`tunelab.targets.services.HTTP_PORT`)
serving fixed files (:data:`tunelab.targets.services.HTTP_FILES`): ``/`` and ``/index.html``
(1 KiB), ``/64k.bin`` (64 KiB); choose one with the ``path`` setting.

wrk prints only whole-run figures (no per-second output, no warm-up), so the series is empty and
the metrics include the warm-up seconds; keep ``warmup_s`` small or the server pre-warmed. Latency
percentiles come from ``--latency`` (always on). wrk's sizes use binary units (1 MB = 2^20 bytes);
``transfer_mbps`` converts them to 10^6 bit/s like iperf3's ``throughput_mbps``.

Outcomes: no ``Requests/sec`` line -> ``failed`` (e.g. connection refused); every response non-2xx/3xx
-> ``failed`` (wrong path?); some non-2xx/3xx -> ``flagged``; socket errors alone are a result
(``errors``), not a flag.

Example
-------
>>> WrkLoad().command({"port": 8080, "path": "/"}, 10, "10.0.0.1")[-1]
'http://10.0.0.1:8080/'
"""
from __future__ import annotations

import math
import re
from typing import Any, Mapping

import pandas as pd

from tunelab.errors import LoadError
from tunelab.loads import _common as c
from tunelab.loads.base import LOADS, Load, LoadResult
from tunelab.loads.metrics import pick
from tunelab.model import Traffic
from tunelab.targets.base import CommandResult
from tunelab.targets.services import HTTP_PORT

# No ``script`` setting on purpose: ``wrk -s script.lua`` runs arbitrary Lua (os.execute) as root.
SETTINGS = {
    "path": c.pattern(r"/[\x21-\x7e]{0,2047}", "a URL path starting with / (printable ASCII, no spaces)"),
    "port": c.port(),
    "threads": c.positive_int(maximum=1024),
    "connections": c.positive_int(maximum=100_000),
    "timeout": c.Setting((int,), "a whole number of seconds from 1 to 3600",
                         lambda v: not isinstance(v, bool) and 1 <= v <= 3600),
}
DEFAULTS: dict[str, Any] = {"path": "/", "port": HTTP_PORT, "threads": 2, "connections": 16, "timeout": 2}

_TIME_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}
_BINARY = {"": 1, "B": 1, "KB": 2**10, "MB": 2**20, "GB": 2**30, "TB": 2**40}
_TIME = r"(\d+(?:\.\d+)?)(us|ms|s|m|h)"
_LATENCY_ROW = re.compile(rf"^\s*Latency\s+{_TIME}\s+{_TIME}\s+{_TIME}", re.M)
_PERCENTILE = re.compile(rf"^\s*(\d+)%\s+{_TIME}\s*$", re.M)
_REQUESTS = re.compile(r"^\s*(\d+) requests in " + _TIME + r", (\d+(?:\.\d+)?)([KMGT]?B) read", re.M)
_RPS = re.compile(r"^Requests/sec:\s+(\d+(?:\.\d+)?)", re.M)
_TRANSFER = re.compile(r"^Transfer/sec:\s+(\d+(?:\.\d+)?)([KMGT]?B)", re.M)
_SOCKET = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
_NON2XX = re.compile(r"Non-2xx or 3xx responses: (\d+)")


def _ms(value: str, unit: str) -> float:
    return float(value) * _TIME_UNITS[unit]


def parse_report(text: str) -> dict[str, float]:
    """The numbers of a wrk report (empty dict when there is no ``Requests/sec`` line)."""
    rps = _RPS.search(text)
    if not rps:
        return {}
    out = {"requests_per_s": float(rps.group(1))}
    if m := _TRANSFER.search(text):
        out["transfer_mbps"] = float(m.group(1)) * _BINARY[m.group(2)] * 8 / 1e6
    if m := _LATENCY_ROW.search(text):
        out["latency_mean_ms"] = _ms(m.group(1), m.group(2))
        out["latency_stddev_ms"] = _ms(m.group(3), m.group(4))
        out["latency_max_ms"] = _ms(m.group(5), m.group(6))
    percentiles = {int(p): _ms(v, u) for p, v, u in _PERCENTILE.findall(text)}
    if 50 in percentiles:
        out["latency_p50_ms"] = percentiles[50]
    if 99 in percentiles:
        out["latency_p99_ms"] = percentiles[99]
    if m := _REQUESTS.search(text):
        out["requests"] = float(m.group(1))
    socket_errors = sum(int(n) for n in _SOCKET.search(text).groups()) if _SOCKET.search(text) else 0
    non2xx = int(m.group(1)) if (m := _NON2XX.search(text)) else 0
    out["socket_errors"], out["non2xx"] = float(socket_errors), float(non2xx)
    out["errors"] = float(socket_errors + non2xx)
    return out


@LOADS.register("wrk")
class WrkLoad(Load):
    """HTTP GETs of one path over keep-alive connections."""

    name = "wrk"
    tools = ("wrk",)
    service = "http"
    runs_on = "client"
    profiles = {
        "light": {"threads": 1, "connections": 4},
        "heavy": {"threads": 2, "connections": 256},
    }
    metrics = pick("requests_per_s", "transfer_mbps", "latency_mean_ms", "latency_stddev_ms", "latency_max_ms",
                   "latency_p50_ms", "latency_p99_ms", "errors")
    #: wrk times only the requests that completed: fewer completed (requests_per_s) or more failed (errors)
    #: leaves latency measured on the survivors
    conditional_on = {name: ("requests_per_s", "errors") for name in ("latency_mean_ms", "latency_stddev_ms",
                                                                      "latency_max_ms", "latency_p50_ms",
                                                                      "latency_p99_ms")}

    def traffic(self, settings: Mapping[str, Any]) -> frozenset[Traffic]:
        """HTTP over TCP."""
        return frozenset({Traffic.TCP})

    def service_port(self, settings: Mapping[str, Any]) -> int | None:
        return int(self._settings(settings)["port"])

    def _settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        c.check_settings(self.name, settings, SETTINGS)
        s = {**DEFAULTS, **settings}
        if s["connections"] < s["threads"]:
            raise c.SettingError(f"wrk: connections ({s['connections']}) must be >= threads ({s['threads']}); "
                                 "wrk gives every thread at least one connection",
                                 "connections" if "connections" in settings else "threads")
        return s

    def validate_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        return self._settings(settings)

    def command(self, settings: Mapping[str, Any], duration_s: float, server_address: str) -> list[str]:
        s = self._settings(settings)
        seconds = int(round(duration_s))
        if seconds < 1:
            raise LoadError(f"wrk: duration must be at least 1 s, got {duration_s!r}")
        host = f"[{server_address}]" if ":" in server_address else server_address
        return ["wrk", "-t", str(s["threads"]), "-c", str(s["connections"]), "-d", f"{seconds}s",
                "--timeout", f"{s['timeout']}s", "--latency", f"http://{host}:{s['port']}{s['path']}"]

    def parse(self, result: CommandResult, settings: Mapping[str, Any], warmup_s: float) -> LoadResult:
        report = parse_report(result.stdout)
        if not report:
            return c.failed(c.exit_reason("wrk", result) + " (no Requests/sec line)", result)
        requests, non2xx = report.get("requests", math.nan), report["non2xx"]
        if requests > 0 and non2xx >= requests:
            return c.failed(f"wrk: all {requests:.0f} responses were non-2xx/3xx; check the path "
                            f"{settings.get('path', DEFAULTS['path'])!r} on the server", result)
        problems = [] if result.ok else [c.exit_reason("wrk", result)]
        if non2xx:
            problems.append(f"{non2xx:.0f} of {requests:.0f} responses were non-2xx/3xx")
        metrics = {k: v for k, v in report.items() if k in self.metrics}
        return c.result("flagged" if problems else "ok", "; ".join(problems) or None, metrics,
                        pd.DataFrame(columns=["t_s"]), result)
