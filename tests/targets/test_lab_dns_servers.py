"""Each DNS server of the registry in a real lab: serving the operator's own zone file, queried by dnsperf
with the operator's own query file for ~1 s, and serving the lab's own zone (about 1.5 s per server,
the lab always torn down)."""
from __future__ import annotations

from pathlib import Path

import pytest
from dns_helpers import ORIGIN, operator_files, require_tools

from tunelab.loads import get_load
from tunelab.loads.dnsperf import parse_rcodes, parse_summary
from tunelab.targets import services as svc
from tunelab.targets.dns_servers import DNS_SERVERS, get_dns_server

pytestmark = pytest.mark.lab


@pytest.mark.parametrize("name", DNS_SERVERS.names())
def test_each_server_serves_the_operators_zone_to_the_operators_queries(name, make_lab, tmp_path: Path):
    server = get_dns_server(name)
    require_tools("dnsperf", server.tool, server.checker_tool,
                  hint=f"apt-get install {server.package} {server.checker_package} dnsperf")
    zone_file, query_file = operator_files(tmp_path)
    lab = make_lab(dns_server=name, zone=ORIGIN, zone_file=str(zone_file), services=("dns",))
    lab.restart_service("dns")                          # restarted through its own service command, answers again
    load = get_load("dnsperf")()
    try:
        settings = load.settings("low", {"query_file": str(query_file), "rate": 500,
                                         "server_address": lab.address("server")})
        settings.update(load.prepare(lab, settings))
        # the target's address is a documentation address nobody answers on: only server_address reaches the lab
        result = lab.run("client", load.command(settings, 1, "192.0.2.99"), timeout_s=15)
    finally:
        load.cleanup(lab)
    parsed = load.parse(result, settings, 0)
    # dnsperf's counts, not a rate: every answered query of the operator's file was NOERROR
    assert parsed.status != "failed" and result.ok, (parsed.reason, result.stdout[-800:], result.stderr[-400:])
    codes = parse_rcodes(result.stdout)
    assert set(codes) == {"NOERROR"}, codes
    completed = parse_summary(result.stdout)["completed"]
    assert codes["NOERROR"] == completed > 0, (codes, completed)
    assert lab.describe()["lab"]["dns_server"] == name


@pytest.mark.parametrize("name", DNS_SERVERS.names())
def test_each_server_serves_the_labs_own_zone_and_refuses_other_names(name, make_lab):
    server = get_dns_server(name)
    require_tools(server.tool, hint=f"apt-get install {server.package}")
    lab = make_lab(dns_server=name, records=10, services=("dns",))

    def ask(qname: str) -> svc.DnsAnswer:
        return lab.in_namespace("client", svc.dns_query, lab.address("server"), qname, 53, 1.0)

    assert ask("r9.tunelab.test.") == svc.DnsAnswer(rcode=0, answer_count=1, authoritative=True)
    assert ask("r10.tunelab.test.").rcode == 3                 # NXDOMAIN: the zone has r0 ... r9
    assert ask("www.example.net.").rcode == 5                  # REFUSED: authoritative only, never recursion
