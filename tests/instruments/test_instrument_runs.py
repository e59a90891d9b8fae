"""`scalestudy instrument NAME`: the matmul sweep end to end on CPU into a sealed raw log the audit
reads; the power measurements' phases and samples with a fake NVML board and stand-in kernels, written
and read back as the harness and the model do; and their refusal, in one sentence, where a GPU, NVML
or cupy is missing."""

import gzip
import importlib.util
import json
import signal
from pathlib import Path

import pytest
import torch
from instrument_fakes import BurstStub, CommStub, DutyStub, FakeNVML, record_run

from scalestudy.analysis.audit import verify_checksums
from scalestudy.perfmodel import power
from scalestudy.cli import main
from scalestudy.harness.faults import InvalidConfig
from scalestudy.harness.instruments import burst_rate, comm_power, power_duty
from scalestudy.harness.instruments.common import machine, open_board
from scalestudy.harness.provenance import local_facts
from scalestudy.measure.instruments import read_instrument, sweep_best
from scalestudy.measure.rawlog import RawLogError, read_run
from scalestudy.perfmodel.power import fit_comm, read_duty
from scalestudy.spec.instruments import BurstRateSpec, CommPowerSpec, MatmulSweepSpec, PowerDutySpec

REPO = Path(__file__).resolve().parents[2]
CPU = torch.device("cpu")
FAST_SAMPLES = {"sample_s": 0.002}


def committed(rel: str) -> list[dict]:
    return [json.loads(line) for line in gzip.decompress((REPO / rel).read_bytes()).decode().splitlines()]


@pytest.fixture
def in_process(monkeypatch):
    """A one-process run started from this process: the launcher's variables it sets and the SIGTERM
    handling it changes are undone afterwards."""
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SCALESTUDY_INJECT_FAULT"):
        monkeypatch.delenv(k, raising=False)
    handler = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, handler)


def fake_measurement(board, method: dict) -> dict:
    return {**machine(CPU, [local_facts(CPU)], board), **method}


def test_the_matmul_sweep_runs_on_cpu_into_a_sealed_raw_log_the_audit_reads(tmp_path, in_process):
    run_dir = tmp_path / "raw" / "sweep"
    spec_file = tmp_path / "sweep.yaml"
    spec_file.write_text("device: cpu\ngrid: [16, 32]\nllama: [tiny/64]\nwarmup_iters: 1\niters: 5\n")
    assert (
        main(
            [
                "instrument",
                "matmul-sweep",
                "--spec",
                str(spec_file),
                "--tp",
                "1,2",
                "--iters",
                "2",
                "--run-dir",
                str(run_dir),
                "--quiet",
            ]
        )
        == 0
    )
    assert (run_dir / "metrics.jsonl.gz").exists() and verify_checksums(tmp_path / "raw") == []
    log = read_run(run_dir)
    assert log.status["status"] == "ok" and log.run["kind"] == "matmul-sweep"
    spec = MatmulSweepSpec.from_dict(log.run["spec"])
    assert log.run["run_id"] == spec.run_id and spec.run_id.startswith("matmul-cpu-")
    sweep = read_instrument(run_dir, "matmul-sweep")
    gemms = sweep.of("gemm")
    assert [(r["m"], r["n"], r["k"]) for r in gemms] == [(m, n, k) for _, m, n, k in spec.shapes()]
    assert len(gemms) == 8 + 2 * 7 * 3 and [r["index"] for r in gemms] == list(range(len(gemms)))
    assert gemms[-1]["set"] == "llama" and gemms[-1]["tp"] == 2 and "power_w" not in gemms[0]
    assert all(r["mean_s"] > 0 for r in gemms)
    assert sweep_best(run_dir)[0] == sweep_best(run_dir)[1]
    assert sweep.header["torch"] == torch.__version__ and sweep.header["iters"] == 2 and sweep.header["device_name"]
    with pytest.raises(RawLogError, match="a run of kind 'matmul-sweep', not power-duty"):
        read_instrument(run_dir, "power-duty")


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU host the command would measure")
@pytest.mark.parametrize(
    "name, sentence",
    [
        ("power-duty", "power-duty measures an NVIDIA GPU and torch sees no CUDA device here; run it on a GPU host"),
        ("comm-power", "comm-power measures an NVIDIA GPU and torch sees no CUDA device here; run it on a GPU host"),
        ("burst-rate", "burst-rate measures an NVIDIA GPU and torch sees no CUDA device here; run it on a GPU host"),
        ("matmul-sweep", "device 'cuda' was asked for but torch sees no CUDA device"),
    ],
)
def test_a_measurement_without_cuda_is_refused_in_one_sentence(name, sentence, tmp_path, capsys, in_process):
    assert main(["instrument", name, "--run-dir", str(tmp_path / "r")]) == 2
    assert capsys.readouterr().err == f"scalestudy instrument: {sentence}\n"
    assert not (tmp_path / "r").exists()


