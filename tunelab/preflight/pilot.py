"""``--pilot SECONDS``: one short window of the load before the first trial, to see whether the experiment can
show anything.

The pilot measures the target **as it stands**: no knob is written, no service restarted; the load runs once per
profile for the validation's warm-up plus ``SECONDS`` (its query file is put on the load host as a trial's is),
and the target's kernel counters are read around the ``SECONDS`` after the warm-up, as a trial's are
(:class:`tunelab.counters.CounterWindow`). So the pilot sees the values the knobs hold now, which are the
baseline's when the baseline is ``current`` (each report line names the value measured). It reports:

- **binding** (:func:`binding`): whether each changed knob's mechanism binds now, from its counters
  (:attr:`tunelab.knobs.mechanisms.Mechanism.counters`): when none moved, a change that loosens a cap
  (:data:`LOOSER_WHEN_LARGER`: a larger somaxconn) cannot act under this load, while one that tightens it
  may still bind where the current value does not;
- **the load generator**: its own CPU time over the window (the shell's ``times`` of its children, on the load
  host) against the wall time and the load host's CPUs (``nproc``), and the load's ``lost_pct``;
- **the noise** of the load's per-second series (:class:`PilotWindow.series`); the arithmetic from it to a trial's
  CV and the blocks needed is :mod:`tunelab.optimize.pilot_noise` (the statistics are a layer above).

A pilot never refuses: it informs (:meth:`PilotReport.lines`).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from tunelab.counters import CounterRecord, CounterRequest, CounterWindow
from tunelab.errors import DesignError, TunelabError
from tunelab.loads import Load
from tunelab.preflight.checks import KnobChange
from tunelab.targets import Target
from tunelab.model import TrialStatus

#: knobs whose larger value loosens the cap they set (a longer queue, a bigger buffer): raising one can act only
#: where the current value binds
LOOSER_WHEN_LARGER = frozenset({
    "net.core.somaxconn", "net.ipv4.tcp_max_syn_backlog", "net.ipv4.tcp_max_tw_buckets", "net.ipv4.tcp_mem",
    "net.ipv4.udp_mem", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.core.rmem_max", "net.core.wmem_max",
    "net.core.rmem_default", "net.core.wmem_default", "net.core.optmem_max", "net.core.netdev_max_backlog",
    "link.txqueuelen", "fs.file-max", "block.queue.nr_requests"})
#: the line the load's wrapper prints on stderr before the shell's ``times``
TIMES_MARK = "tunelab-pilot-times"
_TIME = re.compile(r"(\d+)m([\d.]+)s")


#: the longest pilot window, in seconds
MAX_PILOT_S = 600.0


def check_pilot(pilot_s: Any) -> float | None:
    """``pilot_s`` as a float (None: no pilot); DesignError unless it is a number of seconds in (0, 600].

    >>> check_pilot(None), check_pilot(5)
    (None, 5.0)
    """
    if pilot_s is None:
        return None
    number = float(pilot_s) if isinstance(pilot_s, (int, float)) and not isinstance(pilot_s, bool) else math.nan
    if not (math.isfinite(number) and 0 < number <= MAX_PILOT_S):
        raise DesignError(f"--pilot must be a number of seconds above 0 and at most {MAX_PILOT_S:g}, got "
                          f"{str(pilot_s)[:40]!r}; e.g. --pilot 10")
    return number


def timed_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` run by ``sh``, which then prints its children's CPU time (POSIX ``times``) on stderr after
    :data:`TIMES_MARK`, and exits with the command's status.

    >>> timed_argv(["dnsperf", "-l", "2"])[:3]
    ['sh', '-c', '"$@"; s=$?; echo tunelab-pilot-times >&2; times >&2; exit $s']
    """
    return ["sh", "-c", f'"$@"; s=$?; echo {TIMES_MARK} >&2; times >&2; exit $s', "sh", *argv]


def children_cpu_s(stderr: str) -> tuple[float | None, str]:
    """The children's user + system CPU seconds from the ``times`` output after :data:`TIMES_MARK` (its second
    line), and ``stderr`` without it; None when it is not there.

    >>> children_cpu_s("warn\\ntunelab-pilot-times\\n0m0.01s 0m0.02s\\n0m1.50s 0m0.25s\\n")
    (1.75, 'warn\\n')
    """
    head, mark, tail = stderr.rpartition(TIMES_MARK + "\n")
    lines = tail.splitlines()
    if not mark or len(lines) < 2:
        return None, stderr
    found = _TIME.findall(lines[1])
    if len(found) != 2:
        return None, stderr
    return sum(60 * int(minutes) + float(seconds) for minutes, seconds in found), head


