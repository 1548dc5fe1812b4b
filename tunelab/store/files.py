"""Where a study's store lives, what its file must be before SQLite may touch it, and how a reader opens it."""
from __future__ import annotations

import os
from pathlib import Path

from tunelab.errors import StoreError
from tunelab.store.values import check_study_name

#: the first 16 bytes of every SQLite 3 database file
SQLITE_MAGIC = b"SQLite format 3\x00"


def check_store_file(path: Path, empty_ok: bool = False) -> bool:
    """Check that ``path`` can be a tunelab store before SQLite touches it; True when it is a zero-byte file.

    A store is a regular file that starts with the SQLite header. A zero-byte file is accepted only
    when ``empty_ok`` (:meth:`Store.open` creating the study's store); anything else is refused
    with a StoreError naming the path, and is never modified.
    """
    try:
        info = path.stat()
    except FileNotFoundError:
        raise StoreError(f"no trial store at {path}; run `tunelab run DESIGN` first or pass the right store "
                         "path") from None
    except OSError as exc:
        raise StoreError(f"cannot use the store path {path} ({exc.strerror}); check the path") from None
    if not os.path.isfile(path):
        kind = "a directory" if path.is_dir() else "not a regular file"
        raise StoreError(f"{path} is {kind}, not a trial store; pass a .sqlite file written by `tunelab run`")
    if info.st_size == 0:
        if empty_ok:
            return True
        raise StoreError(f"{path} is empty (0 bytes), not a tunelab store: a run killed before it recorded anything, "
                         "or a truncated copy. Delete it and run `tunelab run DESIGN` again, or get the original file")
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise StoreError(f"cannot read the store {path} ({exc.strerror}); check its permissions") from None
    if head != SQLITE_MAGIC or info.st_size < 512:
        raise StoreError(f"{path} is not a tunelab store: it is not an SQLite database (it starts with {head[:8]!r}, "
                         f"{info.st_size} bytes); tunelab left it unchanged. Check the path, or get the original file")
    return False


def default_store_path(study: str, data_dir: str | os.PathLike[str] = "data") -> Path:
    """``data/<study>.sqlite`` (relative to the working directory unless ``data_dir`` is absolute);
    StoreError unless ``study`` is a valid study name (:func:`check_study_name`), so the path never
    leaves ``data_dir``."""
    return Path(data_dir) / f"{check_study_name(study, 'study')}.sqlite"


def store_path_for(study: str | os.PathLike[str], data_dir: str | os.PathLike[str] = "data") -> Path:
    """What a user means by STUDY: an existing path or any ``*.sqlite`` path as is, else
    ``data_dir/<study>.sqlite`` (:func:`default_store_path`)."""
    text = os.fspath(study)
    candidate = Path(text)
    if candidate.suffix == ".sqlite" or os.sep in text:
        return candidate
    try:
        if candidate.exists():
            return candidate
    except OSError:   # e.g. a name too long for the filesystem: then it must be a valid study name
        pass
    return default_store_path(text, data_dir)


def read_only_query(path: Path) -> str:
    """The SQLite URI query that opens the store at ``path`` for reading without leaving a file beside it.

    A store is in WAL mode, and SQLite opens a WAL database (even ``mode=ro``) through its ``-wal`` and
    ``-shm`` files: it creates them when they are missing and a read-only connection leaves them behind,
    while a read-only file system, where it cannot create them, fails the open. So:

    * no ``-wal`` and no ``-journal`` beside the store: no connection has it open and every committed
      transaction is in the file itself, which is read as ``immutable`` (no locks, no side files;
      https://www.sqlite.org/uri.html#uriimmutable). A writer that starts meanwhile writes into its own
      ``-wal`` until it closes, so a read stays consistent unless that writer also finishes during it;
    * a folder nobody can write to (a read-only mount, a published data set) holding an empty ``-wal``:
      ``immutable`` as well, since nothing can be written there and the empty log holds nothing;
    * otherwise (a writer has the store open, or a crash left its log): ``mode=ro``, SQLite's own
      locking and the log's committed transactions; the side files exist already. A log that is not
      empty in a read-only folder without its ``-shm`` cannot be read: StoreError saying what to do.
    """
    wal, shm, journal = (Path(f"{path}{suffix}") for suffix in ("-wal", "-shm", "-journal"))
    if not wal.exists() and not journal.exists():
        return "mode=ro&immutable=1"
    if os.access(path.parent, os.W_OK):
        return "mode=ro"
    if not journal.exists() and _size(wal) == 0:
        return "mode=ro&immutable=1"
    if not journal.exists() and not shm.exists():
        raise StoreError(f"{path} has transactions in {wal.name} that SQLite cannot read in a read-only folder "
                         f"without {shm.name} (its writer stopped before it finished). Copy {path.name} with "
                         f"{wal.name} to a writable folder and read it there")
    return "mode=ro"


def _size(path: Path) -> int:
    """The size of the file at ``path`` in bytes, 0 when there is none."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