def test_without_nvml_or_cupy_the_refusal_names_what_is_missing():
    with pytest.raises(
        InvalidConfig,
        match=r"^power-duty reads the GPU's board power through NVML, which does not "
        r"answer here \(NVMLError: Driver Not Loaded\)$",
    ):
        open_board("power-duty", nvml=FakeNVML(fail_init=True))
    if importlib.util.find_spec("cupy") is None:
        with pytest.raises(
            InvalidConfig, match="^comm-power compiles its CUDA kernels with cupy, which does not import"
        ):
            comm_power.require_cupy()


def test_the_duty_cycles_phases_and_samples_with_a_fake_board(tmp_path):
    spec = PowerDutySpec(
        warmup_compute_s=0.005,
        warmup_copy_s=0.005,
        idle_s=0.01,
        continuous_s=0.01,
        duty_periods_s=(0.002, 0.004),
        duty_s=0.01,
        alternate_period_s=0.004,
        alternate_s=0.01,
        together_s=0.01,
        **FAST_SAMPLES,
    )
    board = open_board("power-duty", nvml=FakeNVML(watts=300.0))
    run_dir = record_run(
        tmp_path / spec.run_id,
        spec,
        fake_measurement(board, power_duty.method(spec)),
        lambda log: power_duty.duty_cycles(spec, DutyStub(), board, log, quiet=True),
    )
    duty = read_instrument(run_dir, "power-duty")
    phases = duty.of("phase")
    assert [p["phase"] for p in phases] == [name for name, *_ in spec.phases()]
    for p in phases:
        assert p["t0"] < p["t1"] and p["wall_s"] == pytest.approx(p["t1"] - p["t0"])
        assert p["mean_power_w"] == pytest.approx(300.0, rel=0.05) and p["energy_j"] == pytest.approx(
            300 * p["wall_s"], rel=0.05
        )
        assert 0 <= p["compute_share"] <= 1 and 0 <= p["copy_share"] <= 1
        if p["pattern"] == "idle":
            assert p["compute_s"] == p["copy_s"] == 0.0
        elif p["pattern"] in ("continuous", "duty"):
            ran, idle = ("compute_s", "copy_s") if p["phase"].startswith("compute") else ("copy_s", "compute_s")
            assert p[ran] > 0 and p[idle] == 0.0
        else:
            assert p["compute_s"] > 0 and p["copy_s"] >= 0
    samples = duty.of("sample")
    assert len(samples) >= 20 and {s["phase"] for s in samples} <= {"start", "between", *(p["phase"] for p in phases)}
    assert {(s["power_w"], s["sm_mhz"], s["temp_c"], s["instant_w"]) for s in samples} == {(300.0, 1980, 41, 300.0)}
    header, fitted = read_duty(run_dir)
    assert (header["power_limit_w"], header["driver"]) == (700.0, "580.0")
    assert header["matmul"] == "bf16 8192x8192x8192 torch.mm, random data"
    assert [p.phase for p in fitted] == [p["phase"] for p in phases]


