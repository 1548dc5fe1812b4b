"""Kill -9, SIGINT and SIGTERM a real ``tunelab run`` at every dangerous point; nothing may be left
behind and no trial may be lost or run twice.

Two targets:

(A) ``lab``: a 2-trial Latin-hypercube design (somaxconn, tcp_fin_timeout) under dnsperf, with a
    16 MiB loop disk so the loop-device cleanup is exercised too;
(B) ``local`` inside a private network namespace ``tlk-XXXXXX`` made here: per-netns knobs
    (tcp_fin_timeout, tcp_keepalive_time) under fio reading a small file. Before each case the
    namespace's knobs get fresh random "original" values outside the design's ranges, so a knob
    left at a trial's value, or restored to a crashed trial's value, is always visible. The host's
    own values of these knobs are checked unchanged after every case.

Every case runs the real CLI verbs (``tunelab run|restore|lab down``) in processes forked by
``kill_driver.py`` (a fork server, see its docstring), which signals the run at the N-th
occurrence of a point: the runner's checkpoints plus five points injected by the driver
(``lab_coming_up``, ``target_up``, ``between_trials``, ``teardown``, ``teardown_mid``) and
``measuring`` (a timer fired inside ``before_measure``, so the signal lands while dnsperf/fio runs;
the driver records the load process it saw alive at that moment).

Expected (the contract these tests hold the code to):

* SIGKILL: ``tunelab restore STUDY`` exits 0; then every knob has its original value, no journal
  entry is unrestored, and nothing of the run survives: no ``tl-NAME-*`` namespace, lab state file,
  workdir, loop device or backing file, no nsd/iperf3/dnsperf/fio process (processes are found
  three ways: the fork server is a child subreaper, so every orphan of our runs is its child; by
  cmdline naming the lab's state dir/namespaces or our fio file; by the pids in the lab's state).
  Re-running the design resumes and leaves every planned run key with exactly one done trial;
  afterwards no lease of the dead run (``RUN_DIR/leases/PID.json``, :mod:`tunelab.leases`) is left.
* SIGKILL, then a rerun WITHOUT restore: the run restores the journal first (and removes the dead
  run's orphaned lab) or refuses with one ``tunelab: error:`` line naming ``tunelab restore STUDY``;
  no journal entry may ever record a crashed trial's value as a knob's original.
* SIGINT/SIGTERM: exit status 130, the trial in flight recorded ``interrupted``, knobs restored and
  the lab torn down by the run itself (no ``tunelab restore``); a resume completes the plan.
* ``tunelab lab down --all`` removes the orphaned lab of a killed run.

Only states are asserted (knob values, statuses, counts, processes, namespaces, files), never a
metric or a verdict.
"""
from __future__ import annotations

import json
import os
import random
import secrets
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import psutil
import pytest

pytestmark = [pytest.mark.lab, pytest.mark.slow]

DRIVER = Path(__file__).resolve().with_name("kill_driver.py")

#: (point, occurrence) for SIGKILL. Each trial restores 2 knobs, so ``restore`` #3 is the first
#: knob of trial 2 put back and the second one not; ``between_trials`` #2 is the reset before trial 2.
LAB_KILL_POINTS = [
    ("lab_coming_up", 1), ("target_up", 1), ("begin", 2), ("before_apply", 1), ("after_apply", 2),
    ("measuring", 2), ("after_measure", 1), ("after_record", 2), ("restore", 3), ("end", 1),
    ("between_trials", 2), ("teardown", 1), ("teardown_mid", 1),
]
LOCAL_KILL_POINTS = [p for p in LAB_KILL_POINTS if p[0] not in ("lab_coming_up", "teardown_mid")]
#: SIGINT or SIGTERM (in turn: _alternate_signals) at 10 points of each run (the run must clean up by
#: itself): every distinct path of the lab run, and of the local run (which has no lab to build or tear down)
LAB_SOFT_POINTS = [
    ("lab_coming_up", 1), ("begin", 2), ("before_apply", 1), ("after_apply", 2), ("measuring", 2),
    ("after_record", 2), ("restore", 3), ("between_trials", 2), ("teardown", 1), ("teardown_mid", 1),
]
LOCAL_SOFT_POINTS = [p for p in LOCAL_KILL_POINTS if p[0] != "target_up"]
SOFT_POINTS = {"SIGINT": LAB_SOFT_POINTS, "SIGTERM": LAB_SOFT_POINTS}
NO_RESTORE_POINTS = [("after_apply", 2), ("before_measure", 2)]

