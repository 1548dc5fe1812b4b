"""The lab's DNS server registry and its options (no root, no namespaces): names, configs, zone files
and each server's own zone checker (run for real where installed)."""
from __future__ import annotations

import os
import re
import socket
import struct
import threading
from pathlib import Path

import pytest
from dns_helpers import ORIGIN, ZONE, count_checker_runs, operator_files, require_tools

from tunelab.errors import TargetError
from tunelab.targets import check_target_spec, dns_servers
from tunelab.targets import services as svc
from tunelab.targets.base import TargetOptionError
from tunelab.targets.dns_servers import DNS_SERVERS, ServerFiles, Zone, get_dns_server
from tunelab.targets.lab import TOOL_PACKAGES, LabTarget

#: a zone each checker must reject: an IPv4 address out of range
BAD_ADDRESS_ZONE = ZONE.replace("192.0.2.10", "192.0.2.300")


def lab_spec(**options) -> dict:
    return {"type": "lab", "options": options}


@pytest.fixture
def zone_file(tmp_path: Path) -> Path:
    return operator_files(tmp_path)[0]


def test_registry_holds_nsd_and_three_more_servers_each_with_a_package_and_a_checker():
    assert DNS_SERVERS.names() == ["bind9", "knot", "nsd", "unbound"]
    for name in DNS_SERVERS:
        server = get_dns_server(name)
        assert server.checker_tool is not None and server.checker_package, name
        assert TOOL_PACKAGES[server.tool] == server.package
        assert TOOL_PACKAGES[server.checker_tool] == server.checker_package


@pytest.mark.parametrize("name", DNS_SERVERS.names())
def test_every_config_puts_every_path_under_the_work_directory_and_listens_on_the_address(name):
    files = ServerFiles(Path("/run/tunelab/labs/x/dns"), "10.77.0.1", 53, ORIGIN,
                        Path("/run/tunelab/labs/x/dns/zone.db"), Path("/run/tunelab/labs/x/dns.log"))
    text = get_dns_server(name).config(files)
    assert "10.77.0.1" in text and ORIGIN in text and "/run/tunelab/labs/x/dns/zone.db" in text
    quoted_paths = [part for part in text.split('"') if part.startswith("/")]
    assert quoted_paths and all(p.startswith("/run/tunelab/labs/x/") for p in quoted_paths), quoted_paths
    assert "/etc/" not in text and "/var/" not in text


def test_unknown_server_is_one_line_naming_the_known_ones():
    with pytest.raises(TargetOptionError) as info:
        check_target_spec(lab_spec(dns_server="bind"))
    assert str(info.value) == ("target lab: option dns_server: No DNS server named 'bind'; "
                               "known: bind9, knot, nsd, unbound")
    assert info.value.option == "dns_server"
    with pytest.raises(TargetOptionError, match="dns_server=9 must be of type"):
        check_target_spec(lab_spec(dns_server=9))
    with pytest.raises(TargetError, match="No DNS server named 'powerdns'"):
        LabTarget(dns_server="powerdns")


@pytest.mark.parametrize(("options", "fragment"), [
    ({"zone": ORIGIN}, "option zone needs zone_file too"),
    ({"zone_file": "/x.zone"}, "option zone_file needs zone too"),
    ({"zone": "a..b", "zone_file": "/x"}, "option zone: 'a..b' is not a DNS name: it has an empty label"),
    ({"zone": ORIGIN, "zone_file": "/nonexistent/z"}, "option zone_file: /nonexistent/z: no such zone file"),
    ({"zone": ORIGIN, "zone_file": "/dev/zero"}, "the zone file is not a regular file"),
    ({"zone": ORIGIN, "zone_file": "/"}, "the zone file is not a regular file"),
])
def test_zone_options_are_checked_at_plan_time_with_one_line(options, fragment):
    with pytest.raises(TargetOptionError) as info:
        check_target_spec(lab_spec(**options))
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_a_fifo_zone_file_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "zone.fifo"
    os.mkfifo(fifo)
    with pytest.raises(TargetOptionError, match="not a regular file"):
        check_target_spec(lab_spec(zone=ORIGIN, zone_file=str(fifo)))


def test_an_oversized_zone_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(dns_servers, "MAX_ZONE_FILE_BYTES", 100)
    path = tmp_path / "big.zone"
    path.write_text(ZONE)
    with pytest.raises(TargetError, match=r"has \d+ bytes, more than the limit of 100"):
        dns_servers.load_zone(ORIGIN, str(path))


def test_lab_reads_the_zone_file_once_and_records_its_options(zone_file):
    lab = LabTarget(dns_server="knot", zone="Example.NET", zone_file=str(zone_file))
    assert lab.zone == Zone(ORIGIN, ZONE, str(zone_file))
    assert lab.dns_server.name == "knot"
    options = lab._options()
    assert (options["dns_server"], options["zone"], options["zone_file"]) == ("knot", ORIGIN, str(zone_file))
    default = LabTarget()
    assert default.dns_server.name == "nsd" and default.zone.origin == "tunelab.test." and default.zone.text == ""


def test_write_server_files_writes_the_lab_zone_with_its_records(tmp_path):
    conf = dns_servers.write_server_files(get_dns_server("nsd"), tmp_path / "dns", "127.0.0.1",
                                          dns_servers.LAB_ZONE, tmp_path / "dns.log", port=5353, records=3)
    zone = (tmp_path / "dns" / dns_servers.ZONE_FILE).read_text()
    assert zone.splitlines()[-3:] == ["r0 IN A 198.51.100.0", "r1 IN A 198.51.100.1", "r2 IN A 198.51.100.2"]
    assert "ip-address: 127.0.0.1@5353" in conf.read_text()
    assert (tmp_path / "dns").stat().st_mode & 0o777 == 0o700


