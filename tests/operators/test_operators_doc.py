"""The files docs/operators.md shows are files tunelab accepts: its query file, candidate.conf, the production
CHANGE.yaml and the lab's change file, taken from the page itself, pass ``tunelab validate FILE --plan
--offline`` (every check a validation makes before it starts, no connection), and the page's old example (somaxconn
under a UDP load, qps on a capped profile) is refused by the pre-flight as the page says. The production change is
run for real by test_validate_change_ssh.py, in the same shape; the refusals against BIND 9 by
test_preflight_bind.py."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from dns_helpers import ZONE as DNS_ZONE
from dns_helpers import require_tools

from tunelab.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "operators.md"
#: a zone for the page's example.org. (the page loads the operator's own)
ZONE = DNS_ZONE.replace("example.net.", "example.org.")


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block of the page as ``(language, content)``."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.M | re.S)]


def block_after(text: str, marker: str, language: str = "") -> str:
    """The first fenced block in ``language`` after ``marker``."""
    return next(body for lang, body in fenced_blocks(text[text.index(marker):]) if lang == language)


@pytest.fixture
def doc_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """The page's files in a folder, with the ssh key and known_hosts it names under a fresh HOME."""
    text = DOC.read_text()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    ssh = tmp_path / "home" / ".ssh"
    ssh.mkdir(parents=True)
    (ssh / "tunelab_ed25519").write_text("not a real key\n")
    (ssh / "tunelab_known_hosts").write_text("")
    (tmp_path / "queries.txt").write_text(block_after(text, "dnsperf reads a query file"))
    (tmp_path / "candidate.conf").write_text(block_after(text, "with `candidate.conf`:"))
    (tmp_path / "example.org.zone").write_text(ZONE)
    changes = {re.match(r"name: (\S+)", body).group(1): body for lang, body in fenced_blocks(text)
               if lang == "yaml" and body.startswith("name: ")}
    files = {"production": "CHANGE.yaml", "lab": "lab-change.yaml", "udp": "udp-change.yaml"}
    for role, name in (("production", "somaxconn-128"), ("lab", "somaxconn-128-lab"), ("udp", "somaxconn-udp")):
        (tmp_path / files[role]).write_text(changes[name])
    return {role: tmp_path / name for role, name in files.items()}


def test_the_pages_production_change_file_is_accepted_and_its_plan_names_the_restart(doc_files, capsys):
    status = main(["validate", str(doc_files["production"]), "--plan", "--offline", "--allow-design-commands"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "systemctl restart named" in out and "as root" in out
    assert "every change can act under this load" in out          # the pre-flight, offline
    assert "dnsperf" in out and "192.0.2.53" in out                # the load goes to the service address
    assert not Path("data").exists()                                # a plan stores nothing


def test_the_pages_production_change_file_without_the_flag_is_one_error_line(doc_files, capsys):
    status = main(["validate", str(doc_files["production"]), "--plan", "--offline"])
    err = capsys.readouterr().err
    assert status == 2 and "--allow-design-commands" in err and len(err.strip().splitlines()) == 1


def test_the_pages_lab_change_file_is_accepted(doc_files, capsys):
    require_tools("nsd-checkzone", hint="apt-get install nsd")
    status = main(["validate", str(doc_files["lab"]), "--plan", "--offline"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "baseline: net.core.somaxconn=4096" in out and "server: the lab's server namespace" in out


def test_the_pages_old_udp_example_is_refused_by_the_preflight_as_the_page_shows(doc_files, capsys):
    status = main(["validate", str(doc_files["udp"]), "--plan", "--offline", "--allow-design-commands"])
    out, err = capsys.readouterr()
    (line,) = err.strip().splitlines()
    assert status == 2 and line.startswith(f"tunelab: error: {doc_files['udp']}: pre-flight: "), err
    assert "--force" in line and "sends UDP only" in line and "(and 1 more" in line, line
    assert "metric qps [profile normal]: blind metric" in out      # --plan lists the one more
    shown = block_after(DOC.read_text(), "validation itself, with:")
    assert shown.strip() == line.replace(str(doc_files["udp"]), "udp-change.yaml"), (shown, line)
