"""fio on the server's disk: the lab's loop device (``filename: "@disk"``) or a file path.

fio runs time-based for the whole duration with ``--output-format=json+ --status-interval=1``: it
prints one cumulative JSON object per second and a final one, each with the completion-latency
histogram (``clat_ns.bins``). Warm-up is removed by differencing: every metric is computed from the
final counters minus the counters of the last status at the end of the warm-up, so the latency
percentiles are those of the post-warm-up I/Os only (same nearest-rank rule as fio's own). The
per-second series comes from consecutive status objects.

Files are confined, for reads and writes alike: ``filename`` is either ``"@disk"`` (the target's
scratch loop device, e.g. the lab's) or a file under tunelab's scratch directory
:data:`~tunelab.paths.SCRATCH_DIR` (default ``/var/tmp/tunelab/scratch``). Paths are
canonicalised; ``..``, ``:`` (fio's list separator) and symlinks that leave the directory are
refused when the design is read, again on the target in :meth:`FioLoad.prepare`, and again in
:meth:`FioLoad.command`. A design cannot read or overwrite a real disk or a system file.

Example
-------
>>> f = f"{SCRATCH_DIR}/f"
>>> argv = FioLoad().command({"filename": f, "size": "64M", "ioengine": "psync"}, 10, "unused")
>>> argv[:3] == ['fio', '--name=tunelab', f'--filename={f}']
True
"""
from __future__ import annotations

import json
import math
import os
import re
from typing import Any, Callable, Iterator, Mapping

import numpy as np
import pandas as pd

from tunelab.errors import LoadError, quoted
from tunelab.loads import _common as c
from tunelab.loads.base import LOADS, Load, LoadResult
from tunelab.loads.metrics import pick
from tunelab.model import Traffic
from tunelab.paths import SCRATCH_DIR
from tunelab.targets.base import CommandResult, Target

RW = ("randread", "randwrite", "read", "write", "randrw", "readwrite")
#: the mixed read/write patterns, whose read share is ``rwmixread``
MIXED = ("randrw", "readwrite")
#: fio engines a design may choose (``exec``, ``external:`` and friends would run other programs)
ENGINES = ("auto", "libaio", "io_uring", "psync", "sync", "pvsync", "pvsync2", "posixaio", "mmap")
#: largest file fio may lay out in the scratch directory (``size``) and largest block size (``bs``)
MAX_SIZE_BYTES = 16 * 2**30
MAX_BS_BYTES = 64 * 2**20
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_SIZE_RE = re.compile(r"([0-9]{1,15})([kmgt]?)(i?b)?", re.I)
#: the only device fio may touch: the target's own loop device, as resolved from ``@disk``
_LOOP_RE = re.compile(r"/dev/loop[0-9]{1,4}")


def size_bytes(value: Any) -> int | None:
    """``"4k"`` -> 4096 (fio's units: k = 1024); None when ``value`` is not a plain size.

    >>> size_bytes("256M"), size_bytes(4096), size_bytes("4k,8k")
    (268435456, 4096, None)
    """
    if isinstance(value, bool):
        return None
    match = _SIZE_RE.fullmatch(str(value))
    return int(match.group(1)) * _UNITS[match.group(2).lower()] if match else None


def _size_rule(maximum: int) -> Callable[[Any], bool]:
    return lambda v: (n := size_bytes(v)) is not None and 0 < n <= maximum


def check_filename(value: str, setting: str = "filename", resolve: bool = True) -> str:
    """Confine an fio ``filename`` to ``@disk`` or a file under :data:`SCRATCH_DIR`; return it canonical.

    Refused: ``:`` anywhere (fio reads it as a list of files), control characters, relative paths,
    ``..`` components, anything outside the scratch directory after normalisation (``//dev/sda``
    is ``/dev/sda``), and, with ``resolve``, a path whose symlinks lead elsewhere on this machine.
    """
    if value == "@disk":
        return value
    allowed = f"allowed: \"@disk\" (the target's scratch loop device) or a file under {SCRATCH_DIR}/"

    def refuse(why: str) -> LoadError:
        return c.SettingError(f"fio: setting {setting}={quoted(value)} {why}; {allowed}", setting)

    if ":" in value:
        raise refuse("contains ':', which fio reads as a list of several files")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise refuse("contains control characters")
    if not value.startswith("/"):
        raise refuse("is not an absolute path")
    if ".." in value.split("/"):
        raise refuse("contains '..'")
    canonical = os.path.normpath("/" + value.lstrip("/"))
    scratch = os.path.normpath(str(SCRATCH_DIR))
    if os.path.commonpath([canonical, scratch]) != scratch or canonical == scratch:
        raise refuse("is outside tunelab's scratch directory")
    if resolve and os.path.realpath(canonical) != canonical:
        raise refuse(f"resolves through a symlink to {os.path.realpath(canonical)}")
    return canonical


