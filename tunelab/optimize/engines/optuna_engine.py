"""``tpe``, ``gp``, ``cmaes``, ``optuna-nsga2``: Optuna's samplers as tunelab search engines.

Optuna is used as a library: its samplers propose, tunelab's store stays the record. The engine's
memory is the told history (configuration -> pooled mean of each objective), kept in the order the
configurations were first asked. Every :meth:`OptunaRefiner.ask` builds a fresh in-memory study,
adds that history as finished trials (``optuna.trial.create_trial``), makes the sampler with a seed
drawn from ``(seed, ask number)`` and asks it. Hence

* a configuration told again after re-measurement is seen with its new mean (Optuna's trials are
  immutable; the study is rebuilt rather than edited),
* the same settings and tells give the same asks, and a restored engine (:meth:`~OptunaRefiner.state`
  is plain JSON: the ask count, the ask order and NSGA-II's generation numbers; no pickle) continues
  exactly as the uninterrupted one, because the uninterrupted engine rebuilds in the same way.

Encoding. Each gene of the :class:`~tunelab.optimize.space.SearchSpace` is one Optuna parameter
holding the gene's index. Ordered genes (integer ranges, triplet components, and choices of
increasing numbers) are :class:`~optuna.distributions.IntDistribution` ``0..n-1`` so TPE's
kernels, the GP's length scales and CMA-ES exploit the order (a log-scale range is already
log-spaced in its index); other choices (enum names, bools, candidate triplets) are
:class:`~optuna.distributions.CategoricalDistribution` of their indices. ``space.decode`` turns
the indices back into typed values (int, str, bool, tuple).

Objectives. The study's directions are the metrics' directions and each finished trial holds the
pooled means (over the finite measurements, :func:`~tunelab.optimize.engines.base.objective_vector`).
A configuration with an objective that never measured (every measurement NaN) is a ``FAIL`` trial:
all four samplers leave failed trials out of their models, whereas a penalty value would wreck the
GP's standardisation of the values; the configuration is still never asked again (below).

Duplicates. A proposal equal to a configuration already told or asked (same decoded config) is
left RUNNING, so the batch-aware samplers steer away from it (TPE's constant liar, the GP's q-batch
acquisition), and the sampler is asked again, at most ``duplicate_retries`` times per candidate
(default 10; 3 for the GP, whose every proposal is a full acquisition optimisation); then a random
configuration not yet seen is asked instead (origin ``"random"``).

The first ask returns the baseline, then ``settings.initial`` (as enqueued trials, so the samplers
see them), then ``n`` proposals. Options (``settings.options``, over the defaults):

============= =============================================================================
engine        sampler and options
============= =============================================================================
tpe           ``TPESampler(multivariate=True, constant_liar=True)``; ``n_startup_trials``
              (random proposals before the model: ``max(1, min(10, budget // 4))``),
              ``n_ei_candidates`` (24), ``batch_size``
gp            ``GPSampler`` (Matern-5/2 GP, logEI; q-batch logEI for the rest of a batch);
              ``n_startup_trials`` (as tpe), ``batch_size``, ``deterministic_objective`` (true);
              needs PyTorch, the optional extra ``pip install 'tunelab[gp]'`` (:func:`check_installed`)
cmaes         ``CmaEsSampler`` over the ordered genes; ``popsize`` (batch; CMA-ES's default
              ``4 + 3 ln d``), ``n_startup_trials``; see below
optuna-nsga2  ``NSGAIISampler``; ``population_size`` (batch; 20), ``mutation_prob``,
              ``crossover_prob`` (0.9), ``swapping_prob`` (0.5); several objectives
============= =============================================================================

``batch_size`` (tpe, gp) defaults to ``max(1, min(8, budget // 10))``; ``duplicate_retries`` applies
to all; an option the engine does not know is refused (:data:`OPTIONS`). The GP treats the pooled means as exact (``deterministic_objective``): the search measures a
configuration once and re-measuring is the race's job, while a noise-aware GP mostly proposes
configurations it has seen (23 of 27 proposals at 200 of 512 told), each a full acquisition
optimisation wasted; ``deterministic_objective: false`` restores the noise model. CMA-ES: Optuna's ``CmaEsSampler`` keeps its evolving state (mean, covariance, step size) as a
pickle in the trials, which tunelab does not store (stores are untrusted input). So each ask
restarts it warm from the history instead (Optuna's warm-starting CMA-ES, ``source_trials``: mean
and covariance of the best tenth of the told configurations, once 10 are told; before that from the
centre of the space): an estimation-of-distribution search without CMA's step-size path. CMA-ES
handles only ordered genes; categorical genes (enums, bools) fall back to an independent sampler,
here a univariate TPE (Optuna's default would be uniformly random, which never learns them).

Examples
--------
>>> from tunelab.model import Metric
>>> from tunelab.optimize.space import space_from_spec
>>> space = space_from_spec({"n": {"kind": "int", "low": 1, "high": 64, "scale": "log", "n": 7},
...                          "cc": {"kind": "choice", "values": ["cubic", "bbr"]}})
>>> engine = ENGINES.get("tpe")(EngineSettings(space, (Metric("qps", "maximize"),), seed=1,
...                                           baseline={"n": 8, "cc": "cubic"}))
>>> batch = engine.ask(2)
>>> batch[0]
Candidate(config={'n': 8, 'cc': 'cubic'}, origin='baseline')
>>> for c in batch:
...     engine.tell(c, [{"qps": float(c.config["n"])}])
>>> engine.state()["ask_count"]
1
"""
from __future__ import annotations

