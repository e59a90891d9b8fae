"""The device-busy meter: its arithmetic on a Chrome trace, where it runs, and that it never fails a
run (the profiler part runs only on CUDA)."""

from types import SimpleNamespace

import pytest
import torch

from scalestudy.harness import device_busy
from scalestudy.harness.device_busy import applies, busy_seconds, measure


def test_overlapping_gpu_activities_count_once_and_host_events_not_at_all():
    events = [
        {"ph": "X", "cat": "kernel", "ts": 10, "dur": 30},
        {"ph": "X", "cat": "kernel", "ts": 30, "dur": 30},  # overlaps the first: [10, 60) -> 50 us
        {"ph": "X", "cat": "gpu_memcpy", "ts": 100, "dur": 5},
        {"ph": "X", "cat": "gpu_memset", "ts": 200, "dur": 5},
        {"ph": "X", "cat": "gpu_user_annotation", "ts": 0, "dur": 1000},  # a range, not work
        {"ph": "X", "cat": "cuda_runtime", "ts": 0, "dur": 1000},  # the host's launch call
        {"ph": "f", "cat": "kernel", "ts": 0},
    ]
    assert busy_seconds(events) == (pytest.approx(60e-6), 4)


@pytest.mark.parametrize(
    "spec, device, why",
    [
        (SimpleNamespace(comm="fake", profile_iters=0), torch.device("cpu"), "not a CUDA run"),
        (SimpleNamespace(comm="real", profile_iters=0), torch.device("cuda", 0), "not a rank share"),
        (SimpleNamespace(comm="fake", profile_iters=2), torch.device("cuda", 0), "own torch.profiler window"),
    ],
)
def test_the_meter_runs_on_cuda_rank_shares_alone(spec, device, why):
    assert why in applies(spec, device)


def test_a_cuda_rank_share_gets_the_meter():
    assert applies(SimpleNamespace(comm="fake", profile_iters=0), torch.device("cuda", 0)) is None


def test_each_extra_step_is_traced_alone(monkeypatch):
    ran = []
    monkeypatch.setattr(device_busy, "traced_step", lambda step, sync: (step(), (0.25, 1.0, 7))[1])
    rec = measure(ran.append, lambda: None)
    assert ran == list(range(device_busy.BUSY_STEPS))
    assert rec["available"] and rec["busy_s_per_step"] == 0.25 and rec["host_wall_s"] == [1.0] * len(ran)


def test_a_traced_step_exports_and_reads_its_trace():
    """The profiler session, the Chrome trace export and its reading, on the CPU: a CPU trace
    holds operators but no GPU activity."""
    from torch.profiler import ProfilerActivity

    from scalestudy.harness.device_busy import traced_step

    a = torch.randn(64, 64)
    busy, wall, n = traced_step(lambda: (a @ a).sum(), lambda: None, activities=[ProfilerActivity.CPU])
    assert busy == 0.0 and n == 0 and wall > 0


def test_a_long_step_is_traced_once():
    assert device_busy.steps_to_trace([0.5, 0.6]) == device_busy.BUSY_STEPS
    assert device_busy.steps_to_trace([20.0, 21.0]) == 1
    assert device_busy.steps_to_trace([]) == device_busy.BUSY_STEPS


def test_a_failing_profiler_is_recorded_not_raised(monkeypatch):
    def broken(step, sync):
        raise RuntimeError("CUPTI said no")

    monkeypatch.setattr(device_busy, "traced_step", broken)
    rec = measure(lambda i: None, lambda: None)
    assert rec == {"available": False, "reason": "RuntimeError: CUPTI said no", "method": device_busy.METHOD}


def test_no_gpu_activity_is_no_measurement(monkeypatch):
    monkeypatch.setattr(device_busy, "traced_step", lambda step, sync: (0.0, 1.0, 0))
    assert measure(lambda i: None, lambda: None)["available"] is False