SETTINGS = {
    "rw": c.one_of(*RW),
    "bs": c.Setting((str, int), f"a block size such as 4k or 1M (at most {MAX_BS_BYTES // 2**20}M)",
                    _size_rule(MAX_BS_BYTES)),
    "iodepth": c.positive_int(maximum=4096),
    "numjobs": c.positive_int(maximum=64),
    "ioengine": c.one_of(*ENGINES),
    "direct": c.Setting((bool,), "true or false"),
    "size": c.Setting((str, int), f"a size such as 256M (at most {MAX_SIZE_BYTES // 2**30}G)",
                      _size_rule(MAX_SIZE_BYTES), optional=True),
    "filename": c.Setting((str,), f"\"@disk\" or a file under {SCRATCH_DIR}/", lambda v: len(v) <= 4096),
    # share of reads in % for the mixed patterns (rw: randrw | readwrite); fio ignores it otherwise
    "rwmixread": c.Setting((int,), "an integer from 0 to 100 (the % of I/Os that are reads)",
                           lambda v: not isinstance(v, bool) and 0 <= v <= 100),
}
INTERNAL = ("device_from_target",)
DEFAULTS: dict[str, Any] = {"rw": "randread", "bs": "4k", "iodepth": 16, "numjobs": 1, "ioengine": "auto",
                            "direct": True, "size": None, "filename": "@disk",
                            "rwmixread": 50}
_OPS = ("read", "write", "trim")
MIN_INTERVAL_S = 0.5  # status objects closer than this to the previous one (the final one) are merged