#: points inside a trial before it is recorded: the trial in flight must end up ``interrupted``
IN_FLIGHT = {"begin", "before_apply", "after_apply", "before_measure", "measuring", "after_measure"}
#: points at which a SIGKILL leaves (B)'s knobs changed (checks that the test kills where it means to)
LEAVES_CHANGES = {"after_apply", "before_measure", "measuring", "after_measure", "after_record", "restore"}
DONE = {"ok", "flagged"}
LOADS = {"dnsperf", "fio"}
MEASURING_DELAY_S = 0.5
#: measure_s of a ``measuring`` case per target: long enough that a load generator outliving a killed
#: run still runs when the checks look for it (restore takes well under a second); 1 s otherwise
MEASURING_MEASURE_S = {"lab": 2.0, "local": 3.0}
#: a process killed a moment before the check may still be exiting; wait this long before calling it left
LEFTOVER_GRACE_S = 0.5

LOCAL_KNOBS = {  # knob -> (design range, range of the random originals, always outside the design range)
    "net.ipv4.tcp_fin_timeout": ((10, 30), (31, 59)),
    "net.ipv4.tcp_keepalive_time": ((100, 900), (1000, 7000)),
}
HOST_GUARD = (*LOCAL_KNOBS, "net.core.somaxconn")

LAB_DESIGN = """\
name: {study}
description: kill points on the lab target
target: {{type: lab, options: {{disk_mb: 16}}}}
load: {{generator: dnsperf, profile: overload, settings: {{}}}}
warmup_s: 0
measure_s: {measure_s}
metrics:
  - {{name: qps, direction: maximize, sesoi_pct: 5}}
knobs:
  - {{name: net.core.somaxconn, host: server, levels: [64, 1024], baseline: 64}}
  - {{name: net.ipv4.tcp_fin_timeout, host: server, levels: [30], baseline: 30}}
design: {{type: full_factorial, replicates: 1, seed: 3}}
"""

LOCAL_DESIGN = """\
name: {study}
description: kill points on the local target inside a private network namespace
target: {{type: local}}
load: {{generator: fio, profile: randread, settings: {{filename: {fio_file}, size: 4M, direct: false,
        ioengine: psync, iodepth: 1}}}}
warmup_s: 0
measure_s: {measure_s}
metrics:
  - {{name: iops, direction: maximize, sesoi_pct: 5}}
knobs:
  - {{name: net.ipv4.tcp_fin_timeout, host: server, levels: [10, 30], baseline: 10}}
  - {{name: net.ipv4.tcp_keepalive_time, host: server, levels: [900], baseline: 900}}
design: {{type: full_factorial, replicates: 1, seed: 3}}
preflight: {{controls: [net.ipv4.tcp_fin_timeout, net.ipv4.tcp_keepalive_time]}}   # TCP knobs under fio: kill points only
"""


# ---- the fork server ----------------------------------------------------------------------------


