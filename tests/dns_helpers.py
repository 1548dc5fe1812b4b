"""An operator's tiny zone file and query file, shared by the DNS tests of tests/targets and tests/loads."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ORIGIN = "example.net."
#: a zone every checker accepts: SOA, NS with glue, A, AAAA, MX and SRV records
ZONE = """$ORIGIN example.net.
$TTL 300
@ IN SOA ns1 hostmaster 2026112601 3600 600 86400 60
@ IN NS ns1
@ IN MX 10 mail
ns1 IN A 192.0.2.1
www IN A 192.0.2.10
mail IN AAAA 2001:db8::25
_dns._udp IN SRV 0 0 53 ns1
"""
#: queries for names of :data:`ZONE` only (every answer NOERROR), with a comment and an empty line
QUERIES = ("; the operator's own sample\nwww.example.net. A\nmail.example.net. AAAA\n\nexample.net. MX\n"
           "_dns._udp.example.net. SRV\nexample.net. SOA\n")


def operator_files(directory: Path, zone: str = ZONE, queries: str = QUERIES) -> tuple[Path, Path]:
    """Write ``example.net.zone`` and ``queries.txt`` into ``directory``; return their paths."""
    zone_file, query_file = directory / "example.net.zone", directory / "queries.txt"
    zone_file.write_text(zone)
    query_file.write_text(queries)
    return zone_file, query_file


def require_tools(*tools: str | None, hint: str = "") -> None:
    """Skip the calling test unless every tool is installed (sbin included)."""
    missing = [t for t in tools if t and shutil.which(t) is None and shutil.which(t, path="/usr/sbin:/sbin") is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}" + (f" ({hint})" if hint else ""))


def count_checker_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the program of every ``subprocess.run`` the zone checks make (``tunelab.targets.dns_servers``):
    the returned list grows as they run, so a test can count how often a zone checker ran."""
    import subprocess

    from tunelab.targets import dns_servers

    runs: list[str] = []
    real_run = subprocess.run

    def counted(argv, **kwargs):
        runs.append(argv[0])
        return real_run(argv, **kwargs)

    monkeypatch.setattr(dns_servers.subprocess, "run", counted)
    return runs


def lab_dnsperf_design(name: str, description: str, knobs: str, *, design: str = "{type: oat, replicates: 1, "
                       "blocks: 1, seed: 3}", measure_s: float = 2) -> str:
    """A lab design under dnsperf overload with short trials (1 s warm-up), maximising qps (SESOI 5 %): the
    shape of every short lab test; ``knobs`` is the YAML list of its knobs, one ``- {...}`` per line."""
    knob_lines = "\n".join(f"  {line.strip()}" for line in knobs.strip().splitlines())
    return (f"name: {name}\ndescription: {description}\ntarget: {{type: lab, options: {{}}, allow_host_global: false}}\n"
            "load: {generator: dnsperf, profile: overload, settings: {}}\n"
            f"warmup_s: 1\nmeasure_s: {measure_s}\n"
            "metrics:\n  - {name: qps, direction: maximize, sesoi_pct: 5}\n"
            f"knobs:\n{knob_lines}\ndesign: {design}\n")


@pytest.fixture
def needs_dns_tools() -> None:
    """Skip unless Debian's dnsperf and nsd are installed (the lab's DNS load and server)."""
    require_tools("dnsperf", "nsd")