def test_the_communication_phases_with_a_fake_board_are_the_committed_phases(tmp_path):
    spec = CommPowerSpec(phase_s=0.01, gap_s=0.0, **FAST_SAMPLES)
    board = open_board("comm-power", nvml=FakeNVML(watts=150.0))
    run_dir = record_run(
        tmp_path / spec.run_id,
        spec,
        fake_measurement(board, comm_power.method(spec, None)),
        lambda log: comm_power.comm_phases(spec, CommStub(), board, log, quiet=True),
    )
    phases = read_instrument(run_dir, "comm-power").of("phase")
    want = [p["phase"] for p in committed("data/comm-power/h200-comm-power.jsonl.gz") if p["kind"] == "phase"]
    assert [p["phase"] for p in phases] == want
    for p in phases:
        assert p["mean_power_w"] == pytest.approx(150.0, rel=0.05)
        if p["phase"].startswith("trickle_"):
            assert p["chunks_min"] == p["chunks_max"] == int(spec.phase_s * 1e9) // p["period_ns"]
            assert p["achieved_network_gb_per_s"] == pytest.approx(p["network_gb_per_s"], rel=0.01)
    comm = fit_comm(run_dir)
    assert comm.n_phases == 12 and comm.idle_w == pytest.approx(150.0, rel=0.05)


def test_the_bursts_bookkeeping_with_a_fake_board(tmp_path):
    from scalestudy.perfmodel.burst_check import rows

    product_s = 2e-4
    spec = BurstRateSpec(
        bursts_ms=(1, 2),
        gap_ms=0.5,
        phase_s=0.01,
        rest_s=0.0,
        warmup_products=2,
        reference_products=5,
        back_to_back_group=4,
        **FAST_SAMPLES,
    )
    board = open_board("burst-rate", nvml=FakeNVML(watts=500.0))
    run_dir = record_run(
        tmp_path / spec.run_id,
        spec,
        fake_measurement(board, burst_rate.method(spec)),
        lambda log: burst_rate.burst_phases(spec, BurstStub(product_s), board, log, quiet=True),
    )
    phases = read_instrument(run_dir, "burst-rate").of("phase")
    assert [p["phase"] for p in phases] == ["back_to_back", "burst_1ms", "burst_2ms", "back_to_back_end"]
    for p in phases:
        assert p["tflops"] == pytest.approx(2 * 8192**3 / product_s / 1e12)
        assert p["gpu_s"] == pytest.approx(p["products"] * product_s) and 0 < p["compute_share"] <= 1
        assert p["mean_power_w"] == pytest.approx(500.0, rel=0.05)
        if p["burst_ms_target"] is None:
            assert p["burst_products"] is None and p["burst_ms_measured"] is None and p["products"] % 4 == 0
        else:
            k = round(p["burst_ms_target"] / 1000 / product_s)
            assert p["burst_products"] == k and p["burst_ms_measured"] == pytest.approx(1000 * k * product_s)
    assert [r["phase"] for r in rows(run_dir, power.load("NVIDIA H200", REPO))] == [p["phase"] for p in phases]


def test_the_defaults_are_the_committed_runs_constants():
    duty = committed("data/power-duty/h200-power-duty.jsonl.gz")[0]
    assert {k: duty[k] for k in ("matmul", "copy", "sample_s")} == {
        k: power_duty.method(PowerDutySpec())[k] for k in ("matmul", "copy", "sample_s")
    }
    comm = committed("data/comm-power/h200-comm-power.jsonl.gz")
    keys = ("threads_per_block", "phase_s", "gap_s", "ring_bytes", "chunk_network_bytes", "bytes_note")
    assert {k: comm[0][k] for k in keys} == {k: comm_power.method(CommPowerSpec(), None)[k] for k in keys}
    periods = {p["phase"]: p["period_ns"] for p in comm if p["kind"] == "phase" and "period_ns" in p}
    spec = CommPowerSpec()
    assert periods == {f"trickle_{k}_{r:g}": spec.period_ns(r) for k in spec.blocks for r in spec.rates_gb_per_s}
    burst = committed("data/burst-rate/h100-burst-rate.jsonl.gz")
    keys = ("matmul", "gap_ms", "phase_s", "sample_s")
    assert {k: burst[0][k] for k in keys} == {k: burst_rate.method(BurstRateSpec())[k] for k in keys}
    assert [p["burst_ms_target"] for p in burst if p["kind"] == "phase"] == [None, *BurstRateSpec().bursts_ms, None]
