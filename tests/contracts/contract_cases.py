"""The :class:`Case` a contract item runs against: a prepared target and where it may be written."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from tunelab.targets.base import Target


def direct(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


@dataclass
class Case:
    """A target prepared for the contract, and where it may be written.

    Parameters
    ----------
    target : the target, up
    host : the host whose file the write items change
    path : a file on ``host`` that reads, writes and resets use
    values : two texts to write to ``path`` (both differ from its current value)
    call : how an operation runs (``local-netns``: in a thread inside a private namespace)
    skips : items this *case* leaves out, item -> reason (on top of ``target.cannot``)
    reset_default : the text ``reset()`` brings ``path`` back to (``None``: reset keeps values)
    fresh : a new, not yet up target of the same kind for the up/down items (``None``: use ``target``)
    recorded : for a target that records instead of acting, the writes it recorded
    """

    target: Target
    host: str
    path: str
    values: tuple[str, str]
    call: Callable[..., Any] = direct
    skips: dict[str, str] = field(default_factory=dict)
    reset_default: str | None = None
    fresh: Callable[[], Target] | None = None
    recorded: Callable[[], list] | None = None

    def skip_reason(self, item: str) -> str | None:
        """Why this case leaves ``item`` out, or None."""
        return self.skips.get(item) or self.target.cannot.get(item)

    def read(self) -> str:
        return self.call(self.target.read_text, self.host, self.path)

    def write(self, text: str) -> None:
        self.call(self.target.write_text, self.host, self.path, text)
