"""An ssh testbed driven through a Dask worker, against a real sshd in a network namespace of its own.

The Dask worker lives in the root namespace and builds its ssh target from the testbeds file's plain
options (no Python-only ``connect_socket``), so the sshd must be reachable from the root namespace:
the fixture joins one private namespace to it with a veth pair on a random free /30 of 10.254.0.0/16,
runs sshd (and an iperf3 server for the load) inside it on the namespace's address only, and always
removes sshd, iperf3, the veth and the namespace afterwards, pass or fail.
"""
from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml

import tunelab
from tunelab.cluster import journal_path
from tunelab.designs import load_design, make_plan
from tunelab.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "targets"))
from sshd_helper import stop_process, write_sshd_files  # noqa: E402

SSH_PORT = 2222
#: a port nothing listens on inside the namespace (the unreachable testbed)
CLOSED_PORT = 2223
#: the iperf3 load's default port (tunelab/loads/iperf3.py DEFAULTS["port"])
IPERF3_PORT = 5201
KNOB = "net.ipv4.tcp_fin_timeout"
FIN = "/proc/sys/net/ipv4/tcp_fin_timeout"
#: the namespace's value before the study: neither level, so a missed restore cannot go unnoticed
ORIGINAL_FIN = "45"
POOL = ipaddress.ip_network("10.254.0.0/16")
TOOLS = ("ip", "ss", "sshd", "ssh-keygen", "iperf3")
START_TIMEOUT_S = 10.0


def _require_root_and_tools() -> None:
    """Skip (with the reason) unless root with the tools this test runs installed."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    missing = [t for t in TOOLS if shutil.which(t) is None and shutil.which(t, path="/usr/sbin:/sbin") is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (install the Debian packages iproute2, openssh-server, iperf3)")


def _run(*argv: str, check: bool = True, text_in: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, input=text_in, timeout=30)


def _networks_in_use() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network of this namespace's addresses (``ip -o addr``)."""
    out = _run("ip", "-o", "-4", "addr", "show").stdout
    return [ipaddress.ip_interface(line.split()[3]).network for line in out.splitlines() if " inet " in line]


