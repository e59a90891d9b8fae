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
"""

from __future__ import annotations

from dataclasses import dataclass

from scalestudy.spec import catalog


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


def achievable_rate(gpu: str | None, dtype: str) -> AchievableRate | None:
    """The catalog's measured matrix-product rate of `gpu` (device name or alias) in `dtype`, or None."""
    name = catalog.gpu_name(gpu) if gpu else None
    if name is None:
        return None
    spec = catalog.gpu(name)
    rate = spec.matmul_achievable_flops_per_s.get(dtype)
    if rate is None:
        return None
    return AchievableRate(name, dtype, rate / 1e12, spec.peak_flops_per_s[dtype] / 1e12, spec.matmul_achievable_source)


def tensor_carry(target_gpu: str | None, calibration_gpu: str | None, dtype: str = "bf16") -> TensorCarry:
    """The carry of the calibration GPU's tensor-core efficiencies to `target_gpu`: the ratio of
    the two achievable fractions of peak where both are in the catalog, else 1."""
    t, c = achievable_rate(target_gpu, dtype), achievable_rate(calibration_gpu, dtype)
    if t is None or c is None:
        missing = tuple(str(g) for g, r in ((target_gpu, t), (calibration_gpu, c)) if r is None)
        return TensorCarry(1.0, t, c, missing)
    return TensorCarry(t.fraction / c.fraction, t, c)
