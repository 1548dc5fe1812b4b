"""The committed gallery (reports/seeds/) is what the committed stores (data/examples/seeds/) produce: every page,
figure and design copy of ``tunelab gallery --quick``, byte for byte (the pages carry no generation time).

It drifted before: the lab minutes of a duet store were counted once per pair in the code (2.07) while the
committed page still said 3.7, and the design copies came from designs/seeds/, edited after the stores were
recorded, instead of the designs the stores recorded."""
from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

# the session's gallery build (conftest's real_gallery) happens once: on one worker
pytestmark = pytest.mark.xdist_group("seed-gallery")

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "reports" / "seeds"
REBUILD = ("rebuild it from the committed stores and commit it: `tunelab gallery --quick` (it reads data/examples/seeds "
           "and writes reports/seeds)")


def files(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def first_difference(committed: bytes, built: bytes) -> str:
    """The first changed line of two texts (or the sizes of two images)."""
    try:
        old, new = committed.decode().splitlines(), built.decode().splitlines()
    except UnicodeDecodeError:
        return f"binary: {len(committed)} bytes committed, {len(built)} built"
    changed = [line for line in difflib.unified_diff(old, new, lineterm="", n=0) if line[:1] in "+-"][2:4]
    return " | ".join(line[:300] for line in changed)


def test_the_committed_gallery_is_what_the_committed_stores_produce(real_gallery: tuple[Path, str]) -> None:
    if os.environ.get("TUNELAB_SEED_STORES"):
        pytest.skip("TUNELAB_SEED_STORES points the gallery at other stores than the committed ones")
    built, committed = files(real_gallery[0]), files(COMMITTED)
    assert sorted(built) == sorted(committed), f"the gallery's files differ; {REBUILD}"
    stale = {name: first_difference(committed[name], built[name]) for name in committed
             if committed[name] != built[name]}
    assert not stale, f"committed pages differ from what the stores produce; {REBUILD}: {stale}"
