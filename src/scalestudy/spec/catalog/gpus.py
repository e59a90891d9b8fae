"""GPU kinds: the GPUSpec and PeakInfo types (the catalog, scalestudy.spec.catalog, looks them up).
The vendor datasheet facts per GPU (peak FLOP/s per dtype, memory, intra-node link, board power
limit) are data in scalestudy/spec/catalog/gpus.yaml (and user catalog files). Pure data.

Keys are the device names exactly as `torch.cuda.get_device_name()` and NVML report them.
Peaks are dense tensor-core rates (no structured sparsity) except "fp32", which is the
non-tensor CUDA-core rate; "tf32" is the tensor-core rate on fp32 inputs. A dtype a GPU has no
tensor-core path for (V100: bf16, tf32) is absent. These are datasheet leads, not measurements.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DTYPES = ("bf16", "fp16", "fp32", "tf32", "fp8", "nvfp4")
GIB = 1 << 30
GB = 10**9


class UnknownDeviceError(LookupError):
    """No table peak for this device (and dtype); the user must pass one."""

    def __init__(self, device_name: str, dtype: str | None, reason: str):
        self.device_name = device_name
        self.dtype = dtype
        what = f"the peak FLOP/s of {device_name!r} in {dtype}" if dtype else f"the peak FLOP/s of {device_name!r}"
        super().__init__(
            f"{reason}; pass {what} explicitly (user_peak=..., or the command's peak option) to compute MFU"
        )


@dataclass(frozen=True)
class GPUSpec:
    """A GPU kind of the catalog: its datasheet peaks, memory and intra-node link."""

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
    power_cap_w: float = 0.0  # maximum board power (TDP)
    aliases: tuple[str, ...] = ()
    # measured best dense matrix-product rate by dtype (flop/s) and where it was measured; empty if none
    matmul_achievable_flops_per_s: dict[str, float] = field(default_factory=dict)
    matmul_achievable_source: str = ""  # of the bf16/fp16 rates
    matmul_achievable_sources: dict[str, str] = field(default_factory=dict)  # dtype -> its rate's source
    matmul_achievable_data: str = ""  # the raw log of that measurement, relative to the project root
    # the board-power measurements of this GPU the power model reads (perfmodel/power.py), run
    # directories relative to the project root; empty where none was made
    power_duty_data: str = ""  # `scalestudy instrument power-duty`: duty cycles, fitted
    comm_power_data: str = ""  # `scalestudy instrument comm-power`: communication kernels, fitted
    power_burst_data: str = ""  # `scalestudy instrument burst-rate`: bursts the fit is checked against


@dataclass(frozen=True)
class PeakInfo:
    """The peak FLOP/s an MFU is taken against, and where it came from."""

    device_name: str
    dtype: str
    peak_flops_per_s: float
    source: str  # "table" or "user"
    detail: dict = field(default_factory=dict)
