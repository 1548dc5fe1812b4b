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
==================  ===========================================================================

Importing this package registers the five studies.
"""
from __future__ import annotations

from tunelab.seeds import s000_gembala, s001_diiner, s002_ioperf, s003_nsga2, s004_wayfinder  # noqa: F401 (register)
from tunelab.seeds.gallery import build_gallery, record_studies, store_provenance, write_gallery
from tunelab.seeds.contract import (DESIGNS, RECORDED, SEED_STUDIES, Claim, FigureImage, Measured, RecordContext,
                                 SeedStudy, StudyPage, Table, recorded_store)

__all__ = ["DESIGNS", "RECORDED", "SEED_STUDIES", "Claim", "FigureImage", "Measured", "RecordContext", "SeedStudy",
           "StudyPage", "Table", "build_gallery", "record_studies", "recorded_store", "store_provenance", "write_gallery"]