import contextlib
import importlib.util
import math
import warnings
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from tunelab.model import Metric
from tunelab.optimize.engines.base import (ENGINES, FAILED_PENALTY, Candidate, EngineSettings, Measurement, RefineError,
                                           first_batch, objective_vector, typed_config)
from tunelab.optimize.space import ChoiceDimension, SearchSpace, TripletDimension

if TYPE_CHECKING:  # pragma: no cover
    import optuna

#: the engines this module registers, and the Optuna sampler behind each
SAMPLERS = {"tpe": "TPESampler", "gp": "GPSampler", "cmaes": "CmaEsSampler", "optuna-nsga2": "NSGAIISampler"}
#: engines needing a module outside the core install: engine -> (module, pip extra that installs it)
EXTRAS = {"gp": ("torch", "gp")}

#: where Optuna's genetic samplers keep a trial's generation (a system attribute; restored into rebuilt trials)
GA_GENERATION_KEY = "NSGAIISampler:generation"

#: optuna seeds stay below 2**30 (the GP derives further seeds by adding small offsets)
_SEED_RANGE = 1 << 30

#: spaces up to this many configurations are enumerated to find an unseen one once random draws keep missing
_ENUMERABLE = 100_000

#: told configurations CMA-ES needs to warm-start from the best tenth (Optuna's gamma = 0.1)
_WARM_START_MIN = 10


def gene_names(space: SearchSpace) -> list[str]:
    """One Optuna parameter name per gene: the knob id, ``id:i`` for a triplet's components.

    >>> from tunelab.optimize.space import space_from_spec
    >>> gene_names(space_from_spec({"r": {"kind": "triplet", "components": [{"low": 1, "high": 3}] * 3}}))
    ['r:0', 'r:1', 'r:2']
    """
    names: list[str] = []
    for dim in space.dimensions:
        names.extend([f"{dim.id}:{i}" for i in range(3)] if isinstance(dim, TripletDimension) else [dim.id])
    if len(set(names)) != len(names):
        raise RefineError(f"knob ids {space.ids} give clashing Optuna parameter names {names}; rename a knob")
    return names


def is_ordered(dim: Any) -> bool:
    """Whether a dimension's indices are ordered (integer ranges, triplets, increasing numeric choices).

    >>> from tunelab.optimize.space import ChoiceDimension
    >>> is_ordered(ChoiceDimension("a", (16, 128, 4096))), is_ordered(ChoiceDimension("b", (False, True)))
    (True, False)
    """
    if not isinstance(dim, ChoiceDimension):
        return True
    values = dim.values
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return numeric and all(a < b for a, b in zip(values, values[1:]))


