"""dnsperf (2.x) against a DNS server (the lab's, or an operator's own), over UDP or TCP.

The queries are the lab zone's names (``records`` of them, generated) or the operator's own query
file (``query_file``: the file ``dnsperf -d`` reads, on the machine tunelab runs on). That file is read
size-capped (:data:`MAX_QUERY_FILE_BYTES`) and checked line by line when the settings are validated
(each line ``NAME TYPE``, see :func:`tunelab.targets.dnszone.scan_query_file`; one error naming the
file, the line and what is wrong), and :meth:`DnsperfLoad.prepare` copies it to the load host into a
private directory (``mktemp -d``), journalled before the copy when the runner gives the load a
:class:`PrivateDirLog` (:attr:`DnsperfLoad.private_dirs`: ``tunelab restore`` removes it after a crash).
A trial's settings hold the query file's path, SHA-256 and line count, never its text. ``server_address`` (an IP address) sends the load to a service
address or VIP instead of the target's own address for the server.

The command always asks for per-second statistics (``-S 1``) and a time limit (``-l``). The steady-
state rate ``qps`` is the mean of the per-second rates after warm-up; dnsperf's whole-run figure is
kept as ``qps_summary``. dnsperf 2.10 prints no latency percentiles, so ``latency_p50_ms``, ``latency_p95_ms``
and ``latency_p99_ms`` are reported only with ``per_query_latency: true`` (``-v``: one line per answered
query; the first answers, as many as the warm-up seconds completed, are discarded). Use it at modest
rates: each answer costs a line of output. ``latency_mean_ms`` etc. are dnsperf's own whole-run figures.
The ``open_loop`` profile asks a fixed rate far below capacity (``-Q``) with ``per_query_latency``: the
server's latency at a load it keeps up with, rather than how fast a closed loop of clients can go.

Outcomes:

* summary present, all fine -> ``ok``;
* no summary but per-second lines (e.g. ``bind: Address already in use`` when the client runs out of
  local ports under a tiny ``ip_local_port_range``) -> ``flagged``, ``qps`` from the seconds seen;
* a rate was requested and the steady-state rate is below half of it -> ``flagged``;
* nothing answered, no output, or a crash -> ``failed`` with the tool's last message;
* at least half of the answers REFUSED (:data:`REFUSED_FAIL_SHARE`) -> ``failed``: the server does not
  serve the queried names (a query file for another zone), so its rate measures refusals, not answers.

Example
-------
>>> load = DnsperfLoad()
>>> s = load.settings("low", {"port": 5353}) | {"remote_query_file": "/tmp/q"}
>>> load.command(s, 10, "10.0.0.1")[:6]
['dnsperf', '-m', 'udp', '-s', '10.0.0.1', '-p']
"""
from __future__ import annotations

import functools
import hashlib
import ipaddress
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping, Protocol

import numpy as np
import pandas as pd

from tunelab.errors import LoadError
from tunelab.loads import _common as c
from tunelab.loads.base import LOADS, Load, LoadResult, SettingError
from tunelab.loads.metrics import pick
from tunelab.model import Traffic
from tunelab.targets import dnszone
from tunelab.targets.base import CommandResult, Target

STATS_INTERVAL_S = 1
FLAG_BELOW_REQUESTED = 0.5
#: share of REFUSED answers from which a run measures nothing meaningful (the names are not served)
REFUSED_FAIL_SHARE = 0.5

#: most zone records a query file may name (the file is written on the client for every trial)
MAX_RECORDS = 1_000_000
#: largest operator query file (``query_file``) read and copied to the load host
MAX_QUERY_FILE_BYTES = 64 * 1024 * 1024
#: the settings :meth:`DnsperfLoad.prepare` adds: the query file's path on the load host, and the
#: SHA-256 of the operator's query file (recorded with every trial's load settings: provenance)
REMOTE_QUERY_FILE = "remote_query_file"
QUERY_FILE_SHA256 = "query_file_sha256"
#: and its number of lines (with the path and the SHA-256: what a trial records of the file, never its text)
QUERY_FILE_LINES = "query_file_lines"
#: the template of the private directory on the load host (``mktemp -d -t``)
PRIVATE_DIR_TEMPLATE = "tunelab-dnsperf.XXXXXXXXXX"


