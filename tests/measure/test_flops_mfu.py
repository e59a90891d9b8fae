import json

import pytest

from scalestudy.measure.metrics import MFUError, device_peak_record, flops_per_token, mfu, throughput
from scalestudy.spec import catalog
from scalestudy.spec.catalog import peak_flops
from scalestudy.spec.catalog.gpus import UnknownDeviceError


def test_llama2_7b_flops_per_token_by_hand():
    d, layers, ffn, vocab, t = 4096, 32, 11008, 32000, 4096
    per_layer = 4 * d * d + 3 * d * ffn + 2 * d  # wq wk wv wo, w1 w2 w3, two norms
    non_embedding = layers * per_layer + d + vocab * d  # + final norm + output head
    assert non_embedding == 6_607_343_616
    out = flops_per_token("llama2-7b", t)
    assert out["n_params_non_embedding"] == non_embedding
    assert out["n_params"] == non_embedding + vocab * d == 6_738_415_616
    assert out["flops_per_token"] == 6 * non_embedding + 12 * layers * d * t == 46_086_512_640
    assert out["formula"] == "6*N_non_embedding + 12*n_layers*dim*seq_len"
    assert (out["n_layers"], out["dim"], out["seq_len"]) == (32, 4096, 4096)


def test_flops_record_has_the_raw_log_fields():
    fields = {"flops_per_token", "formula", "n_params", "n_params_non_embedding", "n_layers", "dim", "seq_len"}
    assert set(flops_per_token("tiny", 128)) == fields


def test_mfu_value_and_error_above_one():
    fpt = flops_per_token("llama2-7b", 4096)["flops_per_token"]
    peak = peak_flops("NVIDIA H100 80GB HBM3", "bf16").peak_flops_per_s
    assert mfu(8000, fpt, peak) == pytest.approx(8000 * fpt / 989.4e12)
    with pytest.raises(MFUError) as e:
        mfu(30000, fpt, peak)
    assert "30000" in str(e.value) and "9.894e+14" in str(e.value)


def test_table_peaks():
    for name in ("NVIDIA H100 80GB HBM3", "NVIDIA H200"):
        info = peak_flops(name, "bf16")
        assert info.peak_flops_per_s == 989.4e12 and info.source == "table" and info.device_name == name
    assert peak_flops("NVIDIA A100-SXM4-80GB", "bf16").peak_flops_per_s == 312e12
    assert peak_flops("Tesla V100-SXM2-32GB", "fp16").peak_flops_per_s == 125e12
    assert peak_flops("h100-sxm", "bf16").device_name == "NVIDIA H100 80GB HBM3"  # explicit alias
    assert catalog.gpu("NVIDIA H200").intra_node_link_bytes_per_s == 450e9
    for spec in catalog.gpus().values():
        assert spec.memory_bytes > 0 and spec.memory_bytes_per_s > 0
        assert all(p > 1e12 for p in spec.peak_flops_per_s.values())


def test_unknown_device_and_missing_dtype_name_the_device():
    with pytest.raises(UnknownDeviceError) as e:
        peak_flops("NVIDIA H100", "bf16")  # no fuzzy match to an H100 variant
    assert "'NVIDIA H100'" in str(e.value) and "pass the peak" in str(e.value)
    with pytest.raises(UnknownDeviceError) as e:
        peak_flops("Tesla V100-SXM2-32GB", "bf16")
    assert "bf16" in str(e.value) and "Tesla V100-SXM2-32GB" in str(e.value)
    with pytest.raises(ValueError):
        peak_flops("NVIDIA H200", "int8")


def test_user_peak_wins_and_is_recorded():
    info = peak_flops("Some Future GPU", "bf16", user_peak=1.5e15)
    assert (info.peak_flops_per_s, info.source, info.device_name) == (1.5e15, "user", "Some Future GPU")
    rec = device_peak_record(info)
    assert set(rec) == {"device_name", "dtype", "peak_flops_per_s", "source", "detail"}
    json.dumps(rec)
    with pytest.raises(ValueError):
        peak_flops("x", "bf16", user_peak=0)


def _it(rank, step, phase, dt, tokens=4096):
    return {
        "key": "iteration",
        "value": {"step": step, "phase": phase, "step_time_s": dt, "tokens": tokens},
        "metadata": {"rank": rank},
    }


def test_throughput_uses_measured_steps_and_the_slowest_rank():
    recs = [
        _it(0, 0, "warmup", 10.0),
        _it(1, 0, "warmup", 10.0),
        _it(0, 1, "measured", 1.0),
        _it(1, 1, "measured", 2.0),
        _it(0, 2, "measured", 3.0),
        _it(1, 2, "measured", 1.0),
        {"key": "flops", "value": {}, "metadata": {"rank": 0}},
    ]
    out = throughput(recs, world_size=2)
    assert out["n_steps"] == 2
    assert out["tokens_per_s"] == pytest.approx(2 * 4096 / (2.0 + 3.0))
    assert out["tokens_per_s_per_device"] == pytest.approx(out["tokens_per_s"] / 2)
    assert out["step_time_mean_s"] == pytest.approx(2.5) and out["step_time_median_s"] == pytest.approx(2.5)
    assert out["n_ranks_seen"] == 2


def test_throughput_errors():
    with pytest.raises(ValueError, match="no measured"):
        throughput([_it(0, 0, "warmup", 1.0)], world_size=1)
    with pytest.raises(ValueError, match="disagree"):
        throughput([_it(0, 1, "measured", 1.0, 10), _it(1, 1, "measured", 1.0, 20)], world_size=2)


def test_flops_command_prints_json(capsys):
    import argparse

    from scalestudy.cli.measure import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["flops", "--model", "llama2-7b", "--seq-len", "4096"])
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["flops_per_token"] == 46_086_512_640 and out["n_params_non_embedding"] == 6_607_343_616
