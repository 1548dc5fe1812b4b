"""Targets: where knobs change and commands run (lab, local, ssh, dry-run; the SYNTHETIC simulator
registers itself from :mod:`tunelab.simulator`, a layer above).

Importing this package registers the target modules in :data:`TARGETS`.

Targets built from a spec (a design's ``target`` section, a store's recorded spec) go through
:func:`build_target`: it checks the options against the target class's own constructor and
refuses options that carry commands (``command_options``, e.g. ``service_commands``) unless
the caller allows them (``tunelab run --allow-design-commands``).

Examples
--------
>>> check_target_spec({"type": "dry-run", "options": {"quiet": True}}).name
'dry-run'
>>> check_target_spec({"type": "dry-run", "options": {"loud": True}})
Traceback (most recent call last):
...
tunelab.targets.base.TargetOptionError: target dry-run: unknown option 'loud'; allowed options: quiet
>>> target_commands({"type": "local", "options": {"service_commands": {"dns": ["systemctl", "restart", "nsd"]}}})
['target.options.service_commands.dns: systemctl restart nsd']

A target's own rules run too (``validate_options``), e.g. the lab's DNS server must be registered
(:mod:`tunelab.targets.dns_servers`) and its ``zone_file`` pass that server's zone checker:

>>> check_target_spec({"type": "lab", "options": {"dns_server": "bind"}})
Traceback (most recent call last):
...
tunelab.targets.base.TargetOptionError: target lab: option dns_server: No DNS server named 'bind'; known: bind9, knot, nsd, unbound
"""
from __future__ import annotations

import collections.abc
import inspect
import shlex
import types
import typing
from typing import Any, Mapping

from tunelab.errors import SafetyError, TargetError, quoted
from tunelab.targets.base import TARGETS, CommandResult, Target, TargetOptionError, get_target
from tunelab.targets import dryrun as _dryrun  # noqa: F401  (registers "dry-run")
from tunelab.targets import lab as _lab  # noqa: F401  (registers "lab")
from tunelab.targets import local as _local  # noqa: F401  (registers "local")
from tunelab.targets import ssh as _ssh  # noqa: F401  (registers "ssh")

__all__ = ["TARGETS", "CommandResult", "Target", "TargetOptionError", "build_target",
           "check_target_spec", "get_target", "target_commands", "target_options"]

#: the command-line flag that lets a design's command options run
ALLOW_FLAG = "--allow-design-commands"


def target_options(cls: type[Target]) -> dict[str, inspect.Parameter]:
    """The options a spec may give ``cls``: its constructor's keyword parameters minus Python-only ones."""
    params = inspect.signature(cls.__init__).parameters
    hidden = set(getattr(cls, "python_only_options", ()))
    return {name: p for name, p in params.items()
            if name != "self" and name not in hidden
            and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}


def _hints(cls: type[Target]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls.__init__)
    except Exception:  # noqa: BLE001 - an unresolvable annotation only disables the type check
        return {}


def _matches(value: Any, hint: Any) -> bool:
    """Whether ``value`` (plain YAML data) fits the annotation ``hint``; unknown hints accept."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in args)
    if hint is type(None) or hint is None:
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin in (collections.abc.Mapping, dict) or hint in (dict, collections.abc.Mapping):
        if not isinstance(value, collections.abc.Mapping):
            return False
        return len(args) != 2 or all(_matches(k, args[0]) and _matches(v, args[1]) for k, v in value.items())
    if origin in (collections.abc.Sequence, list, tuple) or hint in (list, tuple, collections.abc.Sequence):
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            return False
        return not args or all(_matches(v, args[0]) for v in value)
    if origin is collections.abc.Callable:
        return False
    return True


def _type_text(hint: Any) -> str:
    return str(hint).replace("typing.", "").replace("collections.abc.", "")


def _check_options(type_name: str, cls: type[Target], options: Mapping[str, Any]) -> None:
    allowed = target_options(cls)
    names = ", ".join(allowed) or "(none)"
    for key in options:
        if key not in allowed:
            raise TargetOptionError(f"target {type_name}: unknown option {key!r}; allowed options: {names}", key)
    missing = [n for n, p in allowed.items() if p.default is inspect.Parameter.empty and n not in options]
    if missing:
        raise TargetOptionError(f"target {type_name}: option {missing[0]!r} is required; allowed options: {names}",
                                missing[0])
    hints = _hints(cls)
    for key, value in options.items():
        if key in hints and not _matches(value, hints[key]):
            raise TargetOptionError(f"target {type_name}: option {key}={quoted(value)} must be of type "
                                    f"{_type_text(hints[key])}", key)


def _spec_parts(spec: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    if not isinstance(spec, Mapping) or not isinstance(spec.get("type"), str):
        raise TargetError(f"a target spec needs a `type` (one of {', '.join(TARGETS.names())}), got {quoted(spec)}")
    options = spec.get("options") or {}
    if not isinstance(options, Mapping):
        raise TargetOptionError(f"target {spec['type']}: options must be a mapping, got {quoted(options)}")
    return spec["type"], options


def target_commands(spec: Mapping[str, Any]) -> list[str]:
    """One line per command the spec's options would run: ``target.options.OPTION[.KEY]: argv``.

    Pure: nothing is built or run. Unknown target types give no commands (they fail elsewhere).
    """
    type_name, options = _spec_parts(spec)
    try:
        cls = get_target(type_name)
    except TargetError:
        return []
    lines = []
    for option in getattr(cls, "command_options", ()):
        value = options.get(option)
        if not value:
            continue
        items = value.items() if isinstance(value, Mapping) else [(None, value)]
        for key, argv in items:
            where = f"target.options.{option}" + (f".{key}" if key is not None else "")
            text = shlex.join(str(a) for a in argv) if isinstance(argv, (list, tuple)) else repr(argv)
            lines.append(f"{where}: {text}")
    return lines


def check_target_spec(spec: Mapping[str, Any], *, allow_commands: bool = False) -> type[Target]:
    """Validate ``{"type", "options"}`` without building anything; return the target class.

    Raises
    ------
    TargetError
        Unknown type; :class:`TargetOptionError` for an unknown, missing or mistyped option.
    SafetyError
        An option carries commands (``cls.command_options``) and ``allow_commands`` is false.
    """
    type_name, options = _spec_parts(spec)
    cls = get_target(type_name)
    _check_options(type_name, cls, options)
    cls.validate_options(dict(options))
    commands = [o for o in getattr(cls, "command_options", ()) if options.get(o)]
    if commands and not allow_commands:
        raise SafetyError(f"target.options.{commands[0]}: the design names commands that would run as root on the "
                          f"{type_name} target; review them with `tunelab plan DESIGN {ALLOW_FLAG}` and pass "
                          f"{ALLOW_FLAG} to run them, or remove {commands[0]} from the design")
    return cls


def build_target(spec: Mapping[str, Any], *, allow_commands: bool = False) -> Target:
    """The one way to build a target from a spec: validate it (:func:`check_target_spec`), then construct it.

    ``allow_commands`` must come from the user (``--allow-design-commands``), never from a file.
    """
    cls = check_target_spec(spec, allow_commands=allow_commands)
    _, options = _spec_parts(spec)
    try:
        return cls(**dict(options))
    except (TypeError, ValueError) as exc:
        raise TargetError(f"target {spec['type']}: invalid options: {exc}") from None
