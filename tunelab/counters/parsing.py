"""Parse the kernel's counter files into flat ``{"Group.Name": value}`` mappings (pure functions).

* ``/proc/net/netstat`` and ``/proc/net/snmp``: pairs of lines, ``Group: Name1 Name2 ...`` then
  ``Group: v1 v2 ...`` (:func:`parse_net_table`; a concatenation of both files parses too);
* ``/proc/net/snmp6``: one ``Ip6InReceives  123`` per line, the group is the name's prefix
  (:func:`parse_snmp6`);
* ``/sys/block/DEV/stat``: one line of numbers in the kernel's documented order
  (Documentation/block/stat.rst, :data:`BLOCK_FIELDS`; older kernels print fewer, :func:`parse_block_stat`);
* ``/proc/PID/stat`` and ``/proc/PID/status``: one process's CPU ticks, faults and context switches
  (:func:`parse_proc_stat`, :func:`parse_proc_status`);
* a cgroup v2's ``cpu.stat`` and ``memory.stat``: the CPU time and major faults of every process in it,
  as the same ``proc.*`` counters (:func:`parse_cgroup_stat`).

A counter a kernel does not print is simply absent. Values that are levels rather than counts
(:data:`GAUGES`, e.g. ``Tcp.CurrEstab``) are left out: their difference over a window means nothing.
"""
from __future__ import annotations

import re

#: values of /proc/net/snmp that are settings or levels, not counts of events
GAUGES = frozenset({"Ip.Forwarding", "Ip.DefaultTTL", "Tcp.RtoAlgorithm", "Tcp.RtoMin", "Tcp.RtoMax", "Tcp.MaxConn",
                    "Tcp.CurrEstab"})
#: the fields of /sys/block/DEV/stat in order (Documentation/block/stat.rst); ``in_flight`` is a level, left out
BLOCK_FIELDS = ("read_ios", "read_merges", "read_sectors", "read_ticks_ms", "write_ios", "write_merges",
                "write_sectors", "write_ticks_ms", "in_flight", "io_ticks_ms", "time_in_queue_ms", "discard_ios",
                "discard_merges", "discard_sectors", "discard_ticks_ms", "flush_ios", "flush_ticks_ms")
_SNMP6 = re.compile(r"^(Ip6|Icmp6|UdpLite6|Udp6)(\w+)$")
#: fields of /proc/PID/stat after the state (proc(5)'s field N is index N - 4): minflt 10, cminflt 11, majflt 12,
#: cmajflt 13, utime 14, stime 15, cutime 16, cstime 17
_STAT_INDEX = {"minflt": 6, "cminflt": 7, "majflt": 8, "cmajflt": 9, "utime": 10, "stime": 11, "cutime": 12,
               "cstime": 13}


def _number(text: str) -> float | None:
    try:
        return float(int(text))
    except ValueError:
        return None


def parse_net_table(text: str) -> dict[str, float]:
    """``/proc/net/netstat`` or ``/proc/net/snmp`` (or both, concatenated) as ``{"Group.Name": value}``.

    >>> parse_net_table("TcpExt: ListenOverflows ListenDrops\\nTcpExt: 3 5\\nTcp: RtoMin ActiveOpens\\nTcp: 200 7\\n")
    {'TcpExt.ListenOverflows': 3.0, 'TcpExt.ListenDrops': 5.0, 'Tcp.ActiveOpens': 7.0}
    """
    out: dict[str, float] = {}
    lines = [line.split() for line in text.splitlines() if line.strip()]
    for header, values in zip(lines, lines[1:]):
        names_line = header[0].endswith(":") and len(header) > 1 and _number(header[1]) is None
        if not names_line or values[0] != header[0]:
            continue
        prefix = header[0][:-1] + "."
        for name, value in zip(header[1:], values[1:]):
            if value.lstrip("-").isdigit():
                out[prefix + name] = float(value)
    for gauge in GAUGES & out.keys():
        del out[gauge]
    return out


