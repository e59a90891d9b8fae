"""Statistics over seeds: mean, sample standard deviation and a Student-t 95% confidence interval.

Pure Python (no scipy): the t quantile is found by bisection on the t distribution's CDF,
written with the regularised incomplete beta function (Numerical Recipes' continued fraction).

Conventions
- `summarize(values)` drops None/NaN values; n counts the rest.
- n = 0: everything null, note "no values".
- n = 1: mean only; std and the interval are null, note "n=1: no interval".
- n >= 2: std with n-1 in the denominator; interval mean +- t(0.975, n-1) * std / sqrt(n).
- Relative changes and differences between two configurations (claims) use Welch's
  approximation: `relative_change` works on the log ratio (delta method), `difference` on the
  plain difference, each with Welch-Satterthwaite degrees of freedom.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

CONFIDENCE = 0.95
NOTE_NO_VALUES = "no values"
NOTE_ONE_VALUE = "n=1: no interval"


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float | None
    std: float | None
    ci95_low: float | None
    ci95_high: float | None
    note: str = ""


def _clean(values: Iterable) -> list[float]:
    out = []
    for v in values:
        if v is None:
            continue
        f = float(v)
        if math.isnan(f):
            continue
        out.append(f)
    return out


def _betacf(a: float, b: float, x: float) -> float:
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(ln)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with df degrees of freedom (0.5 < p < 1)."""
    if not 0.5 < p < 1.0:
        raise ValueError(f"p must lie in (0.5, 1), got {p}")
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def summarize(values: Iterable) -> Summary:
    xs = _clean(values)
    n = len(xs)
    if n == 0:
        return Summary(0, None, None, None, None, NOTE_NO_VALUES)
    mean = math.fsum(xs) / n
    if n == 1:
        return Summary(1, mean, None, None, None, NOTE_ONE_VALUE)
    std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    half = t_quantile(0.5 + CONFIDENCE / 2, n - 1) * std / math.sqrt(n)
    return Summary(n, mean, std, mean - half, mean + half)


@dataclass(frozen=True)
class Comparison:
    """A derived quantity of two summaries (a relative change or a difference) with its interval."""

    value: float | None
    ci95_low: float | None
    ci95_high: float | None
    n_a: int
    n_b: int
    note: str = ""
    predicted: bool = False  # two predictions: the interval is the model's band, not a 95% CI over seeds


def _welch_df(va: float, na: int, vb: float, nb: int) -> float | None:
    num = (va + vb) ** 2
    den = (va * va / (na - 1) if na > 1 else 0.0) + (vb * vb / (nb - 1) if nb > 1 else 0.0)
    return num / den if den > 0 else None


def relative_change(a: Summary, b: Summary) -> Comparison:
    """b / a - 1 with a 95% interval from the delta method on log(b/a) (Welch-Satterthwaite df).
    Both means must be positive; without two values on each side there is no interval."""
    if a.mean is None or b.mean is None:
        return Comparison(None, None, None, a.n, b.n, "missing values")
    if a.mean <= 0 or b.mean <= 0:
        return Comparison(None, None, None, a.n, b.n, "a relative change needs positive means")
    value = b.mean / a.mean - 1.0
    if a.n < 2 or b.n < 2:
        return Comparison(value, None, None, a.n, b.n, "fewer than 2 seeds on a side: no interval")
    va = (a.std / a.mean) ** 2 / a.n  # type: ignore[operator]  # callers check both summaries have a mean and std
    vb = (b.std / b.mean) ** 2 / b.n  # type: ignore[operator]  # callers check both summaries have a mean and std
    df = _welch_df(va, a.n, vb, b.n)
    if df is None:
        return Comparison(value, value, value, a.n, b.n, "zero spread over seeds")
    half = t_quantile(0.5 + CONFIDENCE / 2, df) * math.sqrt(va + vb)
    log_r = math.log(b.mean / a.mean)
    return Comparison(value, math.exp(log_r - half) - 1.0, math.exp(log_r + half) - 1.0, a.n, b.n)


def difference(a: Summary, b: Summary) -> Comparison:
    """b - a with a Welch 95% interval."""
    if a.mean is None or b.mean is None:
        return Comparison(None, None, None, a.n, b.n, "missing values")
    value = b.mean - a.mean
    if a.n < 2 or b.n < 2:
        return Comparison(value, None, None, a.n, b.n, "fewer than 2 seeds on a side: no interval")
    va, vb = a.std**2 / a.n, b.std**2 / b.n  # type: ignore[operator]  # callers check both summaries have a std
    df = _welch_df(va, a.n, vb, b.n)
    if df is None:
        return Comparison(value, value, value, a.n, b.n, "zero spread over seeds")
    half = t_quantile(0.5 + CONFIDENCE / 2, df) * math.sqrt(va + vb)
    return Comparison(value, value - half, value + half, a.n, b.n)


def from_columns(row: dict, metric: str) -> Summary:
    """A Summary back from a summary-table row's `<metric>_mean/_std/_ci95_low/_ci95_high/_n` columns."""

    def get(key):
        v = row.get(f"{metric}_{key}")
        if v is None or (isinstance(v, float) and math.isnan(v)) or v == "":
            return None
        return float(v)

    n = get("n")
    return Summary(int(n) if n is not None else 0, get("mean"), get("std"), get("ci95_low"), get("ci95_high"))
