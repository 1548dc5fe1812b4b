"""CPU pinning of the lab: the server's NSD and the client's commands on disjoint CPU sets.

The rule (:func:`plan_pinning`) is checked on given CPU lists; the real lab is checked by reading
``Cpus_allowed_list`` of the live NSD processes and of a command run on the client (needs root).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tunelab.errors import TargetError
from tunelab.targets import check_target_spec, netns
from tunelab.targets.base import TargetOptionError
from tunelab.targets.lab import cpu_list_text, plan_pinning


def allowed_cpus(text: str) -> set[int]:
    """The CPUs of a ``Cpus_allowed_list`` text (``0-2,5``), parsed independently of the code under test."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def cpus_of(pid: int) -> set[int]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return allowed_cpus(line.split(":", 1)[1])
    raise AssertionError(f"no Cpus_allowed_list for pid {pid}")


# ---- the rule ------------------------------------------------------------------------------------


def test_auto_pins_server_and_client_to_separate_halves():
    sets, note = plan_pinning("auto", [0, 1])
    assert sets == {"server": "0", "client": "1"}
    assert "server CPUs 0" in note and "client CPUs 1" in note
    sets, _ = plan_pinning("auto", [0, 1, 2, 3, 4, 5])
    assert allowed_cpus(sets["server"]) == {0, 1, 2} and allowed_cpus(sets["client"]) == {3, 4, 5}
    sets, _ = plan_pinning(True, [2, 3, 7])       # only the CPUs this process may use
    assert allowed_cpus(sets["server"]) == {2} and allowed_cpus(sets["client"]) == {3, 7}


def test_one_cpu_is_not_pinned_under_auto_and_refused_under_true():
    sets, note = plan_pinning("auto", [0])
    assert sets == {"server": None, "client": None} and "only 1 CPU" in note
    with pytest.raises(TargetError, match="pin_cpus=true needs at least 2 CPUs"):
        plan_pinning(True, [0])


def test_false_never_pins_and_explicit_cpus_override_the_split():
    assert plan_pinning(False, [0, 1, 2, 3])[0] == {"server": None, "client": None}
    assert plan_pinning("auto", [0, 1, 2, 3], client_cpu=3)[0] == {"server": "0-1", "client": "3"}
    with pytest.raises(TargetError, match="server_cpu=9"):
        plan_pinning("auto", [0, 1], server_cpu=9)
    with pytest.raises(TargetError, match="contradicts"):
        plan_pinning(False, [0, 1], server_cpu=0)


def test_bad_pin_cpus_is_one_error_at_plan_time():
    with pytest.raises(TargetOptionError, match="pin_cpus must be auto, true or false"):
        check_target_spec({"type": "lab", "options": {"pin_cpus": "sometimes"}})
    assert cpu_list_text([3, 0, 1, 2, 6]) == "0-3,6"


# ---- the real lab --------------------------------------------------------------------------------


@pytest.mark.lab
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning needs at least 2 CPUs")
def test_nsd_and_client_commands_run_on_disjoint_cpus(make_lab):
    lab = make_lab(services=("dns",))
    server, client = allowed_cpus(lab.cpus["server"]), allowed_cpus(lab.cpus["client"])
    assert server and client and not server & client
    nsd = netns.namespace_pids(lab.namespace("server"))
    assert lab.state.services["dns"] in nsd
    assert all(cpus_of(pid) == server for pid in nsd), {pid: cpus_of(pid) for pid in nsd}
    shown = lab.run("client", ["grep", "Cpus_allowed_list", "/proc/self/status"], timeout_s=5)
    assert shown.ok and allowed_cpus(shown.stdout.split()[-1]) == client
    pinning = lab.describe()["lab"]["pinning"]
    assert allowed_cpus(pinning["server"]) == server and allowed_cpus(pinning["client"]) == client
    assert pinning["note"].startswith("pinned")


@pytest.mark.lab
def test_unpinned_lab_inherits_this_process_cpus_and_says_why(make_lab):
    lab = make_lab(services=("dns",), pin_cpus=False)
    mine = set(os.sched_getaffinity(0))
    assert all(cpus_of(pid) == mine for pid in netns.namespace_pids(lab.namespace("server")))
    shown = lab.run("client", ["grep", "Cpus_allowed_list", "/proc/self/status"], timeout_s=5)
    assert allowed_cpus(shown.stdout.split()[-1]) == mine
    assert lab.describe()["lab"]["pinning"] == {"server": None, "client": None, "note": "not pinned: pin_cpus=false"}
