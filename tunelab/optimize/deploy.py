"""A deployable answer of ``tunelab validate``: the candidate as a sysctl.d file, and its rollback.

When the overall verdict is ``improve`` or ``equivalent`` (:data:`DEPLOYABLE`: no metric in any profile
regresses, is inconclusive or untestable, and either at least one improves or all are equivalent),
:func:`write_sysctl_files` writes two files into one directory:

``90-tunelab-<study>.conf``           the candidate's sysctl knobs, ``name = value`` (a triplet's values
                                      space-separated, as ``sysctl -p`` reads them)
``90-tunelab-<study>.conf.rollback``  the baseline's values as measured (read from the target before the
                                      validation, or as given)

Block and link knobs cannot live in sysctl.d: they are ``#`` comments naming the command (and the udev rule)
that sets them; so are client-side knobs (:func:`tunelab.optimize.export.sysctl_lines`). Each file opens with
a comment header: the server (the target spec without secrets), its kernel, the DNS software and version
(dnsperf against a known service), the query file's sha256 (when a ``query_file`` setting is used), the load
host, the date, the tunelab version and the verdict table (:func:`provenance`). Files are written
atomically (a temporary file in the same directory, then ``os.replace``) with mode 0644, never outside
the chosen directory.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from tunelab.errors import TunelabError
from tunelab.optimize.export import comment_text, sysctl_lines
from tunelab.store import check_study_name
from tunelab.version import __version__

#: overall verdicts that get a sysctl.d file
DEPLOYABLE = ("improve", "equivalent")
#: the files' mode: readable by everyone (as /etc/sysctl.d/ files are), written by their owner
FILE_MODE = 0o644
#: option names (at any depth of the target spec) whose values never reach a file
SECRET_WORDS = ("password", "passphrase", "secret", "token")
#: DNS servers whose version a target description may carry (``tools``, as ``tunelab.targets.hostinfo`` reads)
DNS_SOFTWARE = ("nsd", "named", "knotd", "unbound", "pdns_server", "pdns_recursor")


def not_deployable(verdict: str) -> str | None:
    """Why no sysctl.d file is written for ``verdict`` (``None``: one is).

    >>> not_deployable("improve") is None, not_deployable("regress")
    (True, 'no sysctl.d file written: the verdict is REGRESS; one is written when it is IMPROVE or EQUIVALENT (no metric worse, inconclusive or untestable)')
    """
    if verdict in DEPLOYABLE:
        return None
    return (f"no sysctl.d file written: the verdict is {verdict.upper()}; one is written when it is IMPROVE or "
            "EQUIVALENT (no metric worse, inconclusive or untestable)")


def public_spec(value: Any) -> Any:
    """A target spec with every secret option left out (keys naming a password, passphrase, secret or token).

    >>> public_spec({"type": "ssh", "options": {"server": "root@db1", "connect_kwargs": {"password": "x"}}})
    {'type': 'ssh', 'options': {'server': 'root@db1', 'connect_kwargs': {}}}
    """
    if isinstance(value, Mapping):
        return {str(k): public_spec(v) for k, v in value.items()
                if not any(word in str(k).lower() for word in SECRET_WORDS)}
    if isinstance(value, (list, tuple)):
        return [public_spec(v) for v in value]
    return value


def kernel_of(description: Mapping[str, Any]) -> str | None:
    """The server's ``uname -r`` from a target description (``None`` when the target has no kernel).

    >>> kernel_of({"target": "ssh", "hosts": {"server": {"kernel": "6.1.0-18-amd64"}}})
    '6.1.0-18-amd64'
    """
    server = (description.get("hosts") or {}).get("server") or {}
    return server.get("kernel") or description.get("kernel") or None


def dns_software(description: Mapping[str, Any], load: Any) -> str | None:
    """``"nsd 4.6.1"``: the DNS server dnsperf measured, when the description names it (else ``None``).

    A description's ``dns_server`` (``{"software", "version"}`` or a string) wins; else the first DNS
    server among its ``tools`` with a version (the lab's and the local target's).

    >>> dns_software({"tools": {"nsd": "4.6.1", "dnsperf": "2.14.0"}}, type("L", (), {"service": "dns"})())
    'nsd 4.6.1'
    """
    if getattr(load, "service", None) != "dns":
        return None
    named = description.get("dns_server")
    if isinstance(named, Mapping):
        return " ".join(str(named[k]) for k in ("software", "version") if named.get(k)) or None
    if isinstance(named, str) and named:
        return named
    tools = description.get("tools") or {}
    return next((f"{name} {tools[name]}" for name in DNS_SOFTWARE if tools.get(name)), None)


def load_host(spec: Mapping[str, Any], description: Mapping[str, Any]) -> str:
    """Where the load ran: the ssh client, the lab's client namespace, or this machine."""
    options, here = spec.get("options") or {}, socket.gethostname()
    if options.get("client"):
        return str(options["client"])
    if spec.get("type") == "lab":
        namespace = ((description.get("lab") or {}).get("namespaces") or {}).get("client", "client")
        return f"lab namespace {namespace} on {here}"
    if spec.get("type") == "simulator":
        return "none (SYNTHETIC simulator target)"
    return f"{here} (this machine)"


