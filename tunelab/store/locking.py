"""Who may write a store, and how long to wait: the writer lock, SQLite's lock timeout, transactions.

Only one process may hold a store for writing: an advisory ``flock`` on ``<store>.lock``, which
also holds the writer's pid so a refused process can name it. Readers take no lock. SQLite's own
lock (another connection mid-transaction) is waited for :func:`lock_timeout` seconds; a lock held
longer becomes one :class:`~tunelab.errors.StoreError` naming the holder.
"""
from __future__ import annotations

import errno
import fcntl
import math
import os
import shutil
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import psutil

from tunelab.errors import StoreError
from tunelab.formatting import fmt_number

#: seconds to wait for another process's SQLite lock before giving up (``TUNELAB_LOCK_TIMEOUT_S`` overrides)
LOCK_TIMEOUT_S = 10.0
LOCK_TIMEOUT_ENV = "TUNELAB_LOCK_TIMEOUT_S"
#: SQLite's primary result codes for a full disk and for an I/O error
SQLITE_FULL, SQLITE_IOERR = 13, 10
#: free bytes below which an I/O error writing a store is taken for a full disk: SQLite reports a full
#: tmpfs as "disk I/O error" when it cannot grow the ``-shm`` or ``-wal`` file
NEARLY_FULL_BYTES = 1 << 20


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


def free_bytes(path: Path) -> int | None:
    """Free bytes on the filesystem holding ``path`` (its directory), ``None`` when it cannot be told."""
    try:
        return shutil.disk_usage(path if path.is_dir() else path.parent).free
    except OSError:
        return None


def free_inodes(path: Path) -> int | None:
    """Free inodes (files that may still be created) on the filesystem holding ``path``; ``None`` when unknown."""
    try:
        return os.statvfs(path if path.is_dir() else path.parent).f_favail
    except OSError:
        return None


def disk_full_message(path: Path, exc: BaseException) -> str | None:
    """The StoreError text when ``exc`` means the disk holding the store is full, else ``None``.

    A full disk is ``ENOSPC``/``EDQUOT``, SQLite's ``SQLITE_FULL`` ("database or disk is full"), or
    an SQLite I/O error while less than :data:`NEARLY_FULL_BYTES` are free. A full disk does not
    damage a store: SQLite rolls the transaction back.
    """
    free = free_bytes(path)
    if isinstance(exc, OSError):
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    elif isinstance(exc, sqlite3.Error):
        code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
        full = (code == SQLITE_FULL or "disk is full" in str(exc)
                or (code == SQLITE_IOERR and free is not None and free < NEARLY_FULL_BYTES))
    else:
        full = False
    if not full:
        return None
    room = "free space unknown" if free is None else f"{fmt_number(free / 1024, 0)} KiB free"
    if free_inodes(path) == 0:
        room += ", but no free inodes"
    return (f"the disk holding the store {path} is full ({room}), so SQLite could not write to it "
            f"({getattr(exc, 'strerror', None) or exc}). The store is not damaged and keeps everything recorded "
            "before; free some space, or pass --store on another disk, then run again")


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
        raise StoreError(disk_full_message(path, exc) or f"cannot open the lock file {lock_path} ({exc.strerror}); "
                         "the store's directory must be writable to record trials or restore knobs") from None
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
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
    except OSError as exc:
        release_writer_lock(fd)
        raise StoreError(disk_full_message(path, exc) or f"cannot write the lock file {lock_path} ({exc.strerror}); "
                         "the store's directory must be writable to record trials or restore knobs") from None
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
        raise StoreError(disk_full_message(path, exc) or f"{path} cannot be read as a tunelab store ({exc}); it is "
                         "damaged or not a store: use the original file (or rerun the study)") from None
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} is damaged or not a tunelab store ({exc}); use the original file "
                         "(or rerun the study)") from None


@contextmanager
def transaction(db: sqlite3.Connection, path: Path, lock_timeout_s: float) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any exception); a lock held longer than
    ``lock_timeout_s`` is one StoreError naming its holder, a full disk one saying so
    (:func:`disk_full_message`)."""
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if is_locked(exc):
            raise StoreError(locked_message(path, lock_timeout_s)) from None
        refuse_full_disk(path, exc)
        raise
    try:
        yield db
        db.execute("COMMIT")
    except BaseException as exc:
        if db.in_transaction:      # SQLite may have rolled back already (e.g. after SQLITE_FULL)
            db.execute("ROLLBACK")
        refuse_full_disk(path, exc)
        raise


def refuse_full_disk(path: Path, exc: BaseException) -> None:
    """Raise the StoreError of :func:`disk_full_message` when ``exc`` (an SQLite or OS error) means a full disk."""
    message = disk_full_message(path, exc) if isinstance(exc, (sqlite3.OperationalError, OSError)) else None
    if message:
        raise StoreError(message) from None
