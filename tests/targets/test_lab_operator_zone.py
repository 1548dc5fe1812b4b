"""An operator's zone in the lab from the command line (``tunelab lab up --dns-server NAME --zone-file FILE``),
queried with the operator's own query file by the command ``lab up`` prints; and a lab rebuilt for
``tunelab restore`` never needs that zone file (or any service) again."""
from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from dns_helpers import ORIGIN, operator_files, require_tools

from tunelab.journal import restore_target
from tunelab.loads.dnsperf import parse_rcodes
from tunelab.targets import netns
from tunelab.targets.dns_servers import LAB_ZONE
from tunelab.targets.lab import state_path

from .test_lab import cli


def lab_spec(zone_file: Path) -> dict:
    """A stored lab spec as a run with the operator's zone records it (services, server, zone and its file)."""
    return {"type": "lab", "options": {"name": f"rst{os.getpid() % 100000}", "services": ["dns"],
                                       "dns_server": "knot", "zone": ORIGIN, "zone_file": str(zone_file)}}


def test_restore_rebuilds_a_lab_without_its_zone_file_or_services(tmp_path: Path):
    zone_file, _ = operator_files(tmp_path)
    spec = lab_spec(zone_file)
    zone_file.unlink()                  # the operator's file is gone by the time restore runs
    rebuilt = restore_target(spec)      # builds nothing yet: only the options are checked and kept
    assert rebuilt.initial_services == ()
    assert rebuilt.zone == LAB_ZONE and rebuilt.zone_file is None
    assert spec["options"]["zone_file"] == str(zone_file)          # the stored spec itself is untouched


@pytest.mark.lab
def test_restore_lab_comes_up_without_the_zone_file(lab_tools, tmp_path: Path):
    zone_file, _ = operator_files(tmp_path)
    spec = lab_spec(zone_file)
    zone_file.unlink()
    rebuilt = restore_target(spec)
    try:
        rebuilt.up()
        assert rebuilt.state is not None and rebuilt.state.services == {}     # no DNS server was started
        assert rebuilt.read_text("server", "/proc/sys/net/core/somaxconn").strip().isdigit()
    finally:
        rebuilt.down()


@pytest.mark.lab
def test_cli_lab_up_serves_the_operators_zone_to_the_printed_dnsperf_command(lab_tools, capsys, tmp_path: Path):
    require_tools("knotd", "kzonecheck", "dnsperf", hint="apt-get install knot knot-dnssecutils dnsperf")
    zone_file, query_file = operator_files(tmp_path)
    name = f"opz{os.getpid() % 100000}"
    try:
        status, out, err = cli(capsys, "up", "--name", name, "--dns-server", "knot", "--zone", ORIGIN,
                               "--zone-file", str(zone_file))
        assert status == 0, err
        assert f"knot serving {ORIGIN}" in out
        status, listing, _ = cli(capsys, "status")
        assert f"  dns     knot serving {ORIGIN}" in listing.split(f"{name}:", 1)[1]
        printed = next(line for line in out.splitlines() if line.startswith("query it from the client namespace: "))
        argv = shlex.split(printed.split(": ", 1)[1].replace("QUERY_FILE", str(query_file)).replace("-l 10", "-l 1"))
        zone_file.unlink()              # the lab serves its own copy
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        assert result.returncode == 0, result.stderr
        codes = parse_rcodes(result.stdout)
        assert set(codes) == {"NOERROR"} and codes["NOERROR"] > 0, result.stdout[-800:]
    finally:
        if state_path(name).exists():
            cli(capsys, "down", "--name", name)
    assert not netns.namespace_exists(f"tl-{name}-srv")


def test_cli_lab_up_zone_file_without_zone_is_one_error_before_anything(capsys, tmp_path: Path):
    zone_file, _ = operator_files(tmp_path)
    status, out, err = cli(capsys, "up", "--name", "nozone", "--zone-file", str(zone_file))
    assert status == 2 and "--zone and --zone-file go together" in err and len(err.strip().splitlines()) == 1
    assert not state_path("nozone").exists()


def test_a_labs_description_names_its_dns_server_for_the_sysctl_provenance():
    require_tools("unbound", hint="apt-get install unbound")
    from tunelab.loads import get_load
    from tunelab.optimize.deploy import dns_software
    from tunelab.targets.lab import LabTarget

    banner = subprocess.run(["unbound", "-V"], capture_output=True, text=True, check=False).stdout
    version = banner.splitlines()[0].split()[-1]                     # "Version 1.17.1"
    description = LabTarget(dns_server="unbound", services=()).describe()     # nothing is built
    assert description["dns_server"] == {"software": "unbound", "version": version}
    assert dns_software(description, get_load("dnsperf")()) == f"unbound {version}"     # not the nsd installed beside it
