"""Numbers as people read them: one function per kind of number, shared by the CLI, reports and gallery.

Pure and light (only :mod:`math`), so the command line can use it without importing pandas. Every
view of a screen formats its numbers here, so the same number reads the same everywhere:

* a % change keeps its sign and at least two significant digits: ``-0.000016 %`` reads
  ``-1.6e-05 %``, never ``-0.0 %``;
* a p-value that underflowed to 0 reads ``< 1e-300`` (the smallest positive double is about
  1e-308, and no test here is that exact), never ``0``.

Text from a user's files (a query file, a zone, a candidate, a change file) is personal data: a message,
a stored trial or JSON quotes at most :data:`QUOTE_LIMIT` characters of it, through :func:`quote` (a value)
or :func:`shorten` (a message that may hold one, e.g. an exception's).
"""
from __future__ import annotations

import math
from typing import Any

#: a p-value below this is shown as ``< 1e-300`` (0 included: it underflowed)
P_FLOOR = 1e-300
#: the most characters of an input value (or of a message that may quote one) any output, error or store holds
QUOTE_LIMIT = 200


def shorten(text: Any, limit: int = QUOTE_LIMIT) -> str:
    """``text`` (made a string) in at most ``limit`` characters: a longer one keeps its start, then an ellipsis
    and its total length, all within ``limit`` (the length note alone when ``limit`` is tiny).

    >>> shorten("short"), shorten("x" * 500, limit=30)
    ('short', 'xxxxxxxxxx... (500 characters)')
    """
    text = str(text)
    return text if len(text) <= limit else _cut(text, len(text), limit)


def _cut(text: str, total: int, limit: int) -> str:
    """The start of ``text`` and ``... (TOTAL characters)`` in ``limit`` characters (ends of the note if tiny)."""
    note = f"... ({total} characters)"
    return text[:limit - len(note)] + note if limit >= len(note) else note[len(note) - max(0, limit):]


