"""Hostile trial stores: every kind of broken or crafted ``.sqlite`` file given to screen, export,
report and restore ends in one ``tunelab: error:`` line naming the file, never a traceback, and
never changes a file that is not a tunelab store. Crafted content (names, JSON, HTML) is refused
or rendered inert: nothing is written outside its directory, no script runs in a report.
"""
from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Callable, Iterator

import pytest
import yaml

from mount_helpers import tmpfs  # tests/ is on sys.path (tests/conftest.py)
from simulator_helpers import simulator_design
from tests.hostile.conftest import assert_one_error
from tunelab.errors import StoreError
from tunelab.store import SCHEMA_VERSION, Store, check_knob_id, check_study_name

ROOT = Path(__file__).resolve().parents[2]
#: the default study as recorded on 2026-11-24 (before kernel counters): these tests pin its values and size
EXAMPLE = ROOT / "tests" / "data" / "default-2026-11-24.sqlite"
VERBS = ("screen", "export", "report", "restore")

pytestmark = pytest.mark.usefixtures("no_orphan_lab_cleanup")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    if not EXAMPLE.is_file():
        pytest.skip(f"{EXAMPLE} is missing")
    path = tmp_path / "data"
    path.mkdir()
    return path


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def example(data_dir: Path, name: str = "crafted") -> Path:
    target = data_dir / f"{name}.sqlite"
    shutil.copyfile(EXAMPLE, target)
    return target


def sql(path: Path, *statements: str) -> Path:
    db = sqlite3.connect(path)
    for statement in statements:
        db.execute(statement)
    db.commit()
    db.close()
    return path


# ---- store kinds that are bad for every verb ---------------------------------------------------

def _truncated(d: Path) -> Path:
    path = d / "truncated.sqlite"
    path.write_bytes(EXAMPLE.read_bytes()[:3000])
    return path


def _zero_byte(d: Path) -> Path:
    path = d / "zero.sqlite"
    path.touch()
    return path


def _garbage(d: Path) -> Path:
    path = d / "garbage.sqlite"
    path.write_bytes(bytes(range(256)) * 40)
    return path


def _text_file(d: Path) -> Path:
    path = d / "notes.sqlite"
    path.write_text("study,qps\nx,1\n" * 100)
    return path


def _sqlite_header_only(d: Path) -> Path:
    path = d / "header.sqlite"
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    return path


def _other_sqlite(d: Path) -> Path:
    return sql(d / "other.sqlite", "CREATE TABLE contacts (name TEXT, mail TEXT)", "INSERT INTO contacts VALUES ('a', 'b')")


def _wrong_columns(d: Path) -> Path:
    return sql(example(d, "wrongcols"), "ALTER TABLE study DROP COLUMN target_spec")


def _no_trials_table(d: Path) -> Path:
    return sql(example(d, "notrials"), "DROP TABLE trials")


def _no_study_row(d: Path) -> Path:
    return sql(example(d, "norow"), "DELETE FROM study")


def _target_spec_garbage(d: Path) -> Path:
    return sql(example(d, "badspec"), "UPDATE study SET target_spec = '{not json'")


def _target_spec_list(d: Path) -> Path:
    return sql(example(d, "listspec"), "UPDATE study SET target_spec = '[1, 2, 3]'")


def _traversal_name(d: Path) -> Path:
    return sql(example(d, "traversal"), "UPDATE study SET name = '../../escaped'")


def _long_name(d: Path) -> Path:
    return sql(example(d, "longname"), f"UPDATE study SET name = '{'a' * 300}'")


def _dash_name(d: Path) -> Path:
    return sql(example(d, "dashname"), "UPDATE study SET name = '--all'")


def _newer_schema(d: Path) -> Path:
    return sql(example(d, "newer"), f"PRAGMA user_version = {SCHEMA_VERSION + 5}")


def _design_hash_blob(d: Path) -> Path:
    return sql(example(d, "blobhash"), "UPDATE study SET design_hash = x'00ff'")


def damage_page(path: Path, page: int | None = None) -> Path:
    """Overwrite one whole page of the SQLite file ``path`` (default: the middle one) with 0xA5 bytes."""
    page_size = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(path.read_bytes())
    page = len(data) // page_size // 2 if page is None else page
    data[page * page_size:(page + 1) * page_size] = b"\xa5" * page_size
    path.write_bytes(bytes(data))
    return path


