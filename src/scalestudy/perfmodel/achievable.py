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

Kernel classes (KernelCarry): the calibration run's kernel time by class (perfmodel/measured.py, from
the profiler trace of data/h200-reference's traced run 788fb17cca: matrix products 70.1% of the busy
kernel time, attention 11.1%, element-wise 8.1%, AdamW 6.8%, FSDP copies 3.8%) fixes one efficiency a
class, and each class carries to another GPU by its own rate:
  matmul     x the achievable-matmul ratio above, x the power-limit clock ratio (perfmodel/power.py:
             the board limit of the target, its design power the catalog's power_cap_w)
  attention  as matmul, x option attention_carry (default 1): flash attention's two products (Q K^T,
             P V) run on the same tensor cores at the same clock and power limit as the GEMMs. Its own
             rate would be better, but we know of no published rate of the kernel each ledger row ran
             (PyTorch's flash backend, FlashAttention-2, on the A100; on the H100 FA2 or cuDNN depending
             on the torch build) at its shapes next to one of the kernel our H200 ran (cuDNN's sm90 flash
             kernels: cudnn_generated_fort_native_sdpa_sm90_flash_{fprop,bprop}_wgmma in the trace), so
             the option states a ratio where a user has one [assumed]. Attention computed as batched
             matrix products (Megatron-LM 2021: compute.MEGATRON_2021) is at the matmul efficiency.
  memory     element-wise, norms, rotary, softmax, AdamW and FSDP copies: their efficiencies are fractions
             of HBM bandwidth, so they carry by the ratio of the two GPUs' datasheet HBM bandwidths
             (an A100 SXM 80 GB's 2.039 TB/s over an H200's 4.8: its memory-bound kernels take 2.35x as
             long); not throttled by the power limit [assumed].
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


@dataclass(frozen=True)
class KernelCarry:
    """The calibration GPU's efficiencies carried to a target GPU, kernel class by kernel class: the
    factor by which each class's rate on the target exceeds the calibrated efficiency times the target's
    datasheet peak (matmul, attention) or HBM bandwidth (memory: 1 by construction, the efficiencies are
    fractions of it); `memory_time_ratio` is how much longer the memory-bound kernels take on the target
    than on the calibration GPU (HBM bandwidth ratio)."""

    tensor: TensorCarry
    clock_ratio: float  # power-limit throttling of tensor-core work, target over calibration
    attention_factor: float  # options.attention_carry
    hbm_target: float | None = None  # bytes/s
    hbm_calibration: float | None = None

    @property
    def matmul(self) -> float:
        return self.tensor.factor * self.clock_ratio

    @property
    def attention(self) -> float:
        return self.matmul * self.attention_factor

    @property
    def memory_time_ratio(self) -> float | None:
        if not self.hbm_target or not self.hbm_calibration:
            return None
        return self.hbm_calibration / self.hbm_target

    def as_dict(self) -> dict:
        return {"matmul": self.matmul, "attention": self.attention, "memory_time_ratio": self.memory_time_ratio,
                "achievable_matmul_ratio": self.tensor.factor, "clock_ratio": self.clock_ratio,
                "attention_carry": self.attention_factor}

    def describe(self) -> str:
        mem = self.memory_time_ratio
        att = ("as the matrix products" if self.attention_factor == 1.0 else
               f"x {self.attention:.3f} (the matrix products' x option attention_carry {self.attention_factor:g})")
        return (f"matrix products x {self.matmul:.3f} (achievable-matmul ratio {self.tensor.factor:.3f} x power-limit "
                f"clock ratio {self.clock_ratio:.3f}); attention {att}; memory-bound kernels at the calibrated "
                "fractions of this GPU's HBM bandwidth"
                + (f" (x {mem:.3f} the calibration GPU's time: {self.hbm_calibration / 1e12:g} over "
                   f"{self.hbm_target / 1e12:g} TB/s)" if mem else ""))


def kernel_carry(target_gpu: str | None, calibration_gpu: str | None, dtype: str = "bf16", clock_ratio: float = 1.0,
                 attention_factor: float = 1.0, hbm_target: float | None = None,
                 hbm_calibration: float | None = None) -> KernelCarry:
    """The per-kernel-class carry of the calibration GPU's efficiencies to `target_gpu`."""
    if not attention_factor > 0:
        raise ValueError(f"attention_factor must be positive, not {attention_factor!r}")
    return KernelCarry(tensor_carry(target_gpu, calibration_gpu, dtype), clock_ratio, attention_factor,
                       hbm_target, hbm_calibration)
