"""Targets: where knobs change and commands run (lab, local, ssh, dry-run, simulator).

Importing this package registers the target modules in :data:`TARGETS`.
"""
from tunelab.targets.base import TARGETS, CommandResult, Target, get_target
from tunelab.targets import dryrun as _dryrun  # noqa: F401  (registers "dry-run")
from tunelab.targets import lab as _lab  # noqa: F401  (registers "lab")
from tunelab.targets import local as _local  # noqa: F401  (registers "local")
from tunelab.targets import ssh as _ssh  # noqa: F401  (registers "ssh")
from tunelab.targets import simulator as _simulator  # noqa: F401  (registers "simulator", SYNTHETIC)

__all__ = ["TARGETS", "CommandResult", "Target", "get_target"]
