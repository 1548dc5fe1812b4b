"""fio on the server's disk: the lab's loop device (``filename: "@disk"``) or a file path.

fio runs time-based for the whole duration with ``--output-format=json+ --status-interval=1``: it
prints one cumulative JSON object per second and a final one, each with the completion-latency
histogram (``clat_ns.bins``). Warm-up is removed by differencing: every metric is computed from the
final counters minus the counters of the last status at the end of the warm-up, so the latency
percentiles are those of the post-warm-up I/Os only (same nearest-rank rule as fio's own). The
per-second series comes from consecutive status objects.

Writing workloads (``write``, ``randwrite``, ``randrw``) to a ``/dev/`` path are refused unless
the path came from the target's ``@disk`` (the lab's scratch loop device): a design cannot overwrite
a real disk by mistake.

Example
-------
>>> argv = FioLoad().command({"filename": "/tmp/f", "size": "64M", "ioengine": "psync"}, 10, "unused")
>>> argv[:3]
['fio', '--name=tunelab', '--filename=/tmp/f']
"""
from __future__ import annotations

import json
import math
from typing import Any, Iterator, Mapping

import numpy as np
import pandas as pd

from tunelab.errors import LoadError
from tunelab.loads import _common as c
from tunelab.loads.base import LOADS, Load, LoadResult
from tunelab.loads.metrics import pick
from tunelab.targets.base import CommandResult

RW = ("randread", "randwrite", "read", "write", "randrw")
SETTINGS = {
    "rw": c.one_of(*RW),
    "bs": c.Setting((str, int), "a block size such as 4k or 1M"),
    "iodepth": c.positive_int(),
    "numjobs": c.positive_int(),
    "ioengine": c.Setting((str,), "an fio engine name (libaio, psync, io_uring) or auto", str.isidentifier),
    "direct": c.Setting((bool,), "true or false"),
    "size": c.Setting((str, int), "a size such as 256M", optional=True),
    "filename": c.Setting((str,), "@disk or an absolute path", lambda v: v == "@disk" or v.startswith("/")),
}
INTERNAL = ("device_from_target",)
DEFAULTS: dict[str, Any] = {"rw": "randread", "bs": "4k", "iodepth": 16, "numjobs": 1, "ioengine": "auto",
                            "direct": True, "size": None, "filename": "@disk"}
_OPS = ("read", "write", "trim")
MIN_INTERVAL_S = 0.5  # status objects closer than this to the previous one (the final one) are merged


