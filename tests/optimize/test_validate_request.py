"""The checks of one validation request (tunelab/optimize/validation.py) that need no target: a knob that needs
its service restarted, the restart command and its flag; the DNS software's version asked on the server."""
from __future__ import annotations

import pytest

from tunelab.errors import TargetError
from tunelab.optimize.validation import (CommandsNotAllowed, ValidateRequest, check_request, software_version,
                                         version_argv)
from tunelab.targets.base import CommandResult

SSH = {"type": "ssh", "options": {"server": "root@192.0.2.10"}}
RESTART = {"type": "ssh", "options": {"server": "root@192.0.2.10",
                                      "service_commands": {"dns": ["systemctl", "restart", "nsd"]}}}


def request(spec: dict, candidate: dict, **extra) -> ValidateRequest:
    return ValidateRequest(spec=spec, candidate=candidate, load="dnsperf", profiles=("low",), study="validate-x",
                           **extra)


def test_flags_on_ssh_without_a_restart_command_are_refused_naming_the_option() -> None:
    with pytest.raises(TargetError, match=r"net.core.somaxconn takes effect only after the dns service restarts.*"
                                          r"--target-option service_commands=\{dns: \[\.\.\.\]\}"):
        check_request(request(SSH, {"net.core.somaxconn": 1024}))


def test_a_change_files_restart_needs_the_flag_and_runs_only_when_a_knob_needs_it() -> None:
    with pytest.raises(CommandsNotAllowed, match="pass --allow-design-commands to run it"):
        check_request(request(RESTART, {"net.core.somaxconn": 1024}, allow_commands=False, source="c.yaml"))
    allowed = check_request(request(RESTART, {"net.core.somaxconn": 1024}, allow_commands=True, source="c.yaml"))
    assert allowed.restarts and allowed.spec["options"]["service_commands"] == {"dns": ["systemctl", "restart", "nsd"]}
    # tcp_fin_timeout needs no restart: the command is left out (never runs), so no flag is needed
    unneeded = check_request(request(RESTART, {"net.ipv4.tcp_fin_timeout": 30}, allow_commands=False,
                                     source="c.yaml"))
    assert not unneeded.restarts and "service_commands" not in unneeded.spec["options"]


class Server:
    """A target whose server answers one command."""

    def __init__(self, stdout: str = "", stderr: str = "", returncode: int = 0, broken: bool = False) -> None:
        self.answer, self.broken, self.argv = (stdout, stderr, returncode), broken, None

    def run(self, host, argv, timeout_s, cpu=None):
        self.argv = (host, list(argv))
        if self.broken:
            raise TargetError("ssh server: connection lost")
        out, err, code = self.answer
        return CommandResult(tuple(argv), code, out, err, 0.1)


def test_the_dns_softwares_version_is_asked_on_the_server() -> None:
    server = Server(stderr="NSD version 4.6.1\nWritten by NLnet Labs.\n")
    assert software_version(server, "nsd") == {"software": "nsd", "version": "4.6.1"}
    assert server.argv == ("server", ["nsd", "-v"])
    assert version_argv("knot") == ("knotd", "-V") and version_argv("unbound") == ("unbound", "-V")
    assert software_version(Server(), "powerdns") == {"software": "powerdns"}
    assert software_version(Server(broken=True), "nsd") == {"software": "nsd"}      # the verdict is not lost
    assert software_version(Server(stderr="sh: 1: nsd: not found", returncode=127), "nsd") == {"software": "nsd"}
    assert software_version(Server(), None) is None
