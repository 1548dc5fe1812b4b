"""The knob catalogue: every kernel setting tunelab knows, as data.

Sources: all 27 parameters of Gembala et al. Table 2 (seed 000), the DNS-server knobs of "A Data
Driven Approach to TCP Tuning" (seed 001) and the disk-I/O knobs of IOPerf (seed 002), plus a few
common companions. Ranges are the kernel's own limits where it has them (``proc_dointvec_minmax``
bounds, ``u8`` fields, socket-buffer minimums); where the kernel only bounds by the C type, the
type's limit is used. Devices may cap further (``nr_requests``, ``max_sectors_kb``, ``mtu``).

Scope follows the kernel: ``net.core.somaxconn``, ``net.ipv4.*`` (except the memory-pressure
triplets ``tcp_mem``/``udp_mem``) and ``link.*`` are per network namespace; the other
``net.core.*`` knobs, ``vm.*``, ``fs.*``, ``kernel.*`` and ``block.*`` are host-global. Recent
kernels (seen on 6.18) also show ``net.core.{r,w}mem_{default,max}``, ``optmem_max`` and
``tstamp_allow_data`` inside a namespace; they stay ``"host"`` here, which is the safe side on
every kernel (a write needs ``allow_host_global``).

To add a knob, add one row to the table below, and its mechanism to :mod:`tunelab.knobs.mechanisms`.
"""
from __future__ import annotations

import difflib
from typing import Any

from tunelab.errors import KnobError
from tunelab.knobs.base import Knob
from tunelab.knobs.mechanisms import mechanism_of

INT_MAX = 2**31 - 1
UINT_MAX = 2**32 - 1
LONG_MAX = 2**63 - 1
#: smallest buffers the kernel accepts (SOCK_MIN_RCVBUF / SOCK_MIN_SNDBUF on 64-bit)
SOCK_MIN_RCVBUF = 2304
SOCK_MIN_SNDBUF = 4608

CONGESTION_CONTROLS = ("reno", "cubic", "bbr", "bic", "cdg", "dctcp", "highspeed", "htcp", "hybla", "illinois",
                       "lp", "nv", "scalable", "vegas", "veno", "westwood", "yeah")
QDISCS = ("pfifo_fast", "fq", "fq_codel", "fq_pie", "cake", "sfq", "pie", "codel", "pfifo", "bfifo")
BLOCK_SCHEDULERS = ("none", "mq-deadline", "bfq", "kyber")

#: net.* sysctls that are per network namespace although their prefix suggests otherwise, and
#: vice versa: the exceptions to the prefix rule in :func:`scope_of`.
NETNS_NET_CORE = frozenset({"net.core.somaxconn"})
HOST_NET_IPV4 = frozenset({"net.ipv4.tcp_mem", "net.ipv4.udp_mem"})


def scope_of(name: str, family: str) -> str:
    """``"netns"`` if the setting is per network namespace, else ``"host"``.

    >>> scope_of("net.ipv4.tcp_mem", "sysctl"), scope_of("net.ipv4.tcp_rmem", "sysctl")
    ('host', 'netns')
    """
    if family == "link":
        return "netns"
    if family != "sysctl":
        return "host"
    if name in NETNS_NET_CORE:
        return "netns"
    if name in HOST_NET_IPV4:
        return "host"
    if name.startswith(("net.ipv4.", "net.ipv6.")):
        return "netns"
    return "host"


def _int(lo: int | None, hi: int | None) -> dict[str, Any]:
    return {"type": "int", "minimum": lo, "maximum": hi}


def _bool() -> dict[str, Any]:
    return {"type": "bool"}


def _enum(*choices: str) -> dict[str, Any]:
    return {"type": "enum", "choices": tuple(choices)}


def _triplet(lo: int, hi: int, names: tuple[str, str, str]) -> dict[str, Any]:
    return {"type": "triplet", "minimum": lo, "maximum": hi, "ordered": True, "element_names": names}