def _damaged_middle(d: Path) -> Path:
    return damage_page(example(d, "middle"))


def _directory(d: Path) -> Path:
    path = d / "adir.sqlite"
    path.mkdir()
    return path


STORE_KINDS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "truncated": (_truncated, "damaged"),
    "zero-byte": (_zero_byte, "empty (0 bytes)"),
    "garbage": (_garbage, "not an sqlite database"),
    "text-file": (_text_file, "not an sqlite database"),
    "sqlite-header-only": (_sqlite_header_only, "damaged"),
    "other-sqlite": (_other_sqlite, "not a tunelab trial store"),
    "wrong-columns": (_wrong_columns, "lacks target_spec"),
    "no-trials-table": (_no_trials_table, "no 'trials' table"),
    "no-study-row": (_no_study_row, "without its study row"),
    "target-spec-garbage": (_target_spec_garbage, "target_spec does not hold valid json"),
    "target-spec-list": (_target_spec_list, "json object is expected"),
    "traversal-name": (_traversal_name, "not a valid study name"),
    "long-name": (_long_name, "not a valid study name"),
    "dash-name": (_dash_name, "not a valid study name"),
    "newer-schema": (_newer_schema, "newer tunelab"),
    "design-hash-blob": (_design_hash_blob, "design_hash"),
    "directory": (_directory, "is a directory"),
    "damaged-middle": (_damaged_middle, "damaged"),
}


def run_verb(cli, verb: str, store: Path, data_dir: Path, tmp_path: Path):
    extra = {"export": ["--out", str(tmp_path / "out.csv")], "report": ["--out", str(tmp_path / "report")]}
    return cli(verb, str(store), "--data-dir", str(data_dir), *extra.get(verb, []))


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("kind", list(STORE_KINDS))
def test_bad_store_is_one_error_and_stays_unchanged(kind: str, verb: str, cli, data_dir: Path, tmp_path: Path) -> None:
    build, fragment = STORE_KINDS[kind]
    store = build(data_dir)
    before = sha(store) if store.is_file() else None
    result = run_verb(cli, verb, store, data_dir, tmp_path)
    assert_one_error(result, store.name, fragment)
    if before is not None:
        assert sha(store) == before, f"{verb} modified the {kind} file"
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "report").exists()


# ---- trial content that is bad for the verbs that read trials ----------------------------------

#: each crafts trial 7, a screen trial of the example store (trials 1-4 are its A/A calibration)
TRIAL_KINDS = {
    "metrics-not-json": ("UPDATE trials SET metrics = '{not json' WHERE trial_id = 7", "trial 7 column metrics"),
    "config-not-object": ("UPDATE trials SET config = '[1, 2]' WHERE trial_id = 7", "json object is expected"),
    "knob-id-traversal": ("""UPDATE trials SET knobs_read = '{"../../etc/passwd": 1}' WHERE trial_id = 7""",
                          "not a valid knob id"),
    "knob-id-html": ("""UPDATE trials SET config = '{"<script>x</script>": 1}' WHERE trial_id = 7""",
                     "not a valid knob id"),
    "device-dots": ("""UPDATE trials SET config = '{"block.queue.scheduler[..]": "none"}' WHERE trial_id = 7""",
                    "its device"),
    "metric-name-html": ("""UPDATE trials SET metrics = '{"<img src=x>": 1.0}' WHERE trial_id = 7""",
                         "not a valid metric name"),
    "metric-infinite": ("""UPDATE trials SET metrics = '{"qps": Infinity}' WHERE trial_id = 7""", "finite number"),
    "metric-text": ("""UPDATE trials SET metrics = '{"qps": "fast"}' WHERE trial_id = 7""", "finite number"),
    "status-unknown": ("UPDATE trials SET status = 'pwned' WHERE trial_id = 7", "status 'pwned'"),
    "phase-unknown": ("UPDATE trials SET phase = 'evil' WHERE trial_id = 7", "phase 'evil'"),
    "started-garbage": ("UPDATE trials SET started_at = 'yesterday-ish' WHERE trial_id = 7", "iso 8601"),
    "plan-run-id-text": ("""UPDATE trials SET plan = '{"run_id": "zero"}' WHERE trial_id = 7""", "run_id"),
}


