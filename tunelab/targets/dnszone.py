"""The DNS zone the lab serves and dnsperf queries, defined once so both sides agree."""
from __future__ import annotations

ZONE = "tunelab.test."
DEFAULT_RECORDS = 1000


def record_names(n: int = DEFAULT_RECORDS) -> list[str]:
    """Fully qualified names of the zone's A records: ``r0.tunelab.test.`` ... ``r{n-1}.tunelab.test.``."""
    return [f"r{i}.{ZONE}" for i in range(n)]


def zone_text(n: int = DEFAULT_RECORDS, ttl: int = 3600) -> str:
    """The zone file: SOA, NS and ``n`` A records (relative names, addresses in 198.51.x.y).

    >>> zone_text(2).splitlines()[-2:]
    ['r0 IN A 198.51.100.0', 'r1 IN A 198.51.100.1']
    >>> record_names(2)
    ['r0.tunelab.test.', 'r1.tunelab.test.']
    """
    lines = [
        f"$ORIGIN {ZONE}",
        f"$TTL {ttl}",
        f"@ IN SOA ns.{ZONE} hostmaster.{ZONE} 1 3600 600 86400 60",
        f"@ IN NS ns.{ZONE}",
        "ns IN A 198.51.100.1",
    ]
    lines += [f"r{i} IN A 198.51.{100 + (i // 256) % 100}.{i % 256}" for i in range(n)]
    return "\n".join(lines) + "\n"
