"""``$INCLUDE`` in an operator's zone file: a file of the zone file's own folder is inlined into the lab's
copy (what the checker checks is what the server serves), anything else is refused with one line before a
checker or server runs. The checkers are the real ones where installed; one short lab test serves an
inlined zone."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from dns_helpers import ORIGIN, ZONE, count_checker_runs, operator_files, require_tools

from tunelab.errors import TargetError
from tunelab.targets import check_target_spec, dns_servers, zonefile
from tunelab.targets import services as svc
from tunelab.targets.base import TargetOptionError
from tunelab.targets.dns_servers import get_dns_server
from tunelab.targets.lab import state_path

from .test_lab import cli

#: records of an included file (relative names: the origin decides where they land)
HOSTS = "inc IN A 192.0.2.20\nmail2 IN AAAA 2001:db8::26\n"
#: what a file outside the folder holds: valid records every checker would accept, and a marker
OUTSIDE = "stolen IN TXT \"s3cret-outside-content\"\n"


def lab_spec(**options) -> dict:
    return {"type": "lab", "options": options}


def zone_with(tmp_path: Path, *lines: str) -> Path:
    """The operator's zone (:data:`ZONE`) in ``tmp_path/zones`` with ``lines`` appended."""
    folder = tmp_path / "zones"
    folder.mkdir(exist_ok=True)
    return operator_files(folder, zone=ZONE + "".join(line + "\n" for line in lines))[0]


def refusal(zone_file: Path, server: str = "nsd") -> str:
    """The one-line error plan time gives for ``zone_file`` (checked as validate does): it starts with the
    path of the file at fault, the zone file or a file it includes."""
    with pytest.raises(TargetOptionError) as info:
        check_target_spec(lab_spec(dns_server=server, zone=ORIGIN, zone_file=str(zone_file)))
    message = str(info.value)
    # the file at fault: the zone file or a file it includes (in its folder)
    assert "\n" not in message and message.startswith(f"target lab: option zone_file: {zone_file.parent}/"), message
    return message


def test_an_include_in_the_folder_is_inlined_recursively_with_its_origin_framed_and_restored(tmp_path):
    zone_file = zone_with(tmp_path, '$Include "sub dir/hosts.inc" lab ; the lab hosts', "after IN A 192.0.2.30")
    (tmp_path / "zones" / "sub dir").mkdir()
    (tmp_path / "zones" / "sub dir" / "hosts.inc").write_text(HOSTS + "$ORIGIN other.example.net.\n"
                                                              "$INCLUDE deeper.inc\n" + "x IN A 192.0.2.40")
    (tmp_path / "zones" / "sub dir" / "deeper.inc").write_text("deep IN A 192.0.2.50\n")
    zone = dns_servers.load_zone(ORIGIN, str(zone_file))
    assert zone.text == ZONE + ("$ORIGIN lab.example.net.\n" + HOSTS + "$ORIGIN other.example.net.\n"
                                "deep IN A 192.0.2.50\n$ORIGIN other.example.net.\n"   # deeper.inc: enclosing origin
                                "x IN A 192.0.2.40\n$ORIGIN example.net.\n"           # back to the zone file's origin
                                "after IN A 192.0.2.30\n")
    lines = zone.lines
    assert lines is not None
    first_inlined = ZONE.count("\n") + 2
    assert lines.source_line(first_inlined) == (str(tmp_path / "zones" / "sub dir" / "hosts.inc"), 1)
    assert lines.source_line(zone.text.count("\n"))[1] == ZONE.count("\n") + 2      # "after": line 2 after ZONE


def test_a_zone_without_include_is_left_as_it_is(tmp_path):
    zone_file = zone_with(tmp_path, "; $INCLUDE old.inc (commented out)")
    assert dns_servers.load_zone(ORIGIN, str(zone_file)).text == zone_file.read_text()


@pytest.mark.parametrize("name", ["/etc/hostname", "../outside.inc", "sub/../../outside.inc", "link.inc",
                                  '"../outside.inc"', "\\046\\046/outside.inc"])
