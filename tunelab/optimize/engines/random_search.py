"""``random``: distinct random configurations, the reference every search must beat.

The baseline and the initial configurations come first; then each ask draws ``n`` (default 4)
configurations not yet asked, seeded by (seed, ask number), so a restored engine asks exactly
what the uninterrupted one would.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from tunelab.optimize.engines.base import ENGINES, Candidate, EngineSettings, Measurement, first_batch
from tunelab.optimize.history import config_key

#: configurations per ask when the driver asks for the engine's natural batch
BATCH = 4


class RandomSearch:
    """Uniformly random distinct configurations (see the module docstring)."""

    name = "random"

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        self.asks = 0
        self.seen: set[tuple] = set()

    def ask(self, n: int | None = None) -> list[Candidate]:
        space = self.settings.space
        out: list[Candidate] = []
        if self.asks == 0:
            out = first_batch(self.settings)
        rng = np.random.default_rng([self.settings.seed, self.asks])
        self.asks += 1
        wanted = len(out) + (n or BATCH)
        self.seen.update(config_key(c.config) for c in out)
        attempts = 0
        while len(out) < wanted and len(self.seen) < space.size and attempts < 100 * wanted:
            attempts += 1
            config = space.decode(space.random_genes(rng, 1)[0])
            if config_key(config) not in self.seen:
                self.seen.add(config_key(config))
                out.append(Candidate(config, "random"))
        return out

    def tell(self, candidate: Candidate, measurements: Sequence[Measurement]) -> None:
        self.seen.add(config_key(candidate.config))

    def state(self) -> dict[str, Any]:
        return {"asks": self.asks}

    def restore(self, state: Mapping[str, Any], told: Sequence[tuple[Mapping[str, Any], Sequence[Measurement]]]) -> None:
        self.asks = int(state.get("asks", 0))
        self.seen = {config_key(config) for config, _ in told}


ENGINES.add("random", RandomSearch)
