"""The lab's DNS servers: a small registry, name -> config writer, start command, zone checker.

The lab (:mod:`tunelab.targets.lab`, service ``dns``) runs the server its ``dns_server`` option
names (default ``nsd``). Each server runs in the foreground inside the lab's server namespace, as
root without a user switch (its work directory is private to root), with its config and every
path it writes (zone file, pid file, database, control socket) under the lab's private work
directory, and no remote control. It serves one zone: the lab's own (:mod:`tunelab.targets.dnszone`,
``tunelab.test.``) or an operator's zone file (``zone_file`` with ``zone``), which is checked with the
server's own checker (``nsd-checkzone``, ``named-checkzone``, ``kzonecheck``, ``unbound-checkconf``)
before anything starts. An operator's ``$INCLUDE`` of a file in the zone file's own folder is inlined
into the lab's copy, so the checker checks and the server serves one self-contained text and no server
reads another file; an ``$INCLUDE`` of anything else is refused (:mod:`tunelab.targets.zonefile`).

==========  ==========  ================  ===================================================
name        daemon      Debian package    zone checker (package)
==========  ==========  ================  ===================================================
``nsd``     nsd -d      nsd               nsd-checkzone (nsd)
``bind9``   named -g    bind9             named-checkzone (bind9-utils)
``knot``    knotd       knot              kzonecheck (knot-dnssecutils)
``unbound`` unbound -d  unbound           unbound-checkconf (unbound): loads the ``auth-zone``
==========  ==========  ================  ===================================================

A new server is one :class:`DnsServer` added to :data:`DNS_SERVERS`.

Examples
--------
>>> DNS_SERVERS.names()
['bind9', 'knot', 'nsd', 'unbound']
>>> get_dns_server("bind").name
Traceback (most recent call last):
...
tunelab.errors.TargetError: No DNS server named 'bind'; known: bind9, knot, nsd, unbound
>>> files = ServerFiles(Path("/w"), "10.77.0.1", 53, LAB_ZONE.origin, Path("/w/zone.db"), Path("/w/dns.log"))
>>> "listen-on port 53 { 10.77.0.1; };" in get_dns_server("bind9").config(files)
True
"""
from __future__ import annotations

import functools
import hashlib
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tunelab.errors import TargetError, ToolMissingError
from tunelab.registry import Registry
from tunelab.targets import dnszone, zonefile
from tunelab.targets.services import DNS_PORT

#: largest operator zone file the lab loads
MAX_ZONE_FILE_BYTES = 64 * 1024 * 1024
#: the zone file's name in the server's work directory
ZONE_FILE = "zone.db"
#: seconds a zone checker may take
CHECK_TIMEOUT_S = 60
#: seconds the lab waits for a server to answer its zone's SOA (a large operator zone takes seconds to load)
START_TIMEOUT_S = 30.0
#: checker lines that only summarise (the first other line names the problem)
_CHECKER_SUMMARY = re.compile(r"has \d+ errors|not loaded due to errors|^Error summary|^Serious semantic error|"
                              r"^\d+\s|failed to run semantic checks|failed to load zone")
#: the ``[time] nsd-checkzone[pid]: `` (unbound: ``[pid:thread]``) line prefix
_CHECKER_PREFIX = re.compile(r"^\[[^\]]*\] [\w-]+\[[\d:]+\]:? ")
#: characters of one quoted part of the zone a checker's message keeps (zones are the operator's data)
CHECKER_QUOTE_CHARS = 40
#: the zones a checker accepted in this process (:func:`zone_key`), so each content is checked once
_ACCEPTED_ZONES: set[tuple[str, str, str]] = set()


@dataclass(frozen=True)
class Zone:
    """The zone a lab server serves: its origin (absolute, lower case) and its zone file's text (includes
    inlined; ``lines`` says which file and line each of its lines came from)."""

    origin: str
    text: str
    source: str = "the lab's own zone"
    lines: zonefile.InlinedZone | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ServerFiles:
    """Where one server instance lives: its work directory, address, port, zone and log."""

    workdir: Path
    address: str
    port: int
    origin: str
    zone_path: Path
    log: Path


@dataclass(frozen=True)
class DnsServer:
    """One DNS server the lab can run: how to configure, start, check and identify it."""

    name: str
    tool: str
    package: str
    config_name: str
    config: Callable[[ServerFiles], str]
    argv: Callable[[Path], list[str]]
    version_argv: tuple[str, ...]
    #: ``(origin, zone file, config file) -> argv`` of the server's own checker (exit status 0: accepted)
    checker: Callable[[str, Path, Path], list[str]] | None = None
    checker_package: str | None = None

    @property
    def checker_tool(self) -> str | None:
        return self.checker("x.", Path("z"), Path("c"))[0] if self.checker is not None else None