def _pair(lo: int, hi: int, names: tuple[str, str]) -> dict[str, Any]:
    return {"type": "pair", "minimum": lo, "maximum": hi, "ordered": True, "element_names": names}


_MEM3 = ("min", "default", "max")
_PRESSURE3 = ("low", "pressure", "high")

# (name, family, value spec, unit, requires_restart, description)
_TABLE: list[tuple[str, str, dict[str, Any], str, bool, str]] = [
    # ---- net.core -------------------------------------------------------------------------------
    ("net.core.somaxconn", "sysctl", _int(0, INT_MAX), "connections", True,
     "Upper limit of a listening socket's accept backlog; read when the server calls listen()."),
    ("net.core.rmem_max", "sysctl", _int(SOCK_MIN_RCVBUF, INT_MAX), "bytes", False,
     "Largest receive buffer a socket may ask for with SO_RCVBUF."),
    ("net.core.wmem_max", "sysctl", _int(SOCK_MIN_SNDBUF, INT_MAX), "bytes", False,
     "Largest send buffer a socket may ask for with SO_SNDBUF."),
    ("net.core.rmem_default", "sysctl", _int(SOCK_MIN_RCVBUF, INT_MAX), "bytes", False,
     "Default receive buffer of non-TCP sockets."),
    ("net.core.wmem_default", "sysctl", _int(SOCK_MIN_SNDBUF, INT_MAX), "bytes", False,
     "Default send buffer of non-TCP sockets."),
    ("net.core.optmem_max", "sysctl", _int(0, INT_MAX), "bytes", False,
     "Largest ancillary buffer (socket options, cmsg) per socket."),
    ("net.core.netdev_max_backlog", "sysctl", _int(0, INT_MAX), "packets", False,
     "Packets queued per CPU on input when interfaces receive faster than the kernel processes."),
    ("net.core.netdev_budget", "sysctl", _int(0, INT_MAX), "packets", False,
     "Packets processed in one NET_RX softirq cycle across all interfaces."),
    ("net.core.netdev_budget_usecs", "sysctl", _int(0, INT_MAX), "us", False,
     "Time limit of one NET_RX softirq cycle."),
    ("net.core.dev_weight", "sysctl", _int(1, INT_MAX), "packets", False,
     "Packets one interface may process per NAPI poll."),
    ("net.core.dev_weight_tx_bias", "sysctl", _int(1, INT_MAX), "", False,
     "Multiplier of dev_weight for the transmit softirq."),
    ("net.core.dev_weight_rx_bias", "sysctl", _int(1, INT_MAX), "", False,
     "Multiplier of dev_weight for the receive softirq."),
    ("net.core.bpf_jit_enable", "sysctl", _int(0, 2), "", False,
     "BPF JIT compiler: 0 off, 1 on, 2 on with debug output (forced to 1 with BPF_JIT_ALWAYS_ON)."),
    ("net.core.rps_sock_flow_entries", "sysctl", _int(0, 2**29), "entries", False,
     "Size of the global RFS socket flow table (0 disables RFS); rounded up to a power of two."),
    ("net.core.busy_read", "sysctl", _int(0, INT_MAX), "us", False,
     "Busy-poll time for blocking reads on a device queue (0 off)."),
    ("net.core.busy_poll", "sysctl", _int(0, INT_MAX), "us", False,
     "Busy-poll time for poll() and select() (0 off)."),
    ("net.core.tstamp_allow_data", "sysctl", _bool(), "", False,
     "Whether transmit timestamps may loop back the packet payload."),
    ("net.core.default_qdisc", "sysctl", _enum(*QDISCS), "", False,
     "Queueing discipline given to newly created network devices."),
    # ---- net.ipv4: memory -----------------------------------------------------------------------
    ("net.ipv4.tcp_mem", "sysctl", _triplet(1, LONG_MAX, _PRESSURE3), "pages", False,
     "Host-wide TCP memory thresholds: below low no pressure, above pressure moderate, high is the cap."),
    ("net.ipv4.udp_mem", "sysctl", _triplet(1, LONG_MAX, _PRESSURE3), "pages", False,
     "Host-wide UDP memory thresholds (low, pressure, high)."),
    ("net.ipv4.tcp_rmem", "sysctl", _triplet(1, INT_MAX, _MEM3), "bytes", False,
     "TCP receive buffer per socket: minimum, initial and auto-tuning maximum."),
    ("net.ipv4.tcp_wmem", "sysctl", _triplet(1, INT_MAX, _MEM3), "bytes", False,
     "TCP send buffer per socket: minimum, initial and auto-tuning maximum."),
    ("net.ipv4.tcp_moderate_rcvbuf", "sysctl", _bool(), "", False,
     "Auto-tune the receive buffer within tcp_rmem."),
    ("net.ipv4.tcp_notsent_lowat", "sysctl", _int(0, UINT_MAX), "bytes", False,
     "Unsent bytes in the write queue above which the socket is not writable."),
    ("net.ipv4.tcp_limit_output_bytes", "sysctl", _int(0, INT_MAX), "bytes", False,
     "Bytes per socket allowed in qdisc/device queues (TCP small queues)."),
    ("net.ipv4.tcp_adv_win_scale", "sysctl", _int(-31, 31), "", False,
     "Share of the receive buffer counted as window versus application overhead."),
    # ---- net.ipv4: TCP behaviour ----------------------------------------------------------------
    ("net.ipv4.tcp_no_metrics_save", "sysctl", _bool(), "", False,
     "Do not cache connection metrics (ssthresh, RTT) when a connection closes."),
    ("net.ipv4.tcp_timestamps", "sysctl", _int(0, 2), "", False,
     "RFC 1323 timestamps: 0 off, 1 on with a random offset per connection, 2 on without offset."),
    ("net.ipv4.tcp_window_scaling", "sysctl", _bool(), "", False,
     "RFC 1323 window scaling (windows above 64 KiB)."),
    ("net.ipv4.tcp_sack", "sysctl", _bool(), "", False,
     "Selective acknowledgements (RFC 2018)."),
    ("net.ipv4.tcp_tw_reuse", "sysctl", _int(0, 2), "", False,
     "Reuse TIME-WAIT sockets for new outgoing connections: 0 off, 1 on, 2 loopback only."),
    ("net.ipv4.tcp_keepalive_time", "sysctl", _int(1, 32767), "s", False,
     "Idle time before the first keepalive probe."),
    ("net.ipv4.tcp_keepalive_probes", "sysctl", _int(0, 255), "probes", False,
     "Unanswered keepalive probes before the connection is dropped."),
    ("net.ipv4.tcp_keepalive_intvl", "sysctl", _int(1, 32767), "s", False,
     "Interval between keepalive probes."),
    ("net.ipv4.tcp_fin_timeout", "sysctl", _int(1, INT_MAX // 1000), "s", False,
     "Time an orphaned connection stays in FIN-WAIT-2."),
    ("net.ipv4.tcp_max_tw_buckets", "sysctl", _int(0, INT_MAX), "sockets", False,
     "Largest number of TIME-WAIT sockets held at once."),
    ("net.ipv4.tcp_abort_on_overflow", "sysctl", _bool(), "", False,
     "Reset new connections when the accept queue is full instead of dropping the final ACK."),
    ("net.ipv4.tcp_max_syn_backlog", "sysctl", _int(1, INT_MAX), "connections", True,
     "Half-open (SYN_RECV) connections remembered per listener; sized when the server calls listen()."),
    ("net.ipv4.tcp_syncookies", "sysctl", _int(0, 2), "", False,
     "SYN cookies: 0 off, 1 when the SYN queue overflows, 2 always."),
    ("net.ipv4.tcp_synack_retries", "sysctl", _int(0, 255), "retries", False,
     "SYN-ACK retransmissions for a passive connection."),
    ("net.ipv4.tcp_syn_retries", "sysctl", _int(1, 127), "retries", False,
     "SYN retransmissions for an active connection."),
    ("net.ipv4.tcp_retries2", "sysctl", _int(0, 255), "retries", False,
     "Retransmissions before an established connection is given up."),
    ("net.ipv4.tcp_congestion_control", "sysctl", _enum(*CONGESTION_CONTROLS), "", False,
     "Congestion control of new connections; the module must be loaded "
     "(see net.ipv4.tcp_available_congestion_control)."),
    ("net.ipv4.tcp_slow_start_after_idle", "sysctl", _bool(), "", False,
     "Shrink the congestion window back to the initial window after an idle period."),
    ("net.ipv4.tcp_tso_win_divisor", "sysctl", _int(0, 255), "", False,
     "Largest share (1/N) of the congestion window a single TSO frame may use."),
    ("net.ipv4.tcp_autocorking", "sysctl", _bool(), "", False,
     "Coalesce small writes while earlier packets wait in the qdisc or device."),
    ("net.ipv4.tcp_mtu_probing", "sysctl", _int(0, 2), "", False,
     "Packetization-layer path MTU discovery: 0 off, 1 after an ICMP black hole, 2 always."),
    ("net.ipv4.tcp_min_tso_segs", "sysctl", _int(1, 255), "segments", False,
     "Smallest number of segments per TSO frame."),
    ("net.ipv4.tcp_pacing_ss_ratio", "sysctl", _int(0, 1000), "%", False,
     "Pacing rate during slow start as a share of cwnd/RTT."),
    ("net.ipv4.tcp_pacing_ca_ratio", "sysctl", _int(0, 1000), "%", False,
     "Pacing rate during congestion avoidance as a share of cwnd/RTT."),
    ("net.ipv4.ip_early_demux", "sysctl", _bool(), "", False,
     "Look up the socket of incoming packets early in the receive path."),
    ("net.ipv4.ip_local_port_range", "sysctl", _pair(1, 65535, ("low", "high")), "port", False,
     "Range of local ports for outgoing connections."),
    ("net.ipv4.conf.all.rp_filter", "sysctl", _int(0, 2), "", False,
     "Reverse-path source validation: 0 off, 1 strict, 2 loose."),
    # ---- vm, fs, kernel -------------------------------------------------------------------------
    ("vm.swappiness", "sysctl", _int(0, 200), "", False,
     "Preference for swapping anonymous memory over dropping page cache (0-200)."),
    ("vm.dirty_ratio", "sysctl", _int(0, 100), "%", False,
     "Share of available memory dirty before writers are throttled to write back themselves."),
    ("vm.dirty_background_ratio", "sysctl", _int(0, 100), "%", False,
     "Share of available memory dirty before background writeback starts."),
    ("vm.dirty_expire_centisecs", "sysctl", _int(0, INT_MAX), "cs", False,
     "Age after which dirty data is written back."),
    ("vm.dirty_writeback_centisecs", "sysctl", _int(0, INT_MAX), "cs", False,
     "Interval of the writeback threads (0 disables periodic writeback)."),
    ("vm.vfs_cache_pressure", "sysctl", _int(0, INT_MAX), "", False,
     "Tendency to reclaim dentry and inode caches relative to page cache (100 = fair)."),
    ("vm.min_free_kbytes", "sysctl", _int(0, INT_MAX), "KiB", False,
     "Memory kept free for atomic allocations."),
    ("fs.file-max", "sysctl", _int(0, LONG_MAX), "files", False,
     "Largest number of open files the kernel allocates host-wide."),
    ("kernel.sched_autogroup_enabled", "sysctl", _bool(), "", False,
     "Group tasks by session so the scheduler shares CPU fairly between sessions."),
    ("kernel.numa_balancing", "sysctl", _int(0, 3), "", False,
     "Automatic NUMA balancing: 0 off, 1 normal, 2 memory tiering, 3 both."),
    ("kernel.timer_migration", "sysctl", _bool(), "", False,
     "Let timers migrate away from idle CPUs."),
    # ---- block device queues --------------------------------------------------------------------
    ("block.queue.scheduler", "block", _enum(*BLOCK_SCHEDULERS), "", False,
     "I/O scheduler of the device's request queue."),
    ("block.queue.read_ahead_kb", "block", _int(0, UINT_MAX), "KiB", False,
     "Read-ahead window for sequential reads."),
    ("block.queue.nr_requests", "block", _int(4, INT_MAX), "requests", False,
     "Requests the scheduler may queue per hardware queue (capped by the device's queue depth)."),
    ("block.queue.rotational", "block", _bool(), "", False,
     "Whether the device is treated as a rotating disk."),
    ("block.queue.max_sectors_kb", "block", _int(4, UINT_MAX), "KiB", False,
     "Largest request size (capped by max_hw_sectors_kb)."),
    ("block.queue.nomerges", "block", _int(0, 2), "", False,
     "Request merging: 0 all, 1 simple only, 2 none."),
    ("block.queue.rq_affinity", "block", _int(0, 2), "", False,
     "Complete requests on the submitting CPU: 0 no, 1 same group, 2 same CPU."),
    ("block.queue.add_random", "block", _bool(), "", False,
     "Whether I/O timings feed the entropy pool."),
    # ---- network links --------------------------------------------------------------------------
    ("link.mtu", "link", _int(68, 65536), "bytes", False,
     "Maximum transmission unit of the interface (the device may allow less)."),
    ("link.txqueuelen", "link", _int(0, UINT_MAX), "packets", False,
     "Length of the interface's transmit queue."),
]


def build_catalogue(table: list[tuple[str, str, dict[str, Any], str, bool, str]] = _TABLE) -> dict[str, Knob]:
    """Turn the table rows into :class:`Knob` objects keyed by name."""
    knobs: dict[str, Knob] = {}
    for name, family, spec, unit, restart, description in table:
        if name in knobs:
            raise ValueError(f"knob {name!r} appears twice in the catalogue")
        knobs[name] = Knob(name=name, family=family, unit=unit, requires_restart=restart, description=description,
                           scope=scope_of(name, family), mechanism=mechanism_of(name), **spec)
    return knobs


CATALOGUE: dict[str, Knob] = build_catalogue()


def catalogue() -> dict[str, Knob]:
    """Every known knob, keyed by name (a copy; the catalogue itself is not changed)."""
    return dict(CATALOGUE)


def get_knob(name: str) -> Knob:
    """The catalogue knob called ``name``.

    Raises
    ------
    KnobError
        If ``name`` is unknown; the message suggests close names.

    >>> get_knob("net.core.somaxcon")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tunelab.errors.KnobError: unknown knob 'net.core.somaxcon'; did you mean net.core.somaxconn? see ...
    """
    try:
        return CATALOGUE[name]
    except (KeyError, TypeError):
        pass
    close = suggest(str(name))
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise KnobError(f"unknown knob {name!r}; {hint}see `tunelab knobs list`")


def suggest(name: str, limit: int = 3) -> list[str]:
    """Catalogue names close to ``name``: same last component, or a near spelling of the full name
    or of its last component.

    >>> suggest("tcp_abort_on_overflow"), suggest("net.core.somaxcon")
    (['net.ipv4.tcp_abort_on_overflow'], ['net.core.somaxconn'])
    """
    leaves: dict[str, list[str]] = {}
    for known in CATALOGUE:
        leaves.setdefault(known.rsplit(".", 1)[-1], []).append(known)
    leaf = name.rsplit(".", 1)[-1]
    found = list(leaves.get(leaf, []))
    found += difflib.get_close_matches(name, list(CATALOGUE), n=limit, cutoff=0.85)
    for close_leaf in difflib.get_close_matches(leaf, list(leaves), n=limit, cutoff=0.75):
        found += leaves[close_leaf]
    return list(dict.fromkeys(found))[:limit]

