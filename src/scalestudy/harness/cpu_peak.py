"""A measured peak for CPU runs: the best matrix-product rate of this process's torch threads.

GPU peaks come from datasheets; a CPU has no single one, so MFU on CPU divides by this instead.
"""

from __future__ import annotations

import platform
import time

import torch

# The names RunSpec.precision uses; other dtypes keep torch's name.
_DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def calibrate_cpu_peak(dtype: torch.dtype = torch.float32, size: int = 1024, repeats: int = 10) -> dict:
    """The `device_peak` record value: 2*size^3 / (fastest of `repeats` timed products)."""
    if size < 1 or repeats < 1:
        raise ValueError(f"size and repeats must be at least 1, got {size} and {repeats}")
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=gen).to(dtype)
    b = torch.randn(size, size, generator=gen).to(dtype)
    out = torch.empty(size, size, dtype=dtype)
    torch.mm(a, b, out=out)  # untimed: first-call allocation and dispatch
    timings: list[float] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.mm(a, b, out=out)
        timings.append(time.perf_counter() - t0)
    best = min(timings)
    return {
        "device_name": cpu_model_name(),
        "dtype": _DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch.")),
        "peak_flops_per_s": 2.0 * size**3 / best,
        "source": "cpu_matmul_calibration",
        "detail": {"size": size, "repeats": repeats, "threads": torch.get_num_threads(), "timings_s": timings},
    }