@dataclass(frozen=True)
class Binding:
    """Whether one changed knob's mechanism binds at the current value: the counters' rates per second
    (None: not measured) and the finding's text."""

    label: str
    current: Any
    counters: tuple[str, ...]
    rates: Mapping[str, float] | None
    binds: bool | None
    text: str
    #: the candidate loosens a cap that does not bind now: it cannot act under this load
    cannot_help: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"knob": self.label, "current": str(self.current), "counters": list(self.counters),
                "rates_per_s": dict(self.rates) if self.rates is not None else None, "binds": self.binds,
                "cannot_help": self.cannot_help, "finding": self.text}


def _numbers(value: Any) -> tuple[float, ...] | None:
    parts = value if isinstance(value, (tuple, list)) else str(value).split()
    try:
        return tuple(float(part) for part in parts)
    except (TypeError, ValueError):
        return None


def direction(current: Any, candidate: Any) -> str | None:
    """``"raises"`` or ``"lowers"`` when every number of ``candidate`` is >= (<=) ``current``'s and one
    differs, else None (not numbers, or mixed).

    >>> direction(1024, 4096), direction("4096 131072 6291456", "4096 131072 1048576"), direction("bbr", "cubic")
    ('raises', 'lowers', None)
    """
    old, new = _numbers(current), _numbers(candidate)
    if old is None or new is None or len(old) != len(new) or old == new:
        return None
    if all(b >= a for a, b in zip(old, new)):
        return "raises"
    if all(b <= a for a, b in zip(old, new)):
        return "lowers"
    return None


def _rate_text(rates: Mapping[str, float]) -> str:
    return ", ".join(f"{name} +{rate:.4g}/s" for name, rate in rates.items())


def binding(change: KnobChange, current: Any, candidate: Any, record: CounterRecord | None) -> Binding:
    """The finding of ``change`` from the counters of its mechanism over the pilot window (``record``: None
    when the target has no counters), phrased for the direction of ``candidate`` against ``current``.

    >>> from tunelab.knobs import get_knob
    >>> change = KnobChange(get_knob("net.core.somaxconn"), "server", (1024, 4096), "net.core.somaxconn")
    >>> binding(change, 1024, 4096, CounterRecord(10.0, {"TcpExt.ListenOverflows": 500.0})).text
    'binds at 1024: TcpExt.ListenOverflows +50/s'
    >>> binding(change, 1024, 4096, CounterRecord(10.0, {"TcpExt.ListenOverflows": 0.0})).cannot_help
    True
    """
    mechanism = change.knob.mechanism
    counters = tuple(mechanism.counters) if mechanism is not None else ()
    names = {name: (name if change.host == "server" else f"{change.host}.{name}") for name in counters}
    if not counters:
        return Binding(change.label, current, (), None, None, "no counters show this knob's mechanism binding "
                                                             "(knobs/mechanisms.py lists none): not judged")
    if record is None:
        return Binding(change.label, current, counters, None, None, "not measured on this target (no kernel counters)")
    rates = {name: record.rates()[placed] for name, placed in names.items() if placed in record.deltas}
    if not rates:
        return Binding(change.label, current, counters, None, None,
                       f"not measured: none of {', '.join(counters)} could be read at the {change.host}")
    moved = {name: rate for name, rate in rates.items() if rate > 0}
    if moved:
        return Binding(change.label, current, counters, rates, True, f"binds at {current}: {_rate_text(moved)}")
    return _still(change, current, candidate, counters, rates, record.window_s)


