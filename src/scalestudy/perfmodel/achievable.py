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
  attention  by the published rates of the attention kernels themselves (spec/catalog/attention.yaml:
             forward + backward, causal, head dim 128, sequence 4096): the calibration ran cuDNN's sm90
             flash kernels (its trace), a cluster names the kernel its stack runs (`attention_kernel`,
             e.g. FlashAttention-2, PyTorch SDPA's default on the A100 and on the H100 from torch 2.5.1),
             and the efficiency carries by the ratio of the two kernels' fractions of peak, x the
             power-limit clock ratio, x option attention_carry (default 1). FlashAttention-2 reaches
             55% of an A100's peak but 30% of an H100's, where cuDNN reaches 48% of an H100's, so the
             H100 running FA2 does its attention at 0.62x the calibration's fraction of peak. Where a
             cluster names no kernel, or a rate is missing, attention carries as the matrix products
             (x attention_carry) and the prediction says so. Attention computed as batched matrix
             products (Megatron-LM 2021: compute.MEGATRON_2021) is at the matmul efficiency.
  memory     element-wise, norms, rotary, softmax, AdamW and FSDP copies: their efficiencies are fractions
             of HBM bandwidth, so they carry by the ratio of the two GPUs' datasheet HBM bandwidths
             (an A100 SXM 80 GB's 2.039 TB/s over an H200's 4.8: its memory-bound kernels take 2.35x as
             long); not throttled by the power limit [assumed].
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from scalestudy.perfmodel.compute import LOW_PRECISION
from scalestudy.spec import catalog, strict_yaml


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
            return (
                f"matrix-product and attention efficiencies carried unchanged (no measured achievable "
                f"matmul rate for {' or '.join(self.missing)} in the GPU catalog) [assumed]"
            )
        t, c = self.target, self.calibration
        if t.gpu == c.gpu:
            return "matrix-product and attention efficiencies as calibrated (same GPU)"
        return (
            f"matrix-product and attention efficiencies x {self.factor:.3f}: achievable {t.dtype} matmul "
            f"{t.tflops:g}/{t.peak_tflops:g} TFLOP/s ({t.fraction:.1%}) on {t.gpu} [{t.source}] over "
            f"{c.tflops:g}/{c.peak_tflops:g} ({c.fraction:.1%}) on {c.gpu} [{c.source}]"
        )


def achievable_rate(gpu: str | None, dtype: str) -> AchievableRate | None:
    """The catalog's measured matrix-product rate of `gpu` (device name or alias) in `dtype`, or None."""
    name = catalog.gpu_name(gpu) if gpu else None
    if name is None:
        return None
    spec = catalog.gpu(name)
    rate = spec.matmul_achievable_flops_per_s.get(dtype)
    if rate is None:
        return None
    return AchievableRate(
        name,
        dtype,
        rate / 1e12,
        spec.peak_flops_per_s[dtype] / 1e12,
        spec.matmul_achievable_sources.get(dtype) or spec.matmul_achievable_source,
    )


def tensor_carry(target_gpu: str | None, calibration_gpu: str | None, dtype: str = "bf16") -> TensorCarry:
    """The carry of the calibration GPU's tensor-core efficiencies to `target_gpu`: the ratio of
    the two achievable fractions of peak where both are in the catalog, else 1."""
    t, c = achievable_rate(target_gpu, dtype), achievable_rate(calibration_gpu, dtype)
    if t is None or c is None:
        missing = tuple(str(g) for g, r in ((target_gpu, t), (calibration_gpu, c)) if r is None)
        return TensorCarry(1.0, t, c, missing)
    return TensorCarry(t.fraction / c.fraction, t, c)


CALIBRATION_DTYPE = "bf16"  # the calibration runs' matrix products (data/h200-reference)


@dataclass(frozen=True)
class PrecisionCarry:
    """The calibrated bf16 matrix-product efficiency carried to a lower precision's matrix products on
    `target` (FP8 linear layers): the training's kernels reach the same fraction of the achievable
    rate in that precision as the calibration's reached of its bf16 one. `factor` multiplies the
    efficiency at the target's bf16 peak (the cluster's peak_flops_per_s)."""

    dtype: str
    target: AchievableRate
    target_bf16_peak_tflops: float
    calibration: AchievableRate

    @property
    def factor(self) -> float:
        return (self.target.tflops / self.target_bf16_peak_tflops) / self.calibration.fraction

    def describe(self) -> str:
        t, c = self.target, self.calibration
        return (
            f"the layers' {self.dtype} matrix products x {self.factor:.3f} of the bf16 efficiency at "
            f"{self.target_bf16_peak_tflops:g} TFLOP/s: achievable {self.dtype} matmul {t.tflops:g} TFLOP/s on "
            f"{t.gpu} [{t.source}] over the calibration's achievable bf16 {c.tflops:g}/{c.peak_tflops:g} "
            f"({c.fraction:.1%}) on {c.gpu}"
        )


def precision_carry(target_gpu: str | None, calibration_gpu: str | None, dtype: str) -> PrecisionCarry:
    """The carry of the layers' matrix products to `dtype` on `target_gpu`; refused (ValueError, one
    sentence) where the catalog has no achievable rate in that precision: no rate is guessed from the
    datasheet's peaks."""
    t, c = achievable_rate(target_gpu, dtype), achievable_rate(calibration_gpu, CALIBRATION_DTYPE)
    if t is None or c is None:
        who = target_gpu if t is None else calibration_gpu
        what = dtype if t is None else CALIBRATION_DTYPE
        raise ValueError(
            f"no measured or published achievable {what} matmul rate for {who} in the GPU catalog "
            f"(gpus.yaml matmul_achievable_tflops.{what}): the model does not guess {what} matrix "
            "products from the datasheet peak"
        )
    peak = catalog.gpu(catalog.gpu_name(target_gpu)).peak_flops_per_s.get(CALIBRATION_DTYPE)
    return PrecisionCarry(dtype, t, peak / 1e12, c)


@dataclass(frozen=True)
class AttentionRate(AchievableRate):
    """A published rate of one attention kernel (forward + backward) on one GPU."""

    kernel: str = ""


ATTENTION_FILE = "attention.yaml"


def attention_table_problems(data) -> list[str]:
    """What is wrong with an attention table (attention.schema.json, every kernel a rate names
    declared, the calibration's kernel too, every GPU in the GPU catalog); [] when nothing."""
    import jsonschema  # local: ~90 ms to import, needed only to check the table (as spec.catalog does)

    schema = json.loads((Path(catalog.__file__).parent / "attention.schema.json").read_text())
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data), key=lambda e: list(e.path))
    problems = [f"{'/'.join(map(str, e.path)) or 'top'}: {e.message}" for e in errors]
    if errors:
        return problems
    kernels = set(data["kernels"])
    if data["calibration_kernel"] not in kernels:
        problems.append(f"calibration_kernel {data['calibration_kernel']!r} is not a declared kernel")
    for gpu, rates in data["rates"].items():
        if catalog.gpu_name(gpu) is None:
            problems.append(f"rates/{gpu}: not a GPU of the catalog")
        problems += [f"rates/{gpu}/{k}: not a declared kernel" for k in rates if k not in kernels]
    return problems


