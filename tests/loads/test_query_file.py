"""dnsperf with the operator's own query file and service address (no root): the line checks, the
settings rules, the copy to the load host, and no setting silently ignored."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from dns_helpers import operator_files

from tunelab.errors import LoadError
from tunelab.loads import dnsperf as dnsperf_module
from tunelab.loads import get_load
from tunelab.loads.base import SettingError
from tunelab.targets.base import CommandResult
from tunelab.targets.dnszone import QueryScan, name_problem, scan_query_file

QUERIES = "; production sample\nwww.example.org. A\n\nexample.org MX\n_sip._tcp.example.org. SRV\n*.example.org. aaaa\n"


@pytest.fixture
def load():
    return get_load("dnsperf")()


@pytest.fixture
def query_file(tmp_path: Path) -> Path:
    return operator_files(tmp_path, queries=QUERIES)[1]


def test_a_valid_query_file_counts_its_query_lines_and_skips_comments_and_empty_lines():
    assert scan_query_file(QUERIES) == QueryScan(4, None)
    assert scan_query_file("x. TYPE65\nx. type65535\n") == QueryScan(2, None)


@pytest.mark.parametrize(("text", "line", "fragment"), [
    ("www.example.org. A\nwww.example.org.\n", 2, "expected 'NAME TYPE' (2 fields), found 1 field"),
    ("www.example.org. A IN\n", 1, "found 3 fields"),
    ("www.example.org. A\r\n", 1, "carriage return"),
    ("a. A\nb. A\nc. BOGUS\n", 3, "type 'BOGUS' is not a DNS RR type dnsperf knows"),
    ("a. TYPE65536\n", 1, "type 'TYPE65536' is not a DNS RR type"),
    ("bad..name A\n", 1, "name 'bad..name' is not a DNS name: it has an empty label"),
    ("ex ample.org A\n", 1, "found 3 fields"),
    ("exa$mple.org. A\n", 1, "has a character other than"),
    ("a" * 64 + ".org. A\n", 1, "is 64 characters long (at most 63)"),
    ("; only a comment\n\n", 0, "it has no query line"),
    ("", 0, "it has no query line"),
])
def test_the_first_bad_line_is_named_with_its_number_and_what_is_wrong(text, line, fragment):
    scan = scan_query_file(text)
    assert scan.problem is not None and scan.problem[0] == line and fragment in scan.problem[1], scan


def test_names_longer_than_253_characters_are_refused():
    name = ".".join(["a" * 63] * 4)          # 255 characters
    assert "at most 253" in name_problem(name)
    assert name_problem(".") is None and name_problem("example.org") is None


def test_validate_settings_names_the_file_the_line_and_the_problem(load, tmp_path):
    path = tmp_path / "q.txt"
    path.write_text("www.example.org. A\nwww.example.org. AAAAA\n")
    with pytest.raises(SettingError) as info:
        load.validate_settings({"query_file": str(path)})
    assert str(info.value) == (f"dnsperf: setting query_file: {path}, line 2: type 'AAAAA' is not a DNS RR type "
                               "dnsperf knows (e.g. A, AAAA, MX, TXT, NS, SOA, SRV, PTR); each line is 'NAME TYPE', "
                               "e.g. 'www.example.org. A'")
    assert info.value.setting == "query_file"


@pytest.mark.parametrize(("path", "fragment"), [
    ("/nonexistent/q.txt", "/nonexistent/q.txt: no such query file"),
    ("/dev/zero", "/dev/zero: the query file is not a regular file"),
    ("/", "not a regular file"),
])
def test_a_missing_or_special_query_file_is_one_error(load, path, fragment):
    with pytest.raises(SettingError, match=fragment):
        load.validate_settings({"query_file": path})


def test_a_fifo_query_file_is_refused_without_blocking(load, tmp_path):
    fifo = tmp_path / "q.fifo"
    os.mkfifo(fifo)
    with pytest.raises(SettingError, match="not a regular file"):
        load.validate_settings({"query_file": str(fifo)})


def test_a_query_file_above_the_cap_is_refused(load, query_file, monkeypatch):
    monkeypatch.setattr(dnsperf_module, "MAX_QUERY_FILE_BYTES", 16)
    with pytest.raises(SettingError, match=r"has \d+ bytes, more than the limit of 16"):
        load.validate_settings({"query_file": str(query_file)})


def test_a_file_that_is_not_utf8_is_refused(load, tmp_path):
    path = tmp_path / "q.bin"
    path.write_bytes(b"www.example.org. A\n\xff\xfe\n")
    with pytest.raises(SettingError, match="is not UTF-8 text"):
        load.validate_settings({"query_file": str(path)})


def test_records_with_query_file_would_be_ignored_and_is_refused(load, query_file):
    with pytest.raises(SettingError, match="records sizes the generated query file and would be ignored") as info:
        load.validate_settings({"query_file": str(query_file), "records": 10})
    assert info.value.setting == "records"
    assert load.validate_settings({"query_file": str(query_file)})["query_file"] == str(query_file)


@pytest.mark.parametrize("address", ["192.0.2.53", "2001:db8::53"])
def test_server_address_sends_the_load_to_a_service_address(load, address):
    settings = load.settings("low", {"server_address": address}) | {"remote_query_file": "/q"}
    argv = load.command(settings, 2, "10.0.0.9")
    assert argv[argv.index("-s") + 1] == address
    plain = load.command(load.settings("low") | {"remote_query_file": "/q"}, 2, "10.0.0.9")
    assert plain[plain.index("-s") + 1] == "10.0.0.9"


@pytest.mark.parametrize("address", ["db1.example.org", "10.0.0.300", "10.0.0.1 -x", ""])
def test_server_address_must_be_an_ip_address(load, address):
    with pytest.raises(SettingError, match="server_address=.* must be an IPv4 or IPv6 address"):
        load.validate_settings({"server_address": address})


def test_an_unknown_or_internal_setting_is_refused_when_settings_are_merged(load):
    with pytest.raises(SettingError, match="unknown load setting 'foo'"):
        load.settings("low", {"foo": 1})
    with pytest.raises(SettingError, match="unknown load setting 'remote_query_file'"):
        load.settings("low", {"remote_query_file": "/etc/shadow"})
    with pytest.raises(SettingError, match="unknown load setting 'query_file_sha256'"):
        load.settings("low", {"query_file_sha256": "0" * 64})
    with pytest.raises(LoadError, match="clients=0 must be"):
        load.settings("overload", {"clients": 0})


class Recorder:
    """A load host that records commands and writes (mktemp -d answers a private directory)."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, list[str]]] = []
        self.written: list[tuple[str, str, str]] = []

    def run(self, host, argv, timeout_s, cpu=None):
        self.ran.append((host, list(argv)))
        out = "/tmp/tunelab-dnsperf.QwErTy1234\n" if argv[0] == "mktemp" else ""
        return CommandResult(tuple(argv), 0, out, "", 0.01)

    def write_text(self, host, path, text):
        self.written.append((host, path, text))