@LOADS.register("fio")
class FioLoad(Load):
    """Random/sequential block I/O on the server's scratch disk."""

    name = "fio"
    tools = ("fio",)
    service = None
    runs_on = "server"
    profiles = {
        "randread": {"rw": "randread", "bs": "4k", "iodepth": 16},
        "randwrite": {"rw": "randwrite", "bs": "4k", "iodepth": 16},
        "seqread": {"rw": "read", "bs": "1M", "iodepth": 4},
    }
    metrics = pick("iops", "bw_mibps", "lat_mean_us", "lat_p50_us", "lat_p99_us", "lat_p999_us")

    def _settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        c.check_settings(self.name, settings, SETTINGS, internal=INTERNAL)
        return {**DEFAULTS, **settings}

    def prepare(self, target: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
        """Resolve ``@disk`` to the target's device and ``ioengine: auto`` to libaio (else psync)."""
        s = self._settings(settings)
        extra: dict[str, Any] = {}
        if s["filename"].startswith("@"):
            device = target.resolve_device(s["filename"])
            extra["filename"] = device if device.startswith("/") else f"/dev/{device}"
            extra["device_from_target"] = True
        if s["ioengine"] == "auto":
            engines = target.run(self.runs_on, ["fio", "--enghelp"], timeout_s=10)
            extra["ioengine"] = "libaio" if "libaio" in engines.stdout.split() else "psync"
        return extra

    def command(self, settings: Mapping[str, Any], duration_s: float, server_address: str) -> list[str]:
        s = self._settings(settings)
        if s["filename"].startswith("@") or s["ioengine"] == "auto":
            raise LoadError(f"fio: filename {s['filename']!r} / ioengine {s['ioengine']!r} are unresolved; call "
                            "prepare(target, settings) and merge its result first")
        if "write" in s["rw"] or s["rw"] == "randrw":
            if s["filename"].startswith("/dev/") and not s.get("device_from_target"):
                raise LoadError(f"fio: refusing to write to {s['filename']} (rw={s['rw']}): it is a device that did "
                                "not come from the target's scratch disk; use filename: \"@disk\" or a file path")
        runtime = int(round(duration_s))
        if runtime < 1:
            raise LoadError(f"fio: duration must be at least 1 s, got {duration_s!r}")
        argv = ["fio", "--name=tunelab", f"--filename={s['filename']}", f"--rw={s['rw']}", f"--bs={s['bs']}",
                f"--iodepth={s['iodepth']}", f"--numjobs={s['numjobs']}", "--group_reporting",
                f"--ioengine={s['ioengine']}", f"--direct={int(s['direct'])}", "--time_based",
                f"--runtime={runtime}", "--output-format=json+", "--status-interval=1"]
        if s["size"] is not None:
            argv.append(f"--size={s['size']}")
        return argv

    def parse(self, result: CommandResult, settings: Mapping[str, Any], warmup_s: float) -> LoadResult:
        numjobs = int({**DEFAULTS, **settings}["numjobs"])
        reports = [r for r in json_objects(result.stdout) if r.get("jobs")]
        if not reports:
            return c.failed(f"fio printed no JSON report; {c.exit_reason('fio', result)}", result)
        final = reports[-1]["jobs"][0]
        if final.get("error"):
            return c.failed(f"fio job error {final['error']}: {c.last_line(result.stderr) or 'see raw output'}",
                            result)
        points = [_Counters.of(r["jobs"][0], numjobs) for r in reports]
        series = counter_series(points)
        end = points[-1]
        base = _Counters.zero()
        if warmup_s > 0:
            before = [p for p in points[:-1] if p.t_s <= warmup_s + 0.25]
            if not before:
                return c.failed(f"fio: no status report at the end of the {warmup_s:g} s warm-up "
                                f"(first at {points[0].t_s:.2f} s); run longer", result)
            base = before[-1]
        span = end.minus(base)
        if span.ios <= 0 or span.t_s <= 0:
            return c.failed(f"fio completed no I/O after the {warmup_s:g} s warm-up", result)
        metrics = {"iops": span.ios / span.t_s, "bw_mibps": span.bytes / span.t_s / 2**20,
                   "lat_mean_us": span.clat_sum_ns / span.clat_n / 1000 if span.clat_n else math.nan}
        values, counts = zip(*span.bins.items()) if span.bins else ((), ())
        for name, pct in (("lat_p50_us", 50), ("lat_p99_us", 99), ("lat_p999_us", 99.9)):
            metrics[name] = c.histogram_percentile(values, counts, pct) / 1000 if values else math.nan
        problems = [] if result.ok else [c.exit_reason("fio", result)]
        return c.result("flagged" if problems else "ok", "; ".join(problems) or None, metrics, series, result)


def json_objects(text: str) -> Iterator[dict[str, Any]]:
    """Every top-level JSON object in ``text`` (fio's status reports are concatenated), skipping other text."""
    decoder = json.JSONDecoder()
    index = text.find("{")
    while index != -1:
        try:
            obj, end = decoder.raw_decode(text, index)
        except ValueError:
            index = text.find("{", index + 1)
            continue
        if isinstance(obj, dict):
            yield obj
        index = text.find("{", end)


class _Counters:
    """Cumulative counters of one fio report, summed over read/write/trim."""

    def __init__(self, t_s: float, ios: float, nbytes: float, clat_n: float, clat_sum_ns: float,
                 bins: dict[float, float]) -> None:
        self.t_s, self.ios, self.bytes = t_s, ios, nbytes
        self.clat_n, self.clat_sum_ns, self.bins = clat_n, clat_sum_ns, bins

    @classmethod
    def zero(cls) -> "_Counters":
        return cls(0.0, 0.0, 0.0, 0.0, 0.0, {})

    @classmethod
    def of(cls, job: Mapping[str, Any], numjobs: int) -> "_Counters":
        ios = nbytes = n = total = 0.0
        bins: dict[float, float] = {}
        for op in _OPS:
            stats = job.get(op) or {}
            clat = stats.get("clat_ns") or {}
            ios += float(stats.get("total_ios", 0))
            nbytes += float(stats.get("io_bytes", 0))
            n += float(clat.get("N", 0))
            total += float(clat.get("N", 0)) * float(clat.get("mean", 0))
            for value, count in (clat.get("bins") or {}).items():
                bins[float(value)] = bins.get(float(value), 0.0) + float(count)
        # with --group_reporting, job_runtime (ms) is summed over the jobs
        return cls(float(job.get("job_runtime", 0)) / numjobs / 1000, ios, nbytes, n, total, bins)

    def minus(self, other: "_Counters") -> "_Counters":
        bins = {v: n - other.bins.get(v, 0.0) for v, n in self.bins.items()}
        return _Counters(self.t_s - other.t_s, self.ios - other.ios, self.bytes - other.bytes,
                         self.clat_n - other.clat_n, self.clat_sum_ns - other.clat_sum_ns,
                         {v: n for v, n in bins.items() if n > 0})


def counter_series(points: list[_Counters]) -> pd.DataFrame:
    """Per-interval iops, bandwidth and mean latency from consecutive cumulative reports."""
    rows, previous = [], _Counters.zero()
    for point in points:
        span = point.minus(previous)
        if span.t_s < MIN_INTERVAL_S:
            continue
        rows.append({"t_s": round(point.t_s, 3), "iops": span.ios / span.t_s,
                     "bw_mibps": span.bytes / span.t_s / 2**20,
                     "lat_mean_us": span.clat_sum_ns / span.clat_n / 1000 if span.clat_n else np.nan})
        previous = point
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=["t_s", "iops", "bw_mibps", "lat_mean_us"])
