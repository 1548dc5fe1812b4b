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
a comment header, one readable line per fact (:func:`header`): the server (``user@host:port``, no key paths),
the service address the load was sent to, the DNS software and its full version (dnsperf against a known
service), the kernel, the load host, the query file (path, SHA-256, line count: never its text), each load
profile with its settings, the date, the tunelab version, the restart the change needs to take effect (a knob
read only at start-up, e.g. somaxconn at ``listen()``, and the change file's restart command) and the verdict
table (:func:`provenance`; ``--json`` also keeps the target spec without secrets). Files are written
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
from typing import Any, Callable, Iterable, Mapping, Sequence

from tunelab.errors import TunelabError
from tunelab.formatting import level_label
from tunelab.model import KnobId
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


def file_lines(path: str | os.PathLike[str]) -> int | None:
    """How many lines a file on this machine has (a last line without a newline counts; ``None`` if unreadable)."""
    count, last = 0, b"\n"
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                count, last = count + chunk.count(b"\n"), chunk[-1:]
    except OSError:
        return None
    return count + (last != b"\n")


def query_files(settings: Iterable[Mapping[str, Any]], sent: Mapping[str, str] | None = None,
                sent_lines: Mapping[str, int] | None = None) -> list[dict[str, Any]]:
    """Each distinct ``query_file`` setting with its sha256 and line count: those of what the trials sent (``sent``:
    path -> sha256, the load's ``sent_queries``; ``sent_lines``: path -> lines), else of the file as it is on this
    machine (``None`` if unreadable). Never the file's text."""
    paths = dict.fromkeys(str(s["query_file"]) for s in settings if s.get("query_file"))
    known, lines = dict(sent or {}), dict(sent_lines or {})
    return [{"path": path, "sha256": known[path] if path in known else file_sha256(path),
             "lines": lines[path] if path in lines else file_lines(path)} for path in paths]


def server_host(spec: Mapping[str, Any], description: Mapping[str, Any]) -> str:
    """The server as people name it: ``user@host:port`` over ssh (no key path), else where the target runs.

    >>> server_host({"type": "ssh", "options": {"server": "root@db1:22", "connect_kwargs": {"key_filename": "/k"}}}, {})
    'root@db1:22 (ssh)'
    """
    options, here = spec.get("options") or {}, socket.gethostname()
    if options.get("server"):
        return f"{options['server']} (ssh)"
    if spec.get("type") == "lab":
        namespace = ((description.get("lab") or {}).get("namespaces") or {}).get("server", "server")
        return f"lab namespace {namespace} on {here}"
    if spec.get("type") == "simulator":
        surface = options.get("surface")
        return "none (SYNTHETIC simulator" + (f", surface {surface})" if surface else ")")
    return f"{here} (this machine, {spec.get('type')} target)"


def service_address(spec: Mapping[str, Any], settings: Iterable[Mapping[str, Any]]) -> str | None:
    """Where the load was sent: the ``server_address`` setting (a service address or VIP), else the ssh server's
    host; ``None`` when the target chose (the lab's, this machine's).

    >>> service_address({"options": {"server": "root@192.0.2.1:2222"}}, [{"rate": 5}])
    '192.0.2.1'
    """
    given = next((str(s["server_address"]) for s in settings if s.get("server_address")), None)
    if given:
        return given
    server = str((spec.get("options") or {}).get("server") or "")
    host = server.rpartition("@")[2]
    if host.startswith("["):
        return host[1:].partition("]")[0] or None
    return host.rpartition(":")[0] if host.count(":") == 1 else host or None


#: settings a profile line leaves out: shown on their own lines (query file, service address) or internal
PROFILE_LINE_SKIPS = ("query_file", "server_address", "remote_query_file", "query_file_sha256", "query_file_lines",
                      "key", "records")


def profile_text(name: str, settings: Mapping[str, Any]) -> str:
    """One load profile and its settings on a line.

    >>> profile_text("overload", {"mode": "tcp", "clients": 64, "rate": None})
    'overload: transport tcp, clients 64, no rate cap'
    >>> profile_text("normal", {"rate": 500, "clients": 2})
    'normal: rate 500 qps, clients 2'
    """
    parts = []
    for key, value in settings.items():
        if key in PROFILE_LINE_SKIPS:
            continue
        if key == "mode":
            parts.append(f"transport {value}")
        elif key == "rate":
            parts.append("no rate cap" if value is None else f"rate {level_label(value)} qps")
        elif value is not None:
            parts.append(f"{key} {level_label(value)}")
    return f"{name}: {', '.join(parts) or 'the load defaults'}"


def restart_needed(spec: Mapping[str, Any], knobs: Iterable[str], load: Any) -> str | None:
    """What applying the change needs beyond ``sysctl --system``: restarting the load's service when a knob is read
    only at start-up (``requires_restart``), with the change file's restart command; ``None`` when nothing is."""
    from tunelab.knobs import get_knob        # the catalogue, only when a header is written

    service = getattr(load, "service", None)
    needing = []
    for kid in dict.fromkeys(knobs):
        try:
            knob = get_knob(KnobId.parse(kid).name)
        except TunelabError:
            continue
        if getattr(knob, "requires_restart", False):
            how = "is read at listen()" if "listen()" in (knob.description or "") else "is read only at start-up"
            needing.append(f"{knob.name} {how}")
    if not needing or not service:
        return None
    command = ((spec.get("options") or {}).get("service_commands") or {}).get(service)
    what = "the DNS server" if service == "dns" else f"the {service} service"
    run = f" ({' '.join(map(str, command))})" if command else ""
    return f"restart {what}{run} after sysctl --system: {'; '.join(needing)}"


def provenance(spec: Mapping[str, Any], description: Mapping[str, Any], load: Any,
               settings: Mapping[str, Mapping[str, Any]] | Iterable[Mapping[str, Any]], verdict: str,
               table_lines: list[str], now: str | None = None, knobs: Sequence[str] = ()) -> dict[str, Any]:
    """Where and how the verdict was measured: the header of both files and ``--json``'s ``provenance``.

    ``settings`` are the load settings of each profile (a mapping profile name -> settings names them).
    Keys: ``server`` (the target spec without secrets), ``server_host`` (:func:`server_host`),
    ``service_address``, ``kernel``, ``dns_software`` and ``query_files`` (left out when unknown or unused;
    each file's path, sha256 and lines as the load sent it, :func:`query_files`), ``load_host``, ``profiles``
    (one line each, :func:`profile_text`), ``date`` (UTC), ``tunelab``, ``restart`` (:func:`restart_needed`
    for ``knobs``, when one is needed), ``note`` (the target's, e.g. SYNTHETIC), ``verdict`` (overall) and
    ``verdict_table`` (one line per profile and metric).
    """
    named = dict(settings) if isinstance(settings, Mapping) else {}
    uncapped = {"rate": None} if getattr(load, "service", None) == "dns" else {}     # dnsperf without -Q: no cap
    every = list(named.values()) if named else list(settings)
    out: dict[str, Any] = {"server": public_spec(dict(spec)), "server_host": server_host(spec, description),
                           "service_address": service_address(spec, every), "kernel": kernel_of(description)}
    software = dns_software(description, load)
    if software:
        out["dns_software"] = software
    files = query_files(every, getattr(load, "sent_queries", None),     # hashed once, when the trials sent it
                        getattr(load, "sent_query_lines", None))
    if files:
        out["query_files"] = files
    out.update({"load_host": load_host(spec, description), "load": getattr(load, "name", None),
                "profiles": [profile_text(str(name), {**each, **{k: v for k, v in uncapped.items() if k not in each}}) for name, each in named.items()],
                "date": now or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "tunelab": __version__})
    restart = restart_needed(spec, knobs, load)
    if restart:
        out["restart"] = restart
    if description.get("note"):
        out["note"] = str(description["note"])
    out.update({"verdict": verdict, "verdict_table": [line.strip() for line in table_lines]})
    return out


def header(title: list[str], facts: Mapping[str, Any]) -> list[str]:
    """The comment header: ``title`` lines, then one ``# key: value`` line per provenance fact."""
    lines = [f"# {comment_text(line)}" for line in title]
    if facts.get("note"):
        lines.append(f"# note: {comment_text(facts['note'])}")
    server = facts.get("server_host") or json.dumps(public_spec(facts["server"]), sort_keys=True, default=str)
    lines.append(f"# server: {comment_text(server)}")
    if facts.get("service_address"):
        lines.append(f"# service address: {comment_text(facts['service_address'])}")
    if facts.get("dns_software"):
        lines.append(f"# dns software: {comment_text(facts['dns_software'])}")
    lines.append(f"# kernel: {comment_text(facts.get('kernel') or 'unknown (the target reports none)')}")
    lines.append(f"# load host: {comment_text(facts['load_host'])}")
    for entry in facts.get("query_files", []):
        digest = entry["sha256"] or "not readable on this machine"
        count = entry.get("lines")
        lines.append(f"# query file: {comment_text(entry['path'])}, sha256 {digest}"
                     + (f", {count} line{'' if count == 1 else 's'}" if count is not None else ""))
    lines += [f"# profile {comment_text(line)}" for line in facts.get("profiles", [])]
    for key, label in (("date", "date"), ("tunelab", "tunelab"), ("restart", "restart")):
        if facts.get(key):
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