def _rebuild_without_checks(path: Path) -> None:
    """Recreate the trials table without its CHECK constraint (a crafted store need not have one)."""
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE t2 AS SELECT * FROM trials;
        DROP TABLE trials;
        ALTER TABLE t2 RENAME TO trials;
    """)
    db.commit()
    db.close()


@pytest.mark.parametrize("verb", ("screen", "export", "report"))
@pytest.mark.parametrize("kind", list(TRIAL_KINDS))
def test_bad_trial_content_is_one_error(kind: str, verb: str, cli, data_dir: Path, tmp_path: Path) -> None:
    statement, fragment = TRIAL_KINDS[kind]
    store = example(data_dir, kind.replace("-", "_")[:40])
    if kind.startswith(("status", "phase")):
        _rebuild_without_checks(store)
    sql(store, statement)
    result = run_verb(cli, verb, store, data_dir, tmp_path)
    assert_one_error(result, store.name, fragment)
    assert not (tmp_path / "out.csv").exists()


# ---- writable opens never turn someone else's file into a store ---------------------------------

@pytest.mark.parametrize("kind", ["garbage", "other-sqlite", "text-file", "sqlite-header-only"])
def test_store_open_refuses_a_foreign_file_at_the_default_path(kind: str, data_dir: Path) -> None:
    foreign = STORE_KINDS[kind][0](data_dir)
    target = data_dir / "mystudy.sqlite"
    foreign.rename(target)
    before = sha(target)
    with pytest.raises(StoreError, match="mystudy.sqlite"):
        Store.open(target, study="mystudy", design_hash="h", design_text="name: mystudy")
    assert sha(target) == before
    assert not Path(f"{target}-wal").exists()


def test_zero_byte_file_becomes_a_store_only_through_store_open(data_dir: Path) -> None:
    path = data_dir / "fresh.sqlite"
    path.touch()
    with pytest.raises(StoreError, match="empty"):
        Store(path)
    assert path.stat().st_size == 0
    with Store.open(path, study="fresh", design_hash="h", design_text="name: fresh") as store:
        assert store.study.name == "fresh"
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_old_store_without_user_version_is_accepted(data_dir: Path) -> None:
    store = sql(example(data_dir), "PRAGMA user_version = 0")       # as stores were before the schema version
    assert sqlite3.connect(store).execute("PRAGMA user_version").fetchone()[0] == 0
    with Store(store, readonly=True) as reader:
        assert reader.study.name == "default" and len(reader.tidy()) == 54


# ---- names -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["../x", "a/b", "-all", "--all", "", "A", "a" * 65, "a b", "a\nb", ".hidden", "ü"])
def test_bad_study_names_are_refused(name: str) -> None:
    with pytest.raises(StoreError, match="not a valid study name"):
        check_study_name(name)


@pytest.mark.parametrize("kid", ["x/../../y", "net.core.x@root", "link.mtu[../../x]", "link.mtu[..]", "Net.Core",
                                 "a" * 200, "net..core", "<b>"])
def test_bad_knob_ids_are_refused(kid: str) -> None:
    with pytest.raises(StoreError, match="knob id"):
        check_knob_id(kid)


def test_export_never_writes_outside_the_data_dir(cli, data_dir: Path, tmp_path: Path) -> None:
    """A crafted study name used to name the default export file data/<study>-<phase>.csv."""
    store = _traversal_name(data_dir)
    before = {p for p in tmp_path.rglob("*")}
    result = cli("export", str(store), "--data-dir", str(data_dir))
    assert_one_error(result, "not a valid study name")
    assert {p for p in tmp_path.rglob("*")} - before <= {Path(f"{store}-wal"), Path(f"{store}-shm")}
    for parent in (tmp_path, tmp_path.parent, data_dir.parent.parent):
        assert not list(parent.glob("escaped*")), f"a file was written in {parent}"


def test_export_refuses_a_symlinked_default_output(cli, data_dir: Path, tmp_path: Path) -> None:
    store = example(data_dir, "default")
    outside = tmp_path / "outside.csv"
    (data_dir / "default-screen.csv").symlink_to(outside)
    result = cli("export", str(store), "--data-dir", str(data_dir))
    assert_one_error(result, "must stay", "--out")
    assert not outside.exists()


def test_export_default_output_stays_in_data_dir(cli, data_dir: Path) -> None:
    store = example(data_dir, "default")
    result = cli("export", str(store), "--data-dir", str(data_dir))
    assert result.status == 0, result.err
    assert (data_dir / "default-screen.csv").is_file()


# ---- a store locked by another process -------------------------------------------------------

HOLDER = textwrap.dedent("""
    import sqlite3, sys, time
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("BEGIN EXCLUSIVE")
    db.execute("UPDATE study SET created = created")
    print("held", flush=True)
    time.sleep(60)