LAB_ZONE = Zone(dnszone.ZONE, "")


def _nsd_config(f: ServerFiles) -> str:
    """nsd.conf: one server process, no chroot, no user switch, no database, no remote control.

    >>> files = ServerFiles(Path("/w"), "10.77.0.1", 53, "a.", Path("/w/z"), Path("/l"))
    >>> "ip-address: 10.77.0.1@53" in _nsd_config(files)
    True
    """
    return f"""server:
    ip-address: {f.address}@{f.port}
    do-ip6: no
    server-count: 1
    tcp-count: 100
    username: ""
    chroot: ""
    database: ""
    zonesdir: "{f.workdir}"
    pidfile: "{f.workdir}/nsd.pid"
    xfrdfile: "{f.workdir}/xfrd.state"
    zonelistfile: "{f.workdir}/zone.list"
    logfile: "{f.log}"
    xfrdir: "{f.workdir}"
    verbosity: 0
    hide-version: yes
remote-control:
    control-enable: no
zone:
    name: "{f.origin}"
    zonefile: "{f.zone_path}"
"""


def _bind9_config(f: ServerFiles) -> str:
    """named.conf: authoritative only (no recursion, no validation), no rndc, every path in the work directory."""
    return f"""options {{
    directory "{f.workdir}";
    pid-file "{f.workdir}/named.pid";
    session-keyfile "{f.workdir}/session.key";
    managed-keys-directory "{f.workdir}";
    listen-on port {f.port} {{ {f.address}; }};
    listen-on-v6 {{ none; }};
    recursion no;
    allow-query {{ any; }};
    dnssec-validation no;
    notify no;
    version none;
    hostname none;
    server-id none;
}};
controls {{ }};
zone "{f.origin}" {{
    type primary;
    file "{f.zone_path}";
}};
"""


def _knot_config(f: ServerFiles) -> str:
    """knot.conf: the zone file loaded whole and never written back, no journal, the control socket in
    the work directory."""
    return f"""server:
    rundir: "{f.workdir}"
    pidfile: "{f.workdir}/knot.pid"
    listen: {f.address}@{f.port}
database:
    storage: "{f.workdir}"
control:
    listen: "{f.workdir}/knot.sock"
log:
  - target: stderr
    any: warning
template:
  - id: default
    storage: "{f.workdir}"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
zone:
  - domain: {f.origin}
    file: "{f.zone_path}"
"""


def _unbound_config(f: ServerFiles) -> str:
    """unbound.conf: the zone as an ``auth-zone`` answered to clients, every other name REFUSED (no
    recursion), no remote control."""
    refuse_others = "" if f.origin == "." else '    local-zone: "." refuse\n'
    return f"""server:
    interface: {f.address}@{f.port}
    port: {f.port}
    do-ip6: no
    num-threads: 1
    username: ""
    chroot: ""
    directory: "{f.workdir}"
    pidfile: "{f.workdir}/unbound.pid"
    use-syslog: no
    logfile: ""
    verbosity: 0
    hide-identity: yes
    hide-version: yes
    access-control: 0.0.0.0/0 allow
    module-config: "iterator"
    # authoritative only, as the other servers: names outside the zone are REFUSED (no recursion), and
    # the special-use names unbound answers itself (test., invalid., ...: RFC 6761 default local zones,
    # e.g. NXDOMAIN for tunelab.test.) are handed to the auth-zone by a transparent local zone
{refuse_others}    local-zone: "{f.origin}" transparent
auth-zone:
    name: "{f.origin}"
    zonefile: "{f.zone_path}"
    for-downstream: yes
    for-upstream: no
    fallback-enabled: no
remote-control:
    control-enable: no
"""


def _same_server(a: object, b: object) -> bool:
    return isinstance(a, DnsServer) and isinstance(b, DnsServer) and a.name == b.name


#: the DNS servers the lab can run; ``DNS_SERVERS.get(name)`` raises TargetError listing the known ones
DNS_SERVERS: Registry[DnsServer] = Registry("DNS server", error=TargetError, same=_same_server)
DNS_SERVERS.add("nsd", DnsServer(
    "nsd", "nsd", "nsd", "nsd.conf", _nsd_config, lambda conf: ["nsd", "-d", "-c", str(conf)], ("nsd", "-v"),
    checker=lambda origin, zone, conf: ["nsd-checkzone", origin, str(zone)], checker_package="nsd"))
