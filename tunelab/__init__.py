"""tunelab: statistically sound tuning of Linux kernel knobs.

Design -> run -> screen -> refine -> validate -> report. The public API mirrors the CLI verbs
(:mod:`tunelab.api`): ``tunelab.plan``, ``run``, ``screen``, ``refine``, ``validate``, ``report``,
``restore``, ``lab_up``, ``lab_down``, ``lab_status``; each returns a result with ``to_json()``.
Subpackages hold the parts: :mod:`tunelab.designs`, :mod:`tunelab.knobs`, :mod:`tunelab.targets`,
:mod:`tunelab.loads`, :mod:`tunelab.runner`, :mod:`tunelab.store`, :mod:`tunelab.stats`,
:mod:`tunelab.optimize`, :mod:`tunelab.report`.

The API is imported on first use, so ``import tunelab`` (and ``tunelab --help``) pulls in no
heavy dependency (pandas, scipy, pymoo, papermill).
"""
from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import inspect

from tunelab.version import __version__

_API = ("plan", "run", "screen", "refine", "tune", "validate", "validate_change", "preview_validate", "report", "restore",
        "lab_up", "lab_down", "lab_status")

__all__ = ["__version__", "api", *_API]


class _ReportPackage(types.ModuleType):
    """The :mod:`tunelab.report` subpackage, callable as the API's :func:`tunelab.api.report`.

    ``tunelab.report(study)`` builds a report, and ``import tunelab.report.figures as figures`` (which
    reads the attribute ``report`` of ``tunelab``) finds the subpackage's modules.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return importlib.import_module("tunelab.api").report(*args, **kwargs)

    @property
    def __signature__(self) -> inspect.Signature:
        import inspect

        return inspect.signature(importlib.import_module("tunelab.api").report)


def _report_package() -> types.ModuleType:
    """The :mod:`tunelab.report` subpackage, made callable (:class:`_ReportPackage`)."""
    package = importlib.import_module("tunelab.report")
    if not isinstance(package, _ReportPackage):
        package.__class__ = _ReportPackage
    return package


class _Package(types.ModuleType):
    """The ``tunelab`` module: its API names win over subpackages of the same name.

    ``tunelab.plan``, ``tunelab.run``, ... are the API functions. ``tunelab.report`` is the
    :mod:`tunelab.report` subpackage, callable as the API function (so every submodule still
    imports by its dotted name, e.g. ``import tunelab.report.figures as figures``).
    """

    def __getattribute__(self, name: str) -> Any:
        if name == "report":
            return _report_package()
        if name in _API:
            return getattr(importlib.import_module("tunelab.api"), name)
        return super().__getattribute__(name)


def __getattr__(name: str) -> Any:
    # Lazy, so `import tunelab` (and `tunelab --help`) stays fast and pulls no heavy dependencies.
    if name == "api":
        return importlib.import_module("tunelab.api")
    raise AttributeError(f"module 'tunelab' has no attribute {name!r}")


sys.modules[__name__].__class__ = _Package
