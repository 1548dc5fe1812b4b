"""``tunelab validate CHANGE.yaml`` through ssh when production's sshd offers no SFTP and the operator cannot log
in as root (issue 35): both sshds lack the ``sftp`` subsystem, both logins are a throwaway non-root user with a
NOPASSWD sudoers rule, and the change file says ``sudo: true`` (the load host never needs root).

``--plan`` checks the hosts (a login without ``sudo: true`` is one line naming the fix) and shows ``sudo -n --``
where it is used; the validation then measures every trial, restarts the server through sudo and puts the knob
back. Short on purpose: 2 blocks (the fewest), 0.5 s warm-up, 2 s measured. The verdict is never asserted.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Iterator

import pytest
from dns_helpers import require_tools

from tunelab.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from operator_hosts import ORIGINAL_SOMAXCONN, OperatorHosts, operator_hosts, restarts  # noqa: E402
from sshd_helper import login_user  # noqa: E402  (operator_hosts put tests/targets on the path)
from test_validate_change_ssh import write_change  # noqa: E402

pytestmark = pytest.mark.lab


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[OperatorHosts]:
    require_tools("sshd", "ssh-keygen", "dnsperf", "unbound", "ss", "sudo", "useradd",
                  hint="apt-get install openssh-server dnsperf unbound sudo")
    with login_user(sudoers="ALL") as user, operator_hosts(tmp_path, sftp=False, user=user) as running:
        yield running


def set_sudo(change: Path, sudo: bool) -> None:
    import yaml

    data = yaml.safe_load(change.read_text())
    data["server"]["sudo"] = sudo
    change.write_text(yaml.safe_dump(data, sort_keys=False))


def test_validate_without_sftp_as_a_sudo_user(hosts: OperatorHosts):
    user = hosts.server.split("@", 1)[0]
    change = write_change(hosts, "nosftp")
    before = restarts(hosts)

    # the login is not root and the change file does not say sudo: the plan's host check names the fix
    refused = hosts.run_tunelab("validate", str(change), "--plan", "--allow-design-commands", timeout_s=60)
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    error = refused.stderr.strip()
    assert "\n" not in error and "Traceback" not in error, error
    assert f"ssh server ({hosts.server})" in error and "`sudo: true`" in error and "NOPASSWD" in error, error

    set_sudo(change, True)
    plan = hosts.run_tunelab("validate", str(change), "--plan", "--allow-design-commands", timeout_s=60)
    assert plan.returncode == 0, plan.stderr
    server, load_host = (spec.split("@", 1)[1] for spec in (hosts.server, hosts.load_host))
    assert f"server ({server} over ssh, as {user}, root through `sudo -n --`): per trial, after the knobs: " \
           f"sudo -n -- {hosts.restart}" in plan.stdout, plan.stdout
    assert f"load host ({load_host} over ssh, as {user}): per trial: [profile overload] dnsperf" in plan.stdout
    assert "`sudo -n -- dd of=FILE`" in plan.stdout and "SFTP" not in plan.stdout
    assert hosts.somaxconn() == ORIGINAL_SOMAXCONN and restarts(hosts) == before    # the plan ran nothing

    run = hosts.run_tunelab("validate", str(change), "--allow-design-commands", "--json", "verdict.json",
                            timeout_s=120)
    # any verdict (0 improve/equivalent, 3 worse, 4 inconclusive, 5 untestable: on a busy machine flagged trials
    # can leave a metric untestable); what this test holds is that every trial ran through dd and sudo
    assert run.returncode in (0, 3, 4, 5), (run.returncode, run.stdout, run.stderr[-2000:])
    result = json.loads((hosts.workdir / "verdict.json").read_text())
    assert result["failures"]["trials"] == 8 and result["failures"]["failed"] == 0, result["failures"]
    assert result["table"], result
    assert restarts(hosts) - before >= 4                      # the restart command ran through sudo
    assert hosts.somaxconn() == ORIGINAL_SOMAXCONN           # the knob is back
    with Store(hosts.workdir / "data" / "validate-nosftp.sqlite", readonly=True) as store:
        assert store.unrestored() == []