def optuna_distributions(space: SearchSpace) -> dict[str, "optuna.distributions.BaseDistribution"]:
    """The Optuna distribution of each gene: ``IntDistribution(0, n-1)`` for ordered genes,
    ``CategoricalDistribution(range(n))`` for the others (see the module docstring).

    >>> from tunelab.optimize.space import space_from_spec
    >>> space = space_from_spec({"n": {"kind": "int", "low": 1, "high": 9, "step": 4},
    ...                          "b": {"kind": "choice", "values": [True, False]}})
    >>> optuna_distributions(space)
    {'n': IntDistribution(high=2, log=False, low=0, step=1), 'b': CategoricalDistribution(choices=(0, 1))}
    """
    from optuna.distributions import CategoricalDistribution, IntDistribution

    out: dict[str, Any] = {}
    names = iter(gene_names(space))
    for dim in space.dimensions:
        for size in dim.sizes:
            name = next(names)
            out[name] = IntDistribution(0, size - 1) if is_ordered(dim) else CategoricalDistribution(tuple(range(size)))
    return out


def derived_seed(seed: int, ask: int) -> int:
    """The sampler's seed for ask number ``ask`` (deterministic, below 2**30).

    >>> derived_seed(0, 3) == derived_seed(0, 3) != derived_seed(0, 4)
    True
    """
    return int(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, int(ask)]).generate_state(1)[0]) % _SEED_RANGE


def pooled_values(measurements: Sequence[Measurement], objectives: Sequence[Metric]) -> list[float] | None:
    """The pooled mean of each objective over its finite values; ``None`` when one has none (a FAIL trial).

    >>> from tunelab.model import Metric
    >>> pooled_values([{"qps": 10.0}, {"qps": float("nan")}, {"qps": 12.0}], [Metric("qps", "maximize")])
    [11.0]
    >>> pooled_values([{"qps": float("nan")}], [Metric("qps", "maximize")]) is None
    True
    """
    vector = objective_vector(measurements, objectives)
    if np.any(vector == FAILED_PENALTY):
        return None
    return [float(v) * o.sign for v, o in zip(vector, objectives)]


def missing_extra(name: str) -> str | None:
    """Why engine ``name`` cannot run here (a module of an optional extra is not installed), or ``None``.

    >>> missing_extra("tpe") is None   # needs nothing beyond the core install
    True
    """
    need = EXTRAS.get(name)
    if need is None or importlib.util.find_spec(need[0]) is not None:
        return None
    module, extra = need
    return (f"the {name} engine needs {module}, which is not installed: pip install 'tunelab[{extra}]' "
            "(or choose another engine, e.g. --engine tpe)")


def check_installed(name: str) -> None:
    """Refuse engine ``name`` in one :class:`RefineError` line when :func:`missing_extra` says why."""
    reason = missing_extra(name)
    if reason is not None:
        raise RefineError(reason)