class Driver:
    """A running ``kill_driver.py serve`` (optionally inside a network namespace)."""

    def __init__(self, netns: str | None = None) -> None:
        argv = [sys.executable, str(DRIVER), "serve"]
        if netns:
            argv = ["ip", "netns", "exec", netns, *argv]
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                                     cwd=str(Path(__file__).resolve().parents[2]))
        hello = self._read(timeout_s=60)
        if not hello.get("ready"):
            self.close()
            raise RuntimeError(f"kill driver did not start: {hello}")
        self.pid = hello["pid"]

    def _read(self, timeout_s: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            raise RuntimeError(f"kill driver gave no answer in {timeout_s} s")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"kill driver exited (status {self.proc.poll()})")
        return json.loads(line)

    def request(self, timeout_s: float = 150, **request: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer = self._read(timeout_s)
        if "error" in answer:
            raise RuntimeError(f"kill driver: {answer['error']}\n{answer.get('traceback', '')}")
        return answer

    def survivors(self) -> list[dict[str, Any]]:
        return self.request(op="survivors")["survivors"]

    def close(self) -> None:
        if self.proc.poll() is None:
            for item in self._safe_survivors():
                _kill(item["pid"])
            try:
                self.request(op="quit", timeout_s=10)
            except Exception:  # noqa: BLE001
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def _safe_survivors(self) -> list[dict[str, Any]]:
        try:
            return self.survivors()
        except Exception:  # noqa: BLE001
            return []


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@dataclass
class Verb:
    """One ``tunelab`` verb run by the driver."""

    argv: list[str]
    pid: int
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool

    def __str__(self) -> str:
        return (f"`tunelab {' '.join(self.argv)}` (pid {self.pid}) exited {self.returncode}"
                f"{' (TIMED OUT)' if self.timed_out else ''} after {self.wall_s:.1f} s\n"
                f"--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}")


# ---- fixtures -----------------------------------------------------------------------------------


def _need(*tools: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("kill-point tests need root (network namespaces, sysctls inside them)")
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"kill-point tests need {', '.join(missing)} (Debian packages; ./quickstart.sh installs them)")


@pytest.fixture(scope="module")
def lab_driver() -> Iterator[Driver]:
    _need("ip", "dnsperf", "nsd", "iperf3", "losetup", "taskset")
    driver = Driver()
    try:
        yield driver
    finally:
        driver.close()


@pytest.fixture(scope="module")
def private_netns() -> Iterator[str]:
    _need("ip", "nsenter", "sysctl", "fio")
    name = f"tlk-{secrets.token_hex(3)}"
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True, capture_output=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=False, capture_output=True)


@pytest.fixture(scope="module")
def local_driver(private_netns: str) -> Iterator[Driver]:
    driver = Driver(netns=private_netns)
    try:
        if os.readlink(f"/proc/{driver.pid}/ns/net") == os.readlink("/proc/self/ns/net"):
            pytest.fail(f"the driver is not inside {private_netns}: it would change the HOST's knobs")
        yield driver
    finally:
        driver.close()


@pytest.fixture(scope="module")
def host_knobs() -> Iterator[dict[str, str]]:
    """The host's own values of every knob these tests touch (in namespaces): never to change."""
    before = {name: _proc_sys(name) for name in HOST_GUARD}
    yield before
    assert {name: _proc_sys(name) for name in HOST_GUARD} == before, "a HOST knob was changed"


def _proc_sys(name: str) -> str:
    return Path("/proc/sys", *name.split(".")).read_text().strip()


@pytest.fixture(scope="module")
def fresh_netns_defaults() -> dict[str, str]:
    """somaxconn and tcp_fin_timeout of a brand-new namespace: what every lab trial starts from."""
    name = f"tlk-{secrets.token_hex(3)}"
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
    try:
        return {knob: _ns_sysctl(name, knob) for knob in ("net.core.somaxconn", "net.ipv4.tcp_fin_timeout")}
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=False, capture_output=True)


