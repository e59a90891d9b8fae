"""The model beside a study of measurements: a prediction where the model can express the
configuration, the reason where it cannot (a number format without a rate) or where the cluster is
too small."""

from pathlib import Path
from types import SimpleNamespace

from scalestudy.perfmodel.beside import beside_rows
from scalestudy.spec.run import RunSpec
from scalestudy.spec.studies import PlannedRun

REPO = Path(__file__).resolve().parents[2]


def test_beside_rows_predict_or_say_why_not():
    base = dict(model="llama2-7b", procs_per_node=8, device="cuda", seq_len=4096, micro_batch=2)
    specs = [RunSpec(nodes=1, **base), RunSpec(nodes=512, **base), RunSpec(nodes=1, precision="fp8", **base)]
    study = SimpleNamespace(
        runs=[PlannedRun(s, ("weak_scaling",), "FSDP") for s in specs],
        model_beside={"cluster": "h100-paper", "calibration": ["data/h200-reference/raw"]},
    )
    ok, big, fp8 = beside_rows(study, REPO)
    assert (
        ok["expressible"]
        and ok["tokens_per_s_per_device_low"] < ok["tokens_per_s_per_device"] < ok["tokens_per_s_per_device_high"]
    )
    assert not big["expressible"] and big["reason"].startswith("not predicted:") and "has 2048" in big["reason"]
    assert fp8["expressible"] and fp8["tokens_per_s_per_device"] > ok["tokens_per_s_per_device"]
    assert ok["model_version"].startswith("model.") and ok["cluster"] == "h100-paper"


def test_fp8_without_an_achievable_rate_is_refused_not_guessed():
    base = dict(model="llama2-7b", procs_per_node=8, device="cuda", seq_len=4096, micro_batch=2)
    study = SimpleNamespace(
        runs=[PlannedRun(RunSpec(nodes=1, precision="fp8", **base), ("weak_scaling",), "FSDP")],
        model_beside={"cluster": "a100-paper", "calibration": ["data/h200-reference/raw"]},
    )
    (row,) = beside_rows(study, REPO)
    assert not row["expressible"] and row["reason"].startswith(
        "not predicted: no measured or published achievable fp8 matmul rate for NVIDIA A100"
    )
