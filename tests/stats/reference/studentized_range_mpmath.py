"""30-digit values of the studentized range cdf, independent of scipy and of tunelab.

    F(q; k, df) = ∫_0^∞ f_df(s) k ∫ φ(z) [Φ(z + q s) - Φ(z)]^(k-1) dz ds,

with ``f_df`` the density of ``sqrt(chi2_df / df)``, integrated with mpmath's tanh-sinh quadrature
at 30 digits (the outer integral split at 1 ± j/sqrt(2 df), where the density lives).

Regenerate (system Python with mpmath; ~1-5 min per value, the large-df ones are the slowest):

    python3 tests/stats/reference/studentized_range_mpmath.py

It prints ``CDF_VALUES`` and, for each ``PPF_VALUES`` entry (``q`` as computed by
``tunelab.stats._studentized_range.ppf`` when the table was made), ``F(q) - p``, which must be
below 1e-15 in absolute value. tests/stats/test_speed_paths.py reads both tables.
"""
from __future__ import annotations

#: (q, k, df, cdf to 20 digits). scipy 1.17's nquad values differ by up to 9e-11 at df >= 3e4.
CDF_VALUES = [
    (3.3, 3, 4917, "0.94859830634958260684"),
    (1.0, 3, 4917, "0.24070086825535558471"),
    (3.6, 3, 3277.4, "0.9705197628312403133"),
    (3.3, 3, 99999, "0.94868462995668835316"),
    (3.3, 10, 99999, "0.63291278086229660924"),
    (4.5, 10, 60000, "0.95267656276810081926"),
    (3.5, 3, 3.5, "0.84640405165901128257"),
    (2.0, 5, 27, "0.37583318337171774762"),
]

#: (p, k, df, q): the 30-digit F(q) - p was 5.8e-18, 6.7e-17, 3.0e-16 and 1.1e-16
PPF_VALUES = [
    (0.95, 3, 4917, 3.315499219095323),
    (0.95, 3, 27, 3.5064261233541534),
    (0.99, 4, 3.5, 10.334484601758515),
    (0.95, 3, 3277.4, 3.316002719088967),
]


def cdf(q, k, df):
    import mpmath as mp

    mp.mp.dps = 30
    q, df = mp.mpf(q), mp.mpf(df)

    def range_cdf(w):
        inner = lambda z: mp.npdf(z) * (mp.ncdf(z + w) - mp.ncdf(z)) ** (k - 1)  # noqa: E731
        return k * mp.quad(inner, [-mp.inf, -w - 2, -w / 2, 0, mp.inf]) if w > 0 else mp.mpf(0)

    log_const = mp.log(2) + (df / 2) * mp.log(df / 2) - mp.loggamma(df / 2)
    density = lambda s: mp.exp(log_const + (df - 1) * mp.log(s) - df * s * s / 2)  # noqa: E731
    sd = 1 / mp.sqrt(2 * df)
    points = [0] + [1 + j * sd for j in (-12, -6, -3, -1, 0, 1, 3, 6, 12) if 1 + j * sd > 0] + [mp.inf]
    return mp.quad(lambda s: density(s) * range_cdf(q * s), points)


if __name__ == "__main__":
    import mpmath as mp

    print("CDF_VALUES = [")
    for q, k, df, _ in CDF_VALUES:
        print(f"    ({q!r}, {k!r}, {df!r}, {mp.nstr(cdf(q, k, df), 20)!r}),", flush=True)
    print("]")
    for p, k, df, q in PPF_VALUES:
        print(f"p={p} k={k} df={df} q={q!r}: F(q) - p = {mp.nstr(cdf(q, k, df) - mp.mpf(p), 5)}", flush=True)
