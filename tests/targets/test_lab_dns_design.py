"""A design run end to end in the lab with BIND 9 serving the operator's zone file under the operator's
query file: `tunelab run` builds the lab from the design's options, copies the query file, restarts named
after a requires_restart knob, and records which DNS server answered (two 1 s trials)."""
from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest
from dns_helpers import ZONE, operator_files, require_tools

from tunelab.cli import main
from tunelab.store import Store


def design_text(zone_file: Path, query_file: Path) -> str:
    return textwrap.dedent(f"""
        name: bind9-operator-zone
        target:
          type: lab
          options: {{dns_server: bind9, zone: example.net., zone_file: "{zone_file}", services: [dns]}}
        load: {{generator: dnsperf, profile: low, settings: {{query_file: "{query_file}", rate: 300}}}}
        warmup_s: 0
        measure_s: 1
        metrics: [{{name: latency_mean_ms, direction: minimize}}]   # qps is the offered rate at a capped rate
        knobs:
          - {{name: net.core.somaxconn, levels: [4096, 128], baseline: 4096}}
        design: {{type: oat, replicates: 1, seed: 3}}
        preflight: {{controls: [net.core.somaxconn]}}   # any knob serves here; UDP cannot exercise this one
    """)


@pytest.mark.lab
def test_a_design_runs_bind9_with_the_operators_zone_and_queries(tmp_path: Path, capsys) -> None:
    require_tools("dnsperf", "named", "named-checkzone", hint="apt-get install bind9 bind9-utils dnsperf")
    zone_file, query_file = operator_files(tmp_path)
    design, store_path = tmp_path / "design.yaml", tmp_path / "data" / "bind9.sqlite"
    design.write_text(design_text(zone_file, query_file))

    status = main(["run", str(design), "--store", str(store_path), "--no-progress"])
    out = capsys.readouterr().out
    assert status == 0 and "0 failed" in out, out
    with Store(store_path, readonly=True) as store:
        trials = store.trials()
        assert store.unrestored() == []
    assert len(trials) == 2 and set(trials["status"]) <= {"ok", "flagged"}, trials[["status", "reason"]]
    digest = hashlib.sha256(query_file.read_bytes()).hexdigest()
    for provenance in trials["provenance"]:
        assert provenance["load_settings"]["query_file_sha256"] == digest     # which query file was sent, exactly
        lab = provenance["target"]["lab"]
        assert (lab["dns_server"], lab["zone"], lab["zone_file"]) == ("bind9", "example.net.", str(zone_file))
        assert lab["dns_server_version"].startswith("BIND 9")
    # somaxconn is requires_restart: named was restarted through the lab's service command in every trial
    assert all(t.get("restart", 0.0) > 0 for t in trials["timings"]), list(trials["timings"])


def test_plan_refuses_a_bad_zone_and_a_bad_query_file_with_one_line_each(tmp_path: Path, capsys) -> None:
    require_tools("named-checkzone", hint="apt-get install bind9-utils")
    zone_file, query_file = operator_files(tmp_path, zone=ZONE.replace("192.0.2.10", "192.0.2.256"))
    design = tmp_path / "design.yaml"
    design.write_text(design_text(zone_file, query_file))
    assert main(["plan", str(design)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "target.options.zone_file" in err and "named-checkzone" in err, err
    zone_file.write_text(ZONE)
    query_file.write_text("www.example.net. A\nwww.example.net.\tA\tIN\n")
    assert main(["plan", str(design)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{query_file}, line 2: expected 'NAME TYPE'" in err, err
