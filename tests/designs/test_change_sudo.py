"""``server: {sudo: true}`` in a change file (issue 35): the ssh target's ``sudo`` option, shown by ``--plan
--offline`` as ``sudo -n --`` before every server command that needs root; a load host has no such key."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tunelab.designs.change import load_change
from tunelab.errors import DesignError
from tunelab.optimize.validate_plan import preview_request
from tunelab.optimize.validation import request_of_change

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_change_file import good, write  # noqa: E402


def test_sudo_true_becomes_the_target_option_and_the_plan_shows_sudo(tmp_path: Path) -> None:
    content = good(tmp_path)
    content["server"].update(ssh="alice@192.0.2.10:22", sudo=True)
    change = load_change(write(tmp_path, content))
    assert change.target_spec("dns")["options"]["sudo"] is True
    preview = preview_request(request_of_change(change, allow_commands=True), offline=True).text()
    assert "server (192.0.2.10:22 over ssh, as alice, root through `sudo -n --`): per trial, after the knobs: " \
           "sudo -n -- systemctl restart nsd" in preview, preview
    assert "write the knobs (`sudo -n -- dd of=FILE`" in preview and "SFTP" not in preview


def test_sudo_must_be_a_boolean_and_belongs_to_the_server(tmp_path: Path) -> None:
    content = good(tmp_path)
    content["server"]["sudo"] = "yes"
    with pytest.raises(DesignError, match=r"sudo.*must be true or false"):
        load_change(write(tmp_path, content))
    content["server"].pop("sudo")
    content["load_host"] = {"ssh": "tester@192.0.2.20", "sudo": True}
    with pytest.raises(DesignError, match=r"unknown key 'sudo'"):
        load_change(write(tmp_path, content))
    content.pop("load_host")
    plain = load_change(write(tmp_path, content))
    assert "sudo" not in plain.target_spec("dns")["options"]