class PrivateDirLog(Protocol):
    """Where a load reports the private directories it makes on a host (``made``: before anything is copied
    into it) and removes (``removed``); the runner journals them in the store (:func:`tunelab.runner.prepare_load`)."""

    def made(self, host: str, path: str) -> None: ...

    def removed(self, host: str, path: str) -> None: ...


def _is_ip_address(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


SETTINGS = {
    "mode": c.one_of("udp", "tcp"),
    "clients": c.positive_int(maximum=65_536),
    "threads": c.positive_int(maximum=1024),
    "max_outstanding": c.positive_int(maximum=1_000_000),
    "rate": c.positive_number(optional=True, maximum=1e9),
    "queries_per_conn": c.positive_int(optional=True, maximum=1_000_000_000),
    "timeout": c.positive_number(maximum=3600),
    "port": c.port(),
    "records": c.positive_int(maximum=MAX_RECORDS),
    "per_query_latency": c.Setting((bool,), "true or false"),
    "query_file": c.Setting((str,), "the path of a dnsperf query file (one 'NAME TYPE' per line) on this machine",
                            lambda v: bool(v.strip()) and "\0" not in v, optional=True),
    "server_address": c.Setting((str,), "an IPv4 or IPv6 address (the service address the load is sent to)",
                                _is_ip_address, optional=True),
}
DEFAULTS: dict[str, Any] = {"mode": "udp", "clients": 1, "threads": 1, "max_outstanding": 100, "rate": None,
                            "queries_per_conn": None, "timeout": 5, "port": 53,
                            "records": dnszone.DEFAULT_RECORDS, "per_query_latency": False, "query_file": None,
                            "server_address": None}

_SECOND = re.compile(r"^(\d+\.\d+): (\d+(?:\.\d+)?)\s*$", re.M)
_ANSWER = re.compile(r"^> (\S+) \S+ \S+ (\d+\.\d+)\s*$", re.M)
_NUM = r"(\d+(?:\.\d+)?)"
_SUMMARY = {
    "sent": re.compile(rf"Queries sent:\s+{_NUM}"),
    "completed": re.compile(rf"Queries completed:\s+{_NUM}"),
    "lost": re.compile(rf"Queries lost:\s+{_NUM}"),
    "run_time_s": re.compile(rf"Run time \(s\):\s+{_NUM}"),
    "qps_summary": re.compile(rf"Queries per second:\s+{_NUM}"),
    "reconnections": re.compile(rf"Reconnections:\s+{_NUM}"),
}
# "Average Latency (s):  0.000097 (min 0.000020, max 0.007959)" appears twice with TCP: queries, then
# connections (after "Connection Statistics:")
_LATENCY = re.compile(rf"Average Latency \(s\):\s+{_NUM} \(min {_NUM}, max {_NUM}\)\s*\n\s*Latency StdDev \(s\):\s+{_NUM}")


def query_file_text(records: int) -> str:
    """dnsperf's input: one ``name A`` line per zone record.

    >>> query_file_text(2)
    'r0.tunelab.test. A\\nr1.tunelab.test. A\\n'
    """
    return "".join(f"{name} A\n" for name in dnszone.record_names(records))


@dataclass(frozen=True)
class QueryFile:
    """The operator's query file as checked: its text and the SHA-256 of that text (UTF-8), computed once."""

    text: str
    sha256: str

    @property
    def lines(self) -> int:
        """How many lines the file has (a last line without a newline counts).

        >>> QueryFile("a A\\nb A", "").lines, QueryFile("", "").lines
        (2, 0)
        """
        return self.text.count("\n") + (bool(self.text) and not self.text.endswith("\n"))


def read_query_file(path: str) -> str:
    """The text of the operator's query file ``path`` once it passed every check (:func:`checked_query_file`)."""
    return checked_query_file(path).text


def checked_query_file(path: str) -> QueryFile:
    """The operator's query file ``path`` once it passed every check, with its SHA-256; SettingError otherwise.

    A regular file of at most :data:`MAX_QUERY_FILE_BYTES`, UTF-8, every line ``NAME TYPE`` (empty
    lines and ``;`` comments skipped). A file unchanged since it was last checked is not read, checked or
    hashed again: the settings check, every trial's :meth:`DnsperfLoad.prepare` and the provenance share
    one reading.
    """
    try:
        info = os.stat(path)
    except OSError:
        info = None
    key = (info.st_ino, info.st_size, info.st_mtime_ns) if info is not None else None
    return _checked_query_file(path, key)


@functools.lru_cache(maxsize=2)
def _checked_query_file(path: str, _stat_key: tuple[int, int, int] | None) -> QueryFile:
    def error(message: str) -> SettingError:
        return SettingError(f"dnsperf: setting query_file: {message}", "query_file")

    try:
        text = dnszone.read_regular_text(path, MAX_QUERY_FILE_BYTES, LoadError, "query file",
                                         "give the path of a dnsperf query file on this machine")
    except LoadError as exc:
        raise error(str(exc)) from None
    scan = dnszone.scan_query_file(text)
    if scan.problem is not None:
        line, problem = scan.problem
        where = f"{path}, line {line}" if line else path
        raise error(f"{where}: {problem}; each line is 'NAME TYPE', e.g. 'www.example.org. A'")
    return QueryFile(text, hashlib.sha256(text.encode()).hexdigest())


def parse_rcodes(text: str) -> dict[str, int]:
    """dnsperf's ``Response codes:`` line as ``{rcode: count}`` (empty when there is none).

    >>> parse_rcodes("  Response codes:       NOERROR 95 (95.00%), NXDOMAIN 5 (5.00%)\\n")
    {'NOERROR': 95, 'NXDOMAIN': 5}
    """
    line = re.search(r"Response codes:(.*)", text)
    return {name: int(count) for name, count in re.findall(r"([A-Z]+) (\d+) \(", line.group(1))} if line else {}


def parse_seconds(text: str) -> pd.DataFrame:
    """The ``-S`` lines (``<unix time>: <qps>``) as a frame: ``t_s`` (end of interval since start), ``qps``."""
    rows = [(float(ts), float(qps)) for ts, qps in _SECOND.findall(text)]
    if not rows:
        return pd.DataFrame({"t_s": pd.Series(dtype=float), "qps": pd.Series(dtype=float)})
    first = rows[0][0]
    return pd.DataFrame({"t_s": [round(ts - first + STATS_INTERVAL_S, 3) for ts, _ in rows],
                         "qps": [qps for _, qps in rows]})


def parse_summary(text: str) -> dict[str, float]:
    """The numbers of dnsperf's final ``Statistics:`` block (empty dict when there is none)."""
    if "Statistics:" not in text:
        return {}
    tail = text[text.index("Statistics:"):]
    out = {key: float(m.group(1)) for key, pattern in _SUMMARY.items() if (m := pattern.search(tail))}
    latencies = _LATENCY.findall(tail)
    names = ("latency_mean_ms", "latency_min_ms", "latency_max_ms", "latency_stddev_ms")
    if latencies:
        out.update({name: float(v) * 1000 for name, v in zip(names, latencies[0])})
    if len(latencies) > 1 and "Connection Statistics:" in tail:
        out["conn_latency_mean_ms"] = float(latencies[1][0]) * 1000
    return out


def answer_latencies_ms(text: str) -> list[float]:
    """Per-query latencies (ms) from ``-v`` output, in completion order (answered queries only)."""
    return [float(seconds) * 1000 for _, seconds in _ANSWER.findall(text)]


@LOADS.register("dnsperf")
class DnsperfLoad(Load):
    """DNS queries for the zone's A records at a fixed rate (``low``) or as fast as possible (``overload``)."""

    name = "dnsperf"
    tools = ("dnsperf",)
    service = "dns"
    runs_on = "client"
    profiles = {
        # seed 001's low utilisation, scaled to this machine: far below NSD's ~45-50k qps here
        "low": {"mode": "udp", "rate": 2000, "clients": 4, "max_outstanding": 20},
        # measured here: a stable TCP overload with connection churn (accept queue, ports, TIME_WAIT)
        "overload": {"mode": "tcp", "clients": 200, "max_outstanding": 10000, "queries_per_conn": 100},
        "udp_overload": {"mode": "udp", "clients": 4, "max_outstanding": 500},
        # open loop: a fixed rate far below capacity (NSD answers ~45-50k qps here), outstanding never the limit
        # (at ~0.1 ms per answer about 1 query is in flight), latency percentiles from each answer (-v)
        "open_loop": {"mode": "udp", "rate": 5000, "clients": 4, "max_outstanding": 1000, "per_query_latency": True},
    }
    metrics = pick("qps", "qps_summary", "requested_qps", "achieved_qps", "latency_mean_ms", "latency_stddev_ms",
                   "latency_max_ms", "latency_p50_ms", "latency_p95_ms", "latency_p99_ms", "conn_latency_mean_ms",
                   "reconnections", "lost", "lost_pct", "server_cpu_per_query")
    server_cpu_metric = ("server_cpu_per_query", "qps")
    #: dnsperf times only the queries that were answered: a level that answers far fewer (qps) or loses
    #: more (lost_pct) leaves latency measured on the few survivors
    conditional_on = {name: ("qps", "lost_pct") for name in ("latency_mean_ms", "latency_stddev_ms", "latency_max_ms",
                                                              "latency_p50_ms", "latency_p95_ms",
                                                              "latency_p99_ms", "conn_latency_mean_ms")}

    rate_metrics = ("qps", "qps_summary", "achieved_qps")

    def traffic(self, settings: Mapping[str, Any]) -> frozenset[Traffic]:
        """UDP or TCP queries, as ``mode`` says."""
        return frozenset({Traffic.TCP if self._settings(settings)["mode"] == "tcp" else Traffic.UDP})

    def rate_cap(self, settings: Mapping[str, Any]) -> str | None:
        rate = self._settings(settings)["rate"]
        return None if rate is None else f"rate {rate:g} queries/s"

    def service_port(self, settings: Mapping[str, Any]) -> int | None:
        return int(self._settings(settings)["port"])

    def __init__(self) -> None:
        #: (target, private directory on its client host) of each target prepared and not yet cleaned up
        self._private: list[tuple[Target, str]] = []
        self._written: dict[str, str] = {}               # path on the load host -> sha256 of what was written there
        #: the operator's query file (``query_file`` as given) -> the SHA-256 of the text :meth:`prepare` last sent
        #: (what the trials measured: :func:`tunelab.optimize.deploy.provenance` takes it, never hashing again)
        self.sent_queries: dict[str, str] = {}
        #: the same file -> its line count as sent
        self.sent_query_lines: dict[str, int] = {}
        #: where the private directory is journalled before the query file is copied into it (None: nowhere)
        self.private_dirs: PrivateDirLog | None = None

    def _settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        c.check_settings(self.name, settings, SETTINGS, internal=(REMOTE_QUERY_FILE, QUERY_FILE_SHA256,
                                                                  QUERY_FILE_LINES))
        return {**DEFAULTS, **settings}

    def validate_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """The settings check, plus: ``query_file`` read and checked line by line (:func:`read_query_file`);
        ``records`` and ``query_file`` together refused (``records`` sizes the generated file only)."""
        c.check_settings(self.name, settings, SETTINGS)
        if settings.get("query_file") is not None:
            if "records" in settings:
                raise SettingError("dnsperf: setting records sizes the generated query file and would be ignored "
                                   "with query_file; drop records (or query_file)", "records")
            read_query_file(settings["query_file"])
        return {**DEFAULTS, **settings}

    def _private_dir(self, target: Target) -> str:
        """A fresh 0700 directory on the client (``mktemp -d``), made once per target and reused; kept per target
        (a load prepared on two targets removes each one's with :meth:`cleanup` on it), and remembered before it
        is journalled, so a journal that fails still leaves it to :meth:`cleanup`."""
        for known, path in self._private:
            if known is target:
                return path
        result = target.run(self.runs_on, ["mktemp", "-d", "-t", PRIVATE_DIR_TEMPLATE], timeout_s=10)
        if not result.ok:
            raise LoadError(f"dnsperf: could not create a private directory for the query file: "
                            f"{c.exit_reason('mktemp', result)}")
        path = result.stdout.strip()
        if not path.startswith("/") or "\n" in path:
            # a dry run records the command and prints nothing: name a directory that is never created
            path = "/nonexistent/tunelab-dnsperf.dry-run"
        self._private.append((target, path))
        if self.private_dirs is not None and not path.startswith("/nonexistent/"):
            self.private_dirs.made(self.runs_on, path)      # journalled before anything is copied there
        return path

    def prepare(self, target: Target, settings: Mapping[str, Any]) -> dict[str, Any]:
        """Put the query file in a private directory on the load host: the operator's ``query_file``
        (:func:`checked_query_file`: read, checked and hashed again only when it changed; its SHA-256 is returned
        too with its line count, for the trial's record, and kept in :attr:`sent_queries`) or ``records`` zone names
        of type A. The settings returned name the file (path, SHA-256, lines), never hold its text.

        The directory comes from ``mktemp -d`` on the load host (mode 0700, unpredictable name),
        so a symlink planted in /tmp is never followed; a file already there with the same content is
        not written again; :meth:`cleanup` removes the directory.
        """
        s = self._settings(settings)
        if s["query_file"] is not None:
            queries = checked_query_file(s["query_file"])
            name, text, digest = "queries", queries.text, queries.sha256
            self.sent_queries[s["query_file"]] = digest
            self.sent_query_lines[s["query_file"]] = queries.lines
            facts = {QUERY_FILE_SHA256: digest, QUERY_FILE_LINES: queries.lines}
        else:
            name, text = f"queries-{int(s['records'])}", query_file_text(s["records"])
            digest = hashlib.sha256(text.encode()).hexdigest()
            facts = {}
        path = f"{self._private_dir(target)}/{name}"
        if self._written.get(path) != digest:
            target.write_text(self.runs_on, path, text)
            self._written[path] = digest
        return {REMOTE_QUERY_FILE: path, **facts}

    def check_prepared(self, target: Target, settings: Mapping[str, Any]) -> None:
        """LoadError unless the query file :meth:`prepare` wrote is a readable file on the load host (a dry run,
        which writes nothing, passes)."""
        path = str(settings.get(REMOTE_QUERY_FILE) or "")
        if not path or path.startswith("/nonexistent/"):
            return
        result = target.run(self.runs_on, ["test", "-f", path, "-a", "-r", path], timeout_s=10)
        if not result.ok and not getattr(result, "dry", False):
            raise LoadError(f"dnsperf: the query file {path} is not a readable file on the {self.runs_on} host after "
                            "it was copied there; check the load host's /tmp (space, mount options) and try again")

    def cleanup(self, target: Target) -> None:
        """Remove the private directory :meth:`prepare` made on ``target`` (if any)."""
        mine = [path for known, path in self._private if known is target]
        if not mine:
            return
        directory = mine[0]
        self._private = [(known, path) for known, path in self._private if known is not target]
        self._written = {path: digest for path, digest in self._written.items()
                         if not path.startswith(directory + "/")}
        if "/tunelab-dnsperf." in directory and not directory.startswith("/nonexistent/"):   # ours, from mktemp
            result = target.run(self.runs_on, ["rm", "-rf", "--", directory], timeout_s=30)
            if not result.ok and not getattr(result, "dry", False):
                raise LoadError(f"dnsperf: could not remove {directory} on the {self.runs_on} host: "
                                f"{c.exit_reason('rm', result)}; `tunelab restore` removes it")
            if self.private_dirs is not None:
                self.private_dirs.removed(self.runs_on, directory)

    def command(self, settings: Mapping[str, Any], duration_s: float, server_address: str) -> list[str]:
        s = self._settings(settings)
        if REMOTE_QUERY_FILE not in s:
            raise LoadError("dnsperf: no query file; call prepare(target, settings) and merge its result first")
        if duration_s <= 0:
            raise LoadError(f"dnsperf: duration must be > 0 s, got {duration_s!r}")
        address = s["server_address"] or server_address
        argv = ["dnsperf", "-m", s["mode"], "-s", address, "-p", str(s["port"]), "-d", s[REMOTE_QUERY_FILE],
                "-l", f"{duration_s:g}", "-S", str(STATS_INTERVAL_S), "-c", str(s["clients"]),
                "-T", str(s["threads"]), "-q", str(s["max_outstanding"]), "-t", f"{s['timeout']:g}"]
        if s["rate"] is not None:
            argv += ["-Q", f"{s['rate']:g}"]
        if s["mode"] == "tcp" and s["queries_per_conn"] is not None:
            argv += ["-O", f"num-queries-per-conn={s['queries_per_conn']}"]
        if s["per_query_latency"]:
            argv.append("-v")
        return argv

    def parse(self, result: CommandResult, settings: Mapping[str, Any], warmup_s: float) -> LoadResult:
        s = {**DEFAULTS, **settings}
        series = parse_seconds(result.stdout)
        summary = parse_summary(result.stdout)
        steady = c.after_warmup(series, warmup_s, STATS_INTERVAL_S)
        if not summary:
            if steady.empty:
                why = "no per-second line after the warm-up" if not series.empty else "no output to measure"
                return c.failed(f"{c.exit_reason('dnsperf', result)} ({why})", result)
            reason = (f"{c.exit_reason('dnsperf', result)}; no summary, qps from the {len(steady)} per-second "
                      f"line(s) after warm-up")
            return c.result("flagged", reason, {"qps": steady["qps"].mean()}, series, result)
        if summary.get("completed", 0) <= 0:
            return c.failed(f"dnsperf: no query was answered ({summary.get('sent', 0):.0f} sent, "
                            f"{summary.get('lost', 0):.0f} lost); is the DNS server up on port {s['port']}?"
                            + ("" if result.ok else f" {c.exit_reason('dnsperf', result)}"), result)
        refused = parse_rcodes(result.stdout).get("REFUSED", 0) / summary["completed"]
        if refused >= REFUSED_FAIL_SHARE:
            return c.failed(f"dnsperf: {refused:.0%} of the answers were REFUSED: the server does not serve the "
                            "queried names; use a query file for the zone it serves (the lab serves an operator's "
                            "zone with its zone_file and zone options)", result)
        metrics: dict[str, float] = {k: v for k, v in summary.items() if k in self.metrics}
        metrics["qps"] = steady["qps"].mean() if not steady.empty else float("nan")
        metrics["lost_pct"] = 100.0 * summary.get("lost", 0) / summary["sent"] if summary.get("sent") else float("nan")
        if summary.get("run_time_s"):
            metrics["achieved_qps"] = summary["sent"] / summary["run_time_s"]
        if s.get("rate") is not None:
            metrics["requested_qps"] = float(s["rate"])
        if s.get("per_query_latency"):
            metrics.update(_steady_percentiles(result.stdout, series, warmup_s))
        problems = []
        if steady.empty:
            problems.append(f"no per-second line after the {warmup_s:g} s warm-up; qps is missing (run longer)")
        if not result.ok:
            problems.append(c.exit_reason("dnsperf", result))
        rate_seen = metrics.get("qps", metrics.get("qps_summary", 0.0))
        if s.get("rate") is not None and rate_seen < FLAG_BELOW_REQUESTED * s["rate"]:
            problems.append(f"achieved {rate_seen:.0f} qps, below {FLAG_BELOW_REQUESTED:.0%} of the requested "
                            f"{s['rate']:g} qps: the client or server could not keep up")
        return c.result("flagged" if problems else "ok", "; ".join(problems) or None, metrics, series, result)


def _steady_percentiles(text: str, series: pd.DataFrame, warmup_s: float) -> dict[str, float]:
    """p50/p95/p99 of the per-query latencies after the answers completed during warm-up."""
    latencies = answer_latencies_ms(text)
    warm = series.drop(c.after_warmup(series, warmup_s).index)
    skip = int(round(float((warm["qps"] * STATS_INTERVAL_S).sum())))
    kept = latencies[skip:]
    if len(kept) < 2:
        return {}
    p50, p95, p99 = np.percentile(kept, [50, 95, 99])
    return {"latency_p50_ms": float(p50), "latency_p95_ms": float(p95), "latency_p99_ms": float(p99)}