@lru_cache(maxsize=1)
def _attention_table() -> dict:
    """spec/catalog/attention.yaml, refused (naming the file and each problem) when it does not check."""
    path = Path(catalog.__file__).parent / ATTENTION_FILE
    data = strict_yaml.load_file(path)
    if problems := attention_table_problems(data):
        raise ValueError(f"{path}: " + "; ".join(problems))
    return data


def attention_kernels() -> dict[str, str]:
    """The attention kernels the table knows: name -> what it is."""
    return dict(_attention_table()["kernels"])


def calibration_attention_kernel() -> str:
    return str(_attention_table()["calibration_kernel"])


def attention_rate(gpu: str | None, kernel: str | None, dtype: str = "bf16") -> AttentionRate | None:
    """The published rate of `kernel` on `gpu` (device name or alias), or None."""
    name = catalog.gpu_name(gpu) if gpu else None
    if name is None or not kernel:
        return None
    table = _attention_table()
    if kernel not in table["kernels"]:
        raise ValueError(
            f"unknown attention kernel {kernel!r}; known: {', '.join(sorted(table['kernels']))} "
            f"(spec/catalog/{ATTENTION_FILE})"
        )
    entry = (table["rates"].get(name) or {}).get(kernel)
    peak = catalog.gpu(name).peak_flops_per_s.get(dtype)
    if entry is None or not peak:
        return None
    return AttentionRate(name, dtype, float(entry["tflops"]), peak / 1e12, str(entry["source"]), kernel)


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
    attention_target: AttentionRate | None = None  # the target's kernel's published rate
    attention_calibration: AttentionRate | None = None
    layer_precision: PrecisionCarry | None = None  # the layers' matrix products in FP8

    @property
    def matmul(self) -> float:
        return self.tensor.factor * self.clock_ratio

    @property
    def layer_matmul(self) -> float:
        """The layers' matrix products: in their own precision where it is lower than bf16."""
        return self.layer_precision.factor * self.clock_ratio if self.layer_precision else self.matmul

    @property
    def attention_by_kernel_rates(self) -> bool:
        return self.attention_target is not None and self.attention_calibration is not None

    @property
    def attention(self) -> float:
        if self.attention_by_kernel_rates:
            ratio = self.attention_target.fraction / self.attention_calibration.fraction
            return ratio * self.clock_ratio * self.attention_factor
        return self.matmul * self.attention_factor

    @property
    def memory_time_ratio(self) -> float | None:
        if not self.hbm_target or not self.hbm_calibration:
            return None
        return self.hbm_calibration / self.hbm_target

    def as_dict(self) -> dict:
        return {
            "matmul": self.matmul,
            "layer_matmul": self.layer_matmul,
            "attention": self.attention,
            "memory_time_ratio": self.memory_time_ratio,
            "achievable_matmul_ratio": self.tensor.factor,
            "clock_ratio": self.clock_ratio,
            "attention_carry": self.attention_factor,
            "attention_kernel": self.attention_target.kernel if self.attention_target else None,
        }

    def describe(self) -> str:
        mem = self.memory_time_ratio
        if self.attention_by_kernel_rates:
            t, c = self.attention_target, self.attention_calibration
            att = (
                f"x {self.attention:.3f}: {t.kernel} {t.tflops:g}/{t.peak_tflops:g} TFLOP/s ({t.fraction:.1%}) on "
                f"{t.gpu} [{t.source}] over the calibration's {c.kernel} {c.tflops:g}/{c.peak_tflops:g} "
                f"({c.fraction:.1%}) on {c.gpu} [{c.source}], x the clock ratio"
                + (f", x option attention_carry {self.attention_factor:g}" if self.attention_factor != 1.0 else "")
            )
        else:
            att = (
                "as the matrix products (no published rate of the cluster's attention kernel) [assumed]"
                if self.attention_factor == 1.0
                else f"x {self.attention:.3f} (the matrix products' x option attention_carry {self.attention_factor:g})"
            )
        low = (
            f"; {self.layer_precision.describe()}, x the clock ratio (x {self.layer_matmul:.3f} in all)"
            if self.layer_precision
            else ""
        )
        return (
            f"matrix products x {self.matmul:.3f} (achievable-matmul ratio {self.tensor.factor:.3f} x power-limit "
            f"clock ratio {self.clock_ratio:.3f}){low}; attention {att}; memory-bound kernels at the calibrated "
            "fractions of this GPU's HBM bandwidth"
            + (
                f" (x {mem:.3f} the calibration GPU's time: {self.hbm_calibration / 1e12:g} over "
                f"{self.hbm_target / 1e12:g} TB/s)"
                if mem
                else ""
            )
        )


def kernel_carry(
    target_gpu: str | None,
    calibration_gpu: str | None,
    dtype: str = "bf16",
    clock_ratio: float = 1.0,
    attention_factor: float = 1.0,
    hbm_target: float | None = None,
    hbm_calibration: float | None = None,
    attention_kernel: str | None = None,
) -> KernelCarry:
    """The per-kernel-class carry of the calibration GPU's efficiencies to `target_gpu`, whose
    stack runs `attention_kernel` (None: not known, attention carries as the matrix products)."""
    if not attention_factor > 0:
        raise ValueError(f"attention_factor must be positive, not {attention_factor!r}")
    low = precision_carry(target_gpu, calibration_gpu, dtype) if dtype in LOW_PRECISION else None
    if low is not None:  # only the layers' matrix products run in it; the rest in bf16
        dtype = CALIBRATION_DTYPE
    t = attention_rate(target_gpu, attention_kernel, dtype)
    c = attention_rate(calibration_gpu, calibration_attention_kernel(), dtype) if t is not None else None
    return KernelCarry(
        tensor_carry(target_gpu, calibration_gpu, dtype),
        clock_ratio,
        attention_factor,
        hbm_target,
        hbm_calibration,
        t,
        c,
        low,
    )
