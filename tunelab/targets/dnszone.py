"""DNS zones and query files: the lab's own zone (served by the lab, queried by dnsperf, defined
once so both sides agree), DNS names, and the checks an operator's zone or query file passes before
anything uses it.

The lab's zone is ``tunelab.test.`` with A records ``r0 ... r{n-1}``. An operator's files are
read with :func:`read_regular_text` (a regular file, size-capped) and a query file (the file
``dnsperf -d`` reads) is checked line by line with :func:`scan_query_file`: each line
``NAME TYPE`` with a valid name and a type dnsperf knows; empty lines and ``;`` comments are
skipped, as dnsperf skips them.

Examples
--------
>>> absolute_name("Example.ORG")
'example.org.'
>>> scan_query_file("www.example.org. A\\n; comment\\n\\nexample.org MX\\n")
QueryScan(queries=2, problem=None)
>>> scan_query_file("www.example.org. A\\nexample.org. BOGUS\\n").problem
(2, "type 'BOGUS' is not a DNS RR type dnsperf knows (e.g. A, AAAA, MX, TXT, NS, SOA, SRV, PTR)")
"""
from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass

from tunelab.paths import read_capped_text

ZONE = "tunelab.test."
DEFAULT_RECORDS = 1000
#: the RR type mnemonics dnsperf 2.x accepts in a query file (its ``qtype_table``); ``TYPEnnn`` also
RR_TYPES = frozenset((
    "A NS MD MF CNAME SOA MB MG MR NULL WKS PTR HINFO MINFO MX TXT RP AFSDB X25 ISDN RT NSAP NSAP-PTR SIG "
    "KEY PX GPOS AAAA LOC NXT EID NIMLOC SRV ATMA NAPTR KX CERT A6 DNAME SINK OPT APL DS SSHFP IPSECKEY "
    "RRSIG NSEC DNSKEY DHCID NSEC3 NSEC3PARAM TLSA SMIMEA HIP NINFO RKEY TALINK CDS CDNSKEY OPENPGPKEY "
    "CSYNC ZONEMD SVCB HTTPS SPF UINFO UID GID UNSPEC NID L32 L64 LP EUI48 EUI64 TKEY TSIG IXFR AXFR "
    "MAILB MAILA ANY URI CAA AVC DOA AMTRELAY TA DLV").split())
_TYPE_NUMBER = re.compile(r"TYPE(\d{1,5})")
#: a label: letters, digits, '-', '_' (SRV, DKIM), or a lone '*' (a wildcard query)
_LABEL = re.compile(r"[A-Za-z0-9_-]{1,63}|\*")
#: longest name in text form without the final dot (255 octets on the wire)
MAX_NAME_CHARS = 253


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


def name_problem(name: str) -> str | None:
    """What is wrong with a DNS name in text form (None: valid). ``.`` is the root.

    >>> name_problem("a..b"), name_problem("a b.")
    ('it has an empty label', "label 'a b' has a character other than a-z, 0-9, '-', '_' (or a lone '*')")
    """
    if name == ".":
        return None
    body = name[:-1] if name.endswith(".") else name
    if not body:
        return "it is empty"
    if len(body) > MAX_NAME_CHARS:
        return f"it is {len(body)} characters long (at most {MAX_NAME_CHARS})"
    for label in body.split("."):
        if not label:
            return "it has an empty label"
        if len(label) > 63:
            return f"label {label[:20]!r}... is {len(label)} characters long (at most 63)"
        if not _LABEL.fullmatch(label):
            return f"label {label[:63]!r} has a character other than a-z, 0-9, '-', '_' (or a lone '*')"
    return None


def absolute_name(name: str) -> str:
    """``name`` lower-cased with its final dot (ValueError naming the problem when it is not a DNS name)."""
    problem = name_problem(name)
    if problem is not None:
        raise ValueError(f"{name!r} is not a DNS name: {problem}")
    return name.lower() if name.endswith(".") else name.lower() + "."


def type_problem(rrtype: str) -> str | None:
    """What is wrong with a query type (None: a mnemonic dnsperf knows, any case, or ``TYPEnnn``)."""
    upper = rrtype.upper()
    number = _TYPE_NUMBER.fullmatch(upper)
    if upper in RR_TYPES or (number is not None and int(number.group(1)) <= 65535):
        return None
    return f"type {rrtype[:40]!r} is not a DNS RR type dnsperf knows (e.g. A, AAAA, MX, TXT, NS, SOA, SRV, PTR)"


def query_line_problem(line: str) -> str | None:
    """What is wrong with one query line (None: ``NAME TYPE``)."""
    if line.endswith("\r"):
        return "it ends in a carriage return (a Windows line ending); convert the file with dos2unix"
    fields = line.split()
    if len(fields) != 2:
        return f"expected 'NAME TYPE' (2 fields), found {len(fields)} field{'s' if len(fields) != 1 else ''}"
    name, rrtype = fields
    problem = name_problem(name)
    if problem is not None:
        return f"name {name[:80]!r} is not a DNS name: {problem}"
    return type_problem(rrtype)


@dataclass(frozen=True)
class QueryScan:
    """A query file's query lines and its first problem ``(line number, what is wrong)``, or None."""

    queries: int
    problem: tuple[int, str] | None


def scan_query_file(text: str) -> QueryScan:
    """Check every line of a dnsperf query file; empty lines and ``;`` comments are skipped (as dnsperf does)."""
    queries = 0
    for number, line in enumerate(text.split("\n"), 1):
        if not line or line.startswith(";"):
            continue
        problem = query_line_problem(line)
        if problem is not None:
            return QueryScan(queries, (number, problem))
        queries += 1
    if queries == 0:
        return QueryScan(0, (0, "it has no query line ('NAME TYPE'); dnsperf would have nothing to send"))
    return QueryScan(queries, None)


def read_regular_text(path: str, limit: int, error: type[Exception], what: str, hint: str) -> str:
    """The UTF-8 text of the regular file ``path``, at most ``limit`` bytes, else one ``error`` line.

    A FIFO, a device (``/dev/zero``) or a directory is refused before it is opened, so reading
    never blocks; the size cap is :func:`tunelab.paths.read_capped_text`'s.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise error(f"{path}: no such {what}; {hint}") from None
    except OSError as exc:
        raise error(f"{path}: cannot read the {what}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise error(f"{path}: the {what} is not a regular file; give the path of a file")
    if info.st_size > limit:
        raise error(f"{path}: the {what} has {info.st_size} bytes, more than the limit of {limit}; "
                    "use a smaller sample")
    return read_capped_text(path, limit, error, what, hint)
