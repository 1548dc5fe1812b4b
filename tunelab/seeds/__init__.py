"""The five source papers reproduced in the lab: seed studies, their recorded stores and the gallery.

==================  ===========================================================================
``contract.py``     :class:`SeedStudy` (claim, designs, ``record``, ``page``) and the registry
                    :data:`SEED_STUDIES`
``s000_gembala``    seed 000: Plackett-Burman of the Table-2 knobs, then the GA (Gembala et al.)
``s001_diiner``     seed 001: somaxconn x tcp_abort_on_overflow x load profile (DIINER slides)
``s002_ioperf``     seed 002: block-queue knobs across fio workloads, "% of workloads improved"
``s003_nsga2``      seed 003: NSGA-II throughput vs RTT, presets on the Pareto plots
``s004_wayfinder``  seed 004: a range space explored by a design and by three searches
``gallery.py``      the HTML gallery (``reports/seeds/index.html``, templates in tunelab/report) and ``tunelab gallery``
``arguments.py``    the gallery's command line and default places (light: the CLI's ``--help`` uses it)
==================  ===========================================================================

Importing this package is cheap: the studies (pandas, matplotlib, the optimisers) are imported, and so
registered in :data:`SEED_STUDIES`, by :func:`load_studies`, which the first use of a name below (and
:func:`tunelab.seeds.gallery.select_studies`) calls.
"""
from __future__ import annotations

import importlib
from typing import Any

#: the study modules, in key order; importing one registers its study in SEED_STUDIES
STUDY_MODULES = ("s000_gembala", "s001_diiner", "s002_ioperf", "s003_nsga2", "s004_wayfinder")
#: the package's names and the module each comes from (imported on first use)
EXPORTS = {
    **{name: "contract" for name in ("DESIGNS", "SEED_STUDIES", "Claim", "FigureImage", "Measured", "RecordContext",
                                  "Section", "SeedStudy", "StudyPage", "Table", "record_command", "recorded_store")},
    **{name: "gallery" for name in ("build_gallery", "record_studies", "store_provenance", "write_gallery")},
    "RECORDED": "arguments",
}

__all__ = sorted(EXPORTS, key=str.lower)


def load_studies() -> None:
    """Import the study modules, registering each study in SEED_STUDIES (nothing to do after the first call)."""
    for name in STUDY_MODULES:
        importlib.import_module(f"{__name__}.{name}")


def __getattr__(name: str) -> Any:
    # PEP 562: `tunelab.seeds.X` imports X's module (and registers the studies) on first use only
    if name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if EXPORTS[name] != "arguments":   # the registry and the gallery: with every study registered
        load_studies()
    return getattr(importlib.import_module(f"{__name__}.{EXPORTS[name]}"), name)