""")


@pytest.fixture
def locked_store(data_dir: Path):
    store = example(data_dir, "locked")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(store)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield store, holder
    finally:
        holder.kill()
        holder.wait(timeout=10)


def test_locked_store_names_its_holder_after_a_bounded_wait(cli, locked_store, monkeypatch: pytest.MonkeyPatch,
                                                             data_dir: Path) -> None:
    store, holder = locked_store
    monkeypatch.setenv("TUNELAB_LOCK_TIMEOUT_S", "0.5")
    started = time.monotonic()
    result = cli("restore", str(store), "--data-dir", str(data_dir))
    assert time.monotonic() - started < 8
    assert_one_error(result, "locked by another process", f"pid {holder.pid}", "BEGIN EXCLUSIVE", "waited 0.5 s",
                     "TUNELAB_LOCK_TIMEOUT_S")


def test_lock_timeout_parameter_bounds_the_wait(locked_store) -> None:
    store, holder = locked_store
    started = time.monotonic()
    with pytest.raises(StoreError, match=f"pid {holder.pid}"):
        Store(store, lock_timeout_s=0.2)
    assert time.monotonic() - started < 5
    with pytest.raises(StoreError, match="lock timeout"):
        Store(store, lock_timeout_s=-1)


def test_second_tunelab_writer_is_named(data_dir: Path) -> None:
    store = example(data_dir, "busy")
    with Store(store):
        with pytest.raises(StoreError, match=r"in use by another tunelab process \(pid \d+ \(this process\)"):
            Store(store)


# ---- HTML: store text reaches the published report as text, never as markup --------------------

MARK = "pwned"
REASON = f"<script>document.title='{MARK}-reason'</script><img src=x onerror=\"document.title='{MARK}-img'\">"
KERNEL = f"6.1<b id=\"{MARK}-marker\">bold</b><img src=y onerror=\"document.body.setAttribute('data-{MARK}','1')\">"
DESCRIPTION = f"<script>document.title='{MARK}-description'</script>[click](javascript:alert(1))"


def _crafted_report_store(data_dir: Path) -> Path:
    store = example(data_dir, "xss")
    db = sqlite3.connect(store)
    design = yaml.safe_load(db.execute("SELECT design_text FROM study").fetchone()[0])
    design["description"] = DESCRIPTION
    db.execute("UPDATE study SET design_text = ?", (yaml.safe_dump(design, sort_keys=False),))
    # every run of somaxconn = 16 and 128 failed with a hostile reason: the knob is untestable and the
    # reason is quoted in the summary and the methods
    db.execute("UPDATE trials SET status = 'failed', reason = ? WHERE json_extract(config, '$.\"net.core.somaxconn\"')"
               " IN (16, 128)", (REASON,))
    targets = [json.loads(t) for (t,) in db.execute("SELECT target FROM runs")]
    for run_id, target in enumerate(targets, start=1):
        target["kernel"] = KERNEL
        db.execute("UPDATE runs SET target = ? WHERE run_id = ?", (json.dumps(target), run_id))
    db.commit()
    db.close()
    return store


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.ids: set[str] = set()
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag, attrs):  # noqa: ANN001
        self.ids.update(v for k, v in attrs if k == "id" and v)
        self._in_title = tag == "title"

    def handle_endtag(self, tag):  # noqa: ANN001
        self._in_title = False

    def handle_data(self, data):  # noqa: ANN001
        self.text.append(data)
        if self._in_title:
            self.title += data


def _dump_dom(page: Path) -> str:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.skip("Debian chromium is not installed")
    with tempfile.TemporaryDirectory(prefix="tunelab-chromium-") as profile:
        done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                               "--disable-background-networking", "--disable-component-update", "--disable-sync",
                               f"--user-data-dir={profile}", "--virtual-time-budget=3000", "--dump-dom",
                               page.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.browser
def test_report_of_a_crafted_store_shows_payloads_as_text_and_runs_none(cli, data_dir: Path, tmp_path: Path) -> None:
    store = _crafted_report_store(data_dir)
    out = tmp_path / "report"
    result = cli("report", str(store), "--data-dir", str(data_dir), "--out", str(out), "--notebooks", "01")
    assert result.status == 0, result.err
    for page in (out / "index.html", out / "01_screen.html"):
        dom = _dump_dom(page)
        parsed = _Text()
        parsed.feed(dom)
        text = " ".join(parsed.text)
        assert MARK not in parsed.title, f"{page.name}: a payload set the title to {parsed.title!r}"
        assert f"{MARK}-marker" not in parsed.ids, f"{page.name}: the store's <b id=...> became an element"
        assert f"data-{MARK}" not in dom.split("<body", 1)[1].split(">", 1)[0], f"{page.name}: onerror ran"
        assert "<script" not in dom.split("</head>", 1)[-1].lower().replace("&lt;script", ""), page.name
        assert "javascript:alert" not in " ".join(a for a in dom.split('href="')[1:] if a.startswith("javascript"))
        # the payloads are there, as text a reader can see
        assert f"document.title='{MARK}-reason'" in text, f"{page.name}: the failure reason is not shown"
        assert f'<b id="{MARK}-marker">' in text, f"{page.name}: the kernel text is not shown"
    index_text = html.unescape((out / "index.html").read_text())
    assert f"document.title='{MARK}-description'" in index_text


# ---- checked before any write: a store damaged in the middle, a full disk (issue 24) ---------------

SIMULATOR_DESIGN = simulator_design("full-disk", cv=0.05)


@pytest.fixture
def simulator_design(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small simulator design, and a lease directory of this test's own (other runs' leases stay out)."""
    import tunelab.leases

    leases = tmp_path / "leases"
    leases.mkdir()
    monkeypatch.setattr(tunelab.leases, "LEASE_DIR", leases)
    path = tmp_path / "sim.yaml"
    path.write_text(SIMULATOR_DESIGN)
    return path