def _still(change: KnobChange, current: Any, candidate: Any, counters: tuple[str, ...], rates: Mapping[str, float],
           window_s: float) -> Binding:
    """The finding when no counter of the mechanism moved, by the candidate's direction."""
    head = (f"does not bind at {current}: none of {', '.join(rates)} moved in {window_s:.3g} s "
            f"(the change can act only if it moves them)")
    way = direction(current, candidate)
    loosens = change.knob.name in LOOSER_WHEN_LARGER
    if way == "raises" and loosens:
        tail = f"; {candidate} only loosens a limit that does not bind now, so it cannot act under this load"
    elif way == "lowers" and loosens:
        tail = f"; {candidate} tightens it, and may bind where {current} does not"
    else:
        tail = f"; {candidate} may still bind where {current} does not"
    return Binding(change.label, current, counters, rates, False, head + tail,
                   cannot_help=way == "raises" and loosens)


@dataclass(frozen=True)
class PilotWindow:
    """One profile's pilot run: the counter record, the load's metrics and per-second ``series``
    (``{column: values after the warm-up}``), the load's CPU seconds (None: not measured), the load host's CPUs,
    the window's wall seconds and what went wrong."""

    profile: str
    seconds: float
    record: CounterRecord | None
    metrics: Mapping[str, float]
    series: Mapping[str, tuple[float, ...]]
    load_cpu_s: float | None
    load_cpus: int | None
    wall_s: float
    status: str
    problems: tuple[str, ...] = ()

    def load_busy_pct(self) -> float | None:
        """The load's CPU time as a share of all its host's CPUs over its run, in %; None when not measured.

        >>> PilotWindow("p", 2.0, None, {}, {}, 3.0, 2, 2.0, "ok").load_busy_pct()
        75.0
        """
        if self.load_cpu_s is None or not self.load_cpus or not self.wall_s > 0:
            return None
        return 100.0 * self.load_cpu_s / (self.wall_s * self.load_cpus)

    def load_text(self) -> str:
        """One line on the load generator: its CPU and ``lost_pct``."""
        busy = self.load_busy_pct()
        cpu = ("load generator CPU: not measured on this target" if busy is None else
               f"load generator CPU {busy:.0f} % of its {self.load_cpus} CPU(s) ({self.load_cpu_s:.2f} s in "
               f"{self.wall_s:.2f} s){': it may be the bottleneck' if busy >= SATURATED_PCT else ''}")
        lost = self.metrics.get("lost_pct")
        return cpu + ("" if lost is None else f"; lost {lost:.2f} % of the queries")

    def to_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "seconds": self.seconds, "status": self.status,
                "counters": self.record.to_json() if self.record is not None else None,
                "metrics": dict(self.metrics), "series": {k: list(v) for k, v in self.series.items()},
                "load_cpu_s": self.load_cpu_s, "load_cpus": self.load_cpus, "wall_s": self.wall_s,
                "load_busy_pct": self.load_busy_pct(), "problems": list(self.problems)}


#: the load generator's CPU share (%) above which it is called saturated
SATURATED_PCT = 90.0


@dataclass(frozen=True)
class PilotReport:
    """The pilot: each profile's window and bindings, and (added by :mod:`tunelab.optimize.pilot_noise`) each
    goal's noise estimate, a mapping with a ``line`` to print."""

    windows: tuple[PilotWindow, ...]
    bindings: Mapping[str, tuple[Binding, ...]]
    noise: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)
    #: why nothing was measured (a target that runs no load), else None
    note: str | None = None

    @property
    def cannot_help(self) -> bool:
        """Every changed knob with counters is a loosened cap that binds under no profile."""
        judged = [b for found in self.bindings.values() for b in found if b.binds is not None]
        return bool(judged) and all(b.cannot_help for b in judged)

    def lines(self) -> list[str]:
        """What to print before the trials (never a refusal)."""
        if self.note is not None:
            return [self.note]
        seconds = self.windows[0].seconds if self.windows else 0.0
        out = [f"pilot: the target as it stands (nothing applied), {seconds:g} s per profile"]
        for window in self.windows:
            if window.status != TrialStatus.OK:
                out.append(f"  [{window.profile}] the load's window is {window.status}: "
                           f"{'; '.join(window.problems)[:200]}")
            out += [f"  [{window.profile}] {b.label}: {b.text}" for b in self.bindings.get(window.profile, ())]
            out.append(f"  [{window.profile}] {window.load_text()}")
        out += [f"  {entry['line']}" for entry in self.noise]
        if self.cannot_help:
            out.append("  PILOT: no changed knob's mechanism binds now, and every change only loosens it: the "
                       "change cannot act under this load (measuring anyway; expect no difference)")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"note": self.note, "windows": [w.to_json() for w in self.windows], "cannot_help": self.cannot_help,
                "bindings": {p: [b.to_json() for b in found] for p, found in self.bindings.items()},
                "noise": [{k: v for k, v in entry.items() if k != "line"} | {"finding": entry["line"]}
                          for entry in self.noise]}