def test_an_include_outside_the_folder_is_refused_with_one_line_naming_file_and_line(tmp_path, name):
    zone_file = zone_with(tmp_path, f"$INCLUDE {name}")
    (tmp_path / "outside.inc").write_text(OUTSIDE)
    (tmp_path / "zones" / "sub").mkdir()
    (tmp_path / "zones" / "link.inc").symlink_to(tmp_path / "outside.inc")
    message = refusal(zone_file)
    assert f"{zone_file}:{ZONE.count(chr(10)) + 1}: $INCLUDE '" in message
    assert f"is outside the zone file's folder {tmp_path / 'zones'}" in message and "s3cret" not in message


def test_an_outside_include_is_refused_where_the_checker_itself_accepts_it(tmp_path):
    """nsd-checkzone alone reads the outside file and accepts the zone: the refusal is the lab's own rule."""
    require_tools("nsd-checkzone", hint="apt-get install nsd")
    (tmp_path / "outside.inc").write_text(OUTSIDE)
    zone_file = zone_with(tmp_path, f"$INCLUDE {tmp_path / 'outside.inc'}")
    direct = subprocess.run(["nsd-checkzone", ORIGIN, str(zone_file)], capture_output=True, text=True, check=False)
    assert direct.returncode == 0, direct.stderr
    assert "outside the zone file's folder" in refusal(zone_file)


def test_a_long_hostile_file_name_is_quoted_short(tmp_path):
    zone_file = zone_with(tmp_path, "$INCLUDE /" + "a" * 5000)
    message = refusal(zone_file)
    assert len(message) < 600 and "a" * (zonefile.QUOTE_CHARS + 1) not in message


@pytest.mark.parametrize(("files", "fragment"), [
    ({"a.inc": "$INCLUDE b.inc\n", "b.inc": "$INCLUDE a.inc\n"}, "(a cycle)"),
    ({"a.inc": "$INCLUDE ../example.net.zone\n"}, "(a cycle)"),
    ({"a.inc": "$INCLUDE 1.inc\n", **{f"{i}.inc": f"$INCLUDE {i + 1}.inc\n" for i in range(1, 12)}},
     "deeper than 8 levels"),
    ({"a.inc": "x IN A 192.0.2.1\n$INCLUDE missing.inc\n"}, ":2: $INCLUDE 'missing.inc': no such file"),
    ({"a.inc": b"\xff\xfe".decode("latin-1")}, "is not UTF-8 text"),
    ({"a.inc": "$INCLUDE\n"}, "write $INCLUDE on one line as '$INCLUDE FILE [ORIGIN] [; comment]'"),
    ({"a.inc": "$INCLUDE ( b.inc )\n"}, "without parentheses"),
    ({"a.inc": "x IN TXT ( \"a\"\n$INCLUDE /etc/hostname )\n"}, ":2: $INCLUDE and $ORIGIN must stand in the first column"),
    ({"a.inc": "  $include /etc/hostname\n"}, ":1: $INCLUDE and $ORIGIN must stand in the first column"),
    ({"a.inc": "x IN A 192.0.2.1\r$INCLUDE /etc/hostname\n"}, "after no carriage return or form feed"),
    ({"a.inc": 'x IN TXT "open\n$ORIGIN evil.\n"\n'}, ":2: $INCLUDE and $ORIGIN must stand in the first column"),
])
def test_nested_problems_are_one_line_naming_the_included_file(tmp_path, files, fragment):
    zone_file = zone_with(tmp_path, "$INCLUDE inc/a.inc")
    (tmp_path / "zones" / "inc").mkdir()
    for name, text in files.items():
        (tmp_path / "zones" / "inc" / name).write_text(text, encoding="latin-1")
    message = refusal(zone_file)
    assert fragment in message, message


def test_a_fifo_include_is_refused_without_blocking(tmp_path):
    zone_file = zone_with(tmp_path, "$INCLUDE pipe.inc")
    os.mkfifo(tmp_path / "zones" / "pipe.inc")
    assert "is not a regular file" in refusal(zone_file)