def _quiet_optuna() -> Any:
    """Import optuna with its logging at warnings only (lazily: the CLI starts without it)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def _option(settings: EngineSettings, key: str, default: Any, kind: type = int, minimum: float | None = None) -> Any:
    """Option ``key`` as ``kind`` (``bool`` takes true/false/1/0/yes/no), or ``default`` when not given."""
    value = settings.options.get(key)
    if value is None:
        return default
    try:
        if kind is bool:
            text = str(value).strip().lower()
            if text not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(value)
            return text in ("true", "1", "yes")
        out = kind(value)
    except (TypeError, ValueError):
        raise RefineError(f"option {key}={value!r} is not a valid {kind.__name__}; e.g. --option {key}="
                          f"{str(default).lower() if kind is bool else default}") from None
    if minimum is not None and out < minimum:
        raise RefineError(f"option {key} must be at least {minimum}, got {value!r}")
    return out


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """PyTorch on one intra-op thread while the GP proposes (restored after).

    Optuna limits the threads this way only around its continuous optimisers; tunelab's genes are
    all discrete, and the GP's discrete local search issues many tiny tensor operations whose
    threads fight any other load for the cores: on this 2-core machine under a load of 4, one
    thread proposes in 0.3-0.5 s what two threads take 3-4 s for (no difference when idle).
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _startup(settings: EngineSettings) -> int:
    return _option(settings, "n_startup_trials", max(1, min(10, settings.budget // 4)), minimum=0)


def _tpe(settings: EngineSettings, seed: int, told: list) -> Any:
    optuna = _quiet_optuna()
    return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True,
                                      n_startup_trials=_startup(settings),
                                      n_ei_candidates=_option(settings, "n_ei_candidates", 24, minimum=1))


def _gp(settings: EngineSettings, seed: int, told: list) -> Any:
    optuna = _quiet_optuna()
    deterministic = _option(settings, "deterministic_objective", True, bool)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=_startup(settings),
                                         deterministic_objective=deterministic)


def _cmaes(settings: EngineSettings, seed: int, told: list) -> Any:
    optuna = _quiet_optuna()
    from optuna.distributions import IntDistribution

    ordered = {k: d for k, d in optuna_distributions(settings.space).items()
               if isinstance(d, IntDistribution) and not d.single()}
    complete = [t for t in told if t.state == optuna.trial.TrialState.COMPLETE]
    source = None
    if ordered and len(complete) >= _WARM_START_MIN:
        # warm start from the history: source trials must hold exactly the genes CMA-ES searches
        source = [optuna.trial.create_trial(params={k: t.params[k] for k in ordered}, distributions=ordered,
                                            value=t.value) for t in complete]
    independent = optuna.samplers.TPESampler(seed=seed, multivariate=False, constant_liar=True,
                                             n_startup_trials=_startup(settings))
    return optuna.samplers.CmaEsSampler(seed=seed, n_startup_trials=_startup(settings), source_trials=source,
                                        independent_sampler=independent, warn_independent_sampling=False,
                                        popsize=_option(settings, "popsize", None, minimum=2))


def _nsga2(settings: EngineSettings, seed: int, told: list) -> Any:
    optuna = _quiet_optuna()
    return optuna.samplers.NSGAIISampler(population_size=_population(settings), seed=seed,
                                         mutation_prob=_option(settings, "mutation_prob", None, float, 0.0),
                                         crossover_prob=_option(settings, "crossover_prob", 0.9, float, 0.0),
                                         swapping_prob=_option(settings, "swapping_prob", 0.5, float, 0.0))


def _population(settings: EngineSettings) -> int:
    return _option(settings, "population_size", 20, minimum=2)


_MAKERS: dict[str, Callable[[EngineSettings, int, list], Any]] = {
    "tpe": _tpe, "gp": _gp, "cmaes": _cmaes, "optuna-nsga2": _nsga2}

#: the options each engine takes: name -> (type, minimum)
OPTIONS: dict[str, dict[str, tuple[type, float | None]]] = {
    "tpe": {"n_startup_trials": (int, 0), "n_ei_candidates": (int, 1), "batch_size": (int, 1)},
    "gp": {"n_startup_trials": (int, 0), "batch_size": (int, 1), "deterministic_objective": (bool, None)},
    "cmaes": {"n_startup_trials": (int, 0), "popsize": (int, 2)},
    "optuna-nsga2": {"population_size": (int, 2), "mutation_prob": (float, 0.0), "crossover_prob": (float, 0.0),
                     "swapping_prob": (float, 0.0)},
}


def check_options(name: str, settings: EngineSettings) -> None:
    """Refuse an option engine ``name`` does not know or a value of the wrong type (one clear line)."""
    known = {**OPTIONS[name], "duplicate_retries": (int, 0)}
    for key in settings.options:
        if key not in known:
            raise RefineError(f"{name} has no option {key!r}; its options are {', '.join(sorted(known))}")
        kind, minimum = known[key]
        _option(settings, key, None, kind, minimum)


def _natural_batch(name: str, settings: EngineSettings) -> int:
    """Candidates per ask when the driver asks for the engine's natural batch."""
    if name == "optuna-nsga2":
        return _population(settings)
    if name == "cmaes":   # CMA-ES's own default population over the genes it searches
        ordered = sum(1 for d, dim in zip(settings.space.upper, _gene_dims(settings.space)) if d > 0 and is_ordered(dim))
        return _option(settings, "popsize", 4 + int(math.floor(3 * math.log(max(ordered, 1)))), minimum=2)
    return _option(settings, "batch_size", max(1, min(8, settings.budget // 10)), minimum=1)


def _gene_dims(space: SearchSpace) -> list[Any]:
    """The dimension of each gene (a triplet's three genes share one)."""
    return [dim for dim in space.dimensions for _ in dim.sizes]


class OptunaRefiner:
    """One of Optuna's samplers behind tunelab's ask/tell contract (see the module docstring).

    Parameters
    ----------
    name : ``"tpe"``, ``"gp"``, ``"cmaes"`` or ``"optuna-nsga2"``
    settings : the engine settings (space, objectives, seed, budget, baseline, initial, options)
    """

    def __init__(self, name: str, settings: EngineSettings) -> None:
        if name not in _MAKERS:
            raise RefineError(f"no Optuna engine named {name!r}; known: {', '.join(SAMPLERS)}")
        if not settings.objectives:
            raise RefineError(f"{name}: give at least one objective, e.g. qps:max")
        if name == "cmaes" and len(settings.objectives) > 1:
            raise RefineError("cmaes optimises one objective; give one, or use optuna-nsga2, tpe or gp "
                              "for several")
        check_installed(name)
        check_options(name, settings)
        self.name = name
        self.settings = settings
        self.space = settings.space
        self.names = gene_names(settings.space)
        self.batch = _natural_batch(name, settings)
        self.retries = _option(settings, "duplicate_retries", 3 if name == "gp" else 10, minimum=0)
        self.ask_count = 0
        self.order: list[tuple[int, ...]] = []            # genes of each config, in the order first asked/told
        self.values: dict[tuple[int, ...], list[float] | None] = {}  # genes -> pooled means (None: failed)
        self.generation: dict[tuple[int, ...], int] = {}  # genes -> NSGA-II generation of its trial
        self._ordered: set[tuple[int, ...]] = set()
        self._dists: dict[str, Any] | None = None

    # --- the contract -------------------------------------------------------------------------------
    def ask(self, n: int | None = None) -> list[Candidate]:
        """The baseline and initial configurations (first ask), then ``n`` proposals of the sampler."""
        optuna = _quiet_optuna()
        wanted = self.batch if n is None else int(n)
        seed = derived_seed(self.settings.seed, self.ask_count)
        fixed = first_batch(self.settings) if self.ask_count == 0 else []
        self.ask_count += 1
        told = self._trials()
        threads = one_torch_thread() if self.name == "gp" else contextlib.nullcontext()
        with warnings.catch_warnings(), threads:
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = _MAKERS[self.name](self.settings, seed, told)
            study = optuna.create_study(directions=[o.direction for o in self.settings.objectives], sampler=sampler)
            study.add_trials(told)
            return self._propose(study, sampler, fixed, wanted, seed)

    def tell(self, candidate: Candidate, measurements: Sequence[Measurement]) -> None:
        """Record the pooled means of every measurement of ``candidate``'s configuration so far."""
        genes = self._genes(candidate.config)
        self._remember(genes)
        self.values[genes] = pooled_values(measurements, self.settings.objectives)

    def state(self) -> dict[str, Any]:
        """``{"ask_count", "order": [genes, ...], "generation": [int | None, ...]}`` (plain JSON)."""
        return {"ask_count": self.ask_count, "order": [list(g) for g in self.order],
                "generation": [self.generation.get(g) for g in self.order]}

    def restore(self, state: Mapping[str, Any],
                told: Sequence[tuple[Mapping[str, Any], Sequence[Measurement]]]) -> None:
        """Continue from ``state`` and the ``(config, measurements)`` told so far."""
        try:
            self.ask_count = int(state.get("ask_count", 0))
            order = [tuple(int(x) for x in g) for g in state.get("order", [])]
            generations = [None if g is None else int(g) for g in state.get("generation", [None] * len(order))]
            upper = self.space.upper.tolist()
            if any(len(g) != len(upper) or not all(0 <= x <= u for x, u in zip(g, upper)) for g in order):
                raise ValueError("a configuration is off this search space")
        except (TypeError, ValueError) as exc:
            raise RefineError(f"{self.name}: the stored engine state is malformed ({exc}); "
                              "start the search anew") from None
        self.order, self._ordered = [], set()
        for genes in order:
            self._remember(genes)
        self.generation = {g: gen for g, gen in zip(order, generations) if gen is not None}
        self.values = {}
        for config, measurements in told:
            self.tell(Candidate(dict(config)), measurements)

    # --- helpers ------------------------------------------------------------------------------------
    @property
    def distributions(self) -> dict[str, Any]:
        """The Optuna distribution of each gene (:func:`optuna_distributions`, made once)."""
        if self._dists is None:
            self._dists = optuna_distributions(self.space)
        return self._dists

    def _genes(self, config: Mapping[str, Any]) -> tuple[int, ...]:
        """The canonical gene vector of a configuration (decoded first, so sorted triplets compare equal)."""
        return tuple(int(x) for x in self.space.encode(typed_config(self.space, config)))

    def _trials(self) -> list[Any]:
        """The told history as finished Optuna trials, in the order first asked."""
        optuna = _quiet_optuna()
        dists = self.distributions
        trials = []
        for genes in self.order:
            if genes not in self.values:
                continue
            values = self.values[genes]
            attrs = {GA_GENERATION_KEY: self.generation[genes]} if genes in self.generation else {}
            state = optuna.trial.TrialState.COMPLETE if values is not None else optuna.trial.TrialState.FAIL
            trials.append(optuna.trial.create_trial(state=state, values=values, distributions=dists,
                                                    params=dict(zip(self.names, genes)), system_attrs=attrs))
        return trials

    def _ask_trial(self, study: Any, sampler: Any, params: Mapping[str, int] | None = None
                   ) -> tuple[tuple[int, ...], int | None]:
        """Ask one trial (``params``: an enqueued, fixed one): its canonical genes and, for a genetic
        sampler, its generation (Optuna tags sampled trials itself, this tags enqueued ones too)."""
        if params is not None:
            study.enqueue_trial(dict(params), skip_if_exists=False)
        trial = study.ask(self.distributions)
        genes = self._genes(self.space.decode([trial.params[k] for k in self.names]))
        tag = getattr(sampler, "get_trial_generation", None)
        generation = int(tag(study, study.get_trials(deepcopy=False)[-1])) if tag is not None else None
        return genes, generation

    def _accept(self, genes: tuple[int, ...], generation: int | None, seen: set[tuple[int, ...]]) -> None:
        seen.add(genes)
        self._remember(genes)
        if generation is not None:
            self.generation[genes] = generation

    def _propose(self, study: Any, sampler: Any, fixed: list[Candidate], wanted: int, seed: int) -> list[Candidate]:
        seen = set(self.order)
        out: list[Candidate] = []
        for candidate in fixed:
            self._accept(*self._ask_trial(study, sampler, dict(zip(self.names, self._genes(candidate.config)))), seen)
            out.append(candidate)
        rng = np.random.default_rng([self.settings.seed & 0xFFFFFFFF, seed])
        made = 0
        while made < wanted and len(seen) < self.space.size:
            origin = self.name
            for _ in range(self.retries + 1):
                genes, generation = self._ask_trial(study, sampler)
                if genes not in seen:
                    break
            else:  # the sampler keeps proposing seen configurations: ask a random unseen one instead
                unseen = self._random_unseen(rng, seen)
                if unseen is None:
                    break
                genes, generation = self._ask_trial(study, sampler, dict(zip(self.names, unseen)))
                origin = "random"
            self._accept(genes, generation, seen)
            made += 1
            out.append(Candidate(self.space.decode(genes), origin))
        return out

    def _remember(self, genes: tuple[int, ...]) -> None:
        """Put ``genes`` in the ask order (once: the order of first ask, or first tell if never asked)."""
        if genes not in self._ordered:
            self._ordered.add(genes)
            self.order.append(genes)

    def _random_unseen(self, rng: np.random.Generator, seen: set[tuple[int, ...]]) -> tuple[int, ...] | None:
        """A random configuration not in ``seen`` (None when every one is: small spaces are enumerated)."""
        for row in self.space.random_genes(rng, 200):
            genes = self._genes(self.space.decode(row))
            if genes not in seen:
                return genes
        if self.space.size > _ENUMERABLE:
            return None
        unseen = sorted({self._genes(c) for c in self.space.all_configs(_ENUMERABLE)} - seen)
        return unseen[int(rng.integers(len(unseen)))] if unseen else None


def _factory(name: str) -> Callable[[EngineSettings], OptunaRefiner]:
    def make(settings: EngineSettings) -> OptunaRefiner:
        return OptunaRefiner(name, settings)

    make.__name__ = make.__qualname__ = f"optuna_{name.replace('-', '_')}"
    make.check_installed = lambda: check_installed(name)   # type: ignore[attr-defined]  (driver.check_engine)
    make.__doc__ = f"The ``{name}`` engine: Optuna's {SAMPLERS[name]} (see :mod:`{__name__}`)."
    return make


for _name in SAMPLERS:
    ENGINES.add(_name, _factory(_name))
