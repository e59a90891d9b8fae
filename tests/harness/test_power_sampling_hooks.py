"""The harness takes power sampling from the run specification (RunSpec.power_sampling), its one
source of truth: NVML is never opened for a run whose spec says false, and the run records why."""

import json
import subprocess
import sys

import torch
from conftest import REPO, child_env

from scalestudy.harness import hooks
from scalestudy.measure.rawlog import read_run
from scalestudy.spec.run import POWER_SAMPLING_OFF, RunSpec


class Log:
    def __init__(self):
        self.records = []

    def log(self, key, value):
        self.records.append((key, value))


class FakeMonitor:
    """Stands for PowerMonitor: records which device it was asked to sample and whether idle power was read."""

    def __init__(self, device_index, period_s):
        self.device_index, self.reason, self.idle_read = device_index, None, False

    def idle_power(self, seconds):
        self.idle_read = True


def test_hooks_open_nvml_only_where_the_spec_samples_power(monkeypatch, tmp_path):
    monkeypatch.setattr(hooks, "PowerMonitor", FakeMonitor)
    cuda = torch.device("cuda", 0)  # a device object only: nothing runs on it
    on = hooks.MeasurementHooks(RunSpec(device="cuda"), tmp_path, 0, cuda, Log(), power_period_s=0.1)
    off = hooks.MeasurementHooks(
        RunSpec(device="cuda", power_sampling=False), tmp_path, 0, cuda, Log(), power_period_s=0.1
    )
    assert on.monitor.device_index == 0 and on.monitor.idle_read and on.monitor.reason is None
    assert off.monitor.device_index is None and not off.monitor.idle_read
    assert off.monitor.reason == POWER_SAMPLING_OFF


def test_a_cpu_window_without_power_sampling_records_the_spec_as_the_reason(tmp_path):
    spec = RunSpec(power_sampling=False, warmup_iters=1, measured_iters=2)
    log = Log()
    h = hooks.MeasurementHooks(spec, tmp_path, 0, torch.device("cpu"), log, power_period_s=0.1)
    h.before(spec.warmup_iters)
    h.finish(lambda n: None)
    ((key, energy),) = [r for r in log.records if r[0] == "energy"]
    assert energy["available"] is False and energy["energy_j"] is None
    assert POWER_SAMPLING_OFF == "power sampling switched off by the run specification (power_sampling: false)"
    assert energy["reason"] == POWER_SAMPLING_OFF
    assert not [r for r in log.records if r[0] == "power_sample"]


def test_scalestudy_train_no_power_makes_a_run_whose_spec_and_id_say_so(tmp_path):
    """One process on CPU, a tiny slice: `--no-power` sets the spec field, the run id is that
    spec's, and the raw log's energy record names the spec as the reason."""
    run_dir = tmp_path / "r"
    args = ["--no-power", "--precision", "fp32", "--n-layers", "2", "--seq-len", "16"]
    args += ["--warmup-iters", "1", "--measured-iters", "2", "--quiet", "--run-dir", str(run_dir)]
    out = subprocess.run(
        [sys.executable, "-m", "scalestudy", "train", *args],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    run = read_run(run_dir)
    assert run.status["status"] == "ok"
    record = json.loads((run_dir / "run.json").read_text())
    want = RunSpec(power_sampling=False, precision="fp32", n_layers=2, seq_len=16, warmup_iters=1, measured_iters=2)
    assert record["spec"]["power_sampling"] is False and record["run_id"] == want.run_id
    assert record["launch"]["power"] is False  # what readers of earlier runs look at, from the spec
    (energy,) = [r["value"] for r in run.records if r["key"] == "energy"]
    assert energy["available"] is False and energy["reason"] == POWER_SAMPLING_OFF
