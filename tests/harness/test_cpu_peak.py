import math
import time

import pytest
import torch

from scalestudy.harness.cpu_peak import calibrate_cpu_peak


def test_calibration_record():
    t0 = time.perf_counter()
    rec = calibrate_cpu_peak(size=256, repeats=3)
    assert time.perf_counter() - t0 < 5.0
    assert rec["source"] == "cpu_matmul_calibration"
    assert rec["dtype"] == "fp32"
    assert rec["device_name"]
    peak = rec["peak_flops_per_s"]
    assert math.isfinite(peak) and peak > 0
    d = rec["detail"]
    assert d["size"] == 256 and d["repeats"] == 3 and d["threads"] == torch.get_num_threads()
    assert len(d["timings_s"]) == 3 and all(t > 0 for t in d["timings_s"])
    assert peak == pytest.approx(2 * 256**3 / min(d["timings_s"]))


def test_bf16_dtype_name():
    assert calibrate_cpu_peak(torch.bfloat16, size=64, repeats=1)["dtype"] == "bf16"


def test_rejects_empty_calibration():
    with pytest.raises(ValueError):
        calibrate_cpu_peak(size=0)
