"""``tunelab`` (the default) and ``model``: proposals from a model of main effects and pairwise interactions.

The model is Bayesian regression on every knob's main effect and every pair's interaction,
written as a Gaussian process whose kernel counts what two configurations share (an additive
kernel of first and second order, Duvenaud et al. 2011):

    k(x, x') = t_main * sum_g w_g s_g + t_pair * sum_{g<h} s_g s_h,

where ``s_g`` is 1 when knob ``g`` has the same level in both (enum and bool knobs) or decays
with the distance between grid points (ordered knobs: ``exp(-d^2 / 2 l^2)``), and ``w_g`` is knob ``g``'s
relevance (1 for every knob unless the option ``relevance`` asks for rounds, below). The kernel costs
``O(knobs)`` per pair of configurations however many levels the knobs have, so the same model
serves 5 knobs or 27. It is fitted to the log of the measured objective (effects are relative);
the share of interaction variance, the noise and ``l`` are chosen by marginal likelihood on a
small grid.

**It grows with the data.** While the configurations measured are at most :data:`PAIRS_AFTER` (1) times the
knobs, the interaction share is held at 0 (main effects only: the data cannot tell a pair from a main
effect yet); past that the marginal likelihood chooses it (:func:`pair_shares`), and its Occam factor keeps
pairs out until the data ask for them. Chosen from the benchmark (issue 30): holding pairs back until
twice the main-effect columns (92 configurations on wide27) halved wide27's hit rate at 60 (25 % against
50 % with pairs always allowed) and raised the mean regret at 60 on all three surfaces tried, while at 30
the two rules tied.

**Relevance (option ``relevance``, 0 by default).** ``relevance=k`` weighs each knob's main effect after the
grid fit by ``k`` rounds of automatic relevance determination (MacKay's fixed-point update of each knob's prior
variance under the marginal likelihood, :meth:`InteractionModel.relevance_update`, floored at
:data:`RELEVANCE_FLOOR` of the mean weight; pairs weigh alike), each followed by the grid fit again. Tried as
the default in issue 30 (``relevance=2``, 20 seeds, hit % / mean regret %): at 30 measurements it lowered the
regret on the sparse surfaces (levy12c 7.2 to 5.2, styblinski27 4.6 to 4.2, wide27 3.6 to 3.5) but not the hit
rate (0-10 % either way); at 60 it raised the hit rate on wide27 (35 to 45), levy12c (15 to 30) and
styblinski27 (50 to 65) and cut it on rosenbrock12, where every knob acts through its neighbours (35 to 5).
On the dense few-knob surfaces it lost too (with pairs weighed by relevance: smooth 95 to 75 at 60, rastrigin10's
regret at 30 7.7 to 10.2), and skipping it once the model chose pairs kept rosenbrock12 but gave the gains back
(wide27 35, levy12c 25, styblinski27 40 at 60). So every knob weighs the same by default.

Each ask proposes the configuration with the best predicted mean not yet measured, and the rest
of the batch by expected improvement (EI). The first batch is the baseline, the initial
configurations (the screen's best levels) and a space-filling design: the maximin (Hamming) subset
of a level-balanced random pool, 30 % of the budget (15 % when initial configurations are given).
Candidates are all configurations when the space has at most :data:`ENUMERATE_LIMIT`, else a seeded
random pool improved by coordinate ascent. With several objectives each ask scalarises them with
random weights (ParEGO, Knowles 2006). ``leaders(k)`` ranks configurations by the model's predicted
mean, measured or not: the driver's race then re-measures the predicted best rather than the
luckiest draw.

**Cliffs.** A configuration that failed, or whose first objective is worse than :data:`CLIFF_RATIO`
(30 %) of the median measured, is a cliff: its levels that no healthy configuration had are never
proposed again (design, proposals, coordinate ascent, leaders), from that one measurement on; its value
enters the model raised to the cliff's limit, so one collapse does not bend the predictions elsewhere.

**The race** (``tunelab`` only; ``model`` does not race): the engine ends its own search (an empty ask)
when the measurements it has made reach its budget minus :func:`race_budget`: none below
:data:`RACE_MIN_BUDGET` measurements, else up to :data:`RACE_SHARE` (30 %) of the budget in proportion to
the model's noise SD against the first objective's smallest effect of interest (SESOI, both on the
log scale: can one measurement tell apart configurations that differ by what matters?) up to
:data:`FULL_RACE_NOISE`. Scaling by the noise against the spread of the measured configurations (the
model's noise share) was tried first: on hard512 and smooth the spread is wide, so it raced little and
the hit rate at 60 fell from 85 % to 55 % (hard512, 20 seeds). Past :data:`RACE_KNOBS` (10) knobs the
share shrinks in proportion (27 knobs: 11 % at most), since there the search, not the choice among its
leaders, limits the result: on wide27, levy12c, rosenbrock12 and styblinski27 this raised the hit rate at 60
from 25/10/15/30 % to 35/15/35/50 % (20 seeds). The driver then races the leaders with
what is left. The driver reserves nothing for it (the engine's ``race_share`` is 0); an explicit
``race_share`` reserves that share on top.
Measurements told before the first ask (a warm start) are not counted, and a search continued past
its budget searches on, the driver reserving :data:`RACE_SHARE` of the extra measurements for a race
(``continued_race_share``).

Options: ``batch`` (default 2), ``initial`` (size of the first design), ``relevance`` (rounds, default 0).
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from tunelab.optimize.engines.base import ENGINES, Candidate, EngineSettings, Measurement, first_batch
from tunelab.optimize.history import config_key
from tunelab.optimize.space import ChoiceDimension, SearchSpace

#: spaces up to this many configurations are searched exhaustively by the model
ENUMERATE_LIMIT = 20_000
#: random configurations in the pool of a larger space (before coordinate ascent)
POOL_SIZE = 2_000
#: most of the budget the ``tunelab`` engine races its leaders with (when the noise is high against the spread)
RACE_SHARE = 0.3
#: below this budget the ``tunelab`` engine does not race (every measurement searches)
RACE_MIN_BUDGET = 20
#: the model's noise SD, against the first objective's SESOI (both on the log scale), at which the race takes its
#: full share
FULL_RACE_NOISE = 0.5
#: with more knobs (genes) than this the race's share shrinks in proportion (the search is the bottleneck)
RACE_KNOBS = 10
#: pairwise terms enter the model once the configurations measured exceed this many times the knobs (genes)
PAIRS_AFTER = 1.0
#: a configuration whose first objective is below this share of the median measured (above its inverse when
#: minimised), or that failed, is a cliff: its levels no other measured configuration had are not proposed again
CLIFF_RATIO = 0.3
#: grids of the hyperparameters chosen by marginal likelihood
PAIR_SHARES = (0.0, 0.25, 0.5)
NOISE_SHARES = (0.02, 0.1, 0.3, 0.6)
LENGTHS = (0.75, 1.5, 3.0)
#: rounds of automatic relevance determination per fit by default (each knob's main-effect weight by marginal
#: likelihood, :meth:`InteractionModel.relevance_update`; the engine option ``relevance``): 0, every knob weighs the
#: same; ``relevance=2`` was benchmarked (issue 30, module docstring)
RELEVANCE = 0
#: no knob's relevance weight falls below this share of the mean weight (a knob judged idle can come back)
RELEVANCE_FLOOR = 0.1


def ordered_genes(space: SearchSpace) -> np.ndarray:
    """Which genes have ordered levels (integer grids, triplet components, numeric choices)."""
    flags: list[bool] = []
    for dim in space.dimensions:
        if isinstance(dim, ChoiceDimension):
            numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in dim.values)
            flags.extend([numeric and len(dim.values) > 2] * len(dim.sizes))
        else:
            flags.extend([True] * len(dim.sizes))
    return np.array(flags, dtype=bool)


def level_similarity(a: np.ndarray, b: np.ndarray, ordered: bool, length: float) -> np.ndarray:
    """``s_g`` of one gene for every pair of entries of ``a`` and ``b``: 1 for the same level, else 0 (enum and bool
    knobs) or ``exp(-d^2 / 2 l^2)`` of the grid distance (ordered knobs)."""
    diff = a[:, None] - b[None, :]
    return np.exp(-0.5 * (diff / length) ** 2) if ordered else (diff == 0).astype(float)


def shared_levels(A: np.ndarray, B: np.ndarray, ordered: np.ndarray, length: float,
                  weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``sum_g w_g s_g``, ``sum_g s_g`` and ``sum_g s_g^2`` for every pair of rows of gene matrices ``A`` (a x G)
    and ``B`` (b x G); ``weights`` ``w_g`` are the knobs' relevances (default 1 each)."""
    main = np.zeros((len(A), len(B)))
    first = np.zeros((len(A), len(B)))
    squares = np.zeros((len(A), len(B)))
    for g in range(A.shape[1]):
        s = level_similarity(A[:, g], B[:, g], bool(ordered[g]), length)
        main += s if weights is None else weights[g] * s
        first += s
        squares += s * s
    return main, first, squares


