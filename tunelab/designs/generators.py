"""Experimental designs, one registered generator per design type.

The pure, knob-agnostic builders come first (coded matrices in -1/+1, Hadamard matrices,
fractional-factorial word algebra, Latin hypercube samples and Morris trajectories from SALib);
the registered generators below map them onto a design's knob levels. Two-level designs code the
knob's **baseline as -1** and its other level as +1, so the all-(-1) row, when a design has one,
is the baseline configuration.

Examples
--------
>>> import numpy as np
>>> X = plackett_burman(7)
>>> X.shape, bool((X.T @ X == 8 * np.eye(7)).all())
((8, 7), True)
>>> ff = fractional_factorial(7, generators=["D=AB", "E=AC", "F=BC", "G=ABC"])
>>> ff.runs, ff.resolution
(8, 3)
"""
from __future__ import annotations

import itertools
import math
import string
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import numpy as np

from tunelab.errors import DesignError
from tunelab.model import DesignType
from tunelab.registry import Registry

if TYPE_CHECKING:
    from tunelab.designs.schema import Design, _Context

# pyDOE3 and SALib are imported inside the functions that use them: together they take about a
# second to import, and `tunelab --help` (which imports this package) must not pay for it.

#: factor letters of fractional factorials (I is skipped: it denotes the identity)
LETTERS = "ABCDEFGHJKLMNOPQRSTUVWXYZ"
#: largest Hadamard order we construct (PB designs beyond this are impractical to run anyway)
MAX_RUNS = 256
#: fractional factorials enumerate 2**p defining words; beyond this use plackett_burman
MAX_GENERATORS = 20
#: largest fractional factorial we build (default generators search up to this many runs)
MAX_FRACTIONAL_RUNS = 4096
#: Latin hypercubes drawn (from the design's seed) for one whose knobs are not confounded
MAX_LHS_DRAWS = 100


# --------------------------------------------------------------------------------------------
# Hadamard matrices and Plackett-Burman designs


def _is_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, math.isqrt(n) + 1))


def _quadratic_character(q: int) -> np.ndarray:
    """chi(x) for x in 0..q-1 over the prime field GF(q): 0, +1 (residue) or -1."""
    residues = {(x * x) % q for x in range(1, q)}
    return np.array([0] + [1 if x in residues else -1 for x in range(1, q)])


def _jacobsthal(q: int) -> np.ndarray:
    chi = _quadratic_character(q)
    idx = np.arange(q)
    return chi[(idx[None, :] - idx[:, None]) % q]


def _paley_1(q: int) -> np.ndarray:
    """Hadamard matrix of order q+1 for a prime q = 3 (mod 4) (Paley's first construction)."""
    n = q + 1
    s = np.zeros((n, n), dtype=int)
    s[0, 1:] = 1
    s[1:, 0] = -1
    s[1:, 1:] = _jacobsthal(q)
    return s + np.eye(n, dtype=int)


def _paley_2(q: int) -> np.ndarray:
    """Hadamard matrix of order 2(q+1) for a prime q = 1 (mod 4) (Paley's second construction)."""
    n = q + 1
    c = np.zeros((n, n), dtype=int)
    c[0, 1:] = 1
    c[1:, 0] = 1
    c[1:, 1:] = _jacobsthal(q)
    return np.kron(c, np.array([[1, -1], [-1, -1]])) + np.kron(np.eye(n, dtype=int), np.array([[1, 1], [1, -1]]))


