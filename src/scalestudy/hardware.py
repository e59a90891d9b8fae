"""Vendor datasheet facts per GPU: peak FLOP/s per dtype, memory, intra-node link. Pure data.

Keys are the device names exactly as `torch.cuda.get_device_name()` and NVML report them.
Peaks are dense tensor-core rates (no structured sparsity) except "fp32", which is the
non-tensor CUDA-core rate; "tf32" is the tensor-core rate on fp32 inputs. A dtype a GPU has no
tensor-core path for (V100: bf16, tf32) is absent. These are datasheet leads, not measurements.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DTYPES = ("bf16", "fp16", "fp32", "tf32")
GIB = 1 << 30
GB = 10**9


class UnknownDeviceError(LookupError):
    """No table peak for this device (and dtype); the user must pass one."""

    def __init__(self, device_name: str, dtype: str | None, reason: str):
        self.device_name = device_name
        self.dtype = dtype
        what = f"the peak FLOP/s of {device_name!r} in {dtype}" if dtype else f"the peak FLOP/s of {device_name!r}"
        super().__init__(f"{reason}; pass {what} explicitly (user_peak=..., or the command's peak option) "
                         "to compute MFU")


@dataclass(frozen=True)
class GPUSpec:
    name: str  # as torch and NVML report it
    product: str  # the datasheet's name
    peak_flops_per_s: dict[str, float]
    memory_bytes: int  # datasheet capacity; HBM "GB" are GiB, torch reports a little less usable
    memory_type: str
    memory_bytes_per_s: float
    intra_node_link: str
    intra_node_link_bytes_per_s: float  # per GPU, one direction
    datasheet: str
    notes: str = ""


@dataclass(frozen=True)
class PeakInfo:
    device_name: str
    dtype: str
    peak_flops_per_s: float
    source: str  # "table" or "user"
    detail: dict = field(default_factory=dict)


def _peaks(bf16: float | None, tf32: float | None, fp32: float, fp16: float | None = None) -> dict[str, float]:
    out = {"fp16": fp16 if fp16 is not None else bf16, "bf16": bf16, "tf32": tf32, "fp32": fp32}
    return {k: v * 1e12 for k, v in out.items() if v is not None}


_H100_SXM = dict(
    product="H100 SXM5 80GB", peak_flops_per_s=_peaks(bf16=989.4, tf32=494.7, fp32=66.9),
    memory_bytes=80 * GIB, memory_type="HBM3", memory_bytes_per_s=3.35e12,
    intra_node_link="NVLink 4 (900 GB/s bidirectional)", intra_node_link_bytes_per_s=450 * GB,
    datasheet="NVIDIA H100 Tensor Core GPU datasheet, SXM column",
)
_A100_SXM_80 = dict(
    product="A100 SXM4 80GB", peak_flops_per_s=_peaks(bf16=312, tf32=156, fp32=19.5),
    memory_bytes=80 * GIB, memory_type="HBM2e", memory_bytes_per_s=2.039e12,
    intra_node_link="NVLink 3 (600 GB/s bidirectional)", intra_node_link_bytes_per_s=300 * GB,
    datasheet="NVIDIA A100 Tensor Core GPU datasheet, 80GB SXM column",
)
_A100_SXM_40 = dict(
    product="A100 SXM4 40GB", peak_flops_per_s=_peaks(bf16=312, tf32=156, fp32=19.5),
    memory_bytes=40 * GIB, memory_type="HBM2", memory_bytes_per_s=1.555e12,
    intra_node_link="NVLink 3 (600 GB/s bidirectional)", intra_node_link_bytes_per_s=300 * GB,
    datasheet="NVIDIA A100 Tensor Core GPU datasheet, 40GB SXM column",
)
_V100_SXM2 = dict(
    peak_flops_per_s=_peaks(bf16=None, tf32=None, fp32=15.7, fp16=125),
    memory_type="HBM2", memory_bytes_per_s=900e9,
    intra_node_link="NVLink 2 (300 GB/s bidirectional)", intra_node_link_bytes_per_s=150 * GB,
    datasheet="NVIDIA Tesla V100 datasheet, SXM2 column",
)

GPUS: dict[str, GPUSpec] = {s.name: s for s in (
    GPUSpec(name="NVIDIA H100 80GB HBM3", **_H100_SXM),
    GPUSpec(
        name="NVIDIA H100 PCIe", product="H100 PCIe 80GB", peak_flops_per_s=_peaks(bf16=756.5, tf32=378, fp32=51.2),
        memory_bytes=80 * GIB, memory_type="HBM2e", memory_bytes_per_s=2.0e12,
        intra_node_link="PCIe Gen5 x16", intra_node_link_bytes_per_s=64 * GB,
        datasheet="NVIDIA H100 Tensor Core GPU datasheet, PCIe column",
        notes="an optional NVLink bridge pairs two cards at 600 GB/s bidirectional",
    ),
    GPUSpec(
        name="NVIDIA H100 NVL", product="H100 NVL 94GB", peak_flops_per_s=_peaks(bf16=835.5, tf32=417.5, fp32=60),
        memory_bytes=94 * GIB, memory_type="HBM3", memory_bytes_per_s=3.9e12,
        intra_node_link="NVLink bridge (600 GB/s bidirectional)", intra_node_link_bytes_per_s=300 * GB,
        datasheet="NVIDIA H100 Tensor Core GPU datasheet, H100 NVL column",
        notes="the bridge links pairs of cards; other pairs talk over PCIe Gen5",
    ),
    GPUSpec(
        name="NVIDIA H200", product="H200 SXM 141GB", peak_flops_per_s=_peaks(bf16=989.4, tf32=494.7, fp32=66.9),
        memory_bytes=141 * GIB, memory_type="HBM3e", memory_bytes_per_s=4.8e12,
        intra_node_link="NVLink 4 (900 GB/s bidirectional)", intra_node_link_bytes_per_s=450 * GB,
        datasheet="NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column",
    ),
    GPUSpec(
        name="NVIDIA B200", product="B200 (HGX B200)", peak_flops_per_s=_peaks(bf16=2250, tf32=1125, fp32=75),
        memory_bytes=180 * GIB, memory_type="HBM3e", memory_bytes_per_s=8.0e12,
        intra_node_link="NVLink 5 (1.8 TB/s bidirectional)", intra_node_link_bytes_per_s=900 * GB,
        datasheet="NVIDIA HGX B200 datasheet, eight-GPU totals divided by eight, sparsity halved",
    ),
    GPUSpec(name="NVIDIA A100-SXM4-80GB", **_A100_SXM_80),
    GPUSpec(name="NVIDIA A100-SXM4-40GB", **_A100_SXM_40),
    GPUSpec(
        name="NVIDIA A100 80GB PCIe", product="A100 PCIe 80GB", peak_flops_per_s=_peaks(bf16=312, tf32=156, fp32=19.5),
        memory_bytes=80 * GIB, memory_type="HBM2e", memory_bytes_per_s=1.935e12,
        intra_node_link="PCIe Gen4 x16", intra_node_link_bytes_per_s=32 * GB,
        datasheet="NVIDIA A100 Tensor Core GPU datasheet, 80GB PCIe column",
        notes="an optional NVLink bridge pairs two cards at 600 GB/s bidirectional",
    ),
    GPUSpec(
        name="NVIDIA A100-PCIE-40GB", product="A100 PCIe 40GB", peak_flops_per_s=_peaks(bf16=312, tf32=156, fp32=19.5),
        memory_bytes=40 * GIB, memory_type="HBM2", memory_bytes_per_s=1.555e12,
        intra_node_link="PCIe Gen4 x16", intra_node_link_bytes_per_s=32 * GB,
        datasheet="NVIDIA A100 Tensor Core GPU datasheet, 40GB PCIe column",
        notes="an optional NVLink bridge pairs two cards at 600 GB/s bidirectional",
    ),
    GPUSpec(name="Tesla V100-SXM2-32GB", product="V100 SXM2 32GB", memory_bytes=32 * GIB, **_V100_SXM2),
    GPUSpec(name="Tesla V100-SXM2-16GB", product="V100 SXM2 16GB", memory_bytes=16 * GIB, **_V100_SXM2),
    GPUSpec(
        name="Tesla V100-PCIE-32GB", product="V100 PCIe 32GB", peak_flops_per_s=_peaks(bf16=None, tf32=None, fp32=14, fp16=112),
        memory_bytes=32 * GIB, memory_type="HBM2", memory_bytes_per_s=900e9,
        intra_node_link="PCIe Gen3 x16", intra_node_link_bytes_per_s=16 * GB,
        datasheet="NVIDIA Tesla V100 datasheet, PCIe column",
    ),
    GPUSpec(
        name="NVIDIA L40S", product="L40S 48GB", peak_flops_per_s=_peaks(bf16=362.05, tf32=183, fp32=91.6),
        memory_bytes=48 * GIB, memory_type="GDDR6", memory_bytes_per_s=864e9,
        intra_node_link="PCIe Gen4 x16 (no NVLink)", intra_node_link_bytes_per_s=32 * GB,
        datasheet="NVIDIA L40S datasheet (bf16/fp16 with fp32 accumulate)",
    ),
)}

# Other spellings of the same devices: older drivers, and short names for planning.
# Only these exact strings are accepted; no other name is guessed.
ALIASES: dict[str, str] = {
    "A100-SXM4-40GB": "NVIDIA A100-SXM4-40GB",
    "A100-SXM-80GB": "NVIDIA A100-SXM4-80GB",
    "NVIDIA A100-SXM-80GB": "NVIDIA A100-SXM4-80GB",
    "h100-sxm": "NVIDIA H100 80GB HBM3",
    "h100-pcie": "NVIDIA H100 PCIe",
    "h100-nvl": "NVIDIA H100 NVL",
    "h200": "NVIDIA H200",
    "b200": "NVIDIA B200",
    "a100-sxm-80gb": "NVIDIA A100-SXM4-80GB",
    "a100-sxm-40gb": "NVIDIA A100-SXM4-40GB",
    "a100-pcie-80gb": "NVIDIA A100 80GB PCIe",
    "a100-pcie-40gb": "NVIDIA A100-PCIE-40GB",
    "v100-sxm2-32gb": "Tesla V100-SXM2-32GB",
    "v100-sxm2-16gb": "Tesla V100-SXM2-16GB",
    "v100-pcie-32gb": "Tesla V100-PCIE-32GB",
    "l40s": "NVIDIA L40S",
}


def _lookup(device_name: str, dtype: str | None) -> GPUSpec:
    name = ALIASES.get(device_name, device_name)
    if name not in GPUS:
        raise UnknownDeviceError(device_name, dtype, f"device {device_name!r} is not in the datasheet table "
                                 f"(known: {', '.join(sorted(GPUS))})")
    return GPUS[name]


def gpu_spec(device_name: str) -> GPUSpec:
    return _lookup(device_name, None)


def peak_flops(device_name: str, dtype: str, user_peak: float | None = None) -> PeakInfo:
    """The peak to divide by for MFU: the user's if given, else the table's."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    if user_peak is not None:
        if not user_peak > 0:
            raise ValueError(f"a user peak must be positive, got {user_peak!r}")
        return PeakInfo(device_name, dtype, float(user_peak), "user", {"note": "given by the user"})
    spec = _lookup(device_name, dtype)
    if dtype not in spec.peak_flops_per_s:
        raise UnknownDeviceError(device_name, dtype, f"{spec.product} has no {dtype} peak in its datasheet "
                                 f"(it has {', '.join(sorted(spec.peak_flops_per_s))})")
    rate = "CUDA cores (no tensor-core path)" if dtype == "fp32" else "dense tensor cores, no sparsity"
    return PeakInfo(spec.name, dtype, spec.peak_flops_per_s[dtype], "table",
                    {"product": spec.product, "datasheet": spec.datasheet, "rate": rate})
