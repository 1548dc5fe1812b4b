"""A tiny tmpfs of a test's own, for full-disk and read-only cases (``from mount_helpers import tmpfs``)."""
from __future__ import annotations

import os
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest


@contextmanager
def tmpfs(mount: Path, options: str) -> Iterator[Path]:
    """A tmpfs of this test's own mounted at ``mount`` with ``options``, unmounted afterwards; the test is
    skipped unless root may mount one here."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tiny tmpfs to fill needs root")
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()[:200]}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True, check=False)
