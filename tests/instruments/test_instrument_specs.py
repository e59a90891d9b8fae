"""The instruments' specs (spec/instruments.py): their defaults are the constants of the scripts that
made the committed data, their ids are stable, and a field that cannot work is refused with a
sentence naming it."""

import gzip
import json
from pathlib import Path

import pytest

from scalestudy.spec.instruments import SPECS, BurstRateSpec, CommPowerSpec, MatmulSweepSpec, PowerDutySpec
from scalestudy.spec.run import SpecError, field_doc

REPO = Path(__file__).resolve().parents[2]


def committed(rel: str) -> list[dict]:
    return [json.loads(line) for line in gzip.decompress((REPO / rel).read_bytes()).decode().splitlines()]


def test_the_ids_are_stable_and_differ_by_seed_only():
    assert MatmulSweepSpec().run_id == "matmul-cuda-7b6f1e4bdd-seed0"
    assert PowerDutySpec().run_id == "power-duty-797ccedffe-seed0"
    assert CommPowerSpec().run_id == "comm-power-e2b379b319-seed0"
    assert BurstRateSpec().run_id == "burst-rate-9165e832f7-seed0"
    assert MatmulSweepSpec(device="cpu").config_id.startswith("matmul-cpu-")
    for cls in SPECS.values():
        spec = cls(seed=3)
        assert spec.config_id == cls().config_id and spec.run_id == f"{cls().config_id}-seed3"
        assert cls.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    assert PowerDutySpec(duty_s=3.0).config_id != PowerDutySpec().config_id


@pytest.mark.parametrize("cls", list(SPECS.values()))
def test_every_field_is_documented(cls):
    from dataclasses import fields

    for f in fields(cls):
        d = field_doc(f)
        assert d.meaning.strip() and d.allowed, f"{cls.__name__}.{f.name}"
        if (
            str(f.type) in ("int", "float")
            or str(f.type).startswith("tuple[int")
            or str(f.type).startswith("tuple[float")
        ):
            assert d.unit, f"{cls.__name__}.{f.name} has no unit"


def test_the_sweep_times_the_committed_sweeps_shapes_in_its_order():
    recs = committed("data/h200-matmul/h200-matmul-sweep.jsonl.gz")
    machine = recs[0]["metadata"]
    spec = MatmulSweepSpec()
    assert (spec.warmup_iters, spec.iters) == (machine["warmup"], machine["iters"])
    got = [({**w, "index": i}, m, n, k) for i, (w, m, n, k) in enumerate(spec.shapes())]
    want = [
        (
            {k: v for k, v in r["metadata"].items() if k not in ("power_w", "sm_clock_mhz")},
            r["value"]["m"],
            r["value"]["n"],
            r["value"]["k"],
        )
        for r in recs
        if r["key"] == "gemm"
    ]
    assert len(got) == 742 and got == want


def test_the_duty_cycles_are_the_committed_phases():
    recs = committed("data/power-duty/h200-power-duty.jsonl.gz")
    phases = [r for r in recs if r["kind"] == "phase"]
    keys = ("pattern", "period_s", "on_fraction", "gap_s")
    want = [(p["phase"], {k: p[k] for k in keys if k in p}) for p in phases]
    assert [(name, meta) for name, _, _, meta in PowerDutySpec().phases()] == want
    assert len(want) == 28


@pytest.mark.parametrize(
    "cls, fields_, field, words",
    [
        (MatmulSweepSpec, {"grid": (0, 64)}, "grid", "0 is below 1"),
        (MatmulSweepSpec, {"llama": ("llama2-7b",)}, "llama", "is not MODEL/TOKENS"),
        (MatmulSweepSpec, {"llama": ("nope/64",)}, "llama", "unknown model 'nope'"),
        (MatmulSweepSpec, {"iters": 0}, "iters", "must be at least 1"),
        (MatmulSweepSpec, {"device": "tpu"}, "device", "'tpu' is not one of cpu, cuda"),
        (PowerDutySpec, {"on_fractions": (0.5, 1.0)}, "on_fractions", "each above 0 and below 1"),
        (PowerDutySpec, {"alternations": ("0.7/0.5",)}, "alternations", "sum at most 1"),
        (PowerDutySpec, {"duty_s": 0.0}, "duty_s", "must be above 0"),
        (CommPowerSpec, {"ring_bytes": 3 << 20, "chunk_bytes": 2 << 20}, "ring_bytes", "a multiple of chunk_bytes"),
        (CommPowerSpec, {"threads": 2048}, "threads", "1 to 1024 threads"),
        (CommPowerSpec, {"blocks": ()}, "blocks", "at least one value"),
        (BurstRateSpec, {"bursts_ms": (5, 0)}, "bursts_ms", "0 is below 1"),
        (BurstRateSpec, {"seed": -1}, "seed", "must not be negative"),
    ],
)
def test_a_field_that_cannot_work_is_refused_by_name(cls, fields_, field, words):
    with pytest.raises(SpecError) as e:
        cls(**fields_)
    assert [f for f, _ in e.value.problems] == [field] and words in e.value.problems[0][1]


def test_an_unknown_field_is_refused():
    with pytest.raises(SpecError, match="phase_ms: unknown field"):
        BurstRateSpec.from_dict({"phase_ms": 4000})
