"""validate's deployable answer: the sysctl.d file of the candidate, its rollback, and their provenance."""
from __future__ import annotations

import json
import re
import stat
from pathlib import Path
from typing import Any

import pytest

import tunelab
from tunelab.designs.config_files import read_config_file
from tunelab.errors import TunelabError
from tunelab.knobs import get_knob
from tunelab.model import KnobId
from tunelab.optimize.deploy import DEPLOYABLE, provenance, sysctl_texts, write_atomic
from tunelab.optimize.export import comment_text
from tunelab.simulator import get_surface
from tunelab.version import __version__

#: a sysctl.d line: ``key = value`` (sysctl.d(5): whitespace around ``=`` is ignored; ``#`` and ``;`` comment)
SYSCTL_LINE = re.compile(r"^(?P<key>[A-Za-z0-9_.\-/*]+)\s*=\s*(?P<value>\S.*?)\s*$")
#: sha256(b"abc"), FIPS 180-2 appendix B.1
SHA256_ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def parse_sysctl_d(text: str) -> dict[str, str]:
    """Read ``text`` as sysctl.d(5) does: blank lines and ``#``/``;`` comments skipped, every other line
    ``key = value`` (a line that is neither fails the test)."""
    out = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith(("#", ";")):
            continue
        match = SYSCTL_LINE.match(line)
        assert match, f"not a sysctl.d line: {line!r}"
        out[match["key"]] = match["value"]
    return out


def sysctl_part(config: dict[str, Any]) -> dict[str, Any]:
    """The server sysctl knobs of ``config`` (what may go into a sysctl.d file)."""
    return {kid: value for kid, value in config.items()
            if KnobId.parse(kid).host == "server" and get_knob(KnobId.parse(kid).name).family == "sysctl"}


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory):
    """wide27's optimum (triplets, bools, host-global sysctls, two link knobs) validated on the simulator."""
    surface = get_surface("wide27")
    candidate = {kid: value for kid, value in surface.optimum().items() if value != surface.baseline[kid]}
    folder = tmp_path_factory.mktemp("deploy")
    run = tunelab.validate("simulator", candidate, surface="wide27", blocks=4, allow_host_global=True,
                           store=folder / "v.sqlite")
    return run, surface, candidate, folder


def test_the_verdict_is_deployable_and_both_files_are_where_they_belong(deployed) -> None:
    run, _, _, folder = deployed
    assert run.verdict in DEPLOYABLE, run.summary()         # +23 % qps on the SYNTHETIC surface: improve
    directory = folder / "v-sysctl"                         # default: next to the store
    names = sorted(p.name for p in directory.iterdir())
    assert names == ["90-tunelab-validate-simulator.conf", "90-tunelab-validate-simulator.conf.rollback"]
    for path in directory.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert run.sysctl.paths == {"conf": directory / names[0], "rollback": directory / names[1]}


def test_the_file_parses_as_sysctl_d_and_round_trips_the_candidate(deployed) -> None:
    run, _, candidate, _ = deployed
    parsed = parse_sysctl_d(run.sysctl.paths["conf"].read_text())
    expected = sysctl_part(candidate)
    assert set(parsed) == set(expected) and len(expected) == 8     # the two link knobs are not sysctls
    for name, text in parsed.items():
        knob = get_knob(name)
        assert knob.validate(knob.from_text(text)) == knob.validate(expected[name])
    assert parsed["net.ipv4.tcp_rmem"] == "8192 262144 33554432"    # a triplet space-separated
    assert parsed["net.ipv4.tcp_no_metrics_save"] == "1" and parsed["net.core.busy_poll"] == "50"
    # what `tunelab validate --candidate FILE` reads back is the same configuration
    read_back = read_config_file(run.sysctl.paths["conf"])
    assert {k: get_knob(k).validate(v) for k, v in read_back.items()} == expected


