"""tunelab: statistically sound tuning of Linux kernel knobs.

Design -> run -> screen -> refine -> report. The public API mirrors the CLI verbs.
"""
from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