DNS_SERVERS.add("bind9", DnsServer(
    "bind9", "named", "bind9", "named.conf", _bind9_config, lambda conf: ["named", "-g", "-4", "-c", str(conf)],
    ("named", "-v"), checker=lambda origin, zone, conf: ["named-checkzone", origin, str(zone)],
    checker_package="bind9-utils"))
DNS_SERVERS.add("knot", DnsServer(
    "knot", "knotd", "knot", "knot.conf", _knot_config, lambda conf: ["knotd", "-c", str(conf)], ("knotd", "-V"),
    checker=lambda origin, zone, conf: ["kzonecheck", "-v", "-o", origin, str(zone)],
    checker_package="knot-dnssecutils"))
DNS_SERVERS.add("unbound", DnsServer(
    "unbound", "unbound", "unbound", "unbound.conf", _unbound_config,
    lambda conf: ["unbound", "-d", "-c", str(conf)], ("unbound", "-V"),
    # unbound has no zone checker, but unbound-checkconf loads the config's auth-zone as the server would
    checker=lambda origin, zone, conf: ["unbound-checkconf", str(conf)], checker_package="unbound"))


def get_dns_server(name: str) -> DnsServer:
    """The registered server ``name`` (TargetError listing the known ones otherwise)."""
    return DNS_SERVERS.get(name)


def tool_packages() -> dict[str, str]:
    """Every daemon and checker the registry runs -> its Debian package."""
    out = {}
    for name in DNS_SERVERS:
        server = DNS_SERVERS.get(name)
        out[server.tool] = server.package
        if server.checker_tool is not None and server.checker_package is not None:
            out[server.checker_tool] = server.checker_package
    return out


def load_zone(zone: str | None, zone_file: str | None) -> Zone:
    """The zone a lab serves: the lab's own without options, else ``zone_file`` read (size-capped) as ``zone``.

    TargetError when only one of the two is given, ``zone`` is not a DNS name, the file cannot be read,
    or one of its ``$INCLUDE`` lines names a file outside its folder (:func:`zonefile.inline_includes`).
    """
    if zone is None and zone_file is None:
        return LAB_ZONE
    if zone is None or zone_file is None:
        given, missing = ("zone", "zone_file") if zone_file is None else ("zone_file", "zone")
        raise TargetError(f"target lab: option {given} needs {missing} too (zone_file: PATH of the zone file, "
                          f"zone: its origin such as example.org.)")
    try:
        origin = dnszone.absolute_name(zone)
    except ValueError as exc:
        raise TargetError(f"target lab: option zone: {exc}") from None
    try:
        text = dnszone.read_regular_text(zone_file, MAX_ZONE_FILE_BYTES, TargetError, "zone file",
                                         "give the path of the zone file to load into the lab's DNS server")
        inlined = zonefile.inline_includes(text, zone_file, origin, MAX_ZONE_FILE_BYTES)
    except TargetError as exc:
        raise TargetError(f"target lab: option zone_file: {exc}") from None
    return Zone(origin, inlined.text, source=zone_file, lines=inlined)


def write_server_files(server: DnsServer, workdir: Path, address: str, zone: Zone, log: Path,
                       port: int = DNS_PORT, records: int = dnszone.DEFAULT_RECORDS) -> Path:
    """Write the zone file and ``server``'s config into ``workdir`` (made 0700); return the config path.

    The lab's own zone (``zone.text`` empty) gets ``records`` A records.
    """
    workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
    zone_path = workdir / ZONE_FILE
    zone_path.write_text(zone.text or dnszone.zone_text(records))
    conf = workdir / server.config_name
    conf.write_text(server.config(ServerFiles(workdir, address, port, zone.origin, zone_path, log)))
    return conf