def test_block_and_link_knobs_are_comments_with_the_command_that_sets_them(deployed) -> None:
    run, _, _, _ = deployed
    lines = run.sysctl.paths["conf"].read_text().splitlines()
    assert any(line.startswith("# link.mtu[eth0]:") and "ip link set dev eth0 mtu 9000" in line for line in lines)
    assert any("ip link set dev eth0 txqueuelen 10000" in line for line in lines if line.startswith("#"))


def test_the_rollback_holds_the_baseline_as_measured(deployed) -> None:
    run, surface, candidate, _ = deployed
    parsed = parse_sysctl_d(run.sysctl.paths["rollback"].read_text())
    expected = sysctl_part({kid: surface.baseline[kid] for kid in candidate})     # the simulator's values before
    assert {name: get_knob(name).validate(get_knob(name).from_text(text)) for name, text in parsed.items()} == expected
    assert parsed["net.ipv4.tcp_rmem"] == "4096 131072 6291456"
    assert "ip link set dev eth0 mtu 1500" in run.sysctl.paths["rollback"].read_text()


def test_the_header_carries_the_provenance(deployed) -> None:
    run, _, _, _ = deployed
    head = [line for line in run.sysctl.paths["conf"].read_text().splitlines() if line.startswith("# ")]
    fields = dict(line[2:].split(": ", 1) for line in head if ": " in line)
    assert fields["server"] == "none (SYNTHETIC simulator, surface wide27)"      # readable, not a JSON blob
    assert fields["tunelab"] == __version__ and fields["verdict"] == run.verdict.upper()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", fields["date"])
    assert fields["kernel"].startswith("unknown") and fields["note"].startswith("SYNTHETIC")
    assert "dns software" not in fields and "query file" not in fields     # not dnsperf, no query file
    assert "restart" not in fields                                         # no knob read only at start-up
    assert any(line.startswith("#   [overload] qps: ") for line in head)


def test_json_agrees_with_the_files(deployed) -> None:
    run, _, candidate, _ = deployed
    payload = json.loads(json.dumps(run.to_json()))
    files = payload["sysctl"]["files"]
    assert payload["sysctl"]["written"] is True
    for role in ("conf", "rollback"):
        assert files[role]["content"] == Path(files[role]["path"]).read_text()
    assert payload["sysctl"]["provenance"]["verdict"] == payload["verdict"]
    assert payload["sysctl"]["provenance"]["server"] == {"type": "simulator", "options": {"surface": "wide27"}}
    assert payload["candidate"]["net.ipv4.tcp_rmem"] == list(candidate["net.ipv4.tcp_rmem"])


def test_no_file_on_another_verdict(tmp_path: Path) -> None:
    run = tunelab.validate("simulator", {"net.core.somaxconn": 16}, surface="simple", blocks=3,
                           store=tmp_path / "v.sqlite", write_sysctl=tmp_path / "out")
    assert run.verdict == "regress" and run.sysctl is None and not (tmp_path / "out").exists()
    assert run.sysctl_note.startswith("no sysctl.d file written: the verdict is REGRESS")
    assert run.to_json()["sysctl"] == {"written": False, "reason": run.sysctl_note}


class Dnsperf:
    name, service = "dnsperf", "dns"


