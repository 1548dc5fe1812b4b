"""Testbeds files: several named targets a study runs on at once, checked before anything is applied.

A testbeds file (YAML) lists named targets, each as in a design's ``target:`` section::

    testbeds:
      - name: lab1
        type: lab                  # the lab's `name` option defaults to the testbed name
      - name: dns-a
        type: ssh
        options: {server: root@192.0.2.10:22, known_hosts: ~/.ssh/known_hosts}

Three steps, from pure to worldly, none of which applies anything:

- :func:`parse_testbeds` / :func:`load_testbeds`: the file's shape and every entry's options, checked by
  the target class itself (:func:`tunelab.targets.check_target_spec`), command options refused unless
  the user allows them (``--allow-design-commands``);
- :func:`check_testbeds`: what touches the world (key files, known_hosts, a TCP connection to each
  host the file names, root and ``ip`` for labs), every problem in one :class:`TestbedError`;
- :func:`shared_machine_warnings`: testbeds that share a machine share its CPUs, so their trials interfere.

Files are untrusted input (shared between people; tunelab runs as root): they are read with
``yaml.safe_load``, at most :data:`MAX_FILE_BYTES`, and their data is bounded before it is used.

Examples
--------
>>> beds = parse_testbeds({"testbeds": [{"name": "lab1", "type": "lab"},
...                                     {"name": "lab2", "type": "lab", "options": {"pin_cpus": False}}]}, "beds.yaml")
>>> [bed.spec() for bed in beds]
[{'type': 'lab', 'options': {'name': 'lab1'}}, {'type': 'lab', 'options': {'pin_cpus': False, 'name': 'lab2'}}]
>>> parse_testbeds({"testbeds": [{"name": "Lab 1", "type": "lab"}]}, "beds.yaml")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
tunelab.errors.TestbedError: beds.yaml: testbeds[0] ('Lab 1'): invalid name 'Lab 1'; use 1-24 characters of a-z, ...
>>> beds[1].merged({"type": "lab", "options": {"records": 500, "pin_cpus": True}}).options
{'records': 500, 'pin_cpus': False, 'name': 'lab2'}
"""
from __future__ import annotations

import ipaddress
import os
import re
import shutil
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import psutil
import yaml

from tunelab.errors import SafetyError, TargetError, TestbedError, quoted
from tunelab.paths import read_capped_text
from tunelab.targets import ALLOW_FLAG, TARGETS, check_target_spec, target_commands
from tunelab.targets.ssh import parse_spec

__all__ = ["MAX_FILE_BYTES", "Testbed", "check_testbeds", "load_testbeds", "parse_testbeds",
           "shared_machine_warnings"]

#: largest testbeds file read (a testbeds file is a few hundred bytes per testbed)
MAX_FILE_BYTES = 1 << 20
#: most values, characters of text and deepest nesting a testbeds file may hold, aliases counted each
#: time they are used (so an alias bomb stops here, before anything walks or quotes it)
MAX_NODES = 10_000
MAX_TEXT_CHARS = 4 * MAX_FILE_BYTES
MAX_DEPTH = 20
#: a testbed name (and a lab's name): what a lab accepts, so a lab may be named after its testbed
NAME_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,23}")
NAME_RULE = "use 1-24 characters of a-z, 0-9 and '-', starting with a letter or digit"
TOP_KEYS = ("testbeds",)
ENTRY_KEYS = ("name", "type", "options")
#: target types that run on the machine tunelab runs on (every type but ssh does)
REMOTE_TYPES = ("ssh",)
#: target types whose trials measure no real machine: a group of only these needs no warning
UNMEASURED_TYPES = ("simulator", "dry-run")
THIS_MACHINE = "this machine"
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"