def file_sha256(path: str | os.PathLike[str]) -> str | None:
    """The sha256 of a file on this machine (``None`` when it is not a readable file)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def query_files(settings: Iterable[Mapping[str, Any]], sent: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Each distinct ``query_file`` setting with its sha256: the digest of what the trials sent (``sent``: path ->
    sha256, the load's ``sent_queries``), else of the file as it is on this machine (``None`` if unreadable)."""
    paths = dict.fromkeys(str(s["query_file"]) for s in settings if s.get("query_file"))
    known = dict(sent or {})
    return [{"path": path, "sha256": known[path] if path in known else file_sha256(path)} for path in paths]


def provenance(spec: Mapping[str, Any], description: Mapping[str, Any], load: Any,
               settings: Iterable[Mapping[str, Any]], verdict: str, table_lines: list[str],
               now: str | None = None) -> dict[str, Any]:
    """Where and how the verdict was measured: the header of both files and ``--json``'s ``provenance``.

    Keys: ``server`` (the target spec without secrets), ``kernel``, ``dns_software`` and ``query_files``
    (left out when unknown or unused; each file's sha256 as the load sent it, :func:`query_files`),
    ``load_host``, ``date`` (UTC), ``tunelab``, ``note`` (the target's, e.g. SYNTHETIC), ``verdict`` (overall)
    and ``verdict_table`` (one line per profile and metric).
    """
    out: dict[str, Any] = {"server": public_spec(dict(spec)), "kernel": kernel_of(description)}
    software = dns_software(description, load)
    if software:
        out["dns_software"] = software
    files = query_files(settings, getattr(load, "sent_queries", None))   # hashed once, when the trials sent it
    if files:
        out["query_files"] = files
    out.update({"load_host": load_host(spec, description), "load": getattr(load, "name", None),
                "date": now or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "tunelab": __version__})
    if description.get("note"):
        out["note"] = str(description["note"])
    out.update({"verdict": verdict, "verdict_table": [line.strip() for line in table_lines]})
    return out


