"""The lab's ``http`` service (nginx for wrk), its automatic ``@disk`` and the netem path options.

The lab tests need root and the Debian tools; they only send traffic inside the namespaces they
create and remove every lab, pass or fail.
"""
from __future__ import annotations

import http.client
import re
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

import tunelab
from tunelab.errors import TargetError, ToolMissingError
from tunelab.store import Store
from tunelab.targets import check_target_spec, netns
from tunelab.targets import lab as lab_module
from tunelab.targets.base import TargetOptionError
from tunelab.targets.lab import AUTO_DISK_MB, NETEM_MISSING, LabTarget, netem_available, state_path

from .conftest import require_tools

WRK_DESIGN = """\
name: {study}
description: one wrk trial against the lab's nginx
target: {{type: lab, options: {{name: {lab}, services: []}}}}
load: {{generator: wrk, profile: light, settings: {{path: /index.html}}}}
warmup_s: 0
measure_s: 2
metrics:
  - {{name: requests_per_s, direction: maximize, sesoi_pct: 5}}
knobs:
  - {{name: net.ipv4.tcp_fin_timeout, host: server, levels: [30], baseline: 30}}
design: {{type: full_factorial, replicates: 1, seed: 1}}
"""


def lab_name() -> str:
    return f"t15-{secrets.token_hex(3)}"


def nginx_pids_of(workdir: Path) -> list[int]:
    """PIDs of nginx processes whose command line names ``workdir`` (masters; workers are their children)."""
    out = subprocess.run(["pgrep", "-f", f"nginx.*{workdir}"], capture_output=True, text=True).stdout
    return [int(pid) for pid in out.split()]


def kernel_runs_netem() -> bool:
    """Independent reference: can ``tc`` add a netem loss qdisc in a throwaway namespace?"""
    proc = subprocess.run(["unshare", "--net", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "loss", "1%"],
                          capture_output=True, text=True, check=False)
    return proc.returncode == 0


# ---- pure checks (no lab) --------------------------------------------------------------------------


@pytest.mark.parametrize("options, key", [
    ({"delay_ms": -5}, "delay_ms"),
    ({"delay_ms": "20ms"}, "delay_ms"),
    ({"loss_pct": 100}, "loss_pct"),
    ({"loss_pct": 0}, "loss_pct"),
])
def test_path_options_out_of_range_are_refused_at_plan_time(options, key):
    with pytest.raises(TargetOptionError, match=key) as info:
        check_target_spec({"type": "lab", "options": options})
    assert "\n" not in str(info.value)


def test_disk_mb_accepts_auto_and_null_but_not_other_words():
    assert LabTarget(disk_mb="auto").disk_mb == "auto"
    assert LabTarget(disk_mb=None).disk_mb is None
    with pytest.raises(TargetError, match="disk_mb must be"):
        LabTarget(disk_mb="big")


def test_missing_nginx_is_one_line_naming_the_debian_package(monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(lab_module.shutil, "which", lambda tool, *a, **k: None if tool == "nginx"
                        else real_which(tool, *a, **k))
    lab = LabTarget(name=lab_name(), services=("http",))
    with pytest.raises(ToolMissingError) as info:
        lab.up()
    message = str(info.value)
    assert "\n" not in message
    assert re.search(r"Debian packages? nginx\b", message), message
    assert not state_path(lab.lab_name).exists()  # refused before anything was created


# ---- lab -----------------------------------------------------------------------------------------


@pytest.mark.lab
def test_wrk_runs_against_the_lab_nginx_and_everything_is_removed(lab_tools, tmp_path):
    require_tools("nginx", "wrk")
    name, study = lab_name(), "lab-http-wrk"
    design = tmp_path / "wrk.yaml"
    design.write_text(WRK_DESIGN.format(study=study, lab=name))
    store = tmp_path / "wrk.sqlite"
    workdir = lab_module.STATE_DIR / name
    try:
        result = tunelab.run(design, store=store, progress=False)
        assert (result.ok, result.failed, result.flagged) == (1, 0, 0), result.failures
        with Store(store) as opened:
            trials = opened.tidy()
        assert list(trials["status"]) == ["ok"]
        assert trials["requests_per_s"].iloc[0] > 0
    finally:  # what the run left behind is recorded for the asserts below, then removed whatever happened
        leftover = netns.list_namespaces(f"tl-{name}-")
        pids = nginx_pids_of(workdir)
        netns.kill_pids(pids)
        for ns in leftover:
            netns.delete_namespace(ns)
    assert leftover == [] and pids == []
    assert not state_path(name).exists() and not workdir.exists()


@pytest.mark.lab
def test_http_service_serves_the_fixed_files(make_lab):
    require_tools("nginx")
    lab = make_lab(services=("http",))
    for path, size in {"/": 1024, "/index.html": 1024, "/64k.bin": 65536}.items():
        status, body = lab.in_namespace("client", fetch, lab.address("server"), path)
        assert (status, len(body)) == (200, size)
    assert lab.in_namespace("client", fetch, lab.address("server"), "/missing")[0] == 404


def fetch(address: str, path: str) -> tuple[int, bytes]:
    """Independent client: Python's http.client, run in a thread inside the client namespace."""
    conn = http.client.HTTPConnection(address, 80, timeout=5)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.mark.lab
def test_auto_disk_is_created_on_first_use_and_removed_by_down(lab_tools):
    lab = LabTarget(name=lab_name(), services=())
    with lab:
        assert lab.state.disk_device is None  # nothing until a design names @disk
        device = lab.resolve_device("@disk")
        assert re.fullmatch(r"loop\d+", device)
        backing = lab.state.disk_file
        assert Path(f"/sys/block/{device}/loop/backing_file").read_text().strip() == backing
        assert int(Path(f"/sys/block/{device}/size").read_text()) * 512 == AUTO_DISK_MB * 1024 * 1024
        assert lab.resolve_device("@disk") == device  # one disk per lab
    assert not Path(backing).exists()
    sysfs = Path(f"/sys/block/{device}/loop/backing_file")
    assert not sysfs.exists() or sysfs.read_text().strip() != backing


@pytest.mark.lab
def test_no_disk_when_disk_mb_is_null(make_lab):
    lab = make_lab(services=(), disk_mb=None)
    with pytest.raises(TargetError, match="disk_mb"):
        lab.resolve_device("@disk")


@pytest.mark.lab
def test_delay_and_loss_use_netem_or_fail_in_one_line_before_anything_exists(lab_tools):
    assert netem_available() == kernel_runs_netem()
    lab = LabTarget(name=lab_name(), services=(), delay_ms=20, loss_pct=1)
    if not netem_available():
        with pytest.raises(TargetError) as info:
            lab.up()
        assert str(info.value) == NETEM_MISSING and "\n" not in NETEM_MISSING
        assert not state_path(lab.lab_name).exists()
        assert netns.list_namespaces(f"tl-{lab.lab_name}-") == []
        return
    with lab:
        shown = lab.run("client", ["tc", "qdisc", "show", "dev", "tl0"], timeout_s=5).stdout
        assert re.search(r"qdisc netem .*delay 20ms", shown) and "loss 1%" in shown, shown
