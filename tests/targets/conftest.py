"""Fixtures for the target tests: a lab that is always torn down, and tool checks."""
from __future__ import annotations

import shutil
from typing import Iterator

import pytest

LAB_TOOLS = ("ip", "tc", "nsd", "iperf3", "taskset", "losetup", "ss")


def require_tools(*tools: str) -> None:
    """Skip the calling test, naming the missing Debian tools."""
    missing = [t for t in tools if shutil.which(t) is None and shutil.which(t, path="/usr/sbin:/sbin") is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (install the Debian packages)")


@pytest.fixture
def lab_tools() -> None:
    require_tools(*LAB_TOOLS)


@pytest.fixture
def make_lab(lab_tools: None) -> Iterator:
    """Factory of LabTargets that are up; every one is torn down after the test, pass or fail."""
    from tunelab.targets.lab import LabTarget

    labs: list[LabTarget] = []

    def factory(**options) -> LabTarget:
        lab = LabTarget(**options)
        labs.append(lab)
        lab.up()
        return lab

    try:
        yield factory
    finally:
        for lab in labs:
            lab.down()