def kernel(main: np.ndarray, first: np.ndarray, squares: np.ndarray, n_genes: int, pair_share: float) -> np.ndarray:
    """The additive kernel, scaled so a configuration's prior variance is 1: main effects weighed by relevance
    (``main``, weights averaging 1), every pair alike (the relevances come from main effects, which say nothing
    of a pair that acts only together)."""
    t_main = (1.0 - pair_share) / n_genes
    t_pair = pair_share / max(1, n_genes * (n_genes - 1) / 2)
    return t_main * main + t_pair * 0.5 * (first ** 2 - squares)


def pair_shares(n: int, genes: int) -> tuple[float, ...]:
    """The model's grid of interaction shares with ``n`` configurations measured over ``genes`` knobs (triplet
    components count singly): main effects only (``(0.0,)``) until ``n > PAIRS_AFTER * genes``, then
    :data:`PAIR_SHARES` (the marginal likelihood chooses).

    >>> pair_shares(12, 12), pair_shares(13, 12)
    ((0.0,), (0.0, 0.25, 0.5))
    """
    return PAIR_SHARES if n > PAIRS_AFTER * genes else (0.0,)


def race_budget(budget: int, noise: float) -> int:
    """Measurements the ``tunelab`` engine leaves to the race out of ``budget``: none below
    :data:`RACE_MIN_BUDGET`, else :data:`RACE_SHARE` of it scaled by ``noise`` (the model's noise SD
    against the smallest effect of interest, :meth:`ModelSearch.noise_ratio`) up to :data:`FULL_RACE_NOISE`.

    >>> race_budget(15, 1.0), race_budget(30, 0.02), race_budget(30, 0.5), race_budget(100, 0.1)
    (0, 0, 9, 6)
    """
    if budget < RACE_MIN_BUDGET:
        return 0
    share = RACE_SHARE * min(1.0, max(0.0, noise) / FULL_RACE_NOISE)
    measured = int(round(share * budget))
    return measured if measured >= 2 else 0


