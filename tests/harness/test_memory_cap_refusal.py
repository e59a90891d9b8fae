"""A memory cap above the GPU's memory is an invalid configuration named in one sentence (status
invalid_config), not a crash: seen when paper-rank's 79.6 GiB cap met an H100's 79.2 GiB."""

from types import SimpleNamespace

import pytest
import torch

from scalestudy.harness import faults
from scalestudy.harness.fake_comm import cap_device_memory
from scalestudy.spec.run import RunSpec


def test_a_cap_above_the_device_is_invalid_config(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: SimpleNamespace(total_memory=int(79.2 * 2**30)))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d: "NVIDIA H100 80GB HBM3")
    spec = RunSpec(device="cuda", device_memory_cap_gib=79.6)
    with pytest.raises(faults.InvalidConfig, match=r"79.6 exceeds this device's 79.2 GiB \(NVIDIA H100 80GB HBM3\)"):
        cap_device_memory(spec, torch.device("cpu"))
