import gzip
import json
import re

import pytest
import torch

from scalestudy.harness.profiling import ProfilerWindow
from scalestudy.spec.run import RunSpec

CPU = torch.device("cpu")


def run_iterations(window: ProfilerWindow, n: int) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(n):
        model(torch.randn(4, 32)).square().mean().backward()
        opt.step()
        opt.zero_grad()
        window.step()


def profiler_steps(path) -> list[int]:
    with gzip.open(path, "rt") as f:
        trace = json.load(f)
    names = {e.get("name", "") for e in trace["traceEvents"]}
    return sorted(int(m.group(1)) for n in names if (m := re.fullmatch(r"ProfilerStep#(\d+)", n)))


@pytest.mark.filterwarnings("ignore:Profiler won't be using warmup")
@pytest.mark.parametrize("warmup,start,iters", [(2, 1, 2), (0, 0, 3)])
def test_trace_holds_exactly_the_traced_steps(tmp_path, warmup, start, iters):
    spec = RunSpec(warmup_iters=warmup, measured_iters=4, profile_start=start, profile_iters=iters)
    with ProfilerWindow(spec, tmp_path, rank=3, device=CPU) as window:
        run_iterations(window, spec.warmup_iters + spec.measured_iters)
    first = warmup + start
    rec = window.record()
    assert rec == {
        "trace_file": "traces/rank-00003.json.gz",
        "steps": [first, first + iters - 1],
        "activities": ["cpu"],
    }
    assert profiler_steps(tmp_path / rec["trace_file"]) == list(range(first, first + iters))
    assert sorted(p.name for p in (tmp_path / "traces").iterdir()) == ["rank-00003.json.gz"]


def test_start_stop_methods(tmp_path):
    spec = RunSpec(warmup_iters=1, measured_iters=3, profile_start=2, profile_iters=1)
    window = ProfilerWindow(spec, tmp_path, rank=0, device=CPU)
    window.start()
    run_iterations(window, 4)
    window.stop()
    assert window.record()["steps"] == [3, 3]
    assert profiler_steps(tmp_path / "traces/rank-00000.json.gz") == [3]


def test_no_profile_iters_does_nothing(tmp_path):
    spec = RunSpec(warmup_iters=1, measured_iters=2, profile_iters=0)
    with ProfilerWindow(spec, tmp_path, rank=0, device=CPU) as window:
        run_iterations(window, 3)
    assert window.record() is None
    assert not (tmp_path / "traces").exists()


def test_window_cut_short_writes_no_trace(tmp_path):
    spec = RunSpec(warmup_iters=1, measured_iters=4, profile_start=1, profile_iters=2)
    with ProfilerWindow(spec, tmp_path, rank=0, device=CPU) as window:
        run_iterations(window, 3)  # stops inside the traced steps 2..3
    assert window.record() is None
    assert not (tmp_path / "traces").exists() or not any((tmp_path / "traces").iterdir())


def test_only_rank_0_hears_kineto():
    """Kineto's profiler_start / profiler_stop lines are left to rank 0 (every rank still traces;
    tests/launch/test_launch.py counts the lines of a 2-process run); a KINETO_LOG_LEVEL the user
    set is kept."""
    from scalestudy.harness.profiling import KINETO_LOG_LEVEL_ENV, KINETO_SILENT, quiet_kineto

    env = {}
    quiet_kineto(0, env)
    assert env == {}
    quiet_kineto(1, env)
    assert env == {KINETO_LOG_LEVEL_ENV: KINETO_SILENT}
    env = {KINETO_LOG_LEVEL_ENV: "0"}
    quiet_kineto(1, env)
    assert env == {KINETO_LOG_LEVEL_ENV: "0"}
