"""Targets: where knobs change and commands run (lab, local, ssh, dry-run, simulator)."""
from tunelab.targets.base import TARGETS, CommandResult, Target, get_target

__all__ = ["TARGETS", "CommandResult", "Target", "get_target"]