@dataclass(frozen=True)
class Testbed:
    """One named target of a testbeds file.

    Attributes
    ----------
    name : the testbed's name (``[a-z0-9][a-z0-9-]{0,23}``), unique in its file
    type : a registered target type (``lab``, ``local``, ``ssh``, ``dry-run``, ``simulator``, ...)
    options : the target's options, as written in the file
    """

    __test__ = False   # a name pytest would otherwise try to collect where it is imported

    name: str
    type: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def lab_name(self) -> str | None:
        """The lab's name for a ``lab`` testbed (its ``options.name``, else the testbed name); else None."""
        if self.type != "lab":
            return None
        return self.options.get("name") or self.name

    def spec(self) -> dict[str, Any]:
        """``{"type", "options"}`` as :func:`tunelab.targets.build_target` takes it (a lab always named)."""
        options = dict(self.options)
        if self.type == "lab":
            options["name"] = self.lab_name
        return {"type": self.type, "options": options}

    def merged(self, design_target: Mapping[str, Any]) -> "Testbed":
        """This testbed with a design's ``target`` section (``{"type", "options"}``) as defaults.

        When the design's target has this testbed's type, its options are the defaults and the
        testbed's override them; otherwise the design's options do not apply. A lab keeps its lab name.
        """
        options: dict[str, Any] = {}
        if design_target.get("type") == self.type:
            options.update(design_target.get("options") or {})
        options.update(self.options)
        if self.type == "lab":
            options["name"] = self.lab_name
        return Testbed(self.name, self.type, options)


# ---- parsing (pure) ---------------------------------------------------------------------------


def _one_line(text: str, limit: int = 600) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