def header(title: list[str], facts: Mapping[str, Any]) -> list[str]:
    """The comment header: ``title`` lines, then one ``# key: value`` line per provenance fact."""
    lines = [f"# {comment_text(line)}" for line in title]
    if facts.get("note"):
        lines.append(f"# note: {comment_text(facts['note'])}")
    lines.append(f"# server: {comment_text(json.dumps(facts['server'], sort_keys=True, default=str))}")
    lines.append(f"# kernel: {comment_text(facts.get('kernel') or 'unknown (the target reports none)')}")
    if facts.get("dns_software"):
        lines.append(f"# dns software: {comment_text(facts['dns_software'])}")
    for entry in facts.get("query_files", []):
        digest = entry["sha256"] or "not readable on this machine"
        lines.append(f"# query file: {comment_text(entry['path'])} sha256 {digest}")
    for key, label in (("load_host", "load host"), ("date", "date"), ("tunelab", "tunelab")):
        lines.append(f"# {label}: {comment_text(facts[key])}")
    return lines + [f"# verdict: {comment_text(str(facts['verdict']).upper())}"] + [
        f"#   {comment_text(line)}" for line in facts["verdict_table"]]


def file_names(study: str) -> tuple[str, str]:
    """``(90-tunelab-<study>.conf, 90-tunelab-<study>.conf.rollback)``; the study name cannot hold a ``/``.

    >>> file_names("validate-lab")
    ('90-tunelab-validate-lab.conf', '90-tunelab-validate-lab.conf.rollback')
    """
    name = check_study_name(study, "study")
    return f"90-tunelab-{name}.conf", f"90-tunelab-{name}.conf.rollback"


def sysctl_texts(study: str, baseline: Mapping[str, Any], candidate: Mapping[str, Any], facts: Mapping[str, Any],
                 knob_lookup: Callable[[str], Any] | None = None) -> dict[str, str]:
    """``{"conf": text, "rollback": text}``: the candidate's and the baseline's sysctl.d files."""
    conf, rollback = file_names(study)
    install = [f"roll back: copy {rollback} (the baseline as measured) over /etc/sysctl.d/{conf} and run "
               "`sysctl --system` (its name does not end in .conf, so sysctl never reads it where it lies)"]
    titles = {
        "conf": [f"{conf}: the candidate `tunelab validate` judged {str(facts['verdict']).upper()}",
                 "install: review, copy to /etc/sysctl.d/ and run `sysctl --system`", *install],
        "rollback": [f"{rollback}: the baseline's values as measured, to undo {conf}",
                     f"use: replace /etc/sysctl.d/{conf} with this file (as {conf}) and run `sysctl --system`"],
    }
    texts = {}
    for role, config in (("conf", candidate), ("rollback", baseline)):
        body, comments = sysctl_lines(config, knob_lookup)
        texts[role] = "\n".join(header(titles[role], facts) + body + comments) + "\n"
    return texts


def write_atomic(directory: Path, name: str, text: str) -> Path:
    """Write ``text`` to ``directory/name`` atomically (temporary file, fsync, ``os.replace``), mode 0644."""
    if Path(name).name != name or name in ("", ".", ".."):
        raise TunelabError(f"{name!r} is not a plain file name; sysctl.d files are written only inside {directory}")
    handle, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, FILE_MODE)
        os.replace(temporary, directory / name)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    return directory / name


@dataclass(frozen=True)
class SysctlFiles:
    """The written files (``paths``: role -> path, ``texts``: role -> content) and their provenance."""

    directory: Path
    paths: dict[str, Path]
    texts: dict[str, str]
    provenance: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"written": True, "directory": str(self.directory),
                "files": {role: {"path": str(self.paths[role]), "content": self.texts[role]} for role in self.paths},
                "provenance": self.provenance}


def write_sysctl_files(directory: str | os.PathLike[str], study: str, baseline: Mapping[str, Any],
                       candidate: Mapping[str, Any], facts: Mapping[str, Any],
                       knob_lookup: Callable[[str], Any] | None = None) -> SysctlFiles:
    """Write the candidate's sysctl.d file and its rollback into ``directory`` (made if missing)."""
    texts = sysctl_texts(study, baseline, candidate, facts, knob_lookup)
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    names = dict(zip(("conf", "rollback"), file_names(study)))
    paths = {role: write_atomic(folder, names[role], texts[role]) for role in ("conf", "rollback")}
    return SysctlFiles(folder, paths, texts, dict(facts))
