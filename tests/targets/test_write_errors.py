"""A failed write names the path and the byte count (and a short knob value), never the text written: a query
file is personal data (issue 35). The ssh target's cases run against a real sshd in tests/targets/test_ssh.py."""
from __future__ import annotations

import pytest

from tunelab.errors import TargetError
from tunelab.targets.local import LocalTarget

SECRET = "private.example. A ; personal data\n"


def test_a_failed_local_write_names_the_size_not_the_text(tmp_path):
    text = SECRET * 500
    with pytest.raises(TargetError) as failed:
        LocalTarget().write_text("client", str(tmp_path), text)       # a folder: cannot be written as a file
    message = str(failed.value)
    assert f"could not write {len(text)} bytes to {tmp_path}" in message, message
    assert "private.example" not in message and "\n" not in message