def _require_checker(name: str) -> None:
    require_tools(get_dns_server(name).checker_tool, hint=f"Debian package {get_dns_server(name).checker_package}")


@pytest.mark.parametrize("name", DNS_SERVERS.names())
def test_each_servers_own_checker_accepts_a_good_zone_and_rejects_a_bad_address_naming_it(name, zone_file, tmp_path):
    _require_checker(name)
    check_target_spec(lab_spec(dns_server=name, zone=ORIGIN, zone_file=str(zone_file)))
    bad = tmp_path / "bad.zone"
    bad.write_text(BAD_ADDRESS_ZONE)
    with pytest.raises(TargetOptionError) as info:
        check_target_spec(lab_spec(dns_server=name, zone=ORIGIN, zone_file=str(bad)))
    message = str(info.value)
    tool = get_dns_server(name).checker_tool
    assert message.startswith(f"target lab: option zone_file: {bad} is rejected by {tool}"), message
    assert "\n" not in message and "tunelab-zone." not in message     # the private copy is shown as the operator's file
    assert "192.0.2.300" in message or "ip4" in message.lower() or "ipv4" in message.lower(), message


@pytest.mark.parametrize("name", ["nsd", "bind9", "knot"])
def test_a_zone_without_soa_is_rejected_by_the_checker(name, tmp_path):
    _require_checker(name)
    path = tmp_path / "nosoa.zone"
    path.write_text(re.sub(r"^@ IN SOA .*\n", "", ZONE, flags=re.M))
    with pytest.raises(TargetError, match="SOA"):
        dns_servers.check_zone(get_dns_server(name), dns_servers.load_zone(ORIGIN, str(path)))


def test_a_run_checks_its_zone_once_and_a_changed_zone_again(tmp_path, monkeypatch):
    """Plan time (check_target_spec), the build (the spec checked again) and up() each ask for the check: the
    checker runs once for one content, and again when the file changes (a counter on the checker's runs)."""
    _require_checker("nsd")
    zone_file = operator_files(tmp_path, zone=ZONE + f"; {tmp_path.name}\n")[0]    # a content no other test checked
    runs = count_checker_runs(monkeypatch)
    spec = lab_spec(dns_server="nsd", zone=ORIGIN, zone_file=str(zone_file))
    check_target_spec(spec)                                  # validate's checks before anything is built
    check_target_spec(spec)                                  # build_target checks the spec again
    lab = LabTarget(**spec["options"])
    dns_servers.check_zone(lab.dns_server, lab.zone)         # what up() asks before it creates anything
    assert runs == ["nsd-checkzone"]
    zone_file.write_text(ZONE + f"; {tmp_path.name}, edited\n")
    check_target_spec(spec)
    assert runs == ["nsd-checkzone", "nsd-checkzone"]


def test_up_refuses_a_rejected_zone_before_it_creates_anything(tmp_path, monkeypatch):
    _require_checker("bind9")
    require_tools("ip", "named")
    monkeypatch.setattr("tunelab.targets.lab.STATE_DIR", tmp_path / "labs")
    bad = tmp_path / "bad.zone"
    bad.write_text(ZONE)
    lab = LabTarget(dns_server="bind9", services=("dns",), zone=ORIGIN, zone_file=str(bad))
    lab.zone = Zone(ORIGIN, BAD_ADDRESS_ZONE, str(bad))      # as if the file changed after the plan
    with pytest.raises(TargetError, match="is rejected by named-checkzone"):
        lab.up()
    assert lab.state is None and not (tmp_path / "labs").exists()


def test_checker_message_skips_summaries_and_shows_the_operators_path():
    output = ("[2026-11-26 18:15:23] nsd-checkzone[9]: error: /tmp/t/zone.db:3: bad SOA\n"
              "zone a. file /tmp/t/zone.db has 1 errors\n")
    assert dns_servers.checker_message(output, "/tmp/t/zone.db", "/ops/a.zone") == "error: /ops/a.zone:3: bad SOA"
    unbound = ("[1795717012] unbound-checkconf[22670:0] error: parse error /tmp/t/zone.db 6:9: bad\n"
               "[1795717012] unbound-checkconf[22670:0] fatal error: Could not setup authority zones\n")
    assert dns_servers.checker_message(unbound, "/tmp/t/zone.db", "/z") == "error: parse error /z 6:9: bad"
    assert dns_servers.checker_message("", "/c", "/z") == "no message"


def _answer_once(rcode: int, answers: int) -> tuple[int, threading.Thread]:
    """A one-shot UDP DNS responder on 127.0.0.1 that answers the next query with ``rcode`` and ``answers``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(5)

    def serve() -> None:
        with sock:
            query, peer = sock.recvfrom(512)
            flags = 0x8400 | rcode                       # QR and AA set
            sock.sendto(struct.pack("!HHHHHH", struct.unpack("!H", query[:2])[0], flags, 1, answers, 0, 0)
                        + query[12:], peer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return sock.getsockname()[1], thread


@pytest.mark.parametrize(("rcode", "answers", "ready"), [(0, 1, True), (2, 0, False), (5, 0, False), (0, 0, False)])
def test_a_server_is_ready_only_when_it_answers_the_zones_soa_with_noerror(rcode, answers, ready):
    port, thread = _answer_once(rcode, answers)       # SERVFAIL: still loading; REFUSED: zone not loaded
    assert svc.zone_answers("127.0.0.1", ORIGIN, port, timeout_s=2.0) is ready
    thread.join(timeout=5)