def _check_bounded(data: Any, where: str) -> None:
    """TestbedError if ``data`` holds more than MAX_NODES values or MAX_TEXT_CHARS characters of text, or
    nests deeper than MAX_DEPTH (alias bombs, recursive aliases)."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    seen = chars = 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        chars += len(value) if isinstance(value, (str, bytes)) else 0
        if seen > MAX_NODES or chars > MAX_TEXT_CHARS:
            raise TestbedError(f"{where}: the file expands to more than MAX_NODES={MAX_NODES} values or "
                               f"MAX_TEXT_CHARS={MAX_TEXT_CHARS} characters (aliases count each time they are used); "
                               "a testbeds file needs far fewer: remove repeated aliases")
        if depth > MAX_DEPTH:
            raise TestbedError(f"{where}: nesting deeper than MAX_DEPTH={MAX_DEPTH} levels (or a recursive alias); "
                               "flatten the file")
        if isinstance(value, Mapping):
            stack.extend((item, depth + 1) for pair in value.items() for item in pair)
        elif isinstance(value, (list, tuple)):
            stack.extend((item, depth + 1) for item in value)


def _entry_label(index: int, entry: Any) -> str:
    name = entry.get("name") if isinstance(entry, Mapping) else None
    return f"testbeds[{index}] ({quoted(name, 40) if name is not None else 'no name'})"


def _options_problem(spec: Mapping[str, Any], allow_commands: bool) -> str | None:
    """Why the target class refuses ``spec`` (one line), or None when it accepts it."""
    try:
        check_target_spec(spec, allow_commands=allow_commands)
    except SafetyError:
        commands = "; ".join(target_commands(spec))
        return (f"options name commands that would run as root on the {spec['type']} target "
                f"({_one_line(commands, 300)}); review them and pass {ALLOW_FLAG} to run them, "
                "or remove them from the file")
    except TargetError as exc:
        return f"options: {_one_line(str(exc))}; fix or remove that option"
    return None


def _parse_entry(index: int, entry: Any, allow_commands: bool) -> Testbed:
    """One entry -> Testbed; TestbedError (without the file name) for the first problem."""
    label = _entry_label(index, entry)
    if not isinstance(entry, Mapping):
        raise TestbedError(f"{label}: an entry must be a mapping with name, type and options, got {quoted(entry)}")
    unknown = [key for key in entry if key not in ENTRY_KEYS]
    if unknown:
        raise TestbedError(f"{label}: unknown key {quoted(unknown[0], 40)}; allowed keys: {', '.join(ENTRY_KEYS)}")
    name = entry.get("name")
    if name is None:
        raise TestbedError(f"{label}: `name` is required; give the testbed a name ({NAME_RULE})")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise TestbedError(f"{label}: invalid name {quoted(name, 40)}; {NAME_RULE}")
    type_name = entry.get("type")
    known = ", ".join(TARGETS.names())
    if type_name is None:
        raise TestbedError(f"{label}: `type` is required; choose one of {known}")
    if not isinstance(type_name, str) or type_name not in TARGETS.names():
        hint = " (the simulator target registers itself when tunelab.simulator is imported)" \
            if type_name == "simulator" else ""
        raise TestbedError(f"{label}: unknown target type {quoted(type_name, 40)}; choose one of {known}{hint}")
    options = entry.get("options")
    options = {} if options is None else options
    if not isinstance(options, Mapping):
        raise TestbedError(f"{label}: options must be a mapping (option: value), got {quoted(options)}")
    bed = Testbed(name, type_name, dict(options))
    problem = _options_problem({"type": type_name, "options": dict(options)}, allow_commands)
    if problem:
        raise TestbedError(f"{label}: {problem}")
    if bed.type == "lab" and not (isinstance(bed.lab_name, str) and NAME_RE.fullmatch(bed.lab_name)):
        raise TestbedError(f"{label}: invalid lab name options.name={quoted(bed.lab_name, 40)}; {NAME_RULE}, "
                           "or leave it out to name the lab after the testbed")
    return bed


def _check_unique(testbeds: Sequence[Testbed]) -> None:
    """TestbedError naming both entries when two testbeds share a name, or two labs a lab name."""
    first_by_name: dict[str, int] = {}
    first_by_lab: dict[str, int] = {}
    for index, bed in enumerate(testbeds):
        if bed.name in first_by_name:
            other = first_by_name[bed.name]
            raise TestbedError(f"testbeds[{other}] and testbeds[{index}] are both named {bed.name!r}; "
                               "give every testbed its own name")
        first_by_name[bed.name] = index
        if bed.lab_name is not None:
            if bed.lab_name in first_by_lab:
                other = first_by_lab[bed.lab_name]
                raise TestbedError(f"testbeds[{other}] ({testbeds[other].name}) and testbeds[{index}] ({bed.name}) "
                                   f"are the same lab {bed.lab_name!r}; give each lab testbed its own options.name "
                                   "(or leave it out to use the testbed name)")
            first_by_lab[bed.lab_name] = index


def parse_testbeds(data: Any, where: str, *, allow_commands: bool = False) -> list[Testbed]:
    """The testbeds of a parsed testbeds file (pure: nothing is built, reached or read).

    Parameters
    ----------
    data : the file's YAML data
    where : the file's name, for messages
    allow_commands : whether options that carry commands (``service_commands``) may stay; only ever
        from the user (``--allow-design-commands``), never from a file

    Raises
    ------
    TestbedError
        One line naming the file, the entry (index and name) and the fix, for the first problem.
    """
    _check_bounded(data, where)
    if not isinstance(data, Mapping):
        raise TestbedError(f"{where}: a testbeds file must be a mapping with a `testbeds:` list, got {quoted(data)}")
    unknown = [key for key in data if key not in TOP_KEYS]
    if unknown:
        raise TestbedError(f"{where}: unknown top-level key {quoted(unknown[0], 40)}; "
                           f"allowed keys: {', '.join(TOP_KEYS)}")
    entries = data.get("testbeds")
    if not isinstance(entries, list):
        raise TestbedError(f"{where}: `testbeds` must be a list of testbeds (name, type, options), "
                           f"got {quoted(entries)}")
    if not entries:
        raise TestbedError(f"{where}: `testbeds` is empty; list at least one testbed (name, type, options)")
    try:
        testbeds = [_parse_entry(index, entry, allow_commands) for index, entry in enumerate(entries)]
        _check_unique(testbeds)
    except TestbedError as exc:
        raise TestbedError(f"{where}: {exc}") from None
    return testbeds


class _TestbedsLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key written twice in one mapping (a silently lost value)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        own = [key.value for key, _ in node.value
               if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge"]
        for position, key in enumerate(own):
            if key in own[:position]:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}; each key may appear once",
                                                        node.start_mark)
        return super().construct_mapping(node, deep=deep)


def _read_text(path: Path) -> str:
    return read_capped_text(path, MAX_FILE_BYTES, TestbedError, "testbeds file", "see examples/testbeds-*.yaml")


def load_testbeds(path: str | Path, *, allow_commands: bool = False) -> list[Testbed]:
    """Read and parse a testbeds file (:func:`parse_testbeds`); every problem is one TestbedError line.

    ``allow_commands`` must come from the user (``--allow-design-commands``), never from a file.

    Examples
    --------
    >>> [bed.name for bed in load_testbeds("examples/testbeds-2labs.yaml")]   # from the repository root
    ['lab1', 'lab2']
    """
    path = Path(path)
    text = _read_text(path)
    try:
        data = yaml.load(text, Loader=_TestbedsLoader)   # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        raise TestbedError(f"{path}{':' + str(mark.line + 1) if mark else ''}: malformed YAML: "
                           f"{_one_line(exc.problem or exc.context or str(exc), 200)} ({at}); "
                           "fix the syntax at that position") from None
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise TestbedError(f"{path}: malformed YAML: {_one_line(str(exc), 200)}; fix the file") from None
    return parse_testbeds(data, str(path), allow_commands=allow_commands)


# ---- checks that touch the world (nothing is applied) -------------------------------------------


def _key_files(connect_kwargs: Mapping[str, Any]) -> list[str] | None:
    """The key files of ``connect_kwargs.key_filename`` (a path or a list of paths); None if it is neither."""
    keys = connect_kwargs.get("key_filename")
    if keys is None:
        return []
    if isinstance(keys, str):
        return [keys]
    if isinstance(keys, (list, tuple)) and all(isinstance(key, str) for key in keys):
        return list(keys)
    return None


def _file_problems(bed: Testbed) -> list[str]:
    """Missing or unreadable key files and a missing known_hosts file of an ssh testbed."""
    problems = []
    keys = _key_files(bed.options.get("connect_kwargs") or {})
    if keys is None:
        problems.append(f"testbed {bed.name}: options.connect_kwargs.key_filename must be a path or a list of "
                        f"paths, got {quoted(bed.options['connect_kwargs']['key_filename'])}")
    for key in keys or []:
        path = os.path.expanduser(key)
        if not os.path.isfile(path):
            problems.append(f"testbed {bed.name}: key file {key} does not exist; fix "
                            "options.connect_kwargs.key_filename or create the key (ssh-keygen)")
        elif not os.access(path, os.R_OK):
            problems.append(f"testbed {bed.name}: key file {key} is not readable; fix its permissions "
                            "or options.connect_kwargs.key_filename")
    known = bed.options.get("known_hosts")
    path = os.path.expanduser(known or DEFAULT_KNOWN_HOSTS)
    if not os.path.isfile(path):
        which = known if known else f"{DEFAULT_KNOWN_HOSTS} (the default)"
        problems.append(f"testbed {bed.name}: known_hosts file {which} does not exist; add each host's key with "
                        f"`ssh-keyscan -p PORT HOST >> {path}` after checking its fingerprint, or fix "
                        "options.known_hosts")
    return problems


def _endpoints(bed: Testbed) -> list[tuple[str, int]]:
    """``(host, port)`` of the ssh testbed's server and, if given, client."""
    return [parse_spec(bed.options[role])[1:] for role in ("server", "client") if bed.options.get(role)]


