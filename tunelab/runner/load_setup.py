"""The load's files on its host around a run: put there and checked once before the first trial
(:func:`prepare_load`), its private directories journalled in the study's store (:class:`StorePrivateDirs`),
removed at the end (:func:`cleanup_load`); and the per-trial settings of a load seeded by the run key
(:func:`keyed_settings`)."""
from __future__ import annotations

import sys
from typing import Any, Iterable, Mapping

from tunelab.errors import LoadError, TunelabError
from tunelab.formatting import shorten
from tunelab.loads import Load
from tunelab.runner.knob_writes import host_identities
from tunelab.signals import deferred_interrupts
from tunelab.store import Store
from tunelab.targets import Target


def cleanup_load(load: Load, target: Target) -> None:
    """Remove the load's private temporary files on the target (journalled as removed where :func:`prepare_load`
    journalled them); a problem is a warning, never the outcome."""
    with deferred_interrupts():
        try:
            load.cleanup(target)
        except TunelabError as exc:
            print(f"warning: {getattr(load, 'name', 'load')} could not remove its temporary files: {shorten(exc)}",
                  file=sys.stderr)
        finally:
            if getattr(load, "private_dirs", None) is not None:
                load.private_dirs = None        # type: ignore[attr-defined]


class StorePrivateDirs:
    """A load's private directories journalled in a study's store (:class:`tunelab.store.PrivateDir`): each one
    with its host's identity BEFORE anything is copied into it, marked removed when the load removes it; what a
    crash leaves, ``tunelab restore`` removes (:func:`tunelab.journal.remove_private_dirs`)."""

    def __init__(self, store: Store, target: Target) -> None:
        self.store, self.target = store, target
        self._ids: dict[tuple[str, str], int] = {}

    def made(self, host: str, path: str) -> None:
        identity = host_identities(self.target, {host})[host]
        self._ids[(host, path)] = self.store.private_dir_made(host, path, identity)

    def removed(self, host: str, path: str) -> None:
        dir_id = self._ids.pop((host, path), None)
        if dir_id is not None:
            self.store.private_dir_removed(dir_id)


def prepare_load(target: Target, load: Load, settings: Iterable[Mapping[str, Any]], store: Store | None = None) -> None:
    """Before the first trial applies a knob or restarts a service: put the load's files on its host
    (:meth:`~tunelab.loads.Load.prepare`, once per distinct settings) and check them (the load's
    ``check_prepared``, where it has one: dnsperf's query file is a readable file there). With ``store``, the
    load's private directories are journalled there first (:class:`StorePrivateDirs`).

    Raises
    ------
    LoadError
        one line (the cause shortened to :data:`~tunelab.formatting.QUOTE_LIMIT` characters: it may quote a
        file's text); the load's files are removed again, and nothing was applied or restarted.
    """
    kept = getattr(load, "private_dirs", None)
    if store is not None and hasattr(load, "private_dirs") and not (
            isinstance(kept, StorePrivateDirs) and kept.store is store and kept.target is target):
        load.private_dirs = StorePrivateDirs(store, target)     # type: ignore[attr-defined]  (prepared again: kept)
    seen: list[dict[str, Any]] = []
    for each in map(dict, settings):
        if each in seen:
            continue
        seen.append(each)
        try:
            added = load.prepare(target, each) or {}
            check = getattr(load, "check_prepared", None)
            if check is not None:
                check(target, {**each, **added})
        except (TunelabError, OSError) as exc:
            cleanup_load(load, target)
            raise LoadError(f"{getattr(load, 'name', 'load')}: could not prepare the load on the {load.runs_on} "
                            f"host, so nothing was applied or restarted: {shorten(exc)}") from None


def keyed_settings(load: Load, settings: Mapping[str, Any], run_key: str) -> dict[str, Any]:
    """``settings`` plus the run key as ``key`` for a load whose measurement is seeded by it (the
    simulator's ``wants_key``), so a trial measures the same whichever order or testbed runs it."""
    settings = dict(settings)
    if getattr(load, "wants_key", False):
        settings["key"] = run_key
    return settings


__all__ = ["StorePrivateDirs", "cleanup_load", "keyed_settings", "prepare_load"]