class InteractionModel:
    """The fitted model: posterior mean and SD of the (standardised) objective at any gene rows.

    Hyperparameters are chosen by marginal likelihood on the grid :data:`LENGTHS` x ``pairs`` (default
    :data:`PAIR_SHARES`; :func:`pair_shares` while the data are few) x :data:`NOISE_SHARES`; one
    eigendecomposition per kernel serves every noise level. ``relevance`` rounds of automatic relevance
    determination then weigh each knob (:meth:`relevance_update`) and choose the grid again.
    """

    def __init__(self, X: np.ndarray, y: np.ndarray, ordered: np.ndarray,
                 pairs: Sequence[float] = PAIR_SHARES, relevance: int = RELEVANCE) -> None:
        self.X, self.ordered = X, ordered
        self.center, self.scale = float(y.mean()), float(y.std()) or 1.0
        z = (y - self.center) / self.scale
        self.weights = np.ones(X.shape[1])
        self.choose(z, pairs)
        for _ in range(relevance):
            weights = self.relevance_update()
            if weights is None:
                break
            self.weights = weights
            self.choose(z, pairs)

    def choose(self, z: np.ndarray, pairs: Sequence[float]) -> None:
        """Length, pair share and noise share by marginal likelihood on their grid (with the current weights)."""
        X, best = self.X, None
        for length in (LENGTHS if self.ordered.any() else (1.0,)):
            levels = shared_levels(X, X, self.ordered, length, self.weights)
            for pair in pairs:
                values, vectors = np.linalg.eigh(kernel(*levels, X.shape[1], pair))
                values = np.clip(values, 0.0, None)
                projected = vectors.T @ z
                for noise in NOISE_SHARES:
                    loglik = -0.5 * float((projected ** 2 / (values + noise)).sum()) \
                        - 0.5 * float(np.log(values + noise).sum())
                    if best is None or loglik > best[0]:
                        best = (loglik, length, pair, noise, values, vectors, projected)
        _, self.length, self.pair, self.noise, values, vectors, projected = best
        self.alpha = vectors @ (projected / (values + self.noise))
        self.inverse_root = vectors / np.sqrt(values + self.noise)      # K^-1 = R R^T

    def relevance_update(self) -> np.ndarray | None:
        """The knobs' next relevance weights: MacKay's fixed-point update of each knob's main-effect variance
        ``v_g`` under the marginal likelihood, ``v_g * (a' S_g a) / tr(S_g C^-1)`` (``a = C^-1 z``; 1 at the
        optimum), floored at :data:`RELEVANCE_FLOOR` of the mean and scaled to average 1 (None: no signal)."""
        inverse = self.inverse_root @ self.inverse_root.T
        used, room = np.empty(self.X.shape[1]), np.empty(self.X.shape[1])
        for g in range(self.X.shape[1]):
            S = level_similarity(self.X[:, g], self.X[:, g], bool(self.ordered[g]), self.length)
            used[g] = float(self.alpha @ S @ self.alpha)
            room[g] = float((S * inverse).sum())
        weights = self.weights * used / np.maximum(room, 1e-12)
        if not np.all(np.isfinite(weights)) or weights.sum() <= 0:
            return None
        weights = np.maximum(weights, RELEVANCE_FLOOR * weights.mean())
        return weights * len(weights) / weights.sum()

    def predict_mean(self, C: np.ndarray) -> np.ndarray:
        """Posterior mean only (what coordinate ascent needs; no variance)."""
        levels = shared_levels(C, self.X, self.ordered, self.length, self.weights)
        return self.center + self.scale * (kernel(*levels, self.X.shape[1], self.pair) @ self.alpha)

    def predict(self, C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and SD of the (log-scale, better = larger) objective at gene rows ``C``."""
        levels = shared_levels(C, self.X, self.ordered, self.length, self.weights)
        Ks = kernel(*levels, self.X.shape[1], self.pair)
        mean = Ks @ self.alpha
        v = Ks @ self.inverse_root
        var = np.clip(1.0 - (v * v).sum(axis=1), 1e-12, None)
        return self.center + self.scale * mean, self.scale * np.sqrt(var)


def finite_mean(values: Sequence[float]) -> float:
    """Mean of the finite values (NaN when there is none: every measurement failed)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else math.nan


def log_scale(values: np.ndarray) -> np.ndarray:
    """``log(values)`` when all are positive (effects are relative), else the values."""
    return np.log(values) if np.all(values > 0) else values


def collapsed(values: np.ndarray, sign: float) -> np.ndarray:
    """Which of one objective's mean ``values`` are cliffs: failed (NaN), or beyond :data:`CLIFF_RATIO` of the
    median of the finite ones on the worse side (``sign`` -1: maximised, +1: minimised).

    >>> collapsed(np.array([100.0, 95.0, 20.0, np.nan]), -1.0).tolist()
    [False, False, True, True]
    """
    finite = np.isfinite(values)
    out = ~finite
    if finite.sum() >= 3:
        median = float(np.median(values[finite]))
        limit = CLIFF_RATIO * median if sign < 0 else median / CLIFF_RATIO
        out |= finite & ((values < limit) if sign < 0 else (values > limit))
    return out


def cliff_levels(G: np.ndarray, cliffs: np.ndarray) -> set[tuple[int, int]]:
    """``(gene, level)`` pairs to avoid: each cliff configuration's levels that no healthy configuration had
    (gene rows ``G``, ``cliffs`` their :func:`collapsed` mask). One measurement is enough.

    >>> sorted(cliff_levels(np.array([[0, 0], [1, 0], [1, 1]]), np.array([False, False, True])))
    [(1, 1)]
    """
    healthy = {(g, int(level)) for row in G[~cliffs] for g, level in enumerate(row)}
    return {(g, int(level)) for row in G[cliffs] for g, level in enumerate(row) if (g, int(level)) not in healthy}


def avoids(C: np.ndarray, excluded: set[tuple[int, int]]) -> np.ndarray:
    """Which gene rows of ``C`` have none of the ``excluded`` ``(gene, level)`` pairs."""
    keep = np.ones(len(C), dtype=bool)
    for g, level in excluded:
        keep &= C[:, g] != level
    return keep


def maximin_rows(pool: np.ndarray, chosen: np.ndarray, size: int) -> list[int]:
    """Greedily pick ``size`` rows of ``pool`` each as far (Hamming) as possible from the ``chosen`` rows and the
    ones picked before: a space-filling design over the knobs.

    >>> maximin_rows(np.array([[0, 0], [0, 1], [1, 1]]), np.array([[0, 0]]), 1)
    [2]
    """
    picked: list[int] = []
    nearest = (np.full(len(pool), pool.shape[1] + 1.0) if not len(chosen)
               else (pool[:, None, :] != chosen[None, :, :]).sum(axis=2).min(axis=1).astype(float))
    for _ in range(min(size, len(pool))):
        i = int(np.argmax(nearest))
        if nearest[i] <= 0:
            break
        picked.append(i)
        nearest = np.minimum(nearest, (pool != pool[i]).sum(axis=1))
    return picked


class ModelSearch:
    """The ``model`` engine (see the module docstring); ``tunelab`` is the same with a race."""

    name = "model"
    race_share = 0.0
    #: whether the engine ends its search early to leave the race its measurements (:func:`race_budget`)
    races = False

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        self.space = settings.space
        self.ordered = ordered_genes(self.space)
        self.batch = int(settings.options.get("batch", 2))
        self.relevance = int(settings.options.get("relevance", RELEVANCE))
        levels = int((self.space.upper).sum())
        share = 0.15 if settings.initial else 0.3        # the screen's best levels are known: a smaller design
        default_initial = int(np.clip(round(share * settings.budget), 5, levels + 2))
        self.initial_size = int(settings.options.get("initial", default_initial))
        self.asks = 0
        self.pretold = 0                                 # measurements told before the first ask (a warm start)
        self.told: dict[tuple, tuple[dict[str, Any], list[Measurement]]] = {}
        self.asked: set[tuple[int, ...]] = set()      # gene rows of every configuration asked or told

    # ---- the contract --------------------------------------------------------------------------

    def ask(self, n: int | None = None) -> list[Candidate]:
        rng = np.random.default_rng([self.settings.seed, self.asks])
        self.asks += 1
        if self.asks == 1:      # configurations told before (a warm start) need no place in the design
            out = first_batch(self.settings)
            known = {self.genes(c.config) for c in out} | {self.genes(c) for c, _ in self.told.values()}
            out += self.space_filling(rng, max(0, self.initial_size - len(known)), known)
        else:
            fitted = self.fit(rng)
            if fitted is not None and self.search_done(fitted[0]):
                return []
            out = self.proposals(rng, n or self.batch, fitted)
        self.asked.update(self.genes(c.config) for c in out)
        return out

    def genes(self, config: Mapping[str, Any]) -> tuple[int, ...]:
        return tuple(int(g) for g in self.space.encode(config))

    def tell(self, candidate: Candidate, measurements: Sequence[Measurement]) -> None:
        if self.asks == 0:
            self.pretold += len(measurements) - len(self.told.get(config_key(candidate.config), ((), ()))[1])
        self.told[config_key(candidate.config)] = (dict(candidate.config), list(measurements))

    def state(self) -> dict[str, Any]:
        return {"asks": self.asks, **({"pretold": self.pretold} if self.pretold else {})}

    def restore(self, state: Mapping[str, Any], told: Sequence[tuple[Mapping[str, Any], Sequence[Measurement]]]) -> None:
        self.asks = int(state.get("asks", 0))
        self.pretold = int(state.get("pretold", 0))
        self.told = {config_key(c): (dict(c), list(m)) for c, m in told}
        self.asked = {self.genes(c) for c, _ in self.told.values()}

    def spent(self) -> int:
        """Measurements told since the first ask (the search's own)."""
        return sum(len(m) for _, m in self.told.values()) - self.pretold

    def search_done(self, model: InteractionModel) -> bool:
        """Whether the search should stop and leave the rest of its budget to the race (``tunelab`` only):
        within :func:`race_budget` of the budget (its noise is :meth:`noise_ratio`, times
        ``RACE_KNOBS / knobs`` past :data:`RACE_KNOBS` knobs), and only while the budget is not yet spent (a
        search continued with more budget searches on)."""
        if not self.races:
            return False
        spent, budget = self.spent(), self.settings.budget
        noise = min(self.noise_ratio(model), FULL_RACE_NOISE) * min(1.0, RACE_KNOBS / len(self.space.upper))
        return budget - race_budget(budget, noise) <= spent < budget

    def noise_ratio(self, model: InteractionModel) -> float:
        """The model's noise SD against the first objective's SESOI, both on the log scale (infinite, so a
        full race, when that scale does not apply: several objectives, non-positive values, an absolute SESOI)."""
        objective = self.settings.objectives[0]
        values = self.measured()[1][:, 0]
        values = values[np.isfinite(values)]
        if len(self.settings.objectives) > 1 or objective.sesoi_abs is not None or np.any(values <= 0) \
                or not objective.sesoi_pct:
            return math.inf
        return math.sqrt(model.noise) * model.scale / math.log1p(objective.sesoi_pct / 100)

    def leaders(self, k: int) -> list[dict[str, Any]]:
        """The ``k`` configurations with the best predicted mean (measured or not; never a cliff's level)."""
        fitted = self.fit(np.random.default_rng([self.settings.seed, 10_000 + self.asks]))
        if fitted is None:
            return []
        model, C = fitted
        mean, _ = model.predict(C)
        mean = np.where(avoids(C, self.cliffs()), mean, -np.inf)
        return [self.space.decode(C[i]) for i in np.argsort(-mean, kind="stable")[:k] if np.isfinite(mean[i])]

    # ---- proposals -----------------------------------------------------------------------------

    def balanced_rows(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` random gene rows whose levels are balanced per knob (each level equally often)."""
        columns = []
        for upper in self.space.upper:
            reps = np.resize(rng.permutation(np.arange(upper + 1)), size)
            columns.append(rng.permutation(reps))
        return np.stack(columns, axis=1)

    def space_filling(self, rng: np.random.Generator, size: int, taken: set[tuple]) -> list[Candidate]:
        """``size`` configurations far from each other and from ``taken`` (maximin over a level-balanced pool)."""
        if size <= 0:
            return []
        pool = np.unique(self.balanced_rows(rng, max(8 * size, 64)), axis=0)
        known = taken | self.asked
        pool = pool[[tuple(int(g) for g in row) not in known for row in pool]]
        pool = pool[rng.permutation(len(pool))]
        width = pool.shape[1]
        chosen = np.array(sorted(taken), dtype=int).reshape(-1, width) if taken else np.empty((0, width))
        return [Candidate(self.space.decode(pool[i]), "design") for i in maximin_rows(pool, chosen, size)]

    def balanced_design(self, rng: np.random.Generator, size: int, taken: set[tuple]) -> list[Candidate]:
        """``size`` random configurations whose levels are balanced per knob (none with a cliff's level)."""
        out: list[Candidate] = []
        if size <= 0:
            return out
        excluded = self.cliffs()
        for genes in self.balanced_rows(rng, size * 2):
            row = tuple(int(g) for g in genes)
            if row not in taken and row not in self.asked and avoids(genes[None, :], excluded)[0]:
                taken.add(row)
                out.append(Candidate(self.space.decode(genes), "design"))
            if len(out) >= size:
                break
        return out

    def measured(self) -> tuple[np.ndarray, np.ndarray]:
        """Gene rows of the told configurations and the mean of each objective (NaN: every measurement failed)."""
        rows, values = [], []
        for config, measurements in self.told.values():
            rows.append(self.space.encode(config))
            values.append([finite_mean([m.get(o.name, math.nan) for m in measurements])
                           for o in self.settings.objectives])
        return np.array(rows, dtype=int).reshape(len(rows), -1), np.array(values, dtype=float).reshape(len(rows), -1)

    def cliffs(self) -> set[tuple[int, int]]:
        """The ``(gene, level)`` pairs never to propose again (:func:`cliff_levels` of the first objective)."""
        G, V = self.measured()
        if not len(G):
            return set()
        return cliff_levels(G, collapsed(V[:, 0], self.settings.objectives[0].sign))

    def targets(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray] | None:
        """Gene rows and the value to model (log scale, larger is better; several objectives: ParEGO).
        A cliff's value is raised to the cliff's limit, so one collapse does not bend the model elsewhere."""
        G, V = self.measured()
        if len(G) < 3:
            return None
        columns = []
        for j, o in enumerate(self.settings.objectives):
            v = V[:, j]
            finite = np.isfinite(v)
            if not finite.any():
                return None
            col = np.full(len(v), math.nan)
            col[finite] = -o.sign * log_scale(v[finite])      # larger is better
            if np.all(v[finite] > 0) and finite.sum() >= 3:
                col = np.where(np.isfinite(col), np.maximum(col, np.nanmedian(col) + math.log(CLIFF_RATIO)), col)
            worst = np.nanmin(col) - 3 * (np.nanstd(col) or 1.0)
            columns.append(np.where(np.isfinite(col), col, worst))   # a failed configuration reads as very bad
        if len(columns) == 1:
            return G.astype(float), columns[0]
        F = np.column_stack(columns)
        F = (F - F.min(axis=0)) / np.where(np.ptp(F, axis=0) > 0, np.ptp(F, axis=0), 1.0)   # 1 = best
        w = rng.dirichlet(np.ones(F.shape[1]))
        loss = (w * (1.0 - F)).max(axis=1) + 0.05 * (w * (1.0 - F)).sum(axis=1)
        return G.astype(float), -loss

    def candidates(self, model: InteractionModel, rng: np.random.Generator) -> np.ndarray:
        """Every configuration's genes, or (large spaces) a random pool improved by coordinate ascent;
        none with a cliff's level."""
        excluded = self.cliffs()
        if self.space.size <= ENUMERATE_LIMIT:
            grids = np.meshgrid(*[np.arange(u + 1) for u in self.space.upper], indexing="ij")
            C = np.stack([g.ravel() for g in grids], axis=1).astype(float)
            return C[avoids(C, excluded)]
        pool = self.space.random_genes(rng, POOL_SIZE).astype(float)
        pool = np.vstack([pool[avoids(pool, excluded)], model.X])
        mean, sd = model.predict(pool)
        starts = pool[np.argsort(-mean)[:2]].tolist() + pool[np.argsort(-(mean + sd))[:1]].tolist()
        climbed = [self.climb(model, np.array(s), excluded) for s in starts]
        return np.unique(np.vstack([pool, *climbed]), axis=0)

    def climb(self, model: InteractionModel, genes: np.ndarray, excluded: set[tuple[int, int]] = frozenset(),
              sweeps: int = 4) -> np.ndarray:
        """Coordinate ascent on the predicted mean from ``genes`` (every level of one knob at a time, never
        an ``excluded`` level)."""
        genes = genes.copy()
        for _ in range(sweeps):
            changed = False
            for g, upper in enumerate(self.space.upper):
                trial = np.repeat(genes[None, :], upper + 1, axis=0)
                trial[:, g] = np.arange(upper + 1)
                predicted = np.where(avoids(trial, excluded), model.predict_mean(trial), -np.inf)
                best = float(np.argmax(predicted))
                if best != genes[g] and np.isfinite(predicted[int(best)]):
                    genes[g], changed = best, True
            if not changed:
                break
        return genes

    def fit(self, rng: np.random.Generator) -> tuple[InteractionModel, np.ndarray] | None:
        data = self.targets(rng)
        if data is None:
            return None
        try:
            model = InteractionModel(data[0], data[1], self.ordered, pair_shares(len(data[1]), len(self.space.upper)),
                                     self.relevance)
        except np.linalg.LinAlgError:       # eigh did not converge: propose without the model this time
            return None
        return model, self.candidates(model, rng)

    def proposals(self, rng: np.random.Generator, n: int,
                  fitted: tuple[InteractionModel, np.ndarray] | None) -> list[Candidate]:
        """The best predicted unmeasured configuration, then the best by expected improvement."""
        if fitted is None:
            return self.balanced_design(rng, n, set())
        model, C = fitted
        fresh = np.array([tuple(int(g) for g in row) not in self.asked for row in C], dtype=bool)
        if not fresh.any():
            return []
        from scipy.stats import norm   # scipy.stats takes ~1 s to import: only when the model proposes

        mean, sd = model.predict(C)
        incumbent = float(np.max(model.predict(model.X)[0]))
        z = (mean - incumbent) / sd
        ei = sd * (z * norm.cdf(z) + norm.pdf(z))
        out: list[Candidate] = []
        for score, origin in ((mean, "model"), *((ei, "ei"),) * max(0, n - 1)):
            masked = np.where(fresh, score, -np.inf)
            i = int(np.argmax(masked))
            if not np.isfinite(masked[i]):
                break
            fresh[i] = False
            out.append(Candidate(self.space.decode(C[i]), origin))
        return out


class TunelabSearch(ModelSearch):
    """The default engine: :class:`ModelSearch` that ends its search early to leave the race its share
    (:func:`race_budget`: by the budget and the noise the model sees), whose leaders the driver races."""

    name = "tunelab"
    races = True
    #: the race's share of a continued search's extra measurements (the engine, built with the first budget,
    #: does not see them; the driver reserves this share for it)
    continued_race_share = RACE_SHARE


ENGINES.add("model", ModelSearch)
ENGINES.add("tunelab", TunelabSearch)