def _reach_problem(name: str, host: str, port: int, timeout_s: float) -> str | None:
    """Why ``host:port`` accepts no TCP connection within ``timeout_s`` (one line), or None when it does."""
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except socket.timeout:
        reason = f"timed out after {timeout_s:g} s"
    except ConnectionRefusedError:
        reason = "connection refused: nothing listens on that port"
    except socket.gaierror as exc:
        reason = f"cannot resolve the host name: {exc.strerror or exc}"
    except OSError as exc:
        reason = _one_line(exc.strerror or str(exc), 200)
    return f"testbed {name}: cannot reach {address} ({reason}); check the host is up and the address"


def _lab_problems(bed: Testbed) -> list[str]:
    problems = []
    if os.geteuid() != 0:
        problems.append(f"testbed {bed.name}: a lab needs root (it builds network namespaces); run tunelab as root")
    if shutil.which("ip") is None:
        problems.append(f"testbed {bed.name}: a lab needs `ip` (iproute2), which is not installed; "
                        "install it with `apt-get install iproute2`")
    return problems


def check_testbeds(testbeds: Iterable[Testbed], *, timeout_s: float = 3.0) -> None:
    """The checks before a study starts that touch the world but apply nothing.

    ssh: the key files and known_hosts exist and the server (and client) accept a TCP connection
    within ``timeout_s`` (only the hosts the file names are contacted, all at once); lab: root and
    ``ip``; every testbed's options again by its target class (command options allowed: their
    permission was decided when the file was parsed).

    Raises
    ------
    TestbedError
        Every problem found, one line each, in testbed order.
    """
    testbeds = list(testbeds)
    found: dict[int, list[str]] = {index: [] for index in range(len(testbeds))}
    reach: list[tuple[int, str, int]] = []
    for index, bed in enumerate(testbeds):
        problem = _options_problem(bed.spec(), allow_commands=True)
        if problem:
            found[index].append(f"testbed {bed.name}: {problem}")
            continue
        if bed.type == "lab":
            found[index] += _lab_problems(bed)
        elif bed.type == "ssh":
            found[index] += _file_problems(bed)
            reach += [(index, host, port) for host, port in _endpoints(bed)]
    if reach:
        with ThreadPoolExecutor(max_workers=min(16, len(reach))) as pool:
            answers = pool.map(lambda item: _reach_problem(testbeds[item[0]].name, item[1], item[2], timeout_s), reach)
            for (index, _, _), answer in zip(reach, answers):
                if answer:
                    found[index].append(answer)
    lines = [line for index in sorted(found) for line in found[index]]
    if lines:
        raise TestbedError("\n".join(lines))