def _free_slash30() -> ipaddress.IPv4Network:
    """A random /30 of :data:`POOL` that overlaps no address of this namespace."""
    in_use = _networks_in_use()
    for _ in range(100):
        offset = 4 * secrets.randbelow(POOL.num_addresses // 4)
        candidate = ipaddress.ip_network(f"{POOL.network_address + offset}/30")
        if not any(candidate.overlaps(net) for net in in_use):
            return candidate
    raise RuntimeError(f"no free /30 in {POOL} after 100 tries")


def _wait_listening(namespace: str, address: str, port: int, proc: subprocess.Popen, log: Path) -> None:
    """Wait until ``proc`` listens on ``address:port`` inside ``namespace`` (checked with ss, no connection)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[-1]} exited with {proc.returncode}: {log.read_text()[-2000:]}")
        out = _run("ip", "netns", "exec", namespace, "ss", "-Hltn", f"sport = :{port}", check=False).stdout
        if f"{address}:{port}" in out:
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listened on {address}:{port} in {namespace} after {START_TIMEOUT_S:g} s: "
                       f"{log.read_text()[-2000:]}")


def _kill_namespace_processes(namespace: str) -> None:
    """Kill what still runs in our namespace (sshd's per-connection children), by pid."""
    pids = _run("ip", "netns", "pids", namespace, check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), 9)
        except (ProcessLookupError, ValueError):
            pass


@pytest.fixture
def sshd_netns(tmp_path: Path) -> Iterator[dict]:
    """One namespace ``tl-sshtb-XXXXXX`` joined to the root one by a veth on a random /30, running sshd on
    ``ADDR:2222`` and an iperf3 server on ``ADDR:5201``; everything is removed afterwards, pass or fail."""
    _require_root_and_tools()
    tag = secrets.token_hex(3)
    namespace, root_end, ns_end = f"tl-sshtb-{tag}", f"tlsb-{tag}-h", f"tlsb-{tag}-n"
    net = _free_slash30()
    root_address, address = (str(host) for host in net.hosts())
    procs: list[subprocess.Popen] = []
    made: list[str] = []                                # remove only what this fixture created
    try:
        _run("ip", "netns", "add", namespace)
        made.append("namespace")
        _run("ip", "link", "add", root_end, "type", "veth", "peer", "name", ns_end, "netns", namespace)
        made.append("veth")
        _run("ip", "addr", "add", f"{root_address}/30", "dev", root_end)
        _run("ip", "link", "set", root_end, "up")
        for args in (("addr", "add", f"{address}/30", "dev", ns_end), ("link", "set", ns_end, "up"),
                     ("link", "set", "lo", "up")):
            _run("ip", "-n", namespace, *args)
        _run("ip", "netns", "exec", namespace, "tee", FIN, text_in=ORIGINAL_FIN)
        write_sshd_files(tmp_path, address, SSH_PORT)
        Path("/run/sshd").mkdir(exist_ok=True)          # sshd's privilege-separation directory
        for name, argv, port in (
                ("sshd", ["/usr/sbin/sshd", "-D", "-e", "-f", str(tmp_path / "sshd_config")], SSH_PORT),
                ("iperf3", ["iperf3", "-s", "-B", address, "-p", str(IPERF3_PORT)], IPERF3_PORT)):
            log = tmp_path / f"{name}.log"
            with open(log, "wb") as out:
                procs.append(subprocess.Popen(["ip", "netns", "exec", namespace, *argv], stdout=out, stderr=out,
                                              stdin=subprocess.DEVNULL, start_new_session=True))
            _wait_listening(namespace, address, port, procs[-1], log)
        yield {"namespace": namespace, "address": address, "dir": tmp_path}
    finally:
        for proc in procs:
            stop_process(proc)
        if "veth" in made:
            _run("ip", "link", "delete", root_end, check=False)
        if "namespace" in made:
            _kill_namespace_processes(namespace)
            _run("ip", "netns", "delete", namespace, check=False)


@pytest.fixture
def testbed_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The testbeds' own journal stores go under tmp_path (the Dask workers inherit the environment)."""
    directory = tmp_path / "testbeds"
    monkeypatch.setenv("TUNELAB_TESTBED_DIR", str(directory))
    return directory


def _testbeds_file(sshd: dict, port: int) -> Path:
    directory = sshd["dir"]
    path = directory / "testbeds.yaml"
    path.write_text(yaml.safe_dump({"testbeds": [{
        "name": "remote1", "type": "ssh",
        "options": {"server": f"root@{sshd['address']}:{port}", "known_hosts": str(directory / "known_hosts"),
                    "connect_kwargs": {"key_filename": str(directory / "client"), "look_for_keys": False,
                                       "allow_agent": False}}}]}))
    return path


def _design_file(directory: Path) -> Path:
    """OAT on one per-namespace knob of the sshd's namespace; iperf3 runs here against the server's address."""
    path = directory / "design.yaml"
    path.write_text(yaml.safe_dump({
        "name": "ssh-testbed", "description": "one netns knob on an ssh testbed driven by a Dask worker",
        "load": {"generator": "iperf3", "profile": "bulk", "settings": {}},
        "warmup_s": 0, "measure_s": 1,
        "metrics": [{"name": "throughput_mbps", "direction": "maximize", "sesoi_pct": 5}],
        "knobs": [{"name": KNOB, "levels": [60, 30], "baseline": 60}],
        "design": {"type": "oat", "replicates": 2, "seed": 1}}, sort_keys=False))
    return path


def _namespace_fin(namespace: str) -> str:
    return _run("ip", "netns", "exec", namespace, "cat", FIN).stdout.strip()


@pytest.mark.lab
def test_a_study_runs_on_an_ssh_testbed_through_a_dask_worker(sshd_netns: dict, testbed_dir: Path,
                                                              tmp_path: Path) -> None:
    from tunelab.knobs import get_knob

    assert get_knob(KNOB).scope == "netns"              # the sshd's namespace owns it; the host is never touched
    host_fin = Path(FIN).read_text().strip()
    design = _design_file(tmp_path)
    store_path = tmp_path / "study.sqlite"

    result = tunelab.run(design, testbeds=_testbeds_file(sshd_netns, SSH_PORT), store=store_path, progress=False)

    plan = make_plan(load_design(design))
    assert len(plan) == 4                               # OAT, 2 levels x 2 replicates
    assert result.failed == 0
    with Store(store_path, readonly=True) as store:
        tidy = store.tidy()
        trials = store.trials("screen")
        runs = store.run_targets()
    assert sorted(tidy["run_id"]) == sorted(plan["run_id"])      # every planned trial, once
    assert set(tidy["status"]) == {"ok"} and len(trials) == len(plan)
    assert set(tidy["testbed"]) == {"remote1"}
    assert (tidy["throughput_mbps"] > 0).all()
    by_run = plan.set_index("run_id")[KNOB]
    assert [int(v) for v in tidy[KNOB]] == [int(by_run[r]) for r in tidy["run_id"]]   # read back = planned
    assert sorted(int(v) for v in tidy[KNOB]) == [30, 30, 60, 60]
    # run by the Dask worker of remote1, not in this process
    assert {p["testbed"] for p in trials["provenance"]} == {"remote1"}
    assert runs[-1]["target"] == "testbeds" and runs[-1]["testbeds"] == ["remote1"]
    # every change was put back: the namespace holds its own value again, the host was never touched
    assert _namespace_fin(sshd_netns["namespace"]) == ORIGINAL_FIN
    assert Path(FIN).read_text().strip() == host_fin
    with Store(journal_path("remote1"), readonly=True) as own:
        assert own.path.parent == testbed_dir
        assert own.unrestored() == []
        journal = own.journal()
    assert len(journal) > 0 and set(journal["state"]) == {"restored"}
    assert set(journal["old_text"].str.strip()) == {ORIGINAL_FIN}


@pytest.mark.lab
def test_an_unreachable_ssh_testbed_is_one_error_line(sshd_netns: dict, testbed_dir: Path, tmp_path: Path) -> None:
    design = _design_file(tmp_path)
    store_path = tmp_path / "study.sqlite"
    testbeds = _testbeds_file(sshd_netns, CLOSED_PORT)

    proc = subprocess.run([sys.executable, "-m", "tunelab", "run", str(design), "--testbeds", str(testbeds),
                           "--store", str(store_path), "--no-progress"],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ), cwd=tmp_path)

    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("tunelab: error:")
    assert "remote1" in lines[0] and f"{sshd_netns['address']}:{CLOSED_PORT}" in lines[0]
    if store_path.exists():
        with Store(store_path, readonly=True) as store:
            assert len(store.trials()) == 0
    assert _namespace_fin(sshd_netns["namespace"]) == ORIGINAL_FIN