def parse_snmp6(text: str) -> dict[str, float]:
    """``/proc/net/snmp6`` as ``{"Group.Name": value}`` (group ``Ip6``, ``Icmp6``, ``Udp6`` or ``UdpLite6``).

    >>> parse_snmp6("Ip6InReceives  12\\nUdp6RcvbufErrors 0\\nIcmp6InType133 4\\n")
    {'Ip6.InReceives': 12.0, 'Udp6.RcvbufErrors': 0.0, 'Icmp6.InType133': 4.0}
    """
    out: dict[str, float] = {}
    for line in text.splitlines():
        parts = line.split()
        match = _SNMP6.match(parts[0]) if len(parts) == 2 else None
        number = _number(parts[1]) if match else None
        if match and number is not None:
            out[f"{match.group(1)}.{match.group(2)}"] = number
    return out


def parse_block_stat(text: str) -> dict[str, float]:
    """``/sys/block/DEV/stat`` as ``{"block.FIELD": value}`` (:data:`BLOCK_FIELDS`, without ``in_flight``).

    >>> parse_block_stat("  10 0 80 4 2 0 16 1 0 5 5")["block.read_sectors"]
    80.0
    """
    values = [_number(field) for field in text.split()]
    return {f"block.{name}": value for name, value in zip(BLOCK_FIELDS, values)
            if value is not None and name != "in_flight"}


def parse_proc_stat(text: str, ticks_per_s: float) -> dict[str, float]:
    """One process's ``/proc/PID/stat``: CPU seconds (its own, and its reaped children's as ``child_*``)
    and page faults. The command name may hold spaces and parentheses, so fields are counted after
    the last ``)``.

    >>> parse_proc_stat("42 (a b) S 1 2 3 4 5 6 7 0 3 0 150 50 20 10 20 0", 100)
    {'cpu_s': 2.0, 'child_cpu_s': 0.3, 'minor_faults': 7.0, 'major_faults': 3.0}
    """
    fields = text.rsplit(")", 1)[-1].split()[1:]
    if len(fields) <= _STAT_INDEX["cstime"]:
        return {}
    value = {name: float(fields[index]) for name, index in _STAT_INDEX.items()}
    return {"cpu_s": (value["utime"] + value["stime"]) / ticks_per_s,
            "child_cpu_s": (value["cutime"] + value["cstime"]) / ticks_per_s,
            "minor_faults": value["minflt"] + value["cminflt"], "major_faults": value["majflt"] + value["cmajflt"]}


def parse_proc_status(text: str) -> dict[str, float]:
    """Context switches from a ``/proc/PID/task/TID/status``: they count one thread only (unlike the CPU
    time and faults of ``/proc/PID/stat``, summed over the process's threads), so each thread is read.

    >>> parse_proc_status("Name:\\tnsd\\nvoluntary_ctxt_switches:\\t12\\nnonvoluntary_ctxt_switches:\\t3\\n")
    {'voluntary_switches': 12.0, 'involuntary_switches': 3.0}
    """
    names = {"voluntary_ctxt_switches": "voluntary_switches", "nonvoluntary_ctxt_switches": "involuntary_switches"}
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in names and _number(value.strip()) is not None:
            out[names[key]] = float(value.strip())
    return out


#: cgroup v2 ``cpu.stat``/``memory.stat`` keys -> (counter, factor to its unit)
CGROUP_KEYS = {"usage_usec": ("proc.cpu_s", 1e-6), "pgmajfault": ("proc.major_faults", 1.0)}


def parse_cgroup_stat(text: str) -> dict[str, float]:
    """A cgroup v2 ``cpu.stat`` or ``memory.stat`` as the server's ``proc.*`` counters (:data:`CGROUP_KEYS`).

    >>> parse_cgroup_stat("usage_usec 2500000\\nuser_usec 2000000\\n")
    {'proc.cpu_s': 2.5}
    """
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        number = _number(value.strip()) if key in CGROUP_KEYS else None
        if number is not None:
            name, factor = CGROUP_KEYS[key]
            out[name] = number * factor
    return out


def tail_sections(text: str) -> dict[str, str]:
    """The files of ``tail -v -n +1 -- FILE...`` output, ``{path: text}`` (the one remote command that
    reads a snapshot's files on an ssh host; a missing file prints no section).

    >>> tail_sections("==> /a <==\\nx 1\\n\\n==> /b <==\\ny\\n")
    {'/a': 'x 1\\n', '/b': 'y\\n'}
    """
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        match = re.fullmatch(r"==> (.+) <==", line)
        if match:
            current = sections.setdefault(match.group(1), [])
        elif current is not None:
            current.append(line)
    return {path: "".join(f"{line}\n" for line in lines).rstrip("\n") + "\n" for path, lines in sections.items()}
