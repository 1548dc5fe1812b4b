"""tunelab's own directories on this machine, and how they are made safe to use as root.

tunelab runs as root, so a directory it writes into must not be one another user can plant
files or symlinks in. :func:`private_dir` creates a directory (mode 0700) or checks that an
existing one is a real directory owned by us and not writable by others; anything else is
refused with a :class:`~tunelab.errors.SafetyError` naming the path and the fix.

=================  ===============================  ===========================================
constant           default (environment override)    holds
=================  ===============================  ===========================================
``RUN_DIR``        ``/run/tunelab`` (TUNELAB_RUN_DIR)  lab state files and lab work directories
``DISK_DIR``       ``/var/tmp/tunelab`` (TUNELAB_DISK_DIR)  sparse files behind the lab's loop disks
``SCRATCH_DIR``    ``DISK_DIR/scratch`` (TUNELAB_SCRATCH_DIR)  the only files fio may read or write
testbed journals   ``/var/lib/tunelab/testbeds`` (TUNELAB_TESTBED_DIR)  each testbed's own journal store
                   (:func:`testbed_dir`, read at each call)
=================  ===============================  ===========================================
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from tunelab.errors import SafetyError

RUN_DIR = Path(os.environ.get("TUNELAB_RUN_DIR", "/run/tunelab"))
DISK_DIR = Path(os.environ.get("TUNELAB_DISK_DIR", "/var/tmp/tunelab"))
#: the only place file-based loads (fio) may read or write, besides the target's ``@disk`` loop
#: device: tunelab's own scratch directory next to the lab's disk images
SCRATCH_DIR = Path(os.environ.get("TUNELAB_SCRATCH_DIR") or DISK_DIR / "scratch")


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` (and missing parents) with mode 0700, or check an existing one is safe.

    Safe means: a real directory (not a symlink), owned by the current user, not writable by
    group or others. Returns the path.

    Raises
    ------
    SafetyError
        when the path exists but is a symlink, not a directory, owned by someone else, or
        writable by others (someone could plant files or symlinks in it).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(path)
    problem = None
    if stat.S_ISLNK(info.st_mode):
        problem = "is a symbolic link"
    elif not stat.S_ISDIR(info.st_mode):
        problem = "is not a directory"
    elif info.st_uid != os.geteuid():
        problem = f"is owned by uid {info.st_uid}, not by this user (uid {os.geteuid()})"
    elif info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        problem = f"is writable by others (mode {stat.filemode(info.st_mode)})"
    if problem:
        raise SafetyError(f"tunelab's directory {path} {problem}, so another user could plant files or symlinks "
                          f"that root would follow; remove it (rm -r {path}) and run again")
    return path


def is_inside(path: str | os.PathLike[str], directory: str | os.PathLike[str]) -> bool:
    """Whether ``path`` resolves to ``directory`` itself or somewhere below it (symlinks resolved)."""
    resolved, base = Path(os.path.realpath(path)), Path(os.path.realpath(directory))
    return resolved == base or base in resolved.parents


def testbed_dir() -> Path:
    """Where each testbed of a study run on many (:mod:`tunelab.cluster`) keeps its own journal store,
    on the machine of the Dask worker that drives it: ``TUNELAB_TESTBED_DIR`` or
    ``/var/lib/tunelab/testbeds``, read at each call (worker processes inherit the environment).
    It survives a reboot, so ``tunelab restore --testbeds FILE`` can put a lost testbed's knobs back."""
    return private_dir(os.environ.get("TUNELAB_TESTBED_DIR") or "/var/lib/tunelab/testbeds")


def read_capped_text(path: str | os.PathLike[str], limit: int, error: type[Exception], what: str, hint: str) -> str:
    """The UTF-8 text of a small untrusted file (a design, a testbeds file), reading at most ``limit``
    bytes (``/dev/zero`` ends there too); every problem is one ``error`` line naming ``path`` and ``what``
    it is, with ``hint`` when the file does not exist."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(limit + 1)
    except FileNotFoundError:
        raise error(f"{path}: no such {what}; {hint}") from None
    except (OSError, ValueError) as exc:
        raise error(f"{path}: cannot read the {what}: {' '.join(str(exc).split())[:600]}") from None
    if len(raw) > limit:
        raise error(f"{path}: the {what} is larger than the limit MAX_FILE_BYTES={limit} bytes; a {what} is a few "
                    "kilobytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: the {what} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