def sqlite_finds_damage(path: Path) -> bool:
    """SQLite's own full ``integrity_check`` (not the quick_check tunelab runs) on a copy of ``path`` and
    its write-ahead log (committed transactions not yet checkpointed are part of the store)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        if Path(f"{path}-wal").exists():
            shutil.copyfile(f"{path}-wal", f"{copy}-wal")
        db = sqlite3.connect(copy)
        try:
            return db.execute("PRAGMA integrity_check").fetchall() != [("ok",)]
        except sqlite3.DatabaseError:
            return True
        finally:
            db.close()


def test_run_into_a_store_damaged_in_the_middle_is_refused_before_any_write(cli, data_dir: Path,
                                                                             simulator_design: Path) -> None:
    store = damage_page(example(data_dir, "middle"))
    assert sqlite_finds_damage(store)
    before = sha(store)
    result = cli("run", str(simulator_design), "--store", str(store), "--no-progress")
    assert_one_error(result, store.name, "damaged")
    assert sha(store) == before, "a transaction was committed to the damaged store"


@pytest.mark.parametrize("page", [2, 5, 20, -1])
def test_a_damaged_page_anywhere_is_refused_by_a_writable_open_and_left_unchanged(data_dir: Path, page: int) -> None:
    # pages 2 and 5 are pages the store never reads when it opens: without a check before writing, the
    # store was opened, stamped and written to as if intact
    store = example(data_dir, f"page{page}")
    damage_page(store, page if page >= 0 else store.stat().st_size // 4096 - 1)
    assert sqlite_finds_damage(store)
    before = sha(store)
    with pytest.raises(StoreError, match="damaged") as caught:
        Store(store).close()
    assert "\n" not in str(caught.value)
    assert sha(store) == before


def damaged_with_a_live_journal(data_dir: Path) -> Path:
    """The example store with one unrestored journal entry (somaxconn, as a killed run leaves it), then
    a page damaged that the writable open's check finds but the journal's read-only read does not need."""
    pristine = example(data_dir, "journal-pristine")
    with Store(pristine) as opened:
        opened.journal_apply(None, "server", "net.core.somaxconn", None, "4096", "16")
    pages = pristine.stat().st_size // sqlite3.connect(pristine).execute("PRAGMA page_size").fetchone()[0]
    for page in range(2, pages):
        store = data_dir / "journal.sqlite"
        shutil.copyfile(pristine, store)
        damage_page(store, page)
        try:
            with Store(store, readonly=True) as read:
                live = read.unrestored()
        except StoreError:
            continue
        if len(live) == 1 and sqlite_finds_damage(store):
            return store
    pytest.skip("no page of the example store is damaged apart from its journal")


def test_restore_reads_a_damaged_store_and_still_puts_the_knobs_back(cli, data_dir: Path) -> None:
    # the store refuses writes once damaged; its journal must still get the machine back to its settings
    store = damaged_with_a_live_journal(data_dir)
    with pytest.raises(StoreError, match="damaged"):
        Store(store).close()
    before = sha(store)
    result = cli("restore", str(store), "--data-dir", str(data_dir))
    assert result.status == 0, result.err
    assert "net.core.somaxconn" in result.out and "nothing to restore" in result.out   # the lab's netns is gone
    assert "the store is damaged, so it was only read" in result.out
    assert sha(store) == before, "restore wrote to the damaged store"


def test_an_intact_store_passes_the_check_and_opens_for_writing(data_dir: Path) -> None:
    store = example(data_dir, "intact")
    assert not sqlite_finds_damage(store)
    with Store(store) as opened:
        assert opened.study is not None and opened.study.name == "default"




@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 400 KiB tmpfs (:func:`tmpfs`)."""
    with tmpfs(tmp_path / "tiny", "size=400k") as mount:
        yield mount