def test_provenance_names_kernel_dns_software_query_file_and_load_host_without_secrets(tmp_path: Path) -> None:
    queries = tmp_path / "queries.txt"
    queries.write_bytes(b"abc")
    spec = {"type": "ssh", "options": {"server": "root@db1:22", "client": "root@loadgen:22",
                                       "connect_kwargs": {"key_filename": "/k", "password": "hunter2"},
                                       "service_commands": {"dns": ["systemctl", "restart", "named"]}}}
    description = {"target": "ssh", "hosts": {"server": {"kernel": "6.1.0-18-amd64"}},
                   "dns_server": {"software": "bind9", "version": "9.18.33-1~deb12u2-Debian"}}
    profiles = {"overload": {"mode": "tcp", "clients": 64, "query_file": str(queries)},
                "normal": {"rate": 500, "clients": 2, "query_file": str(queries), "server_address": "192.0.2.53"}}
    facts = provenance(spec, description, Dnsperf(), profiles, "improve", ["[overload] qps: +3.00 % -> improve"],
                       now="2026-11-26T18:00:00Z", knobs=["net.core.somaxconn"])
    assert facts["kernel"] == "6.1.0-18-amd64" and facts["dns_software"] == "bind9 9.18.33-1~deb12u2-Debian"
    assert facts["query_files"] == [{"path": str(queries), "sha256": SHA256_ABC, "lines": 1}]
    assert facts["load_host"] == "root@loadgen:22"
    texts = sysctl_texts("validate-ssh", {"net.core.somaxconn": 128}, {"net.core.somaxconn": 4096}, facts)
    assert "hunter2" not in json.dumps(facts) and "hunter2" not in texts["conf"]
    head = texts["conf"].splitlines()
    assert head[3:13] == [
        "# server: root@db1:22 (ssh)",
        "# service address: 192.0.2.53",
        "# dns software: bind9 9.18.33-1~deb12u2-Debian",
        "# kernel: 6.1.0-18-amd64",
        "# load host: root@loadgen:22",
        f"# query file: {queries}, sha256 {SHA256_ABC}, 1 line",
        "# profile overload: transport tcp, clients 64, no rate cap",
        "# profile normal: rate 500 qps, clients 2",
        "# date: 2026-11-26T18:00:00Z",
        f"# tunelab: {__version__}"], head
    assert ("# restart: restart the DNS server (systemctl restart named) after sysctl --system: "
            "net.core.somaxconn is read at listen()") in head
    assert not any("/k" in line or "key_filename" in line for line in head)   # no key path in the header
    assert parse_sysctl_d(texts["conf"]) == {"net.core.somaxconn": "4096"}
    assert parse_sysctl_d(texts["rollback"]) == {"net.core.somaxconn": "128"}


def test_a_provenance_value_cannot_break_out_of_its_comment() -> None:
    facts = provenance({"type": "local", "options": {}}, {"kernel": "6.1\nnet.core.somaxconn = 1"}, object(),
                       [], "equivalent", ["x"])
    text = sysctl_texts("validate-local", {"net.ipv4.tcp_sack": False}, {"net.ipv4.tcp_sack": True}, facts)["conf"]
    assert parse_sysctl_d(text) == {"net.ipv4.tcp_sack": "1"}
    assert comment_text("a\x1b[2J\tb") == "a [2J b"


@pytest.mark.parametrize("name", ["../escape.conf", "sub/x.conf", "..", ""])
def test_files_are_written_only_inside_the_directory(tmp_path: Path, name: str) -> None:
    inside = tmp_path / "inside"
    inside.mkdir()
    with pytest.raises(TunelabError, match="not a plain file name"):
        write_atomic(inside, name, "x = 1\n")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["inside"]


def test_an_existing_file_is_replaced_whole(tmp_path: Path) -> None:
    old = write_atomic(tmp_path, "90-tunelab-x.conf", "old = 1\n")
    new = write_atomic(tmp_path, "90-tunelab-x.conf", "net.core.somaxconn = 4096\n")
    assert old == new and new.read_text() == "net.core.somaxconn = 4096\n"
    assert [p.name for p in tmp_path.iterdir()] == ["90-tunelab-x.conf"]      # no temporary file left


def test_the_api_can_be_told_not_to_write(tmp_path: Path) -> None:
    run = tunelab.validate("simulator", {"net.core.somaxconn": 1024}, surface="simple", blocks=4,
                           store=tmp_path / "v.sqlite", write_sysctl=False)
    assert run.verdict in DEPLOYABLE and run.sysctl is None and "write_sysctl=False" in run.sysctl_note
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("v.sqlite")) == []
