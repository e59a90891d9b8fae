"""The slowest of W ranks. A synchronous step at W ranks ends when the slowest rank is done, so
its computation takes the expected maximum of W ranks' computation times, not one rank's mean.

Each rank's computation in a step is modelled as its mean times (1 + d), d normal with standard
deviation sqrt(step_cv^2 + gpu_cv^2):
  step_cv  the step-to-step spread of one GPU, measured: the median, over the calibration's
           modelled runs with at least MIN_STEPS measured steps, of their steps' standard
           deviation over mean (data/h200-reference: 0.27-0.66%, median 0.64%). A median, so a run
           with one-off stalls does not set the tail of 2048 ranks.
  gpu_cv   the spread between GPUs of one model (option `gpu_spread_cv`, default 0): Sinha et al.,
           "Not All GPUs Are Created Equal", SC'22 (arXiv 2208.11035), report 8% (max 22%) average
           performance variation between same-SKU V100 and MI60 GPUs of five clusters; the abstract
           does not say how variation is measured (range, interquartile or to the median), and no
           H100 figure is published that we know of, so the default leaves it out and the option
           lets a user set a coefficient of variation of their own.
The step's computation is then multiplied by 1 + sigma x E[max of W standard normals]
(E[max] by numerical integration; 0 at W = 1, 2.59 at 128, 3.44 at 2048). Pure Python.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist, median

MIN_STEPS = 10
GPU_SPREAD_SOURCE = (
    "Sinha et al., Not All GPUs Are Created Equal, SC'22 (arXiv 2208.11035): 8% (max 22%) average "
    "performance variation between same-SKU GPUs (V100, MI60)"
)


@lru_cache(maxsize=256)
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normals] (0 for n = 1)."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if n == 1:
        return 0.0
    nd = NormalDist()
    lo, hi, steps = -9.0, 9.0, 6000
    h = (hi - lo) / steps
    total = 0.0
    for i in range(steps + 1):  # E[max] = integral of x n phi(x) Phi(x)^(n-1) dx (Simpson)
        x = lo + i * h
        w = 1 if i in (0, steps) else (4 if i % 2 else 2)
        total += w * x * n * nd.pdf(x) * nd.cdf(x) ** (n - 1)
    return total * h / 3


@dataclass(frozen=True)
class Straggler:
    step_cv: float
    step_cv_source: str
    gpu_cv: float = 0.0

    @property
    def sigma(self) -> float:
        return math.hypot(self.step_cv, self.gpu_cv)

    def factor(self, world_size: int) -> float:
        """What the computation of a step at `world_size` ranks is multiplied by."""
        return 1.0 + self.sigma * expected_max_normal(max(1, int(world_size)))

    def describe(self, world_size: int) -> str:
        gpu = (
            f", GPU-to-GPU {100 * self.gpu_cv:.2f}% (option gpu_spread_cv; cf. {GPU_SPREAD_SOURCE})"
            if self.gpu_cv
            else ""
        )
        return (
            f"the slowest of {world_size} ranks: computation x {self.factor(world_size):.4f} = 1 + "
            f"{100 * self.sigma:.3f}% x E[max of {world_size} standard normals] "
            f"({expected_max_normal(max(1, int(world_size))):.3f}); step-to-step spread {100 * self.step_cv:.3f}% "
            f"({self.step_cv_source}){gpu}"
        )


def step_spread(runs) -> tuple[float, str]:
    """The median step coefficient of variation of `runs` (MeasuredRun) with enough steps, and its source."""
    have = [(r.run_id, r.step_cv) for r in runs if r.step_cv is not None and r.n_steps >= MIN_STEPS]
    if not have:
        return 0.0, f"no calibration run has {MIN_STEPS} or more measured steps: no step-to-step spread"
    cv = median(c for _, c in have)
    return cv, (
        f"measured: median over {len(have)} calibration runs' measured steps "
        f"({', '.join(f'{100 * c:.2f}%' for _, c in sorted(have))})"
    )