def test_prepare_copies_the_operators_file_into_the_private_directory_once(load, query_file):
    target = Recorder()
    settings = load.settings("low", {"query_file": str(query_file)})
    extra = load.prepare(target, settings)
    assert extra == {"remote_query_file": "/tmp/tunelab-dnsperf.QwErTy1234/queries",
                     "query_file_sha256": hashlib.sha256(QUERIES.encode()).hexdigest(),
                     "query_file_lines": len(QUERIES.splitlines())}       # what a trial records: never the text
    assert target.written == [("client", "/tmp/tunelab-dnsperf.QwErTy1234/queries", QUERIES)]
    argv = load.command(settings | extra, 3, "10.77.0.1")
    assert argv[argv.index("-d") + 1] == "/tmp/tunelab-dnsperf.QwErTy1234/queries"
    load.prepare(target, settings)                                  # the next trial: same content, not copied again
    assert len(target.written) == 1 and [a[0] for _, a in target.ran] == ["mktemp"]
    query_file.write_text(QUERIES + "new.example.org. A\n")         # changed between trials: checked and copied again
    load.prepare(target, settings)
    assert len(target.written) == 2 and target.written[-1][2].endswith("new.example.org. A\n")
    load.cleanup(target)
    assert target.ran[-1] == ("client", ["rm", "-rf", "--", "/tmp/tunelab-dnsperf.QwErTy1234"])