def changes_of(specs: Sequence[Any], baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[KnobChange]:
    """A :class:`KnobChange` per bound knob (``spec.knob``, ``spec.host``, ``spec.id``) that the candidate sets."""
    return [KnobChange(spec.knob, spec.host, tuple(dict.fromkeys(
        value for value in (baseline.get(spec.id), candidate.get(spec.id)) if value is not None)), spec.id)
        for spec in specs if spec.id in candidate]


def _series(load_series: Any, warmup_s: float) -> dict[str, tuple[float, ...]]:
    """The per-second columns after the warm-up (``t_s`` is each interval's end)."""
    if load_series is None or getattr(load_series, "empty", True) or "t_s" not in load_series:
        return {}
    kept = load_series[load_series["t_s"] - 1.0 >= warmup_s - 0.25]
    return {str(name): tuple(float(v) for v in kept[name]) for name in kept.columns if name != "t_s"}


def _cpus(target: Target, host: str) -> int | None:
    try:
        result = target.run(host, ["nproc"], timeout_s=10)
        return int(result.stdout.strip()) if result.ok else None
    except (TunelabError, ValueError):
        return None


def _sources(target: Target, load: Load) -> list[Any]:
    try:
        return list(target.counter_sources(CounterRequest(service=getattr(load, "service", None))))
    except TunelabError:
        return []


def pilot_window(target: Target, load: Load, profile: str, settings: Mapping[str, Any], warmup_s: float,
                 pilot_s: float) -> PilotWindow:
    """One run of ``load`` for ``warmup_s + pilot_s`` with nothing applied, its counters read around the
    ``pilot_s`` after the warm-up and its own CPU time measured by :func:`timed_argv`."""
    import dataclasses

    settings = {**settings, **(load.prepare(target, settings) or {})}
    argv = load.command(settings, warmup_s + pilot_s, target.address("server"))
    total = warmup_s + pilot_s
    with CounterWindow(_sources(target, load), warmup_s, pilot_s) as window:
        result = target.run(load.runs_on, timed_argv(argv), timeout_s=total + max(10.0, 0.5 * total))
    cpu_s, stderr = children_cpu_s(result.stderr)
    parsed = load.parse(dataclasses.replace(result, argv=tuple(argv), stderr=stderr), settings, warmup_s)
    problems = (parsed.reason,) if parsed.reason else ()
    return PilotWindow(profile, pilot_s, window.record, dict(parsed.metrics), _series(parsed.series, warmup_s),
                       cpu_s, _cpus(target, load.runs_on), result.duration_s, str(parsed.status), problems)


def run_pilot(target: Target, load: Load, profiles: Mapping[str, Mapping[str, Any]], specs: Sequence[Any],
              baseline: Mapping[str, Any], candidate: Mapping[str, Any], warmup_s: float,
              pilot_s: float) -> PilotReport:
    """The pilot of every profile (module docstring) for the bound knobs ``specs`` (``id``, ``knob``, ``host``,
    ``device``): each changed knob's value read now (never written), one :func:`pilot_window` per profile, and
    each knob's :func:`binding` in it. A target that cannot run commands (the simulator, a dry run) is noted."""
    if "run" in getattr(target, "cannot", {}):
        return PilotReport((), {}, note=f"pilot: not measured on this target ({target.name}: it runs no load)")
    changed = [spec for spec in specs if spec.id in candidate]
    current = {spec.id: spec.knob.to_text(spec.knob.read(target, spec.host, device=(
        target.resolve_device(spec.device) if spec.device else None))) for spec in changed}
    changes = changes_of(changed, baseline, candidate)
    windows, bindings = [], {}
    for profile, settings in profiles.items():
        window = pilot_window(target, load, profile, settings, warmup_s, pilot_s)
        windows.append(window)
        bindings[profile] = tuple(binding(change, current[change.label],
                                          change.knob.to_text(candidate[change.label]), window.record)
                                  for change in changes)
    return PilotReport(tuple(windows), bindings)
