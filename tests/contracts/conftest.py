"""The cases of the contract suites: one prepared target per kind, built once per module.

Every lab-backed case shares ONE lab (module scope) that a finalizer tears down even when a test
fails; its second ``down()`` there checks that tearing down twice is harmless.
"""
from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "runner"))
sys.path.insert(0, str(HERE.parent / "targets"))
sys.path.insert(0, str(HERE))

from contract_cases import Case  # noqa: E402

from runner_fakes import INITIAL, FakeKnob, FileTarget  # noqa: E402
from sshd_helper import running_sshd, ssh_target  # noqa: E402

from tunelab.simulator import SimulatorTarget  # noqa: E402
from tunelab.targets import netns  # noqa: E402
from tunelab.targets.dryrun import DryRunTarget  # noqa: E402
from tunelab.targets.lab import LabTarget  # noqa: E402
from tunelab.targets.local import LocalTarget  # noqa: E402

#: a per-network-namespace sysctl: writing it in a lab or private namespace never touches the host
FIN = "/proc/sys/net/ipv4/tcp_fin_timeout"
SOMAXCONN = "/proc/sys/net/core/somaxconn"


def require_root_and(*tools: str) -> None:
    """Skip unless root with ``tools`` installed (the suite-wide conftest also skips ``lab`` items without root)."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    missing = [t for t in tools if shutil.which(t) is None and shutil.which(t, path="/usr/sbin:/sbin") is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (install the Debian packages)")


@pytest.fixture(scope="module")
def contract_lab(request: pytest.FixtureRequest) -> LabTarget:
    """ONE lab (no services, so it is quick) for every lab-backed case of the module."""
    require_root_and("ip", "taskset")
    lab = LabTarget(services=())

    def teardown() -> None:
        lab.down()
        lab.down()          # contract: a second down() is a no-op

    request.addfinalizer(teardown)
    lab.up()
    return lab


@pytest.fixture(scope="module")
def lab_case(contract_lab: LabTarget) -> Case:
    default = contract_lab.read_text("server", FIN).strip()
    return Case(contract_lab, "server", FIN, ("23", "24"), reset_default=default)


@pytest.fixture(scope="module")
def contract_sshd(contract_lab: LabTarget, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    require_root_and("ssh-keygen", "sshd")
    with running_sshd(contract_lab, tmp_path_factory.mktemp("sshd")) as info:
        yield info


@pytest.fixture(scope="module")
def ssh_case(contract_sshd: dict, request: pytest.FixtureRequest) -> Case:
    target = ssh_target(contract_sshd)
    request.addfinalizer(target.down)
    target.up()
    return Case(target, "server", FIN, ("23", "24"), fresh=lambda: ssh_target(contract_sshd))


@pytest.fixture(scope="module")
def local_case() -> Case:
    """This machine, read-only: host knobs are read, never written."""
    never = "the tests never write a host knob; the local-netns case writes inside a private namespace"
    return Case(LocalTarget(), "server", SOMAXCONN, ("0", "0"), skips={"write": never, "verify": never},
                fresh=LocalTarget)


@pytest.fixture(scope="module")
def local_netns_case(request: pytest.FixtureRequest) -> Case:
    """The local target run from a thread inside a private namespace ``tlc-RANDOM``: its
    per-namespace sysctls are the ones written, the host's stay as they are."""
    require_root_and("ip")
    name = f"tlc-{secrets.token_hex(3)}"
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
    worker = None

    def teardown() -> None:
        if worker is not None:
            worker.close()
        netns.delete_namespace(name)

    request.addfinalizer(teardown)
    worker = netns.NetnsWorker(name)
    return Case(LocalTarget(), "server", FIN, ("23", "24"), call=worker.call, fresh=LocalTarget)


@pytest.fixture
def dry_run_case(tmp_path: Path) -> Case:
    """Reads come from this machine; the written file is a scratch file that must stay unchanged."""
    path = tmp_path / "knob"
    path.write_text("5\n")
    target = DryRunTarget(quiet=True)
    return Case(target, "server", str(path), ("6", "7"), fresh=lambda: DryRunTarget(quiet=True),
                recorded=lambda: [a for a in target.actions if a["action"] == "write"])


@pytest.fixture
def simulator_case() -> Case:
    return Case(SimulatorTarget("simple", seed=1), "server", SOMAXCONN, ("1024", "256"),
                fresh=lambda: SimulatorTarget("simple"))


@pytest.fixture
def file_fake_case(tmp_path: Path) -> Case:
    target = FileTarget(tmp_path)
    target.seed(INITIAL)
    return Case(target, "server", FakeKnob.path_of("net.fake.alpha"), ("16", "4096"),
                fresh=lambda: FileTarget(tmp_path))