def fill(mount: Path, leave_kib: int) -> None:
    """Fill the tmpfs at ``mount`` until ``leave_kib`` KiB are free."""
    free = shutil.disk_usage(mount).free
    (mount / "filler").write_bytes(b"\0" * max(0, free - leave_kib * 1024))
    assert shutil.disk_usage(mount).free == leave_kib * 1024


@pytest.mark.parametrize("leave_kib", [0, 8, 24, 64])
def test_a_new_store_on_a_full_disk_says_the_disk_is_full(cli, tiny_disk: Path, simulator_design: Path,
                                                          leave_kib: int) -> None:
    fill(tiny_disk, leave_kib)
    store = tiny_disk / "new.sqlite"
    result = cli("run", str(simulator_design), "--store", str(store), "--no-progress")
    assert_one_error(result, str(store), "disk holding the store", "is full", "free some space")
    line = result.error_lines[0]
    assert "damaged or not" not in line and "cannot be read" not in line
    free = re.search(r"\((\d+) KiB free\)", line)
    assert free is not None and int(free.group(1)) <= leave_kib, line


def test_a_disk_filling_during_a_run_keeps_what_was_recorded(cli, tiny_disk: Path, simulator_design: Path) -> None:
    store = tiny_disk / "run.sqlite"
    fill(tiny_disk, 200)
    result = cli("run", str(simulator_design), "--store", str(store), "--no-progress")
    assert_one_error(result, str(store), "is full")
    (tiny_disk / "filler").unlink()
    assert not sqlite_finds_damage(store)
    with Store(store, readonly=True) as kept:
        trials = kept.trials()
        ok = trials[trials["status"] == "ok"]
    assert all(metrics["qps"] > 0 for metrics in ok["metrics"])
    # with the space back, the same run resumes and completes the plan
    result = cli("run", str(simulator_design), "--store", str(store), "--no-progress")
    assert result.status == 0, result.err
    with Store(store, readonly=True) as done:
        assert done.completed_run_keys("screen") == {f"screen:{i}" for i in range(4)}


def test_a_disk_out_of_inodes_says_so(cli, tmp_path: Path, simulator_design: Path) -> None:
    with tmpfs(tmp_path / "inodes", "size=1m,nr_inodes=3") as mount:
        for name in ("a", "b"):              # the root directory takes the first inode
            (mount / name).touch()
        result = cli("run", str(simulator_design), "--store", str(mount / "s.sqlite"), "--no-progress")
        assert_one_error(result, "s.sqlite", "is full", "kib free, but no free inodes")