def check_zone(server: DnsServer, zone: Zone) -> None:
    """Run ``server``'s zone checker on ``zone`` (a private copy); one TargetError line when it rejects it.

    No-op for the lab's own zone and for a server without a checker. ToolMissingError names the
    package when the checker is not installed. A run asks at plan time, when the target is built and at
    ``up()``; the checker runs once per content (:func:`zone_key`): a zone it accepted is not checked again,
    a changed one is.
    """
    if not zone.text or server.checker is None:
        return
    key = zone_key(server, zone)
    if key in _ACCEPTED_ZONES:
        return
    tool = server.checker_tool
    assert tool is not None
    if shutil.which(tool) is None and shutil.which(tool, path="/usr/sbin:/sbin") is None:
        raise ToolMissingError(f"target lab: checking the zone file {zone.source} for {server.name} needs {tool}; "
                               f"install the Debian package {server.checker_package} "
                               f"(apt-get install {server.checker_package})")
    with tempfile.TemporaryDirectory(prefix="tunelab-zone.") as tmp:
        conf = write_server_files(server, Path(tmp), "127.0.0.1", zone, Path(tmp) / "check.log")
        path = Path(tmp) / ZONE_FILE
        try:
            proc = subprocess.run(server.checker(zone.origin, path, conf), capture_output=True, text=True,
                                  timeout=CHECK_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise TargetError(f"target lab: option zone_file: {tool} did not finish checking {zone.source} within "
                              f"{CHECK_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        detail = checker_message(proc.stderr + "\n" + proc.stdout, str(path), zone.source, zone.lines)
        raise TargetError(f"target lab: option zone_file: {zone.source} is rejected by {tool} ({server.name}'s zone "
                          f"checker) as zone {zone.origin}: {detail}")
    _ACCEPTED_ZONES.add(key)


def zone_key(server: DnsServer, zone: Zone) -> tuple[str, str, str]:
    """``(server, origin, sha256 of the zone text)``: what a zone check's answer depends on.

    >>> zone_key(get_dns_server("nsd"), Zone("a.", "x"))[:2]
    ('nsd', 'a.')
    """
    return server.name, zone.origin, hashlib.sha256(zone.text.encode()).hexdigest()


def checker_message(output: str, copy: str, source: str, lines: zonefile.InlinedZone | None = None) -> str:
    """The checker's first line that names a problem, not a summary (the private copy shown as ``source``).

    With ``lines`` (a zone with includes inlined), a line of the copy is shown as the file and line it came
    from. A quoted part of the zone longer than :data:`CHECKER_QUOTE_CHARS` is cut.

    >>> named = "zone a/IN: loading from master file /t/zone.db failed: bad ttl\\nzone a/IN: not loaded due to errors."
    >>> checker_message(named, "/t/zone.db", "/z")
    'zone a/IN: loading from master file /z failed: bad ttl'
    >>> nsd = "[2026-11-26 18:15:23] nsd-checkzone[9]: error: /t/zone.db:3: bad SOA\\nzone a. has 1 errors"
    >>> checker_message(nsd, "/t/zone.db", "/z")
    'error: /z:3: bad SOA'
    >>> inlined = zonefile.InlinedZone("a\\nb\\nc\\n", ((1, "/z", 1), (2, "/z.inc", 1)))
    >>> checker_message("error: /t/zone.db:3: bad " + repr("x" * 90), "/t/zone.db", "/z", inlined)
    "error: /z.inc:2: bad 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'"
    """
    lines_out = [_CHECKER_PREFIX.sub("", line.strip()) for line in output.splitlines()]
    problems = [line for line in lines_out if line and not _CHECKER_SUMMARY.search(line)]
    first = (problems or [line for line in lines_out if line] or ["no message"])[0]
    first = re.sub(r"'([^']{%d,})'" % (CHECKER_QUOTE_CHARS + 1),
                   lambda m: m.group(0) if copy in m.group(0) else f"'{m.group(1)[:CHECKER_QUOTE_CHARS]}...'", first)
    if lines is not None and len(lines.segments) > 1:
        first = re.sub(re.escape(copy) + r"(:|',\s*line\s+| )(\d+)", lambda m: _source_of(m, lines, source), first)
    return first.replace(copy, source)[:400]


def _source_of(match: re.Match[str], lines: zonefile.InlinedZone, source: str) -> str:
    """``FILE<separator>LINE`` for a checker's ``COPY<separator>LINE`` (unbound's ``COPY LINE:COL`` counts one
    line past the one at fault)."""
    separator, number = match.group(1), int(match.group(2))
    found = lines.source_line(number - 1 if separator == " " else number)
    if found is None:
        return f"{source}{separator}{number}"
    return f"{found[0]}{separator}{found[1]}"


@functools.lru_cache(maxsize=None)
def server_version(name: str) -> str:
    """The installed server's version line (e.g. ``NSD version 4.6.1``), or '' when it cannot be run."""
    server = get_dns_server(name)
    try:
        proc = subprocess.run(list(server.version_argv), capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = [line.strip() for line in (proc.stdout + "\n" + proc.stderr).splitlines() if line.strip()]
    return lines[0][:200] if lines else ""
