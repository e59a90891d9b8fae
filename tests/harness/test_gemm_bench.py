"""`scalestudy gemm`: the matrix products of layouts timed on one device, written as a sealed raw log
that names no path of the machine, and read back by the performance model."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scalestudy.spec.gemm import GemmSpec, layer_gemms, parse_layout
from scalestudy.spec.run import SpecError

REPO = Path(__file__).resolve().parents[2]


def test_a_layouts_products_are_megatrons_split():
    gemms = {(g.projection, g.pass_): g for g in layer_gemms("llama3.1-405b", 4096, 8)}
    assert (gemms["qkv", "fprop"].m, gemms["qkv", "fprop"].n, gemms["qkv", "fprop"].k) == (
        4096,
        16384 // 8 + 2 * 128,
        16384,
    )
    assert (gemms["proj", "dgrad"].n, gemms["proj", "dgrad"].k) == (16384 // 8, 16384)
    assert (gemms["fc1", "wgrad"].m, gemms["fc1", "wgrad"].k) == (2 * 53248 // 8, 4096)
    assert gemms["output", "fprop"].n == 128256 // 8
    with pytest.raises(ValueError, match="not MODEL/TOKENS/TP"):
        parse_layout("llama2-7b/4096")
    with pytest.raises(SpecError, match="fp8 products need a GPU"):
        GemmSpec(layouts=("tiny/256/1",), dtypes=("fp8",), device="cpu")


def test_the_benchmark_writes_a_sealed_portable_raw_log_the_model_reads(tmp_path):
    from scalestudy.measure.rawlog import read_run
    from scalestudy.perfmodel.gemm_rates import read_gemm_rates, shape_factor

    run_dir = tmp_path / "raw" / "g"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "scalestudy",
            "gemm",
            "--layouts",
            "tiny/256/1,tiny/128/2",
            "--iters",
            "2",
            "--warmup-iters",
            "1",
            "--settle-s",
            "0",
            "--run-dir",
            str(run_dir),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert (run_dir / "metrics.jsonl.gz").exists()
    log = read_run(run_dir)
    assert log.status["status"] == "ok" and log.run["kind"] == "gemm"
    text = json.dumps(log.run)
    assert str(tmp_path) not in text and str(REPO) not in text  # paths relative to the working directory
    recs = [r["value"] for r in log.records if r["key"] == "gemm"]
    assert len(recs) == 2 * 15 and all(r["tflops"] > 0 for r in recs)
    rates = read_gemm_rates([tmp_path / "raw"])
    sf = shape_factor(rates, "tiny/128/2", "bf16", ("tiny/256/1",))
    assert sf is not None and sf.layer > 0 and sf.head > 0
    assert shape_factor(rates, "tiny/128/2", "fp8", ("tiny/256/1",)) is None  # not measured: no factor


def test_portable_values_name_no_machine_path(tmp_path, monkeypatch):
    from scalestudy.measure.portable import portable_value

    monkeypatch.chdir(tmp_path)
    assert portable_value(str(tmp_path / "data" / "x")) == "data/x"
    assert portable_value("/opt/cuda/lib64:/usr/local/nvidia") == "<host>/cuda/lib64:<host>/local/nvidia"
    assert portable_value("--out=" + str(tmp_path)) == "--out=."