# ---- shared machines ---------------------------------------------------------------------------


def _own_addresses() -> set[str]:
    """This machine's addresses (every interface, IPv4 and IPv6, without a zone)."""
    addresses = set()
    for entries in psutil.net_if_addrs().values():
        for entry in entries:
            if entry.family in (socket.AF_INET, socket.AF_INET6):
                addresses.add(entry.address.split("%")[0])
    return addresses


def _resolve(host: str) -> set[str]:
    """The addresses ``host`` resolves to (no connection is made); ``{host}`` itself if it does not resolve."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return {host.lower()}
    return {str(info[4][0]).split("%")[0] for info in infos}


def _is_this_machine(address: str, own: set[str]) -> bool:
    try:
        parsed = ipaddress.ip_address(address)
        return parsed.is_loopback or parsed.is_unspecified or address in own
    except ValueError:
        return False


def _machines(bed: Testbed, own: set[str]) -> list[set[str]]:
    """The machines ``bed`` runs on, each as its set of addresses; ``{THIS_MACHINE}`` for this one.

    An ssh testbed runs on its server and on its client, which is this machine when not given
    (the load generator runs here); every other type runs on this machine.
    """
    if bed.type not in REMOTE_TYPES:
        return [{THIS_MACHINE}]
    machines = []
    for role in ("server", "client"):
        spec = bed.options.get(role)
        if not spec:
            machines.append({THIS_MACHINE})
            continue
        try:
            host = parse_spec(spec)[1]
        except TargetError:
            continue
        addresses = _resolve(host)
        machines.append({THIS_MACHINE} if any(_is_this_machine(a, own) for a in addresses) else addresses)
    return machines


def _group_by_machine(occupied: Sequence[tuple[str, list[set[str]]]]) -> list[tuple[str, list[str]]]:
    """``(machine label, testbed names)`` per machine that more than one testbed runs on.

    Address sets that overlap are one machine (a host name and its address, two names of one host).
    """
    parent: dict[str, str] = {}

    def root(item: str) -> str:
        while parent.setdefault(item, item) != item:
            item = parent[item]
        return item

    for _, machines in occupied:
        for addresses in machines:
            first, *rest = sorted(addresses)
            for other in rest:
                parent[root(other)] = root(first)
    members: dict[str, list[str]] = {}
    labels: dict[str, set[str]] = {}
    for name, machines in occupied:
        for addresses in machines:
            key = root(next(iter(addresses)))
            labels.setdefault(key, set()).update(addresses)
            if name not in members.setdefault(key, []):
                members[key].append(name)
    groups = []
    for key, names in members.items():
        if len(names) > 1:
            label = THIS_MACHINE if THIS_MACHINE in labels[key] else ", ".join(sorted(labels[key]))
            groups.append((label, names))
    return groups


def shared_machine_warnings(testbeds: Iterable[Testbed]) -> list[str]:
    """One warning line per machine that several testbeds run on (they share its CPUs).

    lab, local, simulator and dry-run testbeds run on this machine; an ssh testbed runs on its
    server (resolved with ``getaddrinfo``, no connection; loopback and this machine's own addresses
    are this machine) and on its client (this machine when none is given). A group whose testbeds
    measure no real machine (only simulator or dry-run) needs no warning.

    Examples
    --------
    >>> shared_machine_warnings([Testbed("sim1", "simulator"), Testbed("sim2", "simulator")])
    []
    """
    testbeds = list(testbeds)
    own = _own_addresses()
    occupied = [(bed.name, _machines(bed, own)) for bed in testbeds]
    types = {bed.name: bed.type for bed in testbeds}
    warnings = []
    for label, names in _group_by_machine(occupied):
        if all(types[name] in UNMEASURED_TYPES for name in names):
            continue
        warnings.append(f"warning: testbeds {', '.join(names)} run on the same machine ({label}); they share its "
                        "CPUs, so their trials interfere. Use one testbed per machine for measurements you will "
                        "publish.")
    return warnings
