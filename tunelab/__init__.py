"""tunelab: statistically sound tuning of Linux kernel knobs.

Design -> run -> screen -> refine -> report. The public API mirrors the CLI verbs
(:mod:`tunelab.api`): ``tunelab.plan``, ``tunelab.run``, ``tunelab.screen``, ``tunelab.report``.
Subpackages hold the parts: :mod:`tunelab.designs`, :mod:`tunelab.knobs`, :mod:`tunelab.targets`,
:mod:`tunelab.loads`, :mod:`tunelab.runner`, :mod:`tunelab.store`, :mod:`tunelab.stats`,
:mod:`tunelab.optimize`, :mod:`tunelab.report`.
"""
from __future__ import annotations

from typing import Any

from tunelab.version import __version__

_API = ("plan", "run", "screen", "report")

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    # Lazy, so `import tunelab` (and `tunelab --help`) stays fast and pulls no heavy dependencies.
    if name in _API:
        from tunelab import api

        return getattr(api, name)
    raise AttributeError(f"module 'tunelab' has no attribute {name!r}")
