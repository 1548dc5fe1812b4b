"""Headless Chromium (Debian ``chromium``) for the tests that check what a reader sees: the reports
(tests/report/test_browser.py) and the seed gallery (tests/seeds/test_gallery.py)."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def find_chromium() -> str | None:
    """The Chromium binary, or None when it is not installed."""
    return shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


def chromium_run(binary: str, url: str, *extra: str) -> str:
    """Run headless Chromium on ``url`` with ``extra`` flags (e.g. ``--dump-dom``) in a throwaway profile;
    returns its stdout (the DOM with ``--dump-dom``)."""
    with tempfile.TemporaryDirectory(prefix="tunelab-chromium-") as profile:
        done = subprocess.run([binary, *FLAGS, f"--user-data-dir={profile}", *extra, url], capture_output=True,
                              text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
