"""How a result shows itself in a notebook: a short HTML summary (``_repr_html_``) and its first figure (``plot()``).

A result is made in a low layer (a :class:`~tunelab.stats.ScreenResult` in ``stats``, a
:class:`~tunelab.study_result.StudyRun` in ``study_result``, a ``ValidateRun`` in ``optimize``), but its HTML and
figures are the report's (:mod:`tunelab.report`, layer 8), which a low layer may not import. So each
result class derives from :class:`Displayed`, and :mod:`tunelab.report.reprs` registers a :class:`View`
of it in :data:`VIEWS`, under the class's name, when :mod:`tunelab.report` is imported
(:mod:`tunelab.api` imports it, so every result of ``tunelab.screen(...)`` and the other verbs has one).

Without a view, ``_repr_html_`` returns ``None`` (Jupyter then shows the text repr) and ``plot()``
says what to import:

>>> class Thing(Displayed):
...     pass
>>> Thing()._repr_html_() is None
True
>>> Thing().plot()
Traceback (most recent call last):
...
tunelab.errors.TunelabError: Thing has no figure until tunelab.report is imported (import tunelab.report, or call tunelab.screen, tunelab.refine, ... which import it)
>>> VIEWS.add("Thing", View(html=lambda result: "<p>a thing</p>"))
>>> Thing()._repr_html_()
'<p>a thing</p>'
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from tunelab.errors import TunelabError
from tunelab.registry import Registry


@dataclass(frozen=True)
class View:
    """How one result class shows: ``html(result)`` its HTML summary, ``plot(result, **options)`` its
    first figure (a :class:`matplotlib.figure.Figure`), or ``None`` when it has none."""

    html: Callable[[Any], str]
    plot: Callable[..., Any] | None = None


def _same_view(a: object, b: object) -> bool:
    """Two views of one class are one definition when their functions are (a module imported twice)."""
    from tunelab.registry import same_definition

    if not isinstance(a, View) or not isinstance(b, View):
        return a is b
    return same_definition(a.html, b.html) and (a.plot is b.plot or same_definition(a.plot, b.plot))


#: result class name -> its :class:`View` (filled by :mod:`tunelab.report.reprs`)
VIEWS: Registry[View] = Registry("result view", error=TunelabError, same=_same_view)


class Displayed:
    """A result that shows as HTML in a notebook and draws its first figure with :meth:`plot`."""

    def _view(self) -> View | None:
        name = type(self).__name__
        return VIEWS.get(name) if name in VIEWS else None

    def _repr_html_(self) -> str | None:
        view = self._view()
        return view.html(self) if view is not None else None

    def plot(self, **options: Any) -> Any:
        """The result's first figure (a :class:`matplotlib.figure.Figure`; see the class's view for the options)."""
        view = self._view()
        name = type(self).__name__
        if view is None:
            raise TunelabError(f"{name} has no figure until tunelab.report is imported (import tunelab.report, or "
                               "call tunelab.screen, tunelab.refine, ... which import it)")
        if view.plot is None:
            raise TunelabError(f"{name} has no figure; its tables are in its attributes (see help({name}))")
        return view.plot(self, **options)


__all__ = ["VIEWS", "Displayed", "View"]
