"""How each catalogue knob acts: what it limits, when it can bind, which counters show it binding, and which
traffic exercises it.

A knob changes a measurement only through its mechanism: ``net.core.somaxconn`` caps the accept queue of TCP
listeners whose own backlog asks for more, so it can matter only under TCP load, only on the host that listens,
only while connections arrive faster than the server accepts them (``TcpExt.ListenOverflows`` and
``ListenDrops`` then move), and only between values on both sides of the backlog the server asks for. The
pre-flight (:mod:`tunelab.preflight`) reads this table before the first trial: a study whose load can never
exercise a knob's mechanism is named, with the reason, before anything is applied.

Fields:

- ``limits``: what the knob limits or sets, in one phrase;
- ``binds_when``: when that limit can change what a load measures;
- ``counters``: the kernel counters (docs/counters.md names: ``TcpExt.ListenOverflows``) that move when it binds;
- ``needs``: the traffic (:class:`tunelab.model.Traffic`) one of which the load must carry; empty: any load;
- ``role``: which end of that traffic it acts on (:class:`tunelab.model.Role`);
- ``server_limit``: the name of a rule in :data:`tunelab.preflight.limits.SERVER_LIMITS` that reads the service's
  own setting capping the knob (the listen backlog the server asked for), or None.

To describe a knob's mechanism, add one row to :data:`MECHANISMS` (and nothing else).

Examples
--------
>>> m = mechanism_of("net.core.somaxconn")
>>> sorted(t.value for t in m.needs), m.role.value, m.server_limit
(['tcp'], 'listener', 'listen_backlog')
>>> mechanism_of("net.ipv4.tcp_fin_timeout").counters
('TcpExt.TW', 'TcpExt.TCPTimeWaitOverflow')
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tunelab.model import Role, Traffic

TCP, UDP, READ, WRITE = Traffic.TCP, Traffic.UDP, Traffic.DISK_READ, Traffic.DISK_WRITE
BUFFERED_READ, BUFFERED_WRITE = Traffic.BUFFERED_READ, Traffic.BUFFERED_WRITE
NET = frozenset({TCP, UDP})
DISK = frozenset({READ, WRITE})


@dataclass(frozen=True)
class Mechanism:
    """How one knob acts (the module docstring says what each field means)."""

    limits: str
    binds_when: str
    counters: tuple[str, ...] = ()
    needs: frozenset[Traffic] = field(default_factory=frozenset)
    role: Role = Role.EITHER
    server_limit: str | None = None

    def exercised_by(self, traffic: frozenset[Traffic]) -> bool:
        """Whether a load carrying ``traffic`` can exercise this mechanism (True when it needs nothing)."""
        return not self.needs or bool(self.needs & traffic)

    def needs_text(self) -> str:
        """``'TCP'``, ``'TCP or UDP'``, ``'disk read or disk write'``: the traffic it needs, for a message."""
        words = sorted(t.value.upper() if t in NET else t.value for t in self.needs)
        return " or ".join(words) if words else "any load"

    def to_json(self) -> dict[str, object]:
        return {"limits": self.limits, "binds_when": self.binds_when, "counters": list(self.counters),
                "needs": sorted(t.value for t in self.needs), "role": self.role.value, "server_limit": self.server_limit}


def _m(limits: str, binds_when: str, counters: tuple[str, ...] = (), needs: frozenset[Traffic] = frozenset(),
       role: Role = Role.EITHER, server_limit: str | None = None) -> Mechanism:
    return Mechanism(limits, binds_when, counters, needs, role, server_limit)


_TCP = frozenset({TCP})
_UDP = frozenset({UDP})
_LISTENER, _CONNECTOR = Role.LISTENER, Role.CONNECTOR
_ACCEPT = ("TcpExt.ListenOverflows", "TcpExt.ListenDrops")

#: knob name -> its mechanism; knobs without a row have no mechanism tunelab can check
MECHANISMS: dict[str, Mechanism] = {
    # ---- accepting connections ------------------------------------------------------------------
    "net.core.somaxconn": _m(
        "the accept queue of each TCP listener: min(the backlog the server passes to listen(), somaxconn)",
        "TCP connections arrive faster than the server accepts them, and the server asks for a backlog above "
        "the smaller level", _ACCEPT, _TCP, _LISTENER, "listen_backlog"),
    "net.ipv4.tcp_max_syn_backlog": _m(
        "half-open (SYN_RECV) connections per listener", "a SYN flood or many new TCP connections per second "
        "with syncookies off", ("TcpExt.ListenDrops", "TcpExt.TCPReqQFullDrop", "TcpExt.TCPReqQFullDoCookies"),
        _TCP, _LISTENER),
    "net.ipv4.tcp_abort_on_overflow": _m(
        "what a full accept queue does to a new connection: reset (1) or drop the final ACK (0)",
        "the accept queue overflows", ("TcpExt.ListenOverflows", "TcpExt.TCPAbortOnOverflow"), _TCP, _LISTENER),
    "net.ipv4.tcp_syncookies": _m(
        "SYN cookies when the SYN queue overflows", "the SYN queue of a listener fills",
        ("TcpExt.SyncookiesSent", "TcpExt.SyncookiesRecv", "TcpExt.SyncookiesFailed", "TcpExt.TCPReqQFullDoCookies"),
        _TCP, _LISTENER),
    "net.ipv4.tcp_synack_retries": _m(
        "SYN-ACK retransmissions of a passive connection", "SYN-ACKs or final ACKs are lost",
        ("Tcp.RetransSegs", "TcpExt.TCPTimeouts"), _TCP, _LISTENER),
    # ---- opening connections --------------------------------------------------------------------
    "net.ipv4.tcp_syn_retries": _m(
        "SYN retransmissions of an active connection", "SYNs are lost or dropped by a full listener",
        ("Tcp.AttemptFails", "TcpExt.TCPTimeouts"), _TCP, _CONNECTOR),
    "net.ipv4.ip_local_port_range": _m(
        "local ports for outgoing connections", "the load generator opens connections faster than TIME-WAIT "
        "frees ports", ("Tcp.AttemptFails",), _TCP, _CONNECTOR),
    "net.ipv4.tcp_tw_reuse": _m(
        "reuse of TIME-WAIT ports by new outgoing connections", "the connecting host runs short of local ports",
        ("TcpExt.TW", "TcpExt.TWRecycled"), _TCP, _CONNECTOR),
    # ---- connection lifetime --------------------------------------------------------------------
    "net.ipv4.tcp_fin_timeout": _m(
        "how long an orphaned connection stays in FIN-WAIT-2", "many connections close and their peers do not",
        ("TcpExt.TW", "TcpExt.TCPTimeWaitOverflow"), _TCP),
    "net.ipv4.tcp_max_tw_buckets": _m(
        "TIME-WAIT sockets held at once", "connections close faster than TIME-WAIT expires",
        ("TcpExt.TCPTimeWaitOverflow",), _TCP),
    "net.ipv4.tcp_keepalive_time": _m(
        "idle time before keepalive probes", "connections stay idle longer than the setting", (), _TCP),
    "net.ipv4.tcp_keepalive_probes": _m(
        "unanswered keepalive probes before a drop", "idle connections' peers vanish", (), _TCP),
    "net.ipv4.tcp_keepalive_intvl": _m(
        "interval of keepalive probes", "idle connections' peers vanish", (), _TCP),
    "net.ipv4.tcp_retries2": _m(
        "retransmissions before an established connection is given up", "a path loses everything for seconds",
        ("TcpExt.TCPTimeouts",), _TCP),
    "net.ipv4.tcp_no_metrics_save": _m(
        "caching of a closed connection's ssthresh and RTT", "repeated connections between the same hosts", (), _TCP),
    # ---- TCP transfer ---------------------------------------------------------------------------
    "net.ipv4.tcp_rmem": _m(
        "TCP receive buffers (initial size and the auto-tuning maximum)", "transfers whose window the buffer "
        "limits (bandwidth x delay above the buffer)", ("TcpExt.TCPRcvQDrop", "TcpExt.PruneCalled",
                                                        "TcpExt.TCPRcvCollapsed"), _TCP),
    "net.ipv4.tcp_wmem": _m(
        "TCP send buffers (initial size and the auto-tuning maximum)", "transfers whose in-flight data the buffer "
        "limits", (), _TCP),
    "net.ipv4.tcp_mem": _m(
        "host-wide TCP memory before pressure", "all TCP sockets together hold more than the pressure threshold",
        ("TcpExt.TCPMemoryPressures", "TcpExt.TCPAbortOnMemory"), _TCP),
    "net.ipv4.tcp_moderate_rcvbuf": _m(
        "receive-buffer auto-tuning", "transfers long enough for the window to grow", (), _TCP),
    "net.ipv4.tcp_notsent_lowat": _m(
        "unsent bytes before a socket stops being writable", "a sender writes faster than the network drains",
        (), _TCP),
    "net.ipv4.tcp_limit_output_bytes": _m(
        "bytes per socket in the qdisc and device queues", "bulk senders fill the queues", (), _TCP),
    "net.ipv4.tcp_adv_win_scale": _m(
        "the share of the receive buffer advertised as window", "transfers limited by the receive window",
        ("TcpExt.TCPRcvQDrop",), _TCP),
    "net.ipv4.tcp_timestamps": _m(
        "RFC 1323 timestamps (RTT samples, PAWS; 12 bytes per segment)", "any TCP connection", (), _TCP),
    "net.ipv4.tcp_window_scaling": _m(
        "windows above 64 KiB", "bandwidth x delay above 64 KiB", (), _TCP),
    "net.ipv4.tcp_sack": _m(
        "selective acknowledgements", "segments are lost", ("TcpExt.TCPSACKRecovery", "Tcp.RetransSegs"), _TCP),
    "net.ipv4.tcp_congestion_control": _m(
        "the congestion window's growth and response to loss", "transfers long enough to leave slow start or "
        "that meet loss", ("Tcp.RetransSegs",), _TCP),
    "net.ipv4.tcp_slow_start_after_idle": _m(
        "the congestion window after an idle period", "connections idle between bursts", (), _TCP),
    "net.ipv4.tcp_tso_win_divisor": _m(
        "the share of the window one TSO frame may take", "bulk TCP on a TSO-capable device", (), _TCP),
    "net.ipv4.tcp_autocorking": _m(
        "coalescing of small writes", "an application writes small pieces while earlier ones are queued",
        ("TcpExt.TCPAutoCorking",), _TCP),
    "net.ipv4.tcp_mtu_probing": _m(
        "packetization-layer path MTU discovery", "a path drops large segments without ICMP",
        ("TcpExt.TCPMTUPFail", "TcpExt.TCPMTUPSuccess"), _TCP),
    "net.ipv4.tcp_min_tso_segs": _m(
        "the smallest TSO frame", "bulk TCP on a TSO-capable device", (), _TCP),
    "net.ipv4.tcp_pacing_ss_ratio": _m(
        "the pacing rate in slow start", "paced connections (fq qdisc or BBR) in slow start", (), _TCP),
    "net.ipv4.tcp_pacing_ca_ratio": _m(
        "the pacing rate in congestion avoidance", "paced connections (fq qdisc or BBR)", (), _TCP),
    # ---- UDP ------------------------------------------------------------------------------------
    "net.ipv4.udp_mem": _m(
        "host-wide UDP memory before pressure", "all UDP sockets together queue more than the threshold",
        ("Udp.RcvbufErrors", "Udp.MemErrors"), _UDP),
    # ---- socket buffers -------------------------------------------------------------------------
    "net.core.rmem_max": _m(
        "the receive buffer a socket may ask for with SO_RCVBUF", "the server asks for a buffer above the smaller "
        "level (SO_RCVBUFFORCE and TCP auto-tuning ignore it) and its queue fills",
        ("Udp.RcvbufErrors", "TcpExt.TCPRcvQDrop"), NET, _LISTENER, "udp_rcvbuf"),
    "net.core.wmem_max": _m(
        "the send buffer a socket may ask for with SO_SNDBUF", "the server asks for a buffer above the smaller "
        "level and sends faster than the device drains", ("Udp.SndbufErrors",), NET, _LISTENER),
    "net.core.rmem_default": _m(
        "the receive buffer of sockets that do not set SO_RCVBUF (not TCP: tcp_rmem)", "the server's UDP "
        "socket keeps the default and its queue fills", ("Udp.RcvbufErrors",), _UDP, _LISTENER),
    "net.core.wmem_default": _m(
        "the send buffer of sockets that do not set SO_SNDBUF (not TCP: tcp_wmem)", "the server's UDP socket "
        "keeps the default and sends in bursts", ("Udp.SndbufErrors",), _UDP, _LISTENER),
    "net.core.optmem_max": _m(
        "ancillary data per socket", "the server uses large socket options or control messages", (), NET),
    # ---- packets, any transport -----------------------------------------------------------------
    "net.core.netdev_max_backlog": _m(
        "packets queued per CPU on input", "packets arrive faster than the softirq processes them", (), NET),
    "net.core.netdev_budget": _m(
        "packets per NET_RX softirq cycle", "receive processing is CPU-bound", ("TcpExt.TCPBacklogDrop",), NET),
    "net.core.netdev_budget_usecs": _m(
        "time per NET_RX softirq cycle", "receive processing is CPU-bound", (), NET),
    "net.core.dev_weight": _m(
        "packets per NAPI poll of one interface", "receive processing is CPU-bound", (), NET),
    "net.core.dev_weight_rx_bias": _m(
        "the receive softirq's share of dev_weight", "receive processing is CPU-bound", (), NET),
    "net.core.dev_weight_tx_bias": _m(
        "the transmit softirq's share of dev_weight", "transmit processing is CPU-bound", (), NET),
    "net.core.busy_read": _m(
        "busy polling of blocking reads", "sockets that block on reads (SO_BUSY_POLL-capable device)", (), NET),
    "net.core.busy_poll": _m(
        "busy polling in poll() and select()", "servers that wait in poll()/select() on a capable device", (), NET),
    "net.core.rps_sock_flow_entries": _m(
        "the RFS flow table", "RFS is configured on the receiving device", (), NET),
    "net.ipv4.ip_early_demux": _m(
        "early socket lookup of incoming packets", "many packets per socket", (), NET),
    "net.ipv4.conf.all.rp_filter": _m(
        "reverse-path source validation", "packets arrive on an interface their source is not routed through",
        ("IpExt.InNoRoutes",), NET),
    "net.core.default_qdisc": _m(
        "the qdisc of network devices created after it is set (existing devices keep theirs)", "a device is "
        "created (or its qdisc replaced) after the change, and its queue fills", (), NET),
    "link.mtu": _m(
        "the largest packet of the interface", "packets or TCP segments larger than the smaller level",
        ("Ip.OutRequests", "Tcp.OutSegs"), NET),
    "link.txqueuelen": _m(
        "the interface's transmit queue", "the interface sends faster than it drains (its qdisc queues)",
        (), NET),
    # ---- the whole machine (any load) --------------------------------------------------------------
    "net.core.bpf_jit_enable": _m(
        "how BPF programs run (interpreted or compiled)", "BPF programs run on the load's path (socket filters, "
        "XDP, seccomp)"),
    "net.core.tstamp_allow_data": _m(
        "payload in looped-back transmit timestamps", "an application asks for transmit timestamps", (), NET),
    "vm.swappiness": _m(
        "swapping anonymous memory against dropping page cache", "memory runs short"),
    "vm.vfs_cache_pressure": _m(
        "reclaim of dentry and inode caches", "memory runs short while many files are open"),
    "vm.min_free_kbytes": _m(
        "memory kept free for atomic allocations", "memory runs short during bursts of atomic allocations "
        "(network receive)"),
    "fs.file-max": _m(
        "open files host-wide", "the host opens nearly that many files"),
    "kernel.sched_autogroup_enabled": _m(
        "CPU sharing between sessions", "CPU-bound tasks of different sessions compete for a CPU"),
    "kernel.numa_balancing": _m(
        "automatic NUMA page migration", "a NUMA machine whose tasks run away from their memory"),
    "kernel.timer_migration": _m(
        "where timers of idle CPUs fire", "CPUs go idle with timers pending"),
    # ---- disk ------------------------------------------------------------------------------------
    "vm.dirty_ratio": _m(
        "dirty memory before writers write back themselves", "buffered (not O_DIRECT) writes faster than writeback",
        ("block.write_ios",), frozenset({BUFFERED_WRITE})),
    "vm.dirty_background_ratio": _m(
        "dirty memory before background writeback", "buffered writes", ("block.write_ios",), frozenset({BUFFERED_WRITE})),
    "vm.dirty_expire_centisecs": _m(
        "the age of dirty data before writeback", "buffered writes", ("block.write_ios",), frozenset({BUFFERED_WRITE})),
    "vm.dirty_writeback_centisecs": _m(
        "the interval of the writeback threads", "buffered writes", ("block.write_ios",), frozenset({BUFFERED_WRITE})),
    "block.queue.scheduler": _m(
        "the order and merging of requests", "requests queue at the device", ("block.time_in_queue_ms",), DISK),
    "block.queue.read_ahead_kb": _m(
        "the read-ahead window", "sequential buffered (not O_DIRECT) reads", ("block.read_sectors", "block.read_ios"),
        frozenset({BUFFERED_READ})),
    "block.queue.nr_requests": _m(
        "requests queued per hardware queue", "more requests in flight than the smaller level",
        ("block.time_in_queue_ms",), DISK),
    "block.queue.rotational": _m(
        "whether the scheduler treats the device as a rotating disk", "a scheduler that reads it (bfq, mq-deadline)",
        (), DISK),
    "block.queue.max_sectors_kb": _m(
        "the largest request", "requests larger than the smaller level", ("block.read_ios", "block.write_ios"), DISK),
    "block.queue.nomerges": _m(
        "merging of adjacent requests", "adjacent requests", ("block.read_merges", "block.write_merges"), DISK),
    "block.queue.rq_affinity": _m(
        "the CPU that completes a request", "high request rates", (), DISK),
    "block.queue.add_random": _m(
        "entropy from I/O timings", "any I/O (a small CPU cost)", (), DISK),
}


def mechanism_of(name: str) -> Mechanism | None:
    """The mechanism of the knob called ``name``, or None where the catalogue records none."""
    return MECHANISMS.get(name)
