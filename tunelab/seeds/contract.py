"""What a seed study is: the paper's claim, the designs that test it, how to record it, how to show it.

Each of the five source papers (``../shared/seeds/``) is one :class:`SeedStudy` in :data:`SEED_STUDIES`,
defined in its own module (``s000_gembala.py`` ... ``s004_wayfinder.py``). A study has two functions:

- ``record(ctx)`` runs the study on a target (the lab by default) into ``ctx.stores`` through the public
  API (:func:`tunelab.run`, :func:`tunelab.refine`, :func:`tunelab.validate`); stores are crash-safe, so
  running it again resumes. It must stay within :attr:`SeedStudy.minutes` of lab time.
- ``page(stores)`` reads the recorded store(s) (never measures) and returns a :class:`StudyPage`: the
  claim row (paper vs measured, with CI and verdict, and why they agree or differ), figures and tables.

The gallery (:mod:`tunelab.seeds.gallery`) writes the pages as HTML.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from tunelab.errors import SeedError
from tunelab.registry import Registry
from tunelab.seeds.arguments import RECORDED  # its home was here; kept importable

#: the repository's designs/seeds directory (the seed designs ship with the source tree)
DESIGNS = Path(__file__).resolve().parents[2] / "designs" / "seeds"
#: the words a claim row's ``agreement`` may take
AGREEMENTS = ("agrees", "partly", "differs", "not testable")


@dataclass(frozen=True)
class Claim:
    """What the paper says, in its own numbers.

    Attributes
    ----------
    text : the claim in one sentence, e.g. "tcp_abort_on_overflow=1 helps under intense load".
    numbers : the paper's figures for it, e.g. "queries lost -98 % under overload; no change at low load".
    where : where in the paper, e.g. "slides 14-16" or "Figure 4".
    """

    text: str
    numbers: str
    where: str


@dataclass(frozen=True)
class Measured:
    """What tunelab measured for the claim.

    Attributes
    ----------
    effect : the effect with its 95 % CI in words, e.g. "lost -97 % [-99, -93] % under overload".
    verdict : tunelab's verdict word(s), e.g. "improve", "interaction p = 0.0003", "no effect".
    agreement : one of :data:`AGREEMENTS`.
    why : one or two sentences: why the lab agrees with the paper or differs (scale, hardware, knobs
        the lab cannot change, ...).
    """

    effect: str
    verdict: str
    agreement: str
    why: str

    def __post_init__(self) -> None:
        if self.agreement not in AGREEMENTS:
            raise ValueError(f"agreement {self.agreement!r} is not one of {', '.join(AGREEMENTS)}")


@dataclass(frozen=True)
class FigureImage:
    """A figure of a study page: PNG bytes with its alt text and caption."""

    png: bytes
    alt: str
    caption: str


@dataclass(frozen=True)
class Table:
    """A table of a study page (shown with ``DataFrame.to_html``)."""

    caption: str
    frame: pd.DataFrame


@dataclass(frozen=True)
class Section:
    """A titled part of a study page after its tables (e.g. "Mechanisms"): paragraphs, figures, tables.

    Attributes
    ----------
    title : the heading, e.g. "Validation: sequential ABBA and duet".
    paragraphs : sentences written from the data (plain text; a missing recording says so, with the command
        that records it: :func:`record_command`).
    figures, tables : shown after the paragraphs, figures numbered on from the page's own.
    """

    title: str
    paragraphs: tuple[str, ...] = ()
    figures: tuple[FigureImage, ...] = ()
    tables: tuple[Table, ...] = ()


@dataclass
class StudyPage:
    """Everything the gallery shows for one study (built from recorded stores only).

    Attributes
    ----------
    measured : the claim row's measured side.
    figures, tables : in reading order.
    sections : titled parts after the tables (:class:`Section`), in reading order.
    notes : what the lab can and cannot reproduce, in sentences.
    provenance : per store: trials, when recorded, machine, busy share (``busy_pct``), lab minutes.
    stores : the store files the page was built from.
    """

    measured: Measured
    figures: list[FigureImage] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    provenance: list[dict[str, Any]] = field(default_factory=list)
    stores: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class RecordContext:
    """Where and how a study records.

    Attributes
    ----------
    stores : directory of the study's stores (created if missing).
    scale : 1.0 records the study as designed; a smaller value shrinks budgets and blocks for a smoke run
        (never for a shipped store).
    target : override of the designs' target type (``None``: as the design says, the lab).
    echo : where progress lines go.
    """

    stores: Path
    scale: float = 1.0
    target: str | None = None
    echo: Callable[[str], None] = print

    def store(self, name: str) -> Path:
        """The path of the store ``name`` (e.g. ``"001-diiner.sqlite"``) in :attr:`stores`."""
        self.stores.mkdir(parents=True, exist_ok=True)
        return self.stores / name

    def scaled(self, value: int, minimum: int = 1) -> int:
        """``value`` scaled by :attr:`scale`, at least ``minimum``."""
        return max(minimum, int(round(value * self.scale)))


@dataclass(frozen=True)
class SeedStudy:
    """One source paper reproduced: its claim, designs, recording and page.

    Attributes
    ----------
    key : the paper's number, ``"000"`` ... ``"004"``.
    slug : short name for files, e.g. ``"diiner-overload"``.
    title : the paper's title and what is reproduced.
    paper : the file in ``../shared/seeds/``.
    claim : the paper's claim.
    designs : design files in ``designs/seeds/`` the study runs.
    minutes : lab minutes the recording takes (at most 10).
    record : ``record(ctx) -> list of store paths``.
    page : ``page(stores_dir) -> StudyPage`` (reads recorded stores only).
    """

    key: str
    slug: str
    title: str
    paper: str
    claim: Claim
    designs: tuple[Path, ...]
    minutes: float
    record: Callable[[RecordContext], list[Path]]
    page: Callable[[Path], StudyPage]

    @property
    def name(self) -> str:
        """``"001-diiner-overload"``: the key and slug, used for store and page names."""
        return f"{self.key}-{self.slug}"

    @property
    def defined_by(self) -> tuple[str, str]:
        """The module and name of its ``record`` function: one study re-imported stays one study."""
        return self.record.__module__, self.record.__qualname__


def _same_study(a: object, b: object) -> bool:
    return a is b or (isinstance(a, SeedStudy) and isinstance(b, SeedStudy) and a.defined_by == b.defined_by)


#: the seed studies by key ("000" ... "004")
SEED_STUDIES: Registry[SeedStudy] = Registry("seed study", error=SeedError, same=_same_study)


def record_command(study: str, stores: str | os.PathLike[str]) -> str:
    """The command that records (or resumes) the seed study ``study`` into ``stores``.

    >>> record_command("001-diiner-overload", "data/seeds-dev"), record_command("001-diiner-overload", RECORDED)
    ('tunelab gallery --record --only 001 --stores data/seeds-dev', 'tunelab gallery --record --only 001')
    """
    command = f"tunelab gallery --record --only {study.split('-')[0]}"
    return command if Path(stores).resolve() == RECORDED.resolve() else f"{command} --stores {stores}"


def recorded_store(stores: str | os.PathLike[str], name: str, study: str) -> Path:
    """The store ``name`` in ``stores``, or one :class:`SeedError` line saying how to record it."""
    path = Path(stores) / name
    if not path.is_file():
        raise SeedError(f"no recorded store {path} for seed study {study}: record it with "
                        f"`{record_command(study, stores)}`")
    return path