def test_the_query_file_is_hashed_once_and_the_provenance_takes_the_digest_the_trials_sent(load, query_file,
                                                                                          monkeypatch):
    """The settings check, three trials' prepare and the sysctl.d provenance share one reading and one SHA-256 of
    the operator's file (a counter on dnsperf's hashing; the provenance may not hash the file again)."""
    from tunelab.optimize import deploy

    hashed = []

    def sha256(data=b""):
        hashed.append(data)
        return hashlib.sha256(data)

    monkeypatch.setattr(dnsperf_module, "hashlib", SimpleNamespace(sha256=sha256))
    monkeypatch.setattr(deploy, "file_sha256", lambda path: pytest.fail(f"{path} was hashed again"))
    settings = load.settings("low", {"query_file": str(query_file)})
    load.validate_settings(settings)
    target = Recorder()
    extras = [load.prepare(target, settings) for _ in range(3)]
    digest = hashlib.sha256(QUERIES.encode()).hexdigest()       # the reference: hashlib on the file's bytes
    assert hashed == [QUERIES.encode()] and {e["query_file_sha256"] for e in extras} == {digest}
    facts = deploy.provenance({"type": "ssh", "options": {}}, {}, load, [settings], "improve", [])
    assert facts["query_files"] == [{"path": str(query_file), "sha256": digest, "lines": len(QUERIES.splitlines())}]


def test_prepare_checks_the_file_again_before_it_copies_it(load, query_file):
    settings = load.settings("low", {"query_file": str(query_file)})
    query_file.write_text("www.example.org. A\nbroken\n")
    target = Recorder()
    with pytest.raises(SettingError, match=r"line 2: expected 'NAME TYPE'"):
        load.prepare(target, settings)
    assert target.written == []


def test_response_codes_are_parsed_from_the_summary():
    text = "  Response codes:       NOERROR 6000 (100.00%)\n"
    assert dnsperf_module.parse_rcodes(text) == {"NOERROR": 6000}
    assert dnsperf_module.parse_rcodes("no summary") == {}


def _recorded(name: str) -> str:
    return (Path(__file__).parent / "recorded" / name).read_text()


@pytest.mark.parametrize(("codes", "status"), [
    ("NOERROR 6000 (100.00%)", "ok"),
    ("NOERROR 3000 (50.00%), NXDOMAIN 3000 (50.00%)", "ok"),          # names that do not exist: a real answer
    ("NOERROR 3001 (50.02%), REFUSED 2999 (49.98%)", "ok"),
    ("NOERROR 3000 (50.00%), REFUSED 3000 (50.00%)", "failed"),
    ("REFUSED 6000 (100.00%)", "failed"),
])
def test_a_run_answered_mostly_with_refused_measures_nothing_and_fails(load, codes, status):
    text = _recorded("dnsperf_low_udp.out").replace("NOERROR 6000 (100.00%)", codes)
    parsed = load.parse(CommandResult(("dnsperf",), 0, text, "", 3.0), load.settings("low"), 1)
    assert parsed.status == status, parsed.reason
    if status == "failed":
        assert "of the answers were REFUSED: the server does not serve the queried names" in parsed.reason
        assert parsed.metrics == {}
