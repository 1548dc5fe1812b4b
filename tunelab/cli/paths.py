"""Where the CLI may write: checks of output paths a user gives (``--out``, ``--json``) and of paths
derived from a store's content (which must stay inside their directory).

tunelab runs as root, so an output path is checked before anything is written: never into
``/proc`` or ``/sys`` (a write there changes the kernel), never onto a device other than
``/dev/null`` and ``/dev/full``, never onto a directory; a name derived from a store is confined to
its directory. Errors writing (full disk, read-only filesystem, ...) become one
:class:`OutputError` naming the flag, the path and what to do.

>>> confined("data", "default-screen.csv").as_posix()
'data/default-screen.csv'
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from tunelab.errors import TunelabError

#: filesystems a report or export must never be written into (writes there change the kernel)
FORBIDDEN_ROOTS = ("/proc", "/sys")
#: devices an output may be (discarding output, or simulating a full disk)
ALLOWED_DEVICES = ("/dev/null", "/dev/full")
#: longest file name (one path component) Linux filesystems take, in bytes
NAME_MAX_BYTES = 255
#: what an OSError means for the user, by errno ({path} is the file involved)
OS_ERRORS = {
    errno.ENOSPC: "no space left on the device holding {path}; free some space or write elsewhere",
    errno.EDQUOT: "disk quota exceeded writing {path}; free some space or write elsewhere",
    errno.EROFS: "{path} is on a read-only filesystem; choose a writable location",
    errno.EISDIR: "{path} is a directory where a file is expected; give a file path",
    errno.ENOTDIR: "a part of {path} is not a directory; check the path",
    errno.EACCES: "permission denied for {path}; choose a location you may write to (or fix its permissions)",
    errno.EPERM: "operation not permitted on {path}; choose another location",
    errno.ENAMETOOLONG: f"a name in {{path}} is too long for the filesystem (at most {NAME_MAX_BYTES} bytes per "
                        "name); use a shorter name",
    errno.ENOENT: "{path} does not exist; check the path",
    errno.EEXIST: "{path} already exists; remove it or choose another path",
    errno.ELOOP: "{path} is a symbolic link loop (or a link tunelab refuses to follow); give a plain path",
    errno.EINVAL: "{path} cannot be written as a file here (invalid argument); choose a regular file path",
}


class OutputError(TunelabError):
    """An output path is refused, or writing to it failed (full disk, read-only, ...)."""


def describe_os_error(exc: OSError, path: str | os.PathLike[str] | None = None) -> str:
    """One sentence for ``exc``: what happened to which path and what to do.

    >>> describe_os_error(OSError(errno.ENOSPC, "No space left on device"), "/dev/full")
    'no space left on the device holding /dev/full; free some space or write elsewhere'
    """
    where = exc.filename if exc.filename is not None else path if path is not None else "a file"
    template = OS_ERRORS.get(exc.errno or 0)
    if template is None:
        return f"{where}: {exc.strerror or exc}"
    return template.format(path=where)


def _forbidden(resolved: Path) -> str | None:
    for root in FORBIDDEN_ROOTS:
        if resolved == Path(root) or Path(root) in resolved.parents:
            return f"it is inside {root}, where writing changes the kernel"
    return None


def _check_names(path: Path, flag: str) -> None:
    for part in path.parts:
        if len(os.fsencode(part)) > NAME_MAX_BYTES:
            raise OutputError(f"{flag} {str(path)[:80]!r}...: a name in it is longer than {NAME_MAX_BYTES} bytes; "
                              "use a shorter name")


def check_output_file(path: str | os.PathLike[str], flag: str) -> Path:
    """Return ``path`` if a file may be written there, else raise :class:`OutputError` naming ``flag``.

    Refused: a directory, a device other than :data:`ALLOWED_DEVICES`, a socket, anything under
    :data:`FORBIDDEN_ROOTS`, a name longer than :data:`NAME_MAX_BYTES` bytes. A FIFO is accepted.
    """
    path = Path(path)
    _check_names(path, flag)
    resolved = Path(os.path.realpath(path))
    why = _forbidden(resolved)
    if why is None:
        try:
            mode = os.stat(resolved).st_mode
        except FileNotFoundError:
            mode = None
        except OSError as exc:
            raise OutputError(f"{flag} {path}: {describe_os_error(exc, path)}") from None
        if mode is not None and stat.S_ISDIR(mode):
            why = "it is a directory; give a file name inside it"
        elif (mode is not None and not stat.S_ISREG(mode) and not stat.S_ISFIFO(mode)
              and str(resolved) not in ALLOWED_DEVICES):
            why = "it is a device or special file; tunelab writes only regular files (or /dev/null)"
    if why:
        raise OutputError(f"{flag} {path} is refused: {why}")
    return path


def check_output_dir(path: str | os.PathLike[str], flag: str) -> Path:
    """Return ``path`` if a directory of files may be written there (it exists as a directory or
    does not exist yet), else raise :class:`OutputError` naming ``flag``."""
    path = Path(path)
    _check_names(path, flag)
    resolved = Path(os.path.realpath(path))
    why = _forbidden(resolved)
    if why is None and resolved.exists() and not resolved.is_dir():
        why = "it exists and is not a directory; give a directory"
    if why:
        raise OutputError(f"{flag} {path} is refused: {why}")
    return path


def confined(directory: str | os.PathLike[str], name: str) -> Path:
    """``directory/name`` for a ``name`` derived from untrusted content; OutputError unless that file
    lies directly in ``directory`` (no ``/``, no ``..``, no symbolic link out of it)."""
    directory = Path(directory)
    candidate = directory / name
    if (not name or name in (".", "..") or "/" in name or "\0" in name or len(os.fsencode(name)) > NAME_MAX_BYTES
            or Path(os.path.realpath(candidate)).parent != Path(os.path.realpath(directory))):
        raise OutputError(f"refusing to write {str(name)[:80]!r}: a file name derived from the store must stay "
                          f"directly inside {directory}; pass --out PATH")
    return candidate


def write_failed(exc: OSError, path: str | os.PathLike[str], flag: str) -> OutputError:
    """The :class:`OutputError` for a failed write of ``path`` (given with ``flag``)."""
    return OutputError(f"cannot write {flag} {path}: {describe_os_error(exc, path)}")
