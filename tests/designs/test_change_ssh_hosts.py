"""Hostile ssh hosts in a change file (``server.ssh``, ``load_host.ssh``) are refused when the file is read, so
``tunelab validate FILE --plan --offline`` refuses them: one ``tunelab: error:`` line naming the file, its line
and the key, exit status 2, nothing on stdout, no traceback. The command runs in-process (:mod:`cli_helpers`).
The rule itself is :func:`tunelab.targets.ssh.parse_spec`, which testbeds files and designs use too."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_helpers import tunelab_here  # noqa: F401 - the fixture

from tunelab.targets import check_target_spec
from tunelab.targets.base import TargetOptionError

from .test_change_file import good, write

PLAN = ("--plan", "--offline", "--allow-design-commands")

HOSTILE = [
    "root@$(touch${IFS}X):22",                 # command substitution as the host
    "root@-oProxyCommand=touch${IFS}X",        # an ssh option as the host
    "-oProxyCommand=touch${IFS}X@host",        # an ssh option as the user
    "root@`touch X`",                          # backticks
    "ro`id`ot@host",
    "root@host;touch X",                       # ;
    "root@host&&id", "root@host|id", "root@host>X",
    "root@host name", "ro ot@host", "root@host :22", "root@host\t",    # blanks
    "root@host\n:22", "root@host\ntouch X",    # a newline
    "@host",                                   # an empty user
    "root@host:0", "root@host:65536", "root@host:22x", "root@host:-1", "root@host:",     # bad ports
    "root@[::1", "root@[192.0.2.10]:22", "root@[fe80::1%$(id)]:22",   # brackets: IPv6 only, zone an interface
    "root@-host", "root@host-.example", "root@ho_st", "root@1.2.3.999", "root@a..b", "root@bücher.example",
]


def change_with(tmp_path: Path, key: str, spec: str) -> Path:
    content = good(tmp_path)
    if key == "load_host":
        content["load_host"] = {"ssh": spec}
    else:
        content["server"]["ssh"] = spec
    return write(tmp_path, content)


@pytest.mark.parametrize("key", ["server", "load_host"])
@pytest.mark.parametrize("spec", HOSTILE)
def test_a_hostile_ssh_host_is_one_error_line_before_anything(tunelab_here, tmp_path: Path, key: str,  # noqa: F811
                                                                spec: str) -> None:
    path = change_with(tmp_path, key, spec)
    proc = tunelab_here(["validate", path.name, *PLAN], tmp_path)
    assert proc.returncode == 2 and proc.stdout == "", (proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert re.match(rf"tunelab: error: {re.escape(path.name)}:\d+: {key}\.ssh: ssh host '.*' is invalid: ",
                    proc.stderr), proc.stderr
    assert "user@host:port" in proc.stderr                # says how to write it
    assert not (tmp_path / "X").exists() and not (tmp_path / "data").exists()


def test_a_long_hostile_host_is_quoted_short(tunelab_here, tmp_path: Path) -> None:  # noqa: F811
    path = change_with(tmp_path, "server", "root@" + "$(id)" * 1000)
    proc = tunelab_here(["validate", path.name, *PLAN], tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert len(proc.stderr) < 500 and "$(id)" * 20 not in proc.stderr, proc.stderr


@pytest.mark.parametrize(("spec", "shown"), [("root@[2001:db8::10]:2222", "2001:db8::10:2222"),
                                             ("tester@db-1.example.org.", "db-1.example.org.:22"),
                                             ("root@192.0.2.10", "192.0.2.10:22")])
def test_good_hosts_pass_the_offline_plan(tunelab_here, tmp_path: Path, spec: str, shown: str) -> None:  # noqa: F811
    path = change_with(tmp_path, "server", spec)
    proc = tunelab_here(["validate", path.name, *PLAN], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "checks: passed" in proc.stdout and f"server: {shown} over ssh" in proc.stdout


@pytest.mark.parametrize("role", ["server", "client"])
def test_an_ssh_target_spec_in_a_design_or_testbeds_file_is_held_to_the_same_rule(role: str) -> None:
    options = {"server": "root@192.0.2.10", role: "root@-oProxyCommand=touch${IFS}X"}
    with pytest.raises(TargetOptionError, match=r"ssh host 'root@-oProxyCommand=touch\$\{IFS\}X' is invalid") as info:
        check_target_spec({"type": "ssh", "options": options})
    assert info.value.option == role and "\n" not in str(info.value)
