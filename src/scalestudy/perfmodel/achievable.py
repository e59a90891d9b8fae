"""Carrying tensor-core efficiencies between GPUs by their measured achievable matrix-product rates.

The calibrated efficiencies (compute.py: eta_matmul, eta_attention) are fractions of the
calibration GPU's datasheet peak. GPUs do not reach the same fraction of their peaks: the best
bf16 matrix product of a shape sweep reaches 86.9% of an A100 SXM's 312 TFLOP/s but 80.3% of an
H100 SXM's 989 [published: "Maximum Achievable Matmul FLOPS", stas00/ml-engineering
compute/accelerator/README.md]. Where the catalog holds such a rate for both GPUs
(gpus.yaml `matmul_achievable_tflops`), the efficiencies carry by the ratio of those fractions:

    eta_target = eta_calibration x (achievable_target / peak_target) / (achievable_cal / peak_cal)

i.e. the training's kernels reach the same fraction of what the GPU's matrix products can reach.
Where either rate is missing the efficiencies carry unchanged, and the prediction says so.

Attention carries by the same ratio: flash attention's two products (Q K^T, P V) run on the same
tensor cores at the same clock and power limit as the GEMMs, and nothing measured separates the
two on another GPU [assumed]. Memory-bound work is not affected (its efficiencies are fractions of
HBM bandwidth).

The rates are read from the catalog files as written (the catalog's GPUSpec does not hold them:
it is shared with the analysis code, and the performance model is the rate's only user).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml


class AchievableRateError(ValueError):
    pass


@dataclass(frozen=True)
class AchievableRate:
    gpu: str
    dtype: str
    tflops: float
    peak_tflops: float
    source: str

    @property
    def fraction(self) -> float:
        return self.tflops / self.peak_tflops


@dataclass(frozen=True)
class TensorCarry:
    """The factor by which the calibrated tensor-core efficiencies are multiplied on `target`."""

    factor: float
    target: AchievableRate | None
    calibration: AchievableRate | None
    missing: tuple[str, ...] = ()  # GPUs without a rate (then factor is 1)

    def describe(self) -> str:
        if self.missing:
            return (f"matrix-product and attention efficiencies carried unchanged (no measured achievable "
                    f"matmul rate for {' or '.join(self.missing)} in the GPU catalog) [assumed]")
        t, c = self.target, self.calibration
        if t.gpu == c.gpu:
            return "matrix-product and attention efficiencies as calibrated (same GPU)"
        return (f"matrix-product and attention efficiencies x {self.factor:.3f}: achievable {t.dtype} matmul "
                f"{t.tflops:g}/{t.peak_tflops:g} TFLOP/s ({t.fraction:.1%}) on {t.gpu} [{t.source}] over "
                f"{c.tflops:g}/{c.peak_tflops:g} ({c.fraction:.1%}) on {c.gpu} [{c.source}]")


@lru_cache(maxsize=32)
def _file_gpus(path: str, mtime: float) -> dict:
    return (yaml.safe_load(Path(path).read_text()) or {}).get("gpus") or {}


def achievable_rate(gpu: str | None, dtype: str) -> AchievableRate | None:
    """The catalog's measured matrix-product rate of `gpu` (device name or alias) in `dtype`, or None."""
    from scalestudy import catalog

    name = catalog.gpu_name(gpu) if gpu else None
    if name is None:
        return None
    for f in catalog.files():
        entry = _file_gpus(f, Path(f).stat().st_mtime).get(name)
        if entry is None:
            continue
        rate = (entry.get("matmul_achievable_tflops") or {}).get(dtype)
        peak = (entry.get("peak_tflops") or {}).get(dtype)
        if rate is None or peak is None:
            return None
        if rate > peak:
            raise AchievableRateError(f"{f}: GPU {name!r}: matmul_achievable_tflops.{dtype} ({rate:g}) exceeds "
                                      f"its peak_tflops.{dtype} ({peak:g})")
        return AchievableRate(name, dtype, float(rate), float(peak), str(entry["matmul_achievable_source"]))
    return None


def tensor_carry(target_gpu: str | None, calibration_gpu: str | None, dtype: str = "bf16") -> TensorCarry:
    """The carry of the calibration GPU's tensor-core efficiencies to `target_gpu`: the ratio of
    the two achievable fractions of peak where both are in the catalog, else 1."""
    t, c = achievable_rate(target_gpu, dtype), achievable_rate(calibration_gpu, dtype)
    if t is None or c is None:
        missing = tuple(str(g) for g, r in ((target_gpu, t), (calibration_gpu, c)) if r is None)
        return TensorCarry(1.0, t, c, missing)
    return TensorCarry(t.fraction / c.fraction, t, c)
