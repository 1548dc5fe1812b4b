"""The pre-flight (:mod:`tunelab.preflight`): every catalogue knob's mechanism is recorded and checkable, each rule
refuses exactly the experiments that cannot show their effect (values worked out by hand from the kernel's rules:
a listener's accept queue is min(backlog, somaxconn); ``ss`` shows that min; a granted SO_RCVBUF is doubled), a
change file that cannot act is refused in one line naming --force before anything runs, and a design can keep a
knob as a declared negative control. The lab test reads a real BIND 9's listen backlog with ``ss``."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from dns_helpers import require_tools

from tunelab.cli import main
from tunelab.counters.columns import is_counter_column  # noqa: F401 - the counters' own module imports cleanly
from tunelab.designs import parse_design
from tunelab.errors import DesignError
from tunelab.knobs import catalogue, get_knob
from tunelab.knobs.mechanisms import MECHANISMS
from tunelab.loads import get_load
from tunelab.model import Traffic
from tunelab.preflight import (Exercise, KnobChange, Preflight, PreflightError, Severity, design_preflight,
                               exercises_of, preflight)
from tunelab.preflight.limits import SERVER_LIMITS, LimitFacts
from tunelab.preflight.sockets import ListeningSocket, parse_ss

#: counter groups docs/counters.md documents (server side)
COUNTER_GROUPS = {"TcpExt", "IpExt", "MPTcpExt", "Ip", "Icmp", "IcmpMsg", "Tcp", "Udp", "UdpLite", "Ip6", "Icmp6",
                  "Udp6", "UdpLite6", "proc", "block"}
TCP, UDP = frozenset({Traffic.TCP}), frozenset({Traffic.UDP})


def change(name: str, levels: tuple, host: str = "server") -> KnobChange:
    return KnobChange(get_knob(name), host, levels, name if host == "server" else f"{name}@{host}")


def exercise(traffic: frozenset, cap: str | None = None, metrics: tuple = ("latency_mean_ms",)) -> Exercise:
    return Exercise("p", "dnsperf", traffic, cap, 53, metrics, ("qps", "qps_summary", "achieved_qps"))


def severities(found: Preflight) -> list[str]:
    return [f.severity.value for f in found.findings]


# ---- the catalogue --------------------------------------------------------------------------------

def test_every_catalogue_knob_has_a_mechanism_with_known_counters_and_rules():
    knobs = catalogue()
    assert set(MECHANISMS) == set(knobs)
    for name, knob in knobs.items():
        mechanism = knob.mechanism
        assert mechanism is not None and mechanism.limits and mechanism.binds_when, name
        for counter in mechanism.counters:
            assert counter.split(".")[0] in COUNTER_GROUPS and "." in counter, (name, counter)
        if mechanism.server_limit is not None:
            assert mechanism.server_limit in SERVER_LIMITS, name


def test_knobs_show_carries_the_mechanism(capsys):
    assert main(["knobs", "show", "net.core.somaxconn"]) == 0
    out = capsys.readouterr().out
    assert "ListenOverflows" in out and "TCP" in out, out


# ---- the rules, by hand --------------------------------------------------------------------------

SS_BIND = """LISTEN 0      10     10.77.0.1:53 0.0.0.0:*
\t skmem:(r0,rb131072,t0,tb46080,f0,w0,o0,bl0,d0)
LISTEN 0      10         [::1]:53    [::]:*
\t skmem:(r0,rb131072,t0,tb46080,f0,w0,o0,bl0,d0)
"""


def test_ss_output_is_read_per_socket():
    sockets = parse_ss(SS_BIND, "tcp")
    assert [(s.local, s.backlog, s.rcvbuf) for s in sockets] == [("10.77.0.1:53", 10, 131072), ("[::1]:53", 10, 131072)]
    assert parse_ss("UNCONN 0 0 10.77.0.1:53 0.0.0.0:*\n\t skmem:(r0,rb212992,t0,tb212992,f0,w0,o0,bl0,d0)",
                    "udp")[0].rcvbuf == 212992


@pytest.mark.parametrize(("levels", "current", "backlog", "cannot"), [
    ((1024, 4096), 4096, 10, True),        # BIND's default: min(10, 1024) == min(10, 4096)
    ((16, 4096), 4096, 10, True),          # both still at or above 10
    ((8, 4096), 4096, 10, None),           # 8 < 10: the queues differ
    ((128, 4096), 4096, 256, None),        # NSD/Unbound's 256 straddled
    ((1024, 8192), 4096, 4096, False),     # ss shows today's somaxconn: the server asks for >= 4096, unknown
    ((16, 1024), 4096, 4096, None),        # every level below today's value: each is the queue
])
def test_the_listen_backlog_rule(levels, current, backlog, cannot):
    facts = LimitFacts("net.core.somaxconn", levels, current, 53, (ListeningSocket("tcp", "a:53", backlog),))
    judged = SERVER_LIMITS.get("listen_backlog")(facts)
    assert (judged.cannot_act if judged is not None else None) is cannot
    if cannot:
        assert f"backlog of {backlog}" in judged.reason and "tcp-listen-queue" in judged.reason


@pytest.mark.parametrize(("rb", "rmem_max", "rmem_default", "levels", "cannot"), [
    (212992, 212992, "212992", (4096, 8388608), True),      # the default buffer: never asked, rmem_max ignored
    (2097152, 212992, "212992", (4096, 8388608), True),     # forced above rmem_max (SO_RCVBUFFORCE, as NSD does)
    (262144, 212992, "100000", (131072, 8388608), True),    # asked for 131072: both levels grant it
    (262144, 212992, "100000", (65536, 8388608), None),     # 65536 < 131072: the buffers differ
])
def test_the_udp_receive_buffer_rule(rb, rmem_max, rmem_default, levels, cannot):
    facts = LimitFacts("net.core.rmem_max", levels, rmem_max, 53, (ListeningSocket("udp", "a:53", 0, rb),),
                       {"net.core.rmem_default": rmem_default})
    judged = SERVER_LIMITS.get("udp_rcvbuf")(facts)
    assert (judged.cannot_act if judged is not None else None) is cannot


def test_transport_end_and_metric_rules():
    somaxconn = change("net.core.somaxconn", (4096, 1024))
    assert severities(preflight([somaxconn], [exercise(UDP)])) == ["cannot act"]
    assert severities(preflight([somaxconn], [exercise(TCP)])) == []
    on_client = preflight([change("net.core.somaxconn", (4096, 16), "client")], [exercise(TCP)])
    assert severities(on_client) == ["cannot act"] and "set it on the server" in on_client.findings[0].reason
    tw_reuse = preflight([change("net.ipv4.tcp_tw_reuse", (0, 1))], [exercise(TCP)])
    assert severities(tw_reuse) == ["cannot act"] and "@client" in tw_reuse.findings[0].reason
    assert severities(preflight([change("net.ipv4.tcp_tw_reuse", (0, 1), "client")], [exercise(TCP)])) == []
    capped = preflight([change("link.mtu", (1500, 576))], [exercise(UDP, "rate 2000 queries/s", ("qps",))])
    assert severities(capped) == ["blind metric"] and "latency" in capped.findings[0].reason
    assert severities(preflight([change("link.mtu", (1500, 576))], [exercise(UDP, "rate 2000 queries/s")])) == []
    # a mechanism that binds under pressure, on a capped profile: a note (the pilot tells), never a refusal
    assert severities(preflight([somaxconn], [exercise(TCP, "rate 2000 queries/s")])) == ["note"]


def test_disk_knobs_need_the_right_io():
    fio = get_load("fio")()
    direct = exercises_of(fio, {"randread": fio.settings("randread")}, ["iops"])
    buffered = exercises_of(fio, {"seq": fio.settings("seqread", {"direct": False})}, ["iops"])
    read_ahead = change("block.queue.read_ahead_kb", (2560, 128))
    assert severities(preflight([read_ahead], direct)) == ["cannot act"]       # O_DIRECT bypasses read-ahead
    assert severities(preflight([read_ahead], buffered)) == []
    assert severities(preflight([change("vm.dirty_ratio", (20, 5))], direct)) == ["cannot act"]
    assert severities(preflight([change("net.core.somaxconn", (4096, 16))], direct)) == ["cannot act"]


def test_a_screening_design_refuses_only_what_no_profile_can_exercise():
    def design(profiles, controls=None):
        data = {"name": "p", "target": {"type": "lab"}, "load": {"generator": "dnsperf", "profile": profiles},
                "metrics": [{"name": "qps"}], "knobs": [{"name": "net.core.somaxconn", "levels": [4096, 16]}],
                "design": {"type": "oat"}}
        if controls is not None:
            data["preflight"] = {"controls": controls}
        return parse_design(data)

    dnsperf = get_load("dnsperf")()
    both = design_preflight(design(["udp_overload", "overload"]), dnsperf)
    assert not both.refusals and [f.profile for f in both.notes] == ["udp_overload"]
    alone = design_preflight(design("udp_overload"), dnsperf)
    assert [f.severity for f in alone.findings] == [Severity.CANNOT_ACT]
    with pytest.raises(PreflightError, match=r"--force"):
        alone.check(force=False)
    alone.check(force=True)
    control = design_preflight(design("udp_overload", ["net.core.somaxconn"]), dnsperf)
    assert not control.refusals and "negative control" in control.notes[0].reason
    with pytest.raises(DesignError, match="not a knob of this design"):
        design("udp_overload", ["net.core.somaxconn@client"])
    # a control changes whether the study starts, never what it measures: the same store resumes
    assert design("udp_overload", ["net.core.somaxconn"]).design_hash == design("udp_overload").design_hash


# ---- the verbs -----------------------------------------------------------------------------------

def write_change(tmp_path: Path, transport: str, profile: dict) -> Path:
    (tmp_path / "queries.txt").write_text("www.example.org. A\n")
    change_file = {"name": "somaxconn-udp", "target": {"type": "lab"},
                   "load": {"generator": "dnsperf", "query_file": "queries.txt", "transport": transport,
                            "profiles": {"normal": profile}},
                   "baseline": {"net.core.somaxconn": 4096}, "candidate": {"net.core.somaxconn": 1024},
                   "metrics": ["qps:max:5"], "blocks": 2, "warmup_s": 1, "measure_s": 2}
    path = tmp_path / "change.yaml"
    path.write_text(yaml.safe_dump(change_file, sort_keys=False))
    return path


def test_validate_plan_refuses_somaxconn_under_udp_in_one_line_naming_force(tmp_path: Path, capsys):
    path = write_change(tmp_path, "udp", {"rate": 2000, "clients": 4})
    status = main(["validate", str(path), "--plan", "--offline"])
    out, err = capsys.readouterr()
    assert status == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot act" in lines[0] and "--force" in lines[0] and "UDP" in lines[0], err
    assert "pre-flight (the design only" in out and "metric qps [profile normal]: blind metric" in out, out
    assert main(["validate", str(path), "--plan", "--offline", "--force"]) == 0


def test_validate_plan_accepts_somaxconn_under_tcp_overload(tmp_path: Path, capsys):
    path = write_change(tmp_path, "tcp", {"clients": 64})
    assert main(["validate", str(path), "--plan", "--offline"]) == 0, capsys.readouterr().err
    assert re.search(r"pre-flight \(.*\): every change can act", capsys.readouterr().out)


@pytest.mark.lab
def test_a_real_bind9s_backlog_of_10_is_read_and_refuses_1024_vs_4096(tmp_path: Path):
    """BIND 9 in the lab listens with its default tcp-listen-queue; ss shows 10; somaxconn 1024 vs 4096 under TCP
    is refused for that reason, 8 vs 4096 is not (read-only: nothing is written)."""
    require_tools("named", "ss", hint="apt-get install bind9 iproute2")
    from tunelab.targets.lab import LabTarget

    dnsperf = get_load("dnsperf")()
    tcp = exercises_of(dnsperf, {"overload": dnsperf.settings("overload")}, ["qps"])
    with LabTarget(name=f"pf{abs(hash(tmp_path)) % 10000}", dns_server="bind9", services=("dns",), pin_cpus=False,
                   disk_mb=None) as lab:
        refused = preflight([change("net.core.somaxconn", (4096, 1024))], tcp, lab)
        assert refused.facts and [f.severity for f in refused.findings] == [Severity.CANNOT_ACT]
        assert "backlog of 10" in refused.findings[0].reason
        assert not preflight([change("net.core.somaxconn", (4096, 8))], tcp, lab).refusals


def test_run_refuses_a_design_whose_knob_cannot_act_before_any_store_and_force_runs_it(tmp_path: Path, capsys,
                                                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    design = tmp_path / "udp.yaml"
    design.write_text(yaml.safe_dump({
        "name": "udp-somaxconn", "target": {"type": "dry-run"}, "load": {"generator": "dnsperf",
                                                                         "profile": "udp_overload"},
        "metrics": [{"name": "qps"}], "knobs": [{"name": "net.core.somaxconn", "levels": [4096, 16]}],
        "design": {"type": "oat", "replicates": 1}}))
    assert main(["run", str(design), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "pre-flight: net.core.somaxconn" in err and "--force" in err, err
    assert not (tmp_path / "data").exists()                           # refused before the store opened
    assert main(["run", str(design), "--no-progress", "--force"]) == 0, capsys.readouterr().err
    assert "nothing was applied, run or recorded" in capsys.readouterr().out


def test_a_forced_refusal_and_the_notes_are_printed_as_the_run_starts():
    found = preflight([change("net.core.somaxconn", (4096, 1024))],
                      [exercise(UDP), Exercise("capped", "dnsperf", TCP, "rate 10 queries/s", 53, (), ())])
    assert found.shown(force=False) == [f"pre-flight: {f.line()}" for f in found.notes]
    forced = found.shown(force=True)
    assert forced[0].startswith("pre-flight: measured anyway (--force): net.core.somaxconn [profile p]: cannot act")
    assert len(forced) == len(found.findings) == 2
