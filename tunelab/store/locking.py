"""Who may write a store, and how long to wait: the writer lock, SQLite's lock timeout, transactions.

Only one process may hold a store for writing: an advisory ``flock`` on ``<store>.lock``, which
also holds the writer's pid so a refused process can name it. Readers take no lock. SQLite's own
lock (another connection mid-transaction) is waited for :func:`lock_timeout` seconds; a lock held
longer becomes one :class:`~tunelab.errors.StoreError` naming the holder.
"""
from __future__ import annotations

import fcntl
import math
import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import psutil

from tunelab.errors import StoreError

#: seconds to wait for another process's SQLite lock before giving up (``TUNELAB_LOCK_TIMEOUT_S`` overrides)
LOCK_TIMEOUT_S = 10.0
LOCK_TIMEOUT_ENV = "TUNELAB_LOCK_TIMEOUT_S"


def lock_timeout(seconds: float | None = None) -> float:
    """Seconds to wait for another process's SQLite lock: ``seconds``, else ``$TUNELAB_LOCK_TIMEOUT_S``,
    else :data:`LOCK_TIMEOUT_S`; StoreError unless it is a number from 0 to 3600."""
    text = os.environ.get(LOCK_TIMEOUT_ENV) if seconds is None else seconds
    if text is None or text == "":
        return LOCK_TIMEOUT_S
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = math.nan
    if not 0 <= value <= 3600:
        raise StoreError(f"lock timeout {text!r} (argument or ${LOCK_TIMEOUT_ENV}) must be a number of seconds "
                         "from 0 to 3600")
    return value


def is_locked(exc: sqlite3.Error) -> bool:
    """True when SQLite refused because another connection holds the database."""
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def lock_holders(path: Path, include_self: bool = False) -> list[str]:
    """Other processes that hold the store open or its writer lock: ``'pid N (command line)'``.

    Looks at the pid recorded in ``<store>.lock`` and, with psutil, at every process with the store
    (or its ``-wal``/``-shm``) open; the caller's own process only with ``include_self`` (when another
    ``Store`` of this process holds the writer lock).
    """
    me = os.getpid()
    pids: list[int] = []
    try:
        text = path.with_name(path.name + ".lock").read_text(errors="replace").strip()
        if text.isdigit() and ((include_self and int(text) == me) or (int(text) != me and psutil.pid_exists(int(text)))):
            pids.append(int(text))
    except OSError:
        pass
    names = {str(Path(f"{path}{suffix}").resolve()) for suffix in ("", "-wal", "-shm")}
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == me or proc.pid in pids:
            continue
        try:
            if any(f.path in names for f in proc.open_files()):
                pids.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    out = []
    for pid in pids:
        try:
            command = "this process" if pid == me else " ".join(psutil.Process(pid).cmdline())
        except (psutil.Error, OSError):
            command = "?"
        out.append(f"pid {pid} ({command[:200]})")
    return out


def locked_message(path: Path, waited_s: float) -> str:
    """The StoreError text for a store another process kept locked for ``waited_s`` seconds."""
    holders = lock_holders(path)
    who = "; ".join(holders) if holders else "the holder could not be identified"
    return (f"the store {path} is locked by another process ({who}); waited {waited_s:g} s. Wait for it to "
            f"finish or stop it, then retry (${LOCK_TIMEOUT_ENV} sets how long to wait)")


def take_writer_lock(path: Path) -> int:
    """Take the writer lock of the store at ``path`` (``<store>.lock``, holding our pid); returns its fd.

    Raises
    ------
    StoreError
        When the lock file cannot be opened, or another process holds the lock (named).
    """
    lock_path = path.with_name(path.name + ".lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise StoreError(f"cannot open the lock file {lock_path} ({exc.strerror}); the store's directory must be "
                         "writable to record trials or restore knobs") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holders = lock_holders(path, include_self=True)
        os.close(fd)
        raise StoreError(
            f"the store {path} is in use by another tunelab process "
            f"({'; '.join(holders) or 'holder unknown'}); "
            "wait for it to finish or stop it, then retry"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def release_writer_lock(fd: int | None) -> None:
    """Release a lock :func:`take_writer_lock` took (``None``: nothing to release)."""
    if fd is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


@contextmanager
def sql_errors(path: Path, lock_timeout_s: float) -> Iterator[None]:
    """Turn SQLite errors into one StoreError: a lock held too long names its holder, any other
    database error says the file is damaged."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if is_locked(exc):
            raise StoreError(locked_message(path, lock_timeout_s)) from None
        raise StoreError(f"{path} cannot be read as a tunelab store ({exc}); it is damaged or not a "
                         "store: use the original file (or rerun the study)") from None
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} is damaged or not a tunelab store ({exc}); use the original file "
                         "(or rerun the study)") from None


@contextmanager
def transaction(db: sqlite3.Connection, path: Path, lock_timeout_s: float) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any exception); a lock held longer than
    ``lock_timeout_s`` is one StoreError naming its holder."""
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if is_locked(exc):
            raise StoreError(locked_message(path, lock_timeout_s)) from None
        raise
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