def test_includes_count_towards_the_zone_file_size_limit(tmp_path, monkeypatch):
    zone_file = zone_with(tmp_path, "$INCLUDE big.inc")
    (tmp_path / "zones" / "big.inc").write_text(HOSTS * 100)
    monkeypatch.setattr(dns_servers, "MAX_ZONE_FILE_BYTES", len(ZONE) + 1000)
    with pytest.raises(TargetError, match=rf"more than {len(ZONE) + 1000} bytes"):
        dns_servers.load_zone(ORIGIN, str(zone_file))


@pytest.mark.parametrize("name", ["nsd", "bind9", "knot", "unbound"])
def test_each_checker_checks_the_inlined_text_and_names_the_included_file_and_line(name, tmp_path):
    server = get_dns_server(name)
    require_tools(server.checker_tool, hint=f"Debian package {server.checker_package}")
    zone_file = zone_with(tmp_path, "$INCLUDE hosts.inc lab.example.net.")
    hosts = tmp_path / "zones" / "hosts.inc"
    hosts.write_text(HOSTS)
    check_target_spec(lab_spec(dns_server=name, zone=ORIGIN, zone_file=str(zone_file)))
    hosts.write_text(HOSTS + "bad IN A 192.0.2.300\n")           # line 3 of the included file
    message = refusal(zone_file, name)
    assert f"is rejected by {server.checker_tool}" in message and str(hosts) in message, message
    assert f"{hosts}:3" in message or f"{hosts}', line 3" in message or f"{hosts} 3:" in message, message
    assert "tunelab-zone." not in message


def test_the_checker_cache_keys_on_the_inlined_text(tmp_path, monkeypatch):
    """Editing only the included file changes the inlined text: the checker runs again (counted runs)."""
    require_tools("nsd-checkzone", hint="apt-get install nsd")
    zone_file = zone_with(tmp_path, "$INCLUDE hosts.inc")
    hosts = tmp_path / "zones" / "hosts.inc"
    hosts.write_text(HOSTS + f"; {tmp_path.name}\n")              # a content no other test checked
    runs = count_checker_runs(monkeypatch)
    spec = lab_spec(dns_server="nsd", zone=ORIGIN, zone_file=str(zone_file))
    check_target_spec(spec)
    check_target_spec(spec)
    assert runs == ["nsd-checkzone"]
    hosts.write_text(HOSTS + "bad IN A 192.0.2.300\n")
    with pytest.raises(TargetOptionError, match="192.0.2.300"):
        check_target_spec(spec)
    assert runs == ["nsd-checkzone", "nsd-checkzone"]


@pytest.mark.lab
def test_the_lab_serves_the_inlined_copy_and_refuses_an_outside_include_before_anything(make_lab, capsys,
                                                                                        tmp_path):
    require_tools("nsd", "nsd-checkzone", hint="apt-get install nsd")
    zone_file = zone_with(tmp_path, "$INCLUDE hosts.inc")
    hosts = tmp_path / "zones" / "hosts.inc"
    hosts.write_text(HOSTS)
    lab = make_lab(dns_server="nsd", zone=ORIGIN, zone_file=str(zone_file), services=("dns",))
    served = (lab.workdir / "dns" / dns_servers.ZONE_FILE).read_text()
    assert "$include" not in served.lower() and "inc IN A 192.0.2.20" in served
    hosts.write_text("")                                          # the server never reads the operator's files
    lab.restart_service("dns")

    def ask(qname: str) -> svc.DnsAnswer | None:
        return lab.in_namespace("client", svc.dns_query, lab.address("server"), qname, 53, 1.0)

    assert ask("inc.example.net.") == svc.DnsAnswer(rcode=0, answer_count=1, authoritative=True)

    (tmp_path / "outside.inc").write_text(OUTSIDE)
    (tmp_path / "other").mkdir()
    outside = zone_with(tmp_path / "other", f"$INCLUDE {tmp_path / 'outside.inc'}")
    name = f"inc{os.getpid() % 100000}"
    status, _, err = cli(capsys, "up", "--name", name, "--dns-server", "nsd", "--zone", ORIGIN,
                         "--zone-file", str(outside))
    assert status == 2 and "outside the zone file's folder" in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and not state_path(name).exists()