def _ns_sysctl(netns: str | int, name: str, value: int | None = None) -> str:
    """Read (or set) a sysctl inside a namespace: a name, or the pid of a process living in it.

    The local cases address their namespace through the driver's pid (``nsenter``), so they keep
    working even if something deletes the namespace's name while the driver still lives in it.
    """
    enter = ["nsenter", f"--net=/proc/{netns}/ns/net"] if isinstance(netns, int) else ["ip", "netns", "exec", netns]
    argv = [*enter, "sysctl"] + (["-w", f"{name}={value}"] if value is not None else ["-n", name])
    proc = subprocess.run(argv, capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def _fio_dir(tmp_path: Path) -> Path:
    """Where fio's file goes: the fio load's scratch directory when it has one, else tmp_path."""
    from tunelab.loads import fio

    for attr in dir(fio):
        if "SCRATCH" in attr.upper():
            value = getattr(fio, attr)
            if isinstance(value, (str, Path)):
                return Path(value) / f"kp-{secrets.token_hex(4)}"
    return tmp_path / "scratch"


# ---- one case: a study, its verbs, and everything that must not be left ------------------------


@dataclass
class Case:
    """One study driven through crash, restore and resume; knows what to look for afterwards."""

    driver: Driver
    target: str                    # "lab" or "local"
    root: Path
    netns: str | None = None
    measure_s: float = 1.0
    study: str = field(default_factory=lambda: f"kp-{secrets.token_hex(4)}")
    originals: dict[str, str] = field(default_factory=dict)
    fio_file: Path | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    verbs: int = 0
    pids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.design = self.root / f"{self.study}.yaml"
        self.store_path = self.root / "data" / f"{self.study}.sqlite"
        self.labs_log = self.root / "labs.jsonl"
        if self.target == "lab":
            self.design.write_text(LAB_DESIGN.format(study=self.study, measure_s=self.measure_s))
        else:
            assert self.fio_file is not None
            self.fio_file.parent.mkdir(parents=True, exist_ok=True)
            self.fio_file.write_bytes(random.randbytes(4 * 2**20))
            self.design.write_text(LOCAL_DESIGN.format(study=self.study, measure_s=self.measure_s,
                                                       fio_file=self.fio_file))
            rng = random.Random()
            for knob, (_, (low, high)) in LOCAL_KNOBS.items():
                self.originals[knob] = str(rng.randint(low, high))
                _ns_sysctl(self.driver.pid, knob, int(self.originals[knob]))
            assert self.knobs() == self.originals

    # ---- verbs --------------------------------------------------------------------------------

    def verb(self, *argv: str, kill: dict[str, Any] | None = None) -> Verb:
        self.verbs += 1
        record = self.root / f"kill-{self.verbs}.json"
        answer = self.driver.request(op="run", argv=list(argv), cwd=str(self.root), kill=kill, record=str(record),
                                     labs_log=str(self.labs_log), out=str(self.root / f"verb-{self.verbs}"))
        self.pids.append(answer["pid"])
        if record.exists():
            self.records.append(json.loads(record.read_text()))
        return Verb(list(argv), answer["pid"], answer["returncode"], answer["stdout"], answer["stderr"],
                    answer["wall_s"], answer["timed_out"])

    def run(self, kill: dict[str, Any] | None = None) -> Verb:
        return self.verb("run", str(self.design), "--no-progress", kill=kill)

    def restore(self) -> Verb:
        return self.verb("restore", self.study)

    # ---- reading state ------------------------------------------------------------------------

    def knobs(self) -> dict[str, str]:
        return {knob: _ns_sysctl(self.driver.pid, knob) for knob in LOCAL_KNOBS}

    def planned_keys(self) -> set[str]:
        from tunelab.api import plan

        _, frame, _ = plan(self.design)
        return {f"screen:{run_id}" for run_id in frame["run_id"]}

    def trials(self):  # noqa: ANN201 - pandas
        from tunelab.store import Store

        with Store(self.store_path, readonly=True) as store:
            return store.trials()

    def journal(self):  # noqa: ANN201
        from tunelab.store import Store

        with Store(self.store_path, readonly=True) as store:
            return store.journal()

    def unrestored(self) -> list[Any]:
        from tunelab.store import Store

        with Store(self.store_path, readonly=True) as store:
            return store.unrestored()

    def labs(self) -> list[str]:
        if not self.labs_log.exists():
            return []
        return sorted({json.loads(line)["name"] for line in self.labs_log.read_text().splitlines() if line.strip()})

    def leftovers(self) -> list[str]:
        """Everything of this case's runs that still exists, one line each (empty: clean)."""
        from tunelab.targets import lab as lab_module

        orphans = self.driver.survivors()
        left = [f"process pid {p['pid']} {p['name']} ({p.get('status')}, orphan of our runs): "
                f"{' '.join(p['cmdline'])[:200]}" for p in orphans]
        seen = {p["pid"] for p in orphans} | {os.getpid()}
        marks: list[str] = [str(self.fio_file)] if self.fio_file else []
        for name in self.labs():
            state = lab_module.state_path(name)
            if state.exists():
                left.append(f"lab state file {state}")
            for role in ("srv", "cli", "rtr"):
                if os.path.exists(f"/run/netns/tl-{name}-{role}"):
                    left.append(f"network namespace tl-{name}-{role}")
            workdir = lab_module.STATE_DIR / name
            if workdir.exists():
                left.append(f"lab workdir {workdir}")
            disk = lab_module.DISK_DIR / f"{name}.img"
            if disk.exists():
                left.append(f"loop backing file {disk}")
            for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
                try:
                    if backing.read_text().strip().startswith(str(disk)):
                        left.append(f"loop device /dev/{backing.parts[3]} -> {disk}")
                except OSError:
                    continue
            marks += [str(workdir), f"tl-{name}-"]
        recorded = {pid for record in self.records for lab in record.get("labs", {}).values()
                    for pid in lab.get("services", {}).values()}
        for proc in psutil.process_iter(["pid", "name", "cmdline", "status"]):
            try:
                if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.pid in seen:
                    continue
                cmdline = " ".join(proc.info["cmdline"] or [])
                if proc.pid in recorded and proc.info["name"] in ("nsd", "iperf3", "ip", "taskset"):
                    left.append(f"lab service pid {proc.pid} {proc.info['name']} (recorded in the lab state)")
                elif any(mark in cmdline for mark in marks) and "pytest" not in cmdline:
                    left.append(f"process pid {proc.pid} {proc.info['name']}: {cmdline[:200]}")
            except psutil.Error:
                continue
        return sorted(set(left))

    # ---- assertions shared by every case ---------------------------------------------------------

    def assert_clean(self, when: str) -> None:
        left = self.leftovers()
        deadline = time.monotonic() + LEFTOVER_GRACE_S
        while left and time.monotonic() < deadline:  # a process SIGKILLed a moment ago is still exiting
            time.sleep(0.05)
            left = self.leftovers()
        assert not left, f"{when}: left behind:\n  " + "\n  ".join(left)
        if self.target == "local":
            assert self.knobs() == self.originals, f"{when}: knobs not back to their originals"

    def assert_complete(self, expect_interrupted: int) -> None:
        """Every planned run key has exactly one done trial; nothing running; interrupted as expected."""
        trials = self.trials()
        done = trials[trials["status"].isin(DONE)].groupby("run_key").size().to_dict()
        planned = self.planned_keys()
        assert set(done) == planned and set(done.values()) == {1}, \
            f"done trials per run key {done}, planned {sorted(planned)}; all trials:\n" \
            f"{trials[['trial_id', 'run_key', 'status', 'reason']].to_string()}"
        assert set(trials["status"]) <= DONE | {"interrupted"}, trials[["run_key", "status", "reason"]].to_string()
        assert (trials["status"] == "interrupted").sum() == expect_interrupted, \
            trials[["run_key", "status", "reason"]].to_string()
        assert self.unrestored() == []

    def assert_originals_journalled(self, defaults: dict[str, str]) -> None:
        """No journal entry took a trial's value for a knob's original."""
        expected = self.originals if self.target == "local" else defaults
        journal = self.journal()
        wrong = journal[journal.apply(lambda row: row["old_text"].strip() != expected[row["knob_id"]], axis=1)]
        assert wrong.empty, f"journal entries whose 'original' is not the knob's original {expected}:\n" \
                            f"{wrong[['entry_id', 'trial_id', 'knob_id', 'old_text', 'new_text', 'state']].to_string()}"

    def assert_no_dead_leases(self) -> None:
        """A run's lease (``RUN_DIR/leases/PID.json``) must not outlive the dead run once all is restored."""
        try:
            from tunelab.leases import LEASE_DIR
        except ImportError:
            return
        dead = [str(path) for path in sorted(LEASE_DIR.glob("*.json")) if path.stem.isdigit()
                and int(path.stem) in self.pids and not psutil.pid_exists(int(path.stem))]
        assert not dead, ("leases of dead runs left after restore and a completed resume: " + ", ".join(dead)
                          + " (a later run of ANY study looks at them)")

    def cleanup(self) -> None:
        """Best effort, whatever happened: our labs, our processes, our scratch file."""
        from tunelab.targets import lab as lab_module

        for item in self.driver._safe_survivors():
            _kill(item["pid"])
        try:  # a failed case must not leave a journal that makes every later run on this machine refuse
            if self.store_path.exists() and self.unrestored():
                self.restore()
        except Exception:  # noqa: BLE001 - best effort
            pass
        try:
            from tunelab.leases import LEASE_DIR

            for path in LEASE_DIR.glob("*.json"):
                if path.stem.isdigit() and int(path.stem) in self.pids and not psutil.pid_exists(int(path.stem)):
                    path.unlink(missing_ok=True)
        except ImportError:
            pass
        names = set(self.labs())
        for state in lab_module.list_states():
            if state.name in names:
                lab_module.destroy(state)
        for name in names:
            for role in ("srv", "cli", "rtr"):
                subprocess.run(["ip", "netns", "delete", f"tl-{name}-{role}"], capture_output=True, check=False)
        if self.fio_file is not None and self.fio_file.parent.name.startswith("kp-"):
            shutil.rmtree(self.fio_file.parent, ignore_errors=True)


@pytest.fixture
def make_case(tmp_path: Path, request: pytest.FixtureRequest, host_knobs: dict[str, str]) -> Iterator[Any]:
    cases: list[Case] = []

    def make(target: str, point: str = "") -> Case:
        measure_s = MEASURING_MEASURE_S[target] if point == "measuring" else 1.0
        if target == "lab":
            case = Case(request.getfixturevalue("lab_driver"), "lab", tmp_path / "case", measure_s=measure_s)
        else:
            netns = request.getfixturevalue("private_netns")
            case = Case(request.getfixturevalue("local_driver"), "local", tmp_path / "case", netns=netns,
                        measure_s=measure_s, fio_file=_fio_dir(tmp_path) / "fio.dat")
        cases.append(case)
        return case

    try:
        yield make
    finally:
        for case in cases:
            case.cleanup()
        assert {name: _proc_sys(name) for name in HOST_GUARD} == host_knobs, "a HOST knob was changed"


def _kill_spec(point: str, occurrence: int, sig: str) -> dict[str, Any]:
    return {"point": point, "occurrence": occurrence, "signal": sig,
            "delay_s": MEASURING_DELAY_S if point == "measuring" else 0}


def _crash(case: Case, point: str, occurrence: int, sig: str) -> tuple[Verb, dict[str, Any]]:
    """Run the design and signal it at ``point`` #``occurrence``; check the signal hit where meant."""
    crashed = case.run(kill=_kill_spec(point, occurrence, sig))
    record = case.records[-1] if case.records and case.records[-1]["pid"] == crashed.pid else None
    assert record is not None, f"the run never reached {point} #{occurrence}:\n{crashed}"
    if point == "measuring":
        loads = [c for c in record["children"] if c["name"] in LOADS]
        assert loads, f"no load generator was running when the signal was sent: {record['children']}"
    expected = -signal.SIGKILL if sig == "SIGKILL" else 130
    assert crashed.returncode == expected, f"expected exit {expected} after {sig} at {point}:\n{crashed}"
    return crashed, record


# ---- (A) + (B): SIGKILL at every point, then restore, then resume ------------------------------


def _orphaned_labs(case: Case) -> list[str]:
    """The labs a killed run left behind, each seen as an orphan (its owner is dead)."""
    from tunelab.targets import lab as lab_module

    names = set(case.labs())
    orphans = [s.name for s in lab_module.list_states() if s.name in names and s.is_orphan()]
    assert orphans, f"the killed run left no orphaned lab ({sorted(names)}): restore would prove nothing"
    return orphans


def _sigkill_restore_resume(case: Case, point: str, occurrence: int, defaults: dict[str, str]) -> None:
    _, record = _crash(case, point, occurrence, "SIGKILL")
    in_flight = record["in_flight"] if point in IN_FLIGHT else None
    if in_flight:
        trials = case.trials()
        assert trials.loc[trials["run_key"] == in_flight, "status"].tolist()[-1] == "running"
    if case.target == "local":
        assert (case.knobs() != case.originals) is (point in LEAVES_CHANGES), \
            f"after SIGKILL at {point}: knobs {case.knobs()}, originals {case.originals}"
    orphans = _orphaned_labs(case) if case.target == "lab" and point == "after_apply" else []

    restored = case.restore()
    assert restored.returncode == 0, str(restored)
    for name in orphans:   # restore says which lab it removed (was tests/runner/test_lab_e2e.py's own crash test)
        assert f"removed orphaned lab {name}" in restored.stdout, str(restored)
    assert case.unrestored() == []
    case.assert_clean(f"after SIGKILL at {point} #{occurrence} and `tunelab restore`")

    resumed = case.run()
    assert resumed.returncode == 0, str(resumed)
    case.assert_complete(expect_interrupted=1 if in_flight else 0)
    case.assert_clean("after the resumed run")
    case.assert_originals_journalled(defaults)
    case.assert_no_dead_leases()


@pytest.mark.parametrize(("point", "occurrence"), LAB_KILL_POINTS, ids=[f"{p}-{n}" for p, n in LAB_KILL_POINTS])
def test_lab_sigkill_then_restore_and_resume(make_case: Any, fresh_netns_defaults: dict[str, str], point: str,
                                             occurrence: int) -> None:
    case = make_case("lab", point)
    _sigkill_restore_resume(case, point, occurrence, fresh_netns_defaults)


@pytest.mark.parametrize(("point", "occurrence"), LOCAL_KILL_POINTS,
                         ids=[f"{p}-{n}" for p, n in LOCAL_KILL_POINTS])
def test_local_netns_sigkill_then_restore_and_resume(make_case: Any, point: str, occurrence: int) -> None:
    case = make_case("local", point)
    _sigkill_restore_resume(case, point, occurrence, {})


# ---- SIGKILL, then a rerun WITHOUT restore ---------------------------------------------------------


def _sigkill_then_rerun_without_restore(case: Case, point: str, occurrence: int, defaults: dict[str, str]) -> None:
    _, record = _crash(case, point, occurrence, "SIGKILL")
    crashed_knobs = case.knobs() if case.target == "local" else None
    rerun = case.run()
    if rerun.returncode == 2:  # refused: one error line that says what to do, and nothing touched
        errors = [line for line in rerun.stderr.splitlines() if line.startswith("tunelab: error:")]
        assert len(errors) == 1 and "tunelab restore" in errors[0] and case.study in errors[0], str(rerun)
        if crashed_knobs is not None:
            assert case.knobs() == crashed_knobs, "a refused rerun changed knobs"
        restored = case.restore()
        assert restored.returncode == 0, str(restored)
        rerun = case.run()
    assert rerun.returncode == 0, f"a rerun after SIGKILL at {point} (no `tunelab restore`) failed:\n{rerun}"
    case.assert_complete(expect_interrupted=1 if record["in_flight"] else 0)
    case.assert_clean(f"after SIGKILL at {point} #{occurrence} and a rerun without restore")
    case.assert_originals_journalled(defaults)
    case.assert_no_dead_leases()


@pytest.mark.parametrize(("point", "occurrence"), NO_RESTORE_POINTS, ids=[f"{p}-{n}" for p, n in NO_RESTORE_POINTS])
def test_lab_sigkill_then_rerun_without_restore(make_case: Any, fresh_netns_defaults: dict[str, str], point: str,
                                                occurrence: int) -> None:
    _sigkill_then_rerun_without_restore(make_case("lab"), point, occurrence, fresh_netns_defaults)


@pytest.mark.parametrize(("point", "occurrence"), NO_RESTORE_POINTS, ids=[f"{p}-{n}" for p, n in NO_RESTORE_POINTS])
def test_local_netns_sigkill_then_rerun_without_restore(make_case: Any, point: str, occurrence: int) -> None:
    _sigkill_then_rerun_without_restore(make_case("local"), point, occurrence, {})


# ---- SIGINT / SIGTERM: the run cleans up by itself -------------------------------------------------

def _alternate_signals(points: list[tuple[str, int]]) -> list[tuple[str, str, int]]:
    """Each point once, SIGINT and SIGTERM in turn: once its handler is in, SIGTERM takes SIGINT's path
    (``signals.sigterm_interrupts`` raises KeyboardInterrupt), so every point is covered by one signal and
    each signal by half the points (in turn, so both see the lab's set-up, a trial and the teardown)."""
    signals = list(SOFT_POINTS)
    return [(signals[i % len(signals)], point, n) for i, (point, n) in enumerate(points)]


SOFT_CASES = _alternate_signals(LAB_SOFT_POINTS)
LOCAL_SOFT_CASES = _alternate_signals(LOCAL_SOFT_POINTS)


def _soft_kill_then_resume(case: Case, sig: str, point: str, occurrence: int) -> None:
    _, record = _crash(case, point, occurrence, sig)
    in_flight = record["in_flight"] if point in IN_FLIGHT else None
    if in_flight:
        trials = case.trials()
        mine = trials[trials["run_key"] == in_flight]
        assert mine["status"].tolist()[-1] == "interrupted", mine[["run_key", "status", "reason"]].to_string()
    assert "running" not in set(case.trials()["status"])
    assert case.unrestored() == [], f"{sig} at {point}: the run left journal entries unrestored"
    case.assert_clean(f"after {sig} at {point} #{occurrence} (no restore run)")

    resumed = case.run()
    assert resumed.returncode == 0, str(resumed)
    case.assert_complete(expect_interrupted=1 if in_flight else 0)
    case.assert_clean("after the resumed run")
    case.assert_no_dead_leases()


@pytest.mark.parametrize(("sig", "point", "occurrence"), SOFT_CASES, ids=[f"{s}-{p}-{n}" for s, p, n in SOFT_CASES])
def test_lab_sigint_sigterm_clean_up_by_themselves(make_case: Any, sig: str, point: str, occurrence: int) -> None:
    _soft_kill_then_resume(make_case("lab", point), sig, point, occurrence)


@pytest.mark.parametrize(("sig", "point", "occurrence"), LOCAL_SOFT_CASES,
                         ids=[f"{s}-{p}-{n}" for s, p, n in LOCAL_SOFT_CASES])
def test_local_netns_sigint_sigterm_clean_up_by_themselves(make_case: Any, sig: str, point: str,
                                                           occurrence: int) -> None:
    _soft_kill_then_resume(make_case("local", point), sig, point, occurrence)


# ---- `tunelab lab down --all` removes a killed run's orphaned lab ---------------------------------


def _foreign_labs(mine: set[str]) -> list[str]:
    from tunelab.targets import lab as lab_module
    from tunelab.targets import netns

    names = {s.name for s in lab_module.list_states()} - mine
    namespaces = [ns for ns in netns.list_namespaces("tl-") if not any(ns.startswith(f"tl-{m}-") for m in mine)]
    return sorted(names) + namespaces


@pytest.mark.serial          # `lab down --all` removes every lab: run-tests.sh runs it when no other test runs
def test_lab_down_all_removes_the_orphan_of_a_killed_run(make_case: Any) -> None:
    case = make_case("lab")
    _crash(case, "after_apply", 1, "SIGKILL")
    assert case.labs() and any(os.path.exists(f"/run/netns/tl-{name}-srv") for name in case.labs()), \
        "the killed run left no lab to remove (the test would prove nothing)"
    # `--all` removes EVERY lab on the machine: never do it while someone else's lab is up
    deadline = time.monotonic() + 30
    while (foreign := _foreign_labs(set(case.labs()))) and time.monotonic() < deadline:
        time.sleep(1)
    if foreign:
        pytest.skip(f"other labs are up on this machine ({', '.join(foreign)}); `lab down --all` would remove them")
    down = case.verb("lab", "down", "--all")
    assert down.returncode == 0, str(down)
    left = case.leftovers()
    assert not left, "after `tunelab lab down --all`: left behind:\n  " + "\n  ".join(left)

    restored = case.restore()
    assert restored.returncode == 0, str(restored)
    resumed = case.run()
    assert resumed.returncode == 0, str(resumed)
    case.assert_complete(expect_interrupted=1)
    case.assert_clean("after the resumed run")
    case.assert_no_dead_leases()