def _pydoe3_size(n: int) -> bool:
    """pyDOE3.pbdesign builds orders 2**e, 12 * 2**e and 20 * 2**e."""
    for base in (1, 12, 20):
        if n % base == 0 and (n // base) & (n // base - 1) == 0:
            return True
    return False


def _hadamard_raw(n: int) -> np.ndarray | None:
    if n == 1:
        return np.ones((1, 1), dtype=int)
    if n == 2:
        return np.array([[1, 1], [1, -1]])
    if n % 4:
        return None
    if _pydoe3_size(n):
        import pyDOE3

        design = pyDOE3.pbdesign(n - 1).astype(int)
        return np.hstack([np.ones((n, 1), dtype=int), design])
    if _is_prime(n - 1) and (n - 1) % 4 == 3:
        return _paley_1(n - 1)
    if _is_prime(n // 2 - 1) and (n // 2 - 1) % 4 == 1:
        return _paley_2(n // 2 - 1)
    half = _hadamard_raw(n // 2) if n % 8 == 0 else None
    if half is not None:
        return np.block([[half, half], [half, -half]])
    return None


def hadamard(n: int) -> np.ndarray:
    """A normalised Hadamard matrix of order ``n`` (first column all +1), verified ``H Hᵀ = n I``.

    Orders 2**e, 12·2**e and 20·2**e come from pyDOE3; others from Paley's constructions
    (e.g. 28 = 2·(13+1), 44 = 43+1) and Sylvester doubling. Unreachable orders raise DesignError.
    """
    if n > MAX_RUNS:
        raise DesignError(f"a Plackett-Burman design of {n} runs is beyond the supported {MAX_RUNS}")
    h = _hadamard_raw(n)
    if h is None:
        raise DesignError(f"no Hadamard matrix construction of order {n} is available (orders must be a multiple "
                          "of 4 reachable by pyDOE3, Paley or doubling); choose the next multiple of 4")
    h = h * np.where(h[:, :1] < 0, -1, 1)  # normalise: first column +1
    if not np.array_equal(h @ h.T, n * np.eye(n, dtype=int)):  # pragma: no cover - guards the constructions
        raise DesignError(f"internal error: Hadamard matrix of order {n} is not orthogonal")
    return h


def plackett_burman(k: int, runs: int | None = None) -> np.ndarray:
    """A ``runs`` × ``k`` Plackett-Burman design in ±1 coding (balanced, orthogonal columns).

    ``runs`` defaults to the smallest multiple of 4 above ``k``; more than ``runs - 1`` factors
    raise DesignError.
    """
    if k < 1:
        raise DesignError(f"a Plackett-Burman design needs at least one factor, got {k}")
    if runs is None:
        runs = 4 * (k // 4 + 1)
    if runs % 4 or runs < 4:
        raise DesignError(f"Plackett-Burman runs must be a multiple of 4 (>= 4), got runs={runs}")
    if k > runs - 1:
        raise DesignError(f"a Plackett-Burman design of {runs} runs holds at most {runs - 1} two-level knobs, "
                          f"but {k} were given; use runs: {4 * (k // 4 + 1)} or fewer knobs")
    return hadamard(runs)[:, 1:k + 1]


# --------------------------------------------------------------------------------------------
# fractional factorials: words as bit masks over factor indices


def _word_text(mask: int, sign: int = 1) -> str:
    letters = "".join(LETTERS[i] for i in range(mask.bit_length()) if mask >> i & 1)
    return ("-" if sign < 0 else "") + (letters or "I")


def _group(generators: Sequence[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """The defining-relation group of the generators: (masks, signs), identity first."""
    masks = np.zeros(1, dtype=np.uint32)
    signs = np.ones(1, dtype=np.int8)
    for index, sign, mask in generators:
        masks = np.concatenate([masks, masks ^ np.uint32(mask | 1 << index)])
        signs = np.concatenate([signs, signs * np.int8(sign)])
    return masks, signs


@dataclass(frozen=True)
class FractionalFactorial:
    """A 2^(k-p) design: base factors A, B, … are the first ``k - p`` knobs; each generator
    defines one of the remaining letters as a signed product of base letters."""

    k: int
    generators: tuple[tuple[int, int, int], ...]  # (factor index, sign, mask of base factors)
    matrix: np.ndarray = field(repr=False, compare=False)

    @property
    def base(self) -> int:
        return self.k - len(self.generators)

    @property
    def runs(self) -> int:
        return 2 ** self.base

    def _words(self, max_length: int | None = None) -> list[tuple[int, int]]:
        masks, signs = _group(self.generators)
        lengths = np.bitwise_count(masks[1:])
        keep = np.ones(len(lengths), dtype=bool) if max_length is None else lengths <= max_length
        words = [(int(m), int(s)) for m, s in zip(masks[1:][keep], signs[1:][keep])]
        return sorted(words, key=lambda w: (w[0].bit_count(), _word_text(w[0])))

    @property
    def resolution(self) -> int | None:
        """Length of the shortest defining word; None for a full factorial (no words)."""
        masks, _ = _group(self.generators)
        return int(np.bitwise_count(masks[1:]).min()) if len(masks) > 1 else None

    def generator_texts(self) -> list[str]:
        return [f"{LETTERS[i]}={_word_text(mask, sign)}" for i, sign, mask in self.generators]

    def defining_relation(self) -> list[str]:
        """The words W of I = W1 = W2 = …: all of them up to p = 6 generators (63 words), else
        only the shortest ones (length <= resolution + 1)."""
        limit = None if len(self.generators) <= 6 else (self.resolution or 0) + 1
        return [_word_text(mask, sign) for mask, sign in self._words(limit)]

    def aliases(self, max_order: int = 2) -> dict[str, list[str]]:
        """Effect -> aliased effects of order <= ``max_order``, for every main effect and 2FI."""
        words = self._words(max_order + 2)
        out: dict[str, list[str]] = {}
        effects = [1 << i for i in range(self.k)] + [1 << i | 1 << j for i, j in itertools.combinations(range(self.k), 2)]
        for effect in effects:
            partners = sorted(((effect ^ mask, sign) for mask, sign in words if (effect ^ mask).bit_count() <= max_order),
                              key=lambda w: (w[0].bit_count(), _word_text(w[0])))
            out[_word_text(effect)] = [_word_text(mask, sign) for mask, sign in partners]
        return out


def _pydoe3_matrix(k: int, generators: Sequence[tuple[int, int, int]]) -> np.ndarray:
    """The coded matrix from pyDOE3.fracfact (its letters a, b, … are our A, B, … by position)."""
    base = k - len(generators)
    lower = string.ascii_lowercase
    terms = [lower[i] for i in range(base)] + [""] * len(generators)
    for index, sign, mask in generators:
        terms[index] = ("-" if sign < 0 else "") + "".join(lower[i] for i in range(base) if mask >> i & 1)
    import pyDOE3

    return pyDOE3.fracfact(" ".join(terms)).astype(int)


def _build(k: int, generators: Sequence[tuple[int, int, int]]) -> FractionalFactorial:
    return FractionalFactorial(k=k, generators=tuple(generators), matrix=_pydoe3_matrix(k, generators))


def parse_generators(k: int, texts: Iterable[str]) -> list[tuple[int, int, int]]:
    """Parse ``["D=AB", "E=-AC"]`` for ``k`` factors into (factor index, sign, base mask)."""
    texts = list(texts)
    p = len(texts)
    base = k - p
    if base < 1:
        raise DesignError(f"{p} generators for {k} knobs leave no base factors; give at most {k - 1}")
    seen: set[int] = set()
    out = []
    for text in texts:
        if not isinstance(text, str) or text.count("=") != 1:
            raise DesignError(f"generator {text!r} must look like 'D=AB' (a letter, '=', a product of base letters)")
        left, right = (part.strip().upper() for part in text.split("="))
        sign = 1
        if right.startswith(("-", "+")):
            sign, right = (-1 if right[0] == "-" else 1), right[1:].strip()
        if len(left) != 1 or left not in LETTERS[:k]:
            raise DesignError(f"generator {text!r}: {left!r} is not a factor letter of {k} knobs ({LETTERS[:k]}, I is skipped)")
        index = LETTERS.index(left)
        if index < base:
            raise DesignError(f"generator {text!r}: {left} is a base factor ({LETTERS[:base]}); with {p} generators the "
                              f"generated factors are {LETTERS[base:k]}")
        if index in seen:
            raise DesignError(f"generator {text!r}: factor {left} is defined twice")
        if not right or any(ch not in LETTERS[:base] for ch in right) or len(set(right)) != len(right):
            raise DesignError(f"generator {text!r}: the right side must be a product of distinct base letters "
                              f"({LETTERS[:base]}), got {right!r}")
        if len(right) < 2:
            raise DesignError(f"generator {text!r} makes {left} identical to main effect {right}; "
                              "use a product of at least two base letters")
        seen.add(index)
        out.append((index, sign, sum(1 << LETTERS.index(ch) for ch in right)))
    return sorted(out)


def _greedy_generators(k: int, base: int, resolution: int) -> list[tuple[int, int, int]] | None:
    """Pick interaction columns of the base factors (smallest first) keeping every word >= resolution."""
    masks = np.zeros(1, dtype=np.uint32)
    chosen: list[tuple[int, int, int]] = []
    for size in range(max(2, resolution - 1), base + 1):
        for combo in itertools.combinations(range(base), size):
            if base + len(chosen) == k:
                return chosen
            index = base + len(chosen)
            interaction = sum(1 << i for i in combo)
            new = masks ^ np.uint32(interaction | 1 << index)
            if int(np.bitwise_count(new).min()) >= resolution:
                masks = np.concatenate([masks, new])
                chosen.append((index, 1, interaction))
    return chosen if base + len(chosen) == k else None


def fractional_factorial(k: int, generators: Sequence[str] | None = None, runs: int | None = None,
                         resolution: int | None = None) -> FractionalFactorial:
    """A 2^(k-p) fractional factorial from explicit ``generators`` or from ``runs``/``resolution``.

    Default generators are chosen greedily among interactions of the base factors (lowest order
    first) so that every defining word has at least ``resolution`` letters; without
    ``resolution`` the highest reachable one is used, without ``runs`` the fewest runs.
    """
    if k < 2:
        raise DesignError(f"a fractional factorial needs at least 2 knobs, got {k}")
    if k > len(LETTERS):
        raise DesignError(f"a fractional factorial supports at most {len(LETTERS)} knobs, got {k}; "
                          "use plackett_burman for screening many knobs")
    if resolution is not None and resolution < 3:
        raise DesignError(f"resolution must be at least 3 (III), got {resolution}; lower ones alias main effects")
    if runs is not None and (runs < 2 or runs & (runs - 1)):
        raise DesignError(f"fractional factorial runs must be a power of 2, got runs={runs}")
    if generators:
        parsed = parse_generators(k, generators)
        if len(parsed) > MAX_GENERATORS:
            raise DesignError(f"{len(parsed)} generators exceed the supported {MAX_GENERATORS}; use plackett_burman")
        ff = _build(k, parsed)
        if runs is not None and ff.runs != runs:
            raise DesignError(f"generators {list(generators)} give {ff.runs} runs for {k} knobs, but runs={runs} "
                              "was requested; drop one of the two options")
        if ff.resolution is not None and ff.resolution < 3:
            raise DesignError(f"generators {list(generators)} alias two main effects (word "
                              f"{ff.defining_relation()[0]}); choose generators with longer products")
        if resolution is not None and (ff.resolution or 99) < resolution:
            raise DesignError(f"generators {list(generators)} give resolution {ff.resolution}, below the requested "
                              f"{resolution}, for k={k} knobs in {ff.runs} runs")
        return ff
    if runs is None and resolution is None:
        raise DesignError("a fractional_factorial needs options `generators`, `runs` or `resolution`")
    if runs is not None:
        bases = [runs.bit_length() - 1]
        if bases[0] > k:
            raise DesignError(f"runs={runs} exceeds the full factorial 2^{k}={2 ** k} of k={k} knobs")
        if runs > MAX_FRACTIONAL_RUNS:
            raise DesignError(f"runs={runs} exceeds the supported {MAX_FRACTIONAL_RUNS} runs of a fractional factorial")
    else:
        smallest = max(1, math.ceil(math.log2(k + 1)))
        bases = [b for b in range(smallest, k + 1) if 2 ** b <= MAX_FRACTIONAL_RUNS]
    wanted = [resolution] if resolution is not None else list(range(k + 1, 2, -1))
    for base in bases:
        if k - base > MAX_GENERATORS:
            continue
        for res in wanted:
            chosen = [] if base == k else _greedy_generators(k, base, res)
            if chosen is not None:
                return _build(k, chosen)
    runs_text = f"{runs} runs" if runs is not None else f"at most {MAX_FRACTIONAL_RUNS} runs"
    res_text = f"resolution {resolution}" if resolution is not None else "resolution III"
    raise DesignError(f"no 2^(k-p) design with k={k} knobs in {runs_text} reaches {res_text}; "
                      "use more runs, a lower resolution, or explicit `generators`")


# --------------------------------------------------------------------------------------------
# Latin hypercube and Morris trajectories (SALib)


def _unit_problem(dimensions: int) -> dict[str, Any]:
    """A SALib problem over the unit hypercube: knobs are mapped onto their ranges afterwards."""
    return {"num_vars": dimensions, "names": [f"x{i}" for i in range(dimensions)], "bounds": [[0.0, 1.0]] * dimensions}


def latin_hypercube(samples: int, dimensions: int, rng: np.random.Generator) -> np.ndarray:
    """``samples`` × ``dimensions`` points in [0, 1): each of ``samples`` equal strata of every
    dimension holds exactly one point (``SALib.sample.latin.sample``, drawing from ``rng``)."""
    from SALib.sample import latin

    return latin.sample(_unit_problem(dimensions), samples, seed=rng)


def morris_trajectories(trajectories: int, dimensions: int, levels: int, rng: np.random.Generator) -> np.ndarray:
    """Morris' (1991) one-at-a-time trajectories as grid indices (``SALib.sample.morris.sample``).

    Returns an integer array of ``trajectories * (dimensions + 1)`` rows in trajectory order;
    entry ``j`` means the grid point ``j / (levels - 1)`` of [0, 1]. Within a trajectory each
    row moves exactly one dimension by ``levels / 2`` grid steps (Morris' Δ = p / (2 (p - 1))).
    """
    from SALib.sample import morris

    unit = morris.sample(_unit_problem(dimensions), trajectories, num_levels=levels, seed=rng)
    return np.rint(unit * (levels - 1)).astype(int)


def map_unit_to_range(u: float, low: int, high: int, scale: str = "linear", step: int | None = None,
                      strata: int | None = None) -> int:
    """Map ``u`` in [0, 1) onto an integer knob range, rounding to the grid and clipping.

    With ``strata`` the rounded value is kept inside the stratum ``u`` fell in whenever that
    stratum contains a grid value, so rounding does not break Latin-hypercube stratification.
    """
    def forward(t: float) -> float:
        if scale == "log":
            return math.exp(math.log(low) + t * (math.log(high) - math.log(low)))
        return low + t * (high - low)

    step = step or 1
    top = low + (high - low) // step * step  # largest grid value <= high

    def snap(x: float) -> int:
        return int(min(max(low + round((x - low) / step) * step, low), top))

    value = snap(forward(u))
    if strata:
        s = min(int(u * strata), strata - 1)
        lo, hi = forward(s / strata), forward((s + 1) / strata)
        first = low + math.ceil((lo - low) / step - 1e-9) * step
        last = low + math.floor((hi - low) / step - 1e-9) * step if s < strata - 1 else top
        if first <= last:
            value = int(min(max(value, first), last))
    return value


# --------------------------------------------------------------------------------------------
# registered generators


@dataclass(frozen=True)
class DesignRows:
    """The distinct runs of one replicate, in standard order.

    ``rows`` map knob id -> level; ``varied`` names the OAT knob of each row (else None);
    ``baseline_every`` (OAT only) places baseline runs between varied runs; ``info`` carries
    design properties for the summary and the analysis: resolution, aliases and the coded matrix
    of two-level designs; ``unit`` points and knob ``ranges`` of ``latin_hypercube`` and ``morris``
    (see :func:`_knob_ranges`), plus ``points`` (the rows in trajectory order, repeats kept),
    ``levels`` and ``trajectories`` of ``morris``.
    """

    rows: list[dict[str, Any]]
    varied: list[str | None]
    info: dict[str, Any] = field(default_factory=dict)
    baseline_every: int | None = None


@dataclass(frozen=True)
class Generator:
    """A design type: its allowed options, a validator (at load time) and a row builder."""

    name: str
    options: tuple[str, ...]
    build: Callable[[Design, np.random.Generator], DesignRows]
    validate: Callable[[Design], None] = lambda design: None

    def check(self, design: Design, ctx: _Context) -> None:
        """Validate a parsed design; DesignErrors are re-raised naming the file and design.options."""
        try:
            self.validate(design)
            self.build(design, np.random.default_rng(design.seed))
        except DesignError as exc:
            raise ctx.error(("design",), f"{design.design_type}: {exc}") from None


GENERATORS: Registry[Generator] = Registry("design type")


def _two_level(design: Design) -> None:
    for i, knob in enumerate(design.knobs):
        if len(knob.levels) != 2:
            raise DesignError(f"knobs[{i}] ({knob.id}) has {len(knob.levels)} levels {list(knob.levels)}, but "
                              f"{design.design_type} needs exactly 2 (baseline = -1, the other = +1)")
        if knob.baseline not in knob.levels:
            raise DesignError(f"knobs[{i}] ({knob.id}): baseline {knob.baseline!r} must be one of its two levels "
                              f"{list(knob.levels)} in a {design.design_type} design")


def _coded_rows(design: Design, matrix: np.ndarray) -> list[dict[str, Any]]:
    return [{knob.id: (knob.baseline if code < 0 else knob.alternative) for knob, code in zip(design.knobs, row)}
            for row in matrix]


def _option_int(design: Design, key: str, minimum: int = 1, default: int | None = None) -> int | None:
    value = design.options.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DesignError(f"option {key} must be an integer >= {minimum}, got {value!r}")
    return value


def _oat(design: Design, rng: np.random.Generator) -> DesignRows:
    baseline = design.baseline
    rows: list[dict[str, Any]] = [dict(baseline)]
    varied: list[str | None] = [None]
    for knob in design.knobs:
        for level in knob.levels:
            if level != knob.baseline:
                rows.append({**baseline, knob.id: level})
                varied.append(knob.id)
    if len(rows) == 1:
        raise DesignError("every knob has only its baseline level, so OAT varies nothing; add levels")
    every = _option_int(design, "baseline_every", default=2)
    return DesignRows(rows=rows, varied=varied, baseline_every=every,
                      info={"baseline_every": every})


def _full_factorial(design: Design, rng: np.random.Generator) -> DesignRows:
    counts = [len(k.levels) for k in design.knobs]
    if math.prod(counts) > 100_000:
        raise DesignError(f"a full factorial of levels {counts} has {math.prod(counts)} runs; use a fractional "
                          "or Plackett-Burman design")
    import pyDOE3

    index = pyDOE3.fullfact(counts).astype(int)
    rows = [{knob.id: knob.levels[i] for knob, i in zip(design.knobs, row)} for row in index]
    return DesignRows(rows=rows, varied=[None] * len(rows))


def _fractional(design: Design, rng: np.random.Generator) -> DesignRows:
    _two_level(design)
    generators = design.options.get("generators")
    if generators is not None and (isinstance(generators, str) or not all(isinstance(g, str) for g in generators)):
        raise DesignError(f"option generators must be a list like ['D=AB', 'E=AC'], got {generators!r}")
    ff = fractional_factorial(len(design.knobs), generators=generators,
                              runs=_option_int(design, "runs", minimum=2),
                              resolution=_option_int(design, "resolution", minimum=3))
    letters = {LETTERS[i]: knob.id for i, knob in enumerate(design.knobs)}
    info = {"coded": ff.matrix, "resolution": ff.resolution, "generators": ff.generator_texts(),
            "defining_relation": ff.defining_relation(), "aliases": ff.aliases(), "letters": letters}
    rows = _coded_rows(design, ff.matrix)
    return DesignRows(rows=rows, varied=[None] * len(rows), info=info)


def _plackett_burman(design: Design, rng: np.random.Generator) -> DesignRows:
    _two_level(design)
    matrix = plackett_burman(len(design.knobs), runs=_option_int(design, "runs", minimum=4))
    rows = _coded_rows(design, matrix)
    return DesignRows(rows=rows, varied=[None] * len(rows), info={"coded": matrix})


def _knob_ranges(design: Design) -> dict[str, dict[str, Any]]:
    """Knob id -> its range, the ``info["ranges"]`` of space-filling designs: ``low``, ``high``,
    ``scale``, ``step`` and ``levels`` (None for a low/high range; a list knob gets its levels, and
    its smallest and largest value as ``low``/``high`` when they are numbers, else None)."""
    out = {}
    for knob in design.knobs:
        if knob.is_range:
            out[knob.id] = {"low": knob.low, "high": knob.high, "scale": knob.scale, "step": knob.step, "levels": None}
        else:
            numeric = all(_is_number(v) for v in knob.levels)
            out[knob.id] = {"low": min(knob.levels) if numeric else None, "high": max(knob.levels) if numeric else None,
                            "scale": "linear", "step": None, "levels": list(knob.levels)}
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating))


def _latin_hypercube(design: Design, rng: np.random.Generator) -> DesignRows:
    samples = _option_int(design, "samples", minimum=2)
    if samples is None:
        raise DesignError("latin_hypercube needs option `samples: N` (the number of configurations)")
    k = len(design.knobs)
    if samples < k + 2:
        raise DesignError(f"samples={samples} is too few for {k} knobs: the regression that reads a Latin hypercube "
                          f"fits an intercept and a slope per knob ({k + 1} parameters) and needs one run more to "
                          f"estimate the noise; use samples: {k + 2} or more ({2 * k + 4} or more to also fit a "
                          "curvature per knob)")
    for i, knob in enumerate(design.knobs):
        if not knob.is_range and len(knob.levels) < 2:
            raise DesignError(f"knobs[{i}] ({knob.id}) has the single level {knob.levels[0]!r}, but a Latin hypercube "
                              "varies every knob; give it two or more levels or drop it")
    for _ in range(MAX_LHS_DRAWS):
        unit = latin_hypercube(samples, k, rng)
        rows = []
        for point in unit:
            row = {}
            for knob, u in zip(design.knobs, point):
                if knob.is_range:
                    row[knob.id] = map_unit_to_range(u, knob.low, knob.high, knob.scale, knob.step, strata=samples)
                else:  # a list of levels: equal shares of [0, 1) per level
                    row[knob.id] = knob.levels[min(int(u * len(knob.levels)), len(knob.levels) - 1)]
            rows.append(row)
        if not _confounded(design, rows):
            return DesignRows(rows=rows, varied=[None] * len(rows),
                              info={"unit": unit, "samples": samples, "ranges": _knob_ranges(design)})
    raise DesignError(f"none of {MAX_LHS_DRAWS} Latin hypercubes of samples={samples} varies the {k} knobs "
                      "independently (knobs with few levels repeat each other's pattern), so the regression could "
                      "not separate their effects; use more samples")


def _confounded(design: Design, rows: list[dict[str, Any]]) -> bool:
    """True when the linear model of the rows (an intercept and a slope per knob, on each knob's
    scale; list knobs of words by level position) is rank-deficient: some knobs' effects alias."""
    columns = [np.ones(len(rows))]
    for knob in design.knobs:
        values = [row[knob.id] for row in rows]
        if knob.is_range:
            x = np.log(np.array(values, dtype=float)) if knob.scale == "log" else np.array(values, dtype=float)
        elif all(_is_number(v) for v in knob.levels):
            x = np.array(values, dtype=float)
        else:
            x = np.array([knob.levels.index(v) for v in values], dtype=float)
        spread = np.ptp(x)
        if spread == 0:
            return True
        columns.append(2 * (x - x.min()) / spread - 1)
    return int(np.linalg.matrix_rank(np.column_stack(columns))) < len(columns)


def _morris_grid(design: Design, levels: int) -> list[list[Any]]:
    """Each knob's value at the Morris grid points 0, 1/(p-1), …, 1 (p = ``levels``).

    Range knobs map the grid onto [low, high] (log-spaced for ``scale: log``) rounded to their
    integer/``step`` grid, which must keep p distinct values. List knobs are ordered by value and
    take equal shares of the grid, so every Morris step (over half the grid) changes the level.
    """
    grids = []
    for i, knob in enumerate(design.knobs):
        if knob.is_range:
            values = [map_unit_to_range(j / (levels - 1), knob.low, knob.high, knob.scale, knob.step)
                      for j in range(levels)]
            if len(set(values)) < levels:
                step = f", step {knob.step}" if knob.step else ""
                raise DesignError(f"knobs[{i}] ({knob.id}): a {levels}-level Morris grid over {knob.low}..{knob.high}"
                                  f"{step} rounds to only {len(set(values))} distinct values {values}; "
                                  "use fewer `levels` or a wider range")
        else:
            if len(knob.levels) < 2:
                raise DesignError(f"knobs[{i}] ({knob.id}) has the single level {knob.levels[0]!r}, but a Morris "
                                  "design moves every knob; give it two or more levels or drop it")
            if not all(_is_number(v) for v in knob.levels):
                raise DesignError(f"knobs[{i}] ({knob.id}) has levels {list(knob.levels)}, but Morris elementary "
                                  "effects need ordered numeric levels; list numbers, or use latin_hypercube or oat")
            ordered = sorted(knob.levels)
            m = len(ordered)
            values = [ordered[min(j * m // (levels - 1), m - 1)] for j in range(levels)]
        grids.append(values)
    return grids


def _morris(design: Design, rng: np.random.Generator) -> DesignRows:
    trajectories = design.options.get("trajectories", 10)
    if isinstance(trajectories, bool) or not isinstance(trajectories, int) or trajectories < 2:
        raise DesignError(f"option trajectories must be an integer >= 2, got {trajectories!r}: each trajectory gives "
                          "one elementary effect per knob and their spread (sigma) needs two or more; 10 is usual")
    levels = design.options.get("levels", 4)
    if isinstance(levels, bool) or not isinstance(levels, int) or levels < 2 or levels % 2:
        raise DesignError(f"option levels must be an even integer >= 2, got {levels!r} (an odd number of grid levels "
                          "biases Morris' sample); 4 is usual, 6 or 8 for long ranges")
    grids = _morris_grid(design, levels)
    index = morris_trajectories(trajectories, len(design.knobs), levels, rng)
    points = [{knob.id: grid[j] for knob, grid, j in zip(design.knobs, grids, row)} for row in index]
    info = {"unit": index / (levels - 1), "points": [dict(p) for p in points], "levels": levels,
            "trajectories": trajectories, "ranges": _knob_ranges(design)}
    return DesignRows(rows=points, varied=[None] * len(points), info=info)


_COMMON = ("baseline_runs",)
GENERATORS.add("oat", Generator("oat", ("baseline_every",), _oat))
GENERATORS.add("full_factorial", Generator("full_factorial", _COMMON, _full_factorial))
GENERATORS.add("fractional_factorial",
               Generator("fractional_factorial", _COMMON + ("generators", "runs", "resolution"), _fractional))
GENERATORS.add("plackett_burman", Generator("plackett_burman", _COMMON + ("runs",), _plackett_burman))
GENERATORS.add("latin_hypercube", Generator("latin_hypercube", _COMMON + ("samples",), _latin_hypercube))
GENERATORS.add("morris", Generator("morris", _COMMON + ("trajectories", "levels"), _morris))


def runs_per_replicate(design: Design) -> int:
    """The runs one replicate will have, computed from the options alone (no matrix is built).

    An upper bound for ``fractional_factorial`` without explicit ``runs`` (then the default
    generators choose at most :data:`MAX_FRACTIONAL_RUNS`). Used to refuse oversized plans
    before any of them is generated.
    """
    def option(key: str, default: int) -> int:
        value = design.options.get(key, default)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default

    extra = option("baseline_runs", 0) if design.design_type != DesignType.OAT else 0
    k = len(design.knobs)
    if design.design_type == DesignType.OAT:
        varied = sum(len(knob.levels) - 1 for knob in design.knobs)
        return varied + math.ceil(varied / option("baseline_every", 2))
    if design.design_type == DesignType.FULL_FACTORIAL:
        return math.prod(len(knob.levels) for knob in design.knobs) + extra
    if design.design_type == DesignType.FRACTIONAL_FACTORIAL:
        generators = design.options.get("generators")
        if isinstance(generators, (list, tuple)) and generators:
            return 2 ** max(k - len(generators), 0) + extra
        return min(option("runs", MAX_FRACTIONAL_RUNS), MAX_FRACTIONAL_RUNS) + extra
    if design.design_type == DesignType.PLACKETT_BURMAN:
        return option("runs", 4 * (k // 4 + 1)) + extra
    if design.design_type == DesignType.LATIN_HYPERCUBE:
        return option("samples", 2) + extra
    if design.design_type == DesignType.MORRIS:
        return option("trajectories", 10) * (k + 1) + extra
    return extra + 1