@LOADS.register("fio")
class FioLoad(Load):
    """Random/sequential, read/write/mixed block I/O on the server's scratch disk.

    Profiles: ``randread``, ``randwrite`` (4k, iodepth 16), ``seqread``, ``seqwrite`` (1M, iodepth 4) and
    ``randrw`` (4k, iodepth 16, 70 % reads). For a mixed profile every metric covers reads and writes
    together: ``iops`` is read IOPS + write IOPS, ``bw_mibps`` the sum of both directions' bandwidth, and
    the latencies (mean and percentiles) are over all completed I/Os of either kind (the two
    completion-latency histograms are merged), which is what the workload as a whole experiences.
    """

    name = "fio"
    tools = ("fio",)
    service = None
    runs_on = "server"
    profiles = {
        "randread": {"rw": "randread", "bs": "4k", "iodepth": 16},
        "randwrite": {"rw": "randwrite", "bs": "4k", "iodepth": 16},
        "seqread": {"rw": "read", "bs": "1M", "iodepth": 4},
        "seqwrite": {"rw": "write", "bs": "1M", "iodepth": 4},
        "randrw": {"rw": "randrw", "bs": "4k", "iodepth": 16, "rwmixread": 70},
    }
    metrics = pick("iops", "bw_mibps", "lat_mean_us", "lat_p50_us", "lat_p99_us", "lat_p999_us")

    def traffic(self, settings: Mapping[str, Any]) -> frozenset[Traffic]:
        """Disk reads and/or writes as ``rw`` says; buffered ones too unless ``direct``."""
        s = self._settings(settings)
        mixed = s["rw"] in MIXED
        reads = s["rw"] in ("randread", "read") or (mixed and s["rwmixread"] > 0)
        writes = s["rw"] in ("randwrite", "write") or (mixed and s["rwmixread"] < 100)
        kinds = {Traffic.DISK_READ} if reads else set()
        kinds |= {Traffic.DISK_WRITE} if writes else set()
        if not s["direct"]:
            kinds |= {Traffic.BUFFERED_READ} if reads else set()
            kinds |= {Traffic.BUFFERED_WRITE} if writes else set()
        return frozenset(kinds)

    def _settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        c.check_settings(self.name, settings, SETTINGS, internal=INTERNAL)
        return {**DEFAULTS, **settings}

    def validate_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """Settings check plus the file rule (:func:`check_filename`); ``device_from_target`` is refused."""
        c.check_settings(self.name, settings, SETTINGS)
        s = {**DEFAULTS, **settings}
        check_filename(s["filename"])
        return s

    def prepare(self, target: Target, settings: Mapping[str, Any]) -> dict[str, Any]:
        """Resolve ``@disk`` to the target's loop device, check a scratch file on the target itself,
        and resolve ``ioengine: auto`` to libaio (else psync)."""
        s = self._settings(settings)
        extra: dict[str, Any] = {}
        if s["filename"] == "@disk":
            device = target.resolve_device("@disk")
            device = device if device.startswith("/") else f"/dev/{device}"
            if not _LOOP_RE.fullmatch(device):
                raise LoadError(f"fio: filename \"@disk\" resolved to {quoted(device)} on this target, which is not "
                                "a loop device; use a target with a scratch disk (lab with disk_mb) or a file "
                                f"under {SCRATCH_DIR}/")
            extra["filename"] = extra["device_from_target"] = device
        else:
            extra["filename"] = self._scratch_file(target, s["filename"])
        if s["ioengine"] == "auto":
            engines = target.run(self.runs_on, ["fio", "--enghelp"], timeout_s=10)
            extra["ioengine"] = "libaio" if "libaio" in engines.stdout.split() else "psync"
        return extra

    def _scratch_file(self, target: Target, filename: str) -> str:
        """Create the scratch directory on the target (0700) and check the file does not leave it there."""
        path = check_filename(filename, resolve=False)
        made = target.run(self.runs_on, ["mkdir", "-p", "-m", "0700", "--", str(SCRATCH_DIR)], timeout_s=10)
        if not made.ok:
            raise LoadError(f"fio: could not create the scratch directory {SCRATCH_DIR}: {c.exit_reason('mkdir', made)}")
        real = target.run(self.runs_on, ["realpath", "-m", "--", path], timeout_s=10)
        seen = real.stdout.strip()
        if not real.ok or (seen and seen != path):   # a dry run prints nothing
            raise LoadError(f"fio: filename {path} resolves to {quoted(seen)} on the target (a symlink); "
                            f"only files under {SCRATCH_DIR}/ are allowed")
        return path

    def counted_device(self, settings: Mapping[str, Any]) -> str | None:
        """The target's loop device when fio drives ``@disk`` (resolved by :meth:`prepare`); None for a file."""
        device = settings.get("device_from_target")
        return os.path.basename(device) if isinstance(device, str) and _LOOP_RE.fullmatch(device) else None

    def command(self, settings: Mapping[str, Any], duration_s: float, server_address: str) -> list[str]:
        s = self._settings(settings)
        if s["filename"].startswith("@") or s["ioengine"] == "auto":
            raise LoadError(f"fio: filename {s['filename']!r} / ioengine {s['ioengine']!r} are unresolved; call "
                            "prepare(target, settings) and merge its result first")
        from_target = s.get("device_from_target") == s["filename"] and _LOOP_RE.fullmatch(s["filename"])
        if not from_target:
            check_filename(s["filename"], resolve=False)   # defence in depth: the rule holds here too
        runtime = int(round(duration_s))
        if runtime < 1:
            raise LoadError(f"fio: duration must be at least 1 s, got {duration_s!r}")
        argv = ["fio", "--name=tunelab", f"--filename={s['filename']}", f"--rw={s['rw']}", f"--bs={s['bs']}",
                f"--iodepth={s['iodepth']}", f"--numjobs={s['numjobs']}", "--group_reporting",
                f"--ioengine={s['ioengine']}", f"--direct={int(s['direct'])}", "--time_based",
                f"--runtime={runtime}", "--output-format=json+", "--status-interval=1"]
        if s["rw"] in MIXED:
            argv.append(f"--rwmixread={int(s['rwmixread'])}")
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
