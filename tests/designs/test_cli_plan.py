"""`tunelab plan` through tunelab.cli.main: the JSON schema documented in designs/README.md."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import yaml

import tunelab.designs.schema as schema
from tunelab.cli import main

TOP_KEYS = {"design", "runs", "runs_per_replicate", "configs", "baseline_runs", "knobs", "host_global", "commands", "warnings",
            "restarts", "estimated_wall_s", "timing", "fractional", "sequential", "plan", "preflight"}


@pytest.fixture(autouse=True)
def fake_catalogue(monkeypatch: pytest.MonkeyPatch, lookup) -> None:
    monkeypatch.setattr(schema, "_default_knob_lookup", lookup)


def run_plan(path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["plan", str(path), "--format", fmt]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


def test_json_output_has_documented_keys(tmp_path: Path, base, two_level, capsys) -> None:
    path = tmp_path / "ff.yaml"
    path.write_text(yaml.safe_dump(base(knobs=two_level(7) + [], design={
        "type": "fractional_factorial", "replicates": 2, "seed": 4, "options": {"generators": ["D=AB", "E=AC", "F=BC", "G=ABC"]}})))
    doc = json.loads(run_plan(path, "json", capsys))
    assert set(doc) == TOP_KEYS
    assert doc["runs"] == len(doc["plan"]) == 16 and doc["runs_per_replicate"] == 8
    assert doc["design"]["type"] == "fractional_factorial" and len(doc["design"]["hash"]) == 64
    assert doc["fractional"]["resolution"] == 3
    assert doc["fractional"]["defining_relation"][:3] == ["ABD", "ACE", "AFG"]
    assert [r["run_order"] for r in doc["plan"]] == list(range(16))
    first = doc["plan"][0]
    assert {"run_id", "config_id", "block", "replicate", "run_order", "is_baseline", "varied_knob", "fake.k00"} <= set(first)
    assert {k["id"] for k in doc["knobs"]} == {f"fake.k{i:02d}" for i in range(7)}
    assert doc["estimated_wall_s"] == pytest.approx(16 * (1 + 2 + 1.0))


def test_json_plan_keeps_triplets_as_arrays(tmp_path: Path, base, capsys) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(base(knobs=[{"name": "net.ipv4.tcp_rmem", "host": "client",
                                               "levels": [[4096, 131072, 6291456], [4096, 131072, 16777216]]}])))
    doc = json.loads(run_plan(path, "json", capsys))
    values = {tuple(r["net.ipv4.tcp_rmem@client"]) for r in doc["plan"]}
    assert values == {(4096, 131072, 6291456), (4096, 131072, 16777216)}
    assert doc["fractional"] is None


def test_csv_output_is_the_plan(tmp_path: Path, base, capsys) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(base(design={"type": "oat", "replicates": 3, "seed": 1})))
    rows = list(csv.DictReader(io.StringIO(run_plan(path, "csv", capsys))))
    assert len(rows) == 6                           # (1 baseline + 1 varied) x 3
    assert rows[0]["run_order"] == "0" and "net.core.somaxconn" in rows[0]


def test_table_output_shows_scope_and_resolution(tmp_path: Path, base, two_level, capsys) -> None:
    path = tmp_path / "t.yaml"
    knobs = two_level(3) + [{"name": "net.core.rmem_max", "levels": [212992, 16777216]}]
    path.write_text(yaml.safe_dump(base(knobs=knobs, design={"type": "fractional_factorial", "seed": 1,
                                                            "options": {"resolution": 4}})))
    out = run_plan(path, "table", capsys)
    assert "resolution  4" in out and "D=ABC" in out
    assert "warning: host-global knobs net.core.rmem_max" in out