def quote(value: Any, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` in at most ``limit`` characters: how a message quotes an input value. A longer one keeps
    its start, then an ellipsis and the value's length (of a string: its characters; else of its repr); only
    the first ``limit`` characters of a long string are ever turned into text.

    >>> quote("NAME A"), quote("q" * 1000, limit=40)
    ("'NAME A'", "'qqqqqqqqqqqqqqqqqq... (1000 characters)")
    """
    if isinstance(value, str):
        text, total = repr(value[:limit + 1]), len(value)
    else:
        text = repr(value)
        total = len(text)
    return text if len(text) <= limit and total <= limit else _cut(text, total, limit)


def is_number(value: Any) -> bool:
    """True for a finite int or float (not a bool, not None, not NaN).

    >>> is_number(1.5), is_number(float("nan")), is_number(None), is_number(True)
    (True, False, False, False)
    """
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def level_label(value: Any) -> str:
    """A knob level as text: tuples space-separated (sysctl form), floats without a trailing ``.0``.

    >>> level_label((32768, 60999)), level_label(4096), level_label(True), level_label(2.0)
    ('32768 60999', '4096', 'True', '2')
    """
    if isinstance(value, (tuple, list)):
        return " ".join(level_label(v) for v in value)
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()                      # a numpy scalar as its Python value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def fmt_config(config: Any, limit: int = 4) -> str:
    """A configuration on one line, ``knob=value, ...``, at most ``limit`` knobs and then how many there are.

    >>> fmt_config({"a": 1, "b": (1, 2, 3)})
    'a=1, b=1 2 3'
    >>> fmt_config({f"k{i}": i for i in range(6)})
    'k0=0, k1=1, k2=2, k3=3, ... (6 knobs)'
    """
    items = list(config.items())
    shown = ", ".join(f"{knob}={level_label(value)}" for knob, value in items[:limit])
    return shown + (f", ... ({len(items)} knobs)" if len(items) > limit else "")


def fmt_number(value: Any, decimals: int = 1, signed: bool = False) -> str:
    """``value`` with ``decimals`` decimals, or two significant digits where rounding would hide a
    non-zero value; ``-0.0`` never appears; NaN/None -> ``'n/a'``.

    >>> fmt_number(-98.73), fmt_number(4.0, signed=True), fmt_number(-1.6e-5), fmt_number(-0.001)
    ('-98.7', '+4.0', '-1.6e-05', '-0.001')
    """
    number = _finite(value)
    if number is None:
        return "n/a"
    rounded = round(number, decimals) + 0.0          # + 0.0 turns -0.0 into 0.0
    if rounded == 0 and number != 0:
        return f"{number:+.2g}" if signed else f"{number:.2g}"
    return f"{rounded:+.{decimals}f}" if signed else f"{rounded:.{decimals}f}"


def fmt_pct(value: Any, signed: bool = True, decimals: int = 1) -> str:
    """A % change: ``-98.73`` -> ``'-98.7 %'``; a tiny change keeps two significant digits; NaN -> ``'n/a'``.

    >>> fmt_pct(-98.73), fmt_pct(4.0), fmt_pct(-98.73, signed=False), fmt_pct(-1.6e-5), fmt_pct(0.0)
    ('-98.7 %', '+4.0 %', '98.7 %', '-1.6e-05 %', '+0.0 %')
    """
    number = _finite(value)
    if number is None:
        return "n/a"
    text = fmt_number(number if signed else abs(number), decimals, signed)
    return f"{text} %"


def fmt_abs(value: Any, signed: bool = True) -> str:
    """A difference in the metric's units with 3 significant digits: ``12.345`` -> ``'+12.3'``; NaN -> ``'n/a'``.

    Above 999 it is a whole number with thousands separators, never ``-3.45e+03``.

    >>> fmt_abs(12.345), fmt_abs(-0.5), fmt_abs(-0.5, signed=False), fmt_abs(-3454.2), fmt_abs(-3454.2, signed=False)
    ('+12.3', '-0.5', '0.5', '-3,454', '3,454')
    """
    number = _finite(value)
    if number is None:
        return "n/a"
    number = number if signed else abs(number)
    text = f"{number:+.3g}" if signed else f"{number:.3g}"
    if "e+" in text:
        return f"{number:+,.0f}" if signed else f"{number:,.0f}"
    return text


def decimals_apart(*values: Any) -> int:
    """Decimals (1 to 3) that keep distinct values distinct when shown in %.

    >>> decimals_apart(-99.12, -98.95), decimals_apart(-99.04, -98.96)
    (1, 2)
    """
    finite = [number for number in map(_finite, values) if number is not None]
    for decimals in (1, 2, 3):
        if len({round(v, decimals) for v in finite}) == len(set(finite)):
            return decimals
    return 3


def fmt_ci(low: Any, high: Any, estimate: Any = None, level: float = 0.95) -> str:
    """``[95 % CI -99.12 % to -98.95 %]`` with enough decimals to tell the numbers apart; ``level`` is the
    interval's confidence level (:func:`fmt_level`).

    >>> fmt_ci(-99.04, -98.96), fmt_ci(-50.8, -35.7, level=1 - 0.0083)
    ('[95 % CI -99.04 % to -98.96 %]', '[99.17 % CI -50.8 % to -35.7 %]')
    """
    decimals = decimals_apart(low, high, *(() if estimate is None else (estimate,)))
    return f"[{fmt_level(level)} CI {fmt_pct(low, decimals=decimals)} to {fmt_pct(high, decimals=decimals)}]"


def fmt_level(level: Any) -> str:
    """A confidence level as a percentage with up to 4 significant digits: ``0.95`` -> ``'95 %'``,
    ``1 - 0.0083`` -> ``'99.17 %'``; NaN -> ``'n/a'``.

    >>> fmt_level(0.95), fmt_level(1 - 0.05 / 6), fmt_level(float("nan"))
    ('95 %', '99.17 %', 'n/a')
    """
    number = _finite(level)
    return "n/a" if number is None else f"{100 * number:.4g} %"


def fmt_p_value(p: Any) -> str:
    """A p-value for prose: ``0.0004`` -> ``'< 0.001'``, ``0.0123`` -> ``'0.012'``, ``0.53`` -> ``'0.53'``.

    >>> fmt_p_value(0.0004), fmt_p_value(0.01234), fmt_p_value(0.53), fmt_p_value(None)
    ('< 0.001', '0.012', '0.53', 'n/a')
    """
    number = _finite(p)
    if number is None:
        return "n/a"
    return "< 0.001" if number < 0.001 else f"{number:.2g}" if number >= 0.1 else f"{number:.3f}"


def fmt_p(p: Any, name: str = "p_adj") -> str:
    """``0.0004`` -> ``'p_adj < 0.001'``, ``0.0123`` -> ``'p_adj = 0.012'``.

    >>> fmt_p(0.0004), fmt_p(0.01234), fmt_p(0.5)
    ('p_adj < 0.001', 'p_adj = 0.012', 'p_adj = 0.5')
    """
    text = fmt_p_value(p)
    if text == "n/a":
        return f"{name} not computable"
    return f"{name} {text}" if text.startswith("<") else f"{name} = {text}"


def fmt_p_exact(p: Any) -> str:
    """A p-value for tables, with 3 significant digits; an underflowed one reads ``< 1e-300``.

    >>> fmt_p_exact(0.0), fmt_p_exact(3.2e-12), fmt_p_exact(0.04567), fmt_p_exact(float("nan"))
    ('< 1e-300', '3.2e-12', '0.0457', '-')
    """
    number = _finite(p)
    if number is None:
        return "-"
    return "< " + format(P_FLOOR, ".0e") if number < P_FLOOR else f"{number:.3g}"


def fmt_pct_interval(effect: Any, low: Any, high: Any, decimals: int | None = None) -> str:
    """A % change with its interval in brackets, with enough decimals (``decimals_apart``) to tell the three
    numbers apart unless ``decimals`` is given; ``'n/a'`` when the change is not a number.

    >>> fmt_pct_interval(-98.73, -99.12, -98.2), fmt_pct_interval(30.2, 19.8, 41.1, decimals=0)
    ('-98.7 % [-99.1 %, -98.2 %]', '+30 % [+20 %, +41 %]')
    """
    if _finite(effect) is None:
        return "n/a"
    d = decimals_apart(effect, low, high) if decimals is None else decimals
    return f"{fmt_pct(effect, decimals=d)} [{fmt_pct(low, decimals=d)}, {fmt_pct(high, decimals=d)}]"


def fmt_abs_interval(effect: Any, low: Any, high: Any) -> str:
    """A difference in the metric's units with its interval (:func:`fmt_abs`); the interval is left out when
    either end is not a number.

    >>> fmt_abs_interval(-12.345, -20, -4.5), fmt_abs_interval(3, None, 1)
    ('-12.3 [-20, -4.5]', '+3')
    """
    if _finite(low) is None or _finite(high) is None:
        return fmt_abs(effect)
    return f"{fmt_abs(effect)} [{fmt_abs(low)}, {fmt_abs(high)}]"


def fmt_plain(value: Any) -> str:
    """A number without scientific notation (axis ticks): ``200000`` -> ``'200,000'``, ``0.25`` -> ``'0.25'``.

    >>> fmt_plain(200000), fmt_plain(0.25), fmt_plain(-12.6)
    ('200,000', '0.25', '-13')
    """
    number = _finite(value)
    if number is None:
        return "n/a"
    return f"{number:,.0f}" if abs(number) >= 10 else f"{number:g}"


#: a table value this many times smaller than the largest of its column is rounding noise and reads 0
NOISE_RATIO = 1e-9


def fmt_sig(value: Any, digits: int = 4, scale: Any = None) -> str:
    """A table number: ``digits`` significant digits, integers of more digits in full with thousands
    separators (never ``1.001e+05``), and a value below ``NOISE_RATIO`` times ``scale`` (the largest
    magnitude in its column) as ``0``: ``-1.421e-14`` beside ``68.85`` is the rounding noise of a zero.
    Not a number -> ``'-'``.

    >>> fmt_sig(1.23456), fmt_sig(100123.4), fmt_sig(-1.421e-14, scale=68.85), fmt_sig(-1.6e-5), fmt_sig(None)
    ('1.235', '100,123', '0', '-1.6e-05', '-')
    >>> fmt_sig(10250.0), fmt_sig(9999.5), fmt_sig(1025.4)
    ('10,250', '10,000', '1025')
    """
    number = _finite(value)
    if number is None:
        return "-"
    reference = _finite(scale)
    if number == 0 or (reference is not None and abs(number) < NOISE_RATIO * abs(reference)):
        return "0"
    text = f"{number:.{digits}g}"
    if abs(number) >= 10 ** digits or "e+" in text:    # 9999.5 rounds to '1e+04': a whole number instead
        return f"{number:,.0f}"
    return text


def fmt_count(value: Any) -> str:
    """A count: a whole number, with thousands separators from five digits on (as :func:`fmt_sig`), never in
    scientific notation; a count that is not whole (a mean of counts) keeps one decimal. Not a number -> ``'-'``.

    >>> fmt_count(10250), fmt_count(1.025e4), fmt_count(1025), fmt_count(3), fmt_count(2.5), fmt_count(None)
    ('10,250', '10,250', '1025', '3', '2.5', '-')
    """
    number = _finite(value)
    if number is None:
        return "-"
    separator = "," if abs(number) >= 10_000 else ""
    return f"{number:{separator}.0f}" if number.is_integer() else f"{number:{separator}.1f}"


def fmt_signed_sig(value: Any) -> str:
    """A signed number with 3 significant digits and no scientific notation above 1 (:func:`fmt_abs`), zero
    unsigned: ``+0.853``, ``-12.3``, ``+74,321``, ``0``. Not a number -> ``'n/a'``.

    >>> fmt_signed_sig(0.8534), fmt_signed_sig(-12.34), fmt_signed_sig(74321.2), fmt_signed_sig(0.0)
    ('+0.853', '-12.3', '+74,321', '0')
    """
    return "0" if _finite(value) == 0 else fmt_abs(value)


#: how an effect size reads when its interval has zero width: every measurement of both groups was the
#: same (a counter that never moved), so the pooled SD is 0 and the standardised change does not exist
UNDEFINED_EFFECT = "undefined (no spread)"


def fmt_effect_size(value: Any, low: Any = None, high: Any = None) -> str:
    """A standardised effect size (Hedges' g) with its interval, 3 significant digits (:func:`fmt_signed_sig`).
    An interval of zero width means no spread in the data, where a standardised effect is undefined: it reads
    :data:`UNDEFINED_EFFECT`, never ``+7.43e+04``. Without an interval, the value alone.

    >>> fmt_effect_size(0.8534, 0.31, 1.402), fmt_effect_size(74321.0, 74321.0, 74321.0), fmt_effect_size(-1.5)
    ('+0.853 [+0.31, +1.4]', 'undefined (no spread)', '-1.5')
    >>> fmt_effect_size(float("nan"), 0.1, 0.2), fmt_effect_size(float("inf"))
    ('undefined (no spread)', 'undefined (no spread)')
    """
    number, lo, hi = _finite(value), _finite(low), _finite(high)
    if number is None or (lo is not None and hi is not None and lo == hi):
        return UNDEFINED_EFFECT
    if lo is None or hi is None:
        return fmt_signed_sig(number)
    return f"{fmt_signed_sig(number)} [{fmt_signed_sig(lo)}, {fmt_signed_sig(hi)}]"


def is_p_column(name: str) -> bool:
    """True for the names tables give p-values: ``p``, ``p_adj``, ``tost_p``, ``p ...``, ``..._p``.

    >>> [is_p_column(n) for n in ("p", "p_adj", "tost_p", "p Shapiro", "pct_change", "top")]
    [True, True, True, True, False, False]
    """
    name = str(name)
    return name in ("p", "p_adj") or name.startswith(("p ", "p_")) or name.endswith("_p")


__all__ = ["NOISE_RATIO", "P_FLOOR", "QUOTE_LIMIT", "UNDEFINED_EFFECT", "quote", "shorten", "level_label",
           "decimals_apart", "fmt_abs", "fmt_abs_interval", "fmt_ci", "fmt_count", "fmt_effect_size", "fmt_signed_sig",
           "fmt_config", "fmt_number", "fmt_p",
           "fmt_p_exact", "fmt_p_value", "fmt_pct", "fmt_pct_interval", "fmt_plain", "fmt_sig", "is_number",
           "is_p_column"]
