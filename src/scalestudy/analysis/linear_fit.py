"""A straight line through points by ordinary least squares, with Student-t 95% intervals on its
intercept and slope (n - 2 degrees of freedom). Pure Python.

Used for a step's time against the micro-batches a pipeline runs in it: time = fixed + per x m,
where `fixed` (the intercept) is the per-step cost that does not shrink with fewer micro-batches
(pipeline fill and drain, the data-parallel gradient and parameter exchange, the optimizer)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from scalestudy.analysis.stats import CONFIDENCE, t_quantile


@dataclass(frozen=True)
class LineFit:
    intercept: float
    slope: float
    intercept_ci95: tuple[float, float] | None  # None with fewer than 3 points
    slope_ci95: tuple[float, float] | None
    n: int
    r2: float | None

    def at(self, x: float) -> float:
        return self.intercept + self.slope * x


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> LineFit:
    """y = intercept + slope * x over the pairs; needs two distinct x values."""
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} x values but {len(ys)} y values")
    n = len(xs)
    if n < 2 or len(set(xs)) < 2:
        raise ValueError(f"a line needs two distinct x values, got {sorted(set(xs))}")
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    slope = sxy / sxx
    intercept = my - slope * mx
    resid = [y - (intercept + slope * x) for x, y in zip(xs, ys)]
    sst = sum((y - my) ** 2 for y in ys)
    r2 = 1.0 - sum(r * r for r in resid) / sst if sst > 0 else None
    if n < 3:
        return LineFit(intercept, slope, None, None, n, r2)
    s2 = sum(r * r for r in resid) / (n - 2)
    se_slope = math.sqrt(s2 / sxx)
    se_intercept = math.sqrt(s2 * (1.0 / n + mx * mx / sxx))
    t = t_quantile(0.5 + CONFIDENCE / 2, n - 2)
    return LineFit(
        intercept,
        slope,
        (intercept - t * se_intercept, intercept + t * se_intercept),
        (slope - t * se_slope, slope + t * se_slope),
        n,
        r2,
    )
