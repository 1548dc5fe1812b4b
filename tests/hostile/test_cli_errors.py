"""The CLI's single error path: bad CSVs, bad names, bad output paths, a full disk, a read-only
filesystem and absurd flags all end in one ``tunelab: error:`` line and exit 2 (never a traceback),
and nothing is written where it must not be.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mount_helpers import tmpfs  # tests/ is on sys.path (tests/conftest.py)
from tests.hostile.conftest import assert_one_error
from tunelab.cli import EXIT_INTERNAL, main

ROOT = Path(__file__).resolve().parents[2]
#: the default study as recorded on 2026-11-24 (before kernel counters): these tests pin its values and size
EXAMPLE = ROOT / "tests" / "data" / "default-2026-11-24.sqlite"

pytestmark = pytest.mark.usefixtures("no_orphan_lab_cleanup")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    if not EXAMPLE.is_file():
        pytest.skip(f"{EXAMPLE} is missing")
    data = tmp_path / "data"
    data.mkdir()
    path = data / "default.sqlite"
    shutil.copyfile(EXAMPLE, path)
    return path


@pytest.fixture
def good_csv(store: Path, tmp_path: Path, cli) -> Path:
    out = tmp_path / "good.csv"
    assert cli("export", str(store), "--out", str(out)).status == 0
    return out


# ---- CSV given to screen -----------------------------------------------------------------------

def _edit_cell(csv: Path, row: int, column: str, value: str, out: Path) -> Path:
    lines = csv.read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[row].split(",")
    cells[header.index(column)] = value
    lines[row] = ",".join(cells)
    out.write_text("\n".join(lines) + "\n")
    return out


@pytest.mark.parametrize("value", ["abc", "12,5", "inf", "-inf", "1e400", "0x10", "NaN?"])
def test_non_numeric_metric_cell_names_row_and_column(value: str, good_csv: Path, tmp_path: Path, cli) -> None:
    bad = _edit_cell(good_csv, 7, "qps", f'"{value}"', tmp_path / "bad.csv")
    result = cli("screen", str(bad), "--metric", "qps:max:5")
    assert_one_error(result, "bad.csv", "row 7 (line 8)", "'qps'", "not a finite number")


def test_header_only_csv(good_csv: Path, tmp_path: Path, cli) -> None:
    header = tmp_path / "header.csv"
    header.write_text(good_csv.read_text().splitlines()[0] + "\n")
    assert_one_error(cli("screen", str(header), "--metric", "qps"), "header.csv", "no data rows")


@pytest.mark.parametrize("content, fragment", [
    ("", "cannot read csv"),
    ("a,qps\n1,2\n1,\"x\n", "cannot read csv"),
    ("\x00\x01\x02garbage\xff", "cannot read csv"),
    ("net.core.somaxconn,qps\n,1\n,2\n", "empty in every row"),
    ("k,qps\n\"a\x1b[2Jb\",1\nc,2\n", "printable"),
    (",qps\n1,2\n3,4\n", "needs a name"),
])
def test_unreadable_or_hostile_csv(content: str, fragment: str, tmp_path: Path, cli) -> None:
    csv = tmp_path / "in.csv"
    csv.write_bytes(content.encode("utf-8", "surrogateescape") if "\xff" not in content else content.encode("latin-1"))
    assert_one_error(cli("screen", str(csv), "--metric", "qps"), "in.csv", fragment)


def test_missing_csv(tmp_path: Path, cli) -> None:
    assert_one_error(cli("screen", str(tmp_path / "nope.csv"), "--metric", "qps"), "nope.csv")


# ---- names -----------------------------------------------------------------------------------

LONG = "a" * 300


@pytest.mark.parametrize("verb", ["screen", "export", "report", "restore"])
@pytest.mark.parametrize("name", [LONG, "--all", "../../no/such/store", "Default", "-x"])
def test_bad_study_name_is_one_error(verb: str, name: str, tmp_path: Path, cli) -> None:
    data = tmp_path / "data"
    data.mkdir()
    before = set(tmp_path.rglob("*"))
    result = cli(verb, "--data-dir", str(data), "--", name)
    if "/" in name:   # a path: it does not exist
        assert_one_error(result, "no trial store")
    else:
        assert_one_error(result, "not a valid study name")
    assert set(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("verb", ["screen", "export", "report", "restore"])
def test_a_system_file_given_as_store_is_refused_unchanged(verb: str, cli) -> None:
    before = Path("/etc/passwd").read_bytes()
    assert_one_error(cli(verb, "/etc/passwd"), "/etc/passwd", "not a tunelab store", "left it unchanged")
    assert Path("/etc/passwd").read_bytes() == before
    assert not Path("/etc/passwd-wal").exists() and not Path("/etc/passwd.lock").exists()


def test_study_name_all_as_an_option_is_a_usage_error_line(cli) -> None:
    assert_one_error(cli("screen", "default", "--all"), "unrecognized arguments: --all", "--help")


# ---- --out and --json ------------------------------------------------------------------------

@pytest.mark.parametrize("target, fragment", [
    ("DIR", "is a directory"),
    ("/proc/sys/net/core/somaxconn", "inside /proc"),
    ("/proc/self/status", "inside /proc"),
    ("/sys/kernel/mm/transparent_hugepage/enabled", "inside /sys"),
    ("/dev/full", "no space left"),
    ("/dev/zero", "device or special file"),
    ("MISSING/../" + "b" * 300 + ".csv", "longer than 255 bytes"),
    ("FILE/sub.csv", "not a directory"),
])
def test_export_out_is_checked(target: str, fragment: str, store: Path, tmp_path: Path, cli) -> None:
    (tmp_path / "afile").write_text("keep")
    target = target.replace("DIR", str(tmp_path)).replace("MISSING", str(tmp_path / "m")).replace(
        "FILE", str(tmp_path / "afile"))
    somaxconn = Path("/proc/sys/net/core/somaxconn").read_text()
    result = cli("export", str(store), "--out", target)
    assert_one_error(result, fragment)
    assert Path("/proc/sys/net/core/somaxconn").read_text() == somaxconn
    assert (tmp_path / "afile").read_text() == "keep"


@pytest.mark.parametrize("target, fragment", [("DIR", "is a directory"), ("/dev/full", "no space left"),
                                              ("/proc/sys/kernel/hostname", "inside /proc")])
def test_screen_json_is_checked(target: str, fragment: str, store: Path, tmp_path: Path, cli) -> None:
    hostname = Path("/proc/sys/kernel/hostname").read_text()
    result = cli("screen", str(store), "--json", target.replace("DIR", str(tmp_path)))
    assert_one_error(result, "--json", fragment)
    assert Path("/proc/sys/kernel/hostname").read_text() == hostname


@pytest.mark.parametrize("target, fragment", [("FILE", "not a directory"), ("/proc/tunelab", "inside /proc"),
                                              ("/sys/tunelab", "inside /sys")])
def test_report_out_is_checked(target: str, fragment: str, store: Path, tmp_path: Path, cli) -> None:
    (tmp_path / "afile").write_text("keep")
    result = cli("report", str(store), "--out", target.replace("FILE", str(tmp_path / "afile")))
    assert_one_error(result, "--out", fragment)
    assert (tmp_path / "afile").read_text() == "keep"


@pytest.fixture
def readonly_dir(tmp_path: Path):
    with tmpfs(tmp_path / "ro", "ro,size=1m") as path:
        yield path


def test_export_to_a_read_only_filesystem(store: Path, readonly_dir: Path, cli) -> None:
    result = cli("export", str(store), "--out", str(readonly_dir / "out.csv"))
    assert_one_error(result, "read-only filesystem", "out.csv")
    assert not list(readonly_dir.iterdir())


def test_screen_json_to_a_read_only_filesystem(store: Path, readonly_dir: Path, cli) -> None:
    assert_one_error(cli("screen", str(store), "--json", str(readonly_dir / "s.json")), "--json", "read-only")


def test_report_to_a_read_only_filesystem(store: Path, readonly_dir: Path, cli) -> None:
    result = cli("report", str(store), "--out", str(readonly_dir / "rep"), "--notebooks", "01")
    assert_one_error(result, "read-only filesystem")


def test_restore_of_a_store_on_a_read_only_filesystem(store: Path, readonly_dir: Path, cli) -> None:
    subprocess.run(["mount", "-o", "remount,rw", str(readonly_dir)], check=True)
    shutil.copyfile(store, readonly_dir / "default.sqlite")
    subprocess.run(["mount", "-o", "remount,ro", str(readonly_dir)], check=True)
    result = cli("restore", str(readonly_dir / "default.sqlite"))
    assert_one_error(result, "lock file", "read-only")


# ---- absurd numbers --------------------------------------------------------------------------

@pytest.mark.parametrize("verb", ["screen", "report"])
@pytest.mark.parametrize("n_boot", ["1000000000", "99", "0", "-5"])
def test_n_boot_is_bounded_before_anything_is_allocated(verb: str, n_boot: str, store: Path, tmp_path: Path,
                                                         cli) -> None:
    extra = ["--out", str(tmp_path / "rep")] if verb == "report" else []
    result = cli(verb, str(store), "--n-boot", n_boot, *extra)
    assert_one_error(result, "--n-boot", "100,000")
    assert not (tmp_path / "rep" / "01_screen.ipynb").exists()


def test_seed_is_bounded(store: Path, cli) -> None:
    assert_one_error(cli("screen", str(store), "--seed", "-1"), "--seed")


@pytest.mark.parametrize("flag, value", [("--alpha", "2"), ("--n-boot", "lots"), ("--alpha", "nan")])
def test_bad_flag_values(flag: str, value: str, store: Path, cli) -> None:
    result = cli("screen", str(store), flag, value)
    assert result.status == 2 and len(result.error_lines) == 1, result.err


# ---- the safety net ----------------------------------------------------------------------------

def test_unexpected_errors_are_one_internal_error_line(monkeypatch: pytest.MonkeyPatch, store: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    import tunelab.cli.export as export

    def boom(*args, **kwargs):  # noqa: ANN002, ANN003
        raise ZeroDivisionError("synthetic bug")

    monkeypatch.setattr(export, "run", boom)   # register() binds export.run when main() builds the parser
    parser_args = ["export", str(store)]
    monkeypatch.delenv("TUNELAB_DEBUG", raising=False)
    status = main(parser_args)
    err = capsys.readouterr().err
    assert status == EXIT_INTERNAL
    assert err.strip() == ("tunelab: internal error: ZeroDivisionError: synthetic bug (set TUNELAB_DEBUG=1 for the "
                           "traceback; please report it)")


@pytest.mark.parametrize("exc, fragment", [
    (OSError(28, "No space left on device", "/x/out.csv"), "no space left on the device holding /x/out.csv"),
    (OSError(30, "Read-only file system", "/ro/out.csv"), "/ro/out.csv is on a read-only filesystem"),
    (IsADirectoryError(21, "Is a directory", "/tmp"), "/tmp is a directory"),
    (NotADirectoryError(20, "Not a directory", "/f/x"), "a part of /f/x is not a directory"),
    (PermissionError(13, "Permission denied", "/root/x"), "permission denied for /root/x"),
    (OSError(36, "File name too long", "/aaa"), "too long"),
])
def test_os_errors_map_to_one_line(exc: OSError, fragment: str) -> None:
    from tunelab.cli import error_message

    assert fragment in error_message(exc)


def test_sqlite_errors_map_to_one_line() -> None:
    import sqlite3

    from tunelab.cli import error_message

    assert "locked by another process" in error_message(sqlite3.OperationalError("database is locked"))
    assert "damaged" in error_message(sqlite3.DatabaseError("file is not a database"))
