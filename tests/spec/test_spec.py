import pytest

from scalestudy.spec import catalog
from scalestudy.spec.catalog.models import parameter_counts
from scalestudy.spec.run import RunSpec, SpecError


def problems(**kw) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as e:
        RunSpec(**kw)
    return e.value.problems


def fields_of(**kw) -> set[str]:
    return {f for f, _ in problems(**kw)}


def test_defaults_resolve():
    s = RunSpec(nodes=1, procs_per_node=4, micro_batch=2)
    assert s.dp_shard == 4 and s.dp == 4 and s.global_batch == 8 and s.grad_accum == 1
    assert s.layout == "fsdp" and s.comm_backend == "gloo"


def test_grad_accum_derived():
    s = RunSpec(procs_per_node=4, micro_batch=2, global_batch=32)
    assert s.grad_accum == 4 and s.local_batch == 8 and s.tokens_per_step == 32 * s.seq_len


def test_pipeline_microbatches_default_and_accum():
    s = RunSpec(procs_per_node=4, pp=2, micro_batch=1, global_batch=8)
    assert s.dp == 2 and s.pp_microbatches == 2 and s.grad_accum == 2
    s = RunSpec(procs_per_node=2, pp=2, pp_schedule="interleaved_1f1b", pp_stages_per_rank=2, global_batch=8)
    assert s.pp_microbatches == 4


@pytest.mark.parametrize(
    "kw,field",
    [
        (dict(procs_per_node=4, tp=3), "dp_shard"),
        (dict(procs_per_node=4, dp_shard=3), "world_size"),
        (dict(procs_per_node=4, tp=8, dp_shard=1, nodes=2), "tp"),  # tiny has 4 heads
        (dict(procs_per_node=3, pp=3, model="llama2-13b"), "pp"),  # 40 layers into 3 stages
        (dict(procs_per_node=4, global_batch=6), "global_batch"),
        (dict(model="llama-9b"), "model"),
        (dict(device="tpu"), "device"),
        (dict(precision="fp16"), "precision"),
        (dict(procs_per_node=4, cp=3), "dp_shard"),
        (dict(procs_per_node=2, cp=2, seq_len=127), "cp"),
        (dict(pp_embedding_stages=True), "pp_embedding_stages"),
        (dict(sequence_parallel=True), "sequence_parallel"),
        (dict(pp_stages_per_rank=2), "pp_stages_per_rank"),
        (dict(procs_per_node=2, pp=2, pp_microbatches=1), "pp_microbatches"),
        (dict(pp_microbatches=2), "pp_microbatches"),
        (dict(measured_iters=0), "measured_iters"),
        (dict(profile_iters=5, measured_iters=4), "profile_iters"),
        (dict(micro_batch=0), "micro_batch"),
    ],
)
def test_invalid_specs_name_the_field(kw, field):
    assert field in fields_of(**kw)


def test_layers_not_divisible_by_pp():
    p = problems(procs_per_node=3, pp=3, model="tiny")
    assert any(f == "pp" and "8 layers" in r for f, r in p)


def test_heads_not_divisible_by_tp_message():
    p = problems(nodes=1, procs_per_node=8, tp=8, model="tiny")
    assert any("heads" in r for f, r in p if f == "tp")


def test_run_id_is_stable_and_depends_on_seed():
    a = RunSpec(procs_per_node=2, seed=1)
    b = RunSpec.from_dict(a.to_dict())
    assert a.run_id == b.run_id and a == b
    c = a.replace(seed=2)
    assert c.config_id == a.config_id and c.run_id != a.run_id
    assert a.replace(tp=2, dp_shard=1).config_id != a.config_id
    # the id does not depend on how dp_shard was given
    assert RunSpec(procs_per_node=2, dp_shard=2).run_id == RunSpec(procs_per_node=2).run_id


def test_from_dict_rejects_unknown_and_mistyped():
    with pytest.raises(SpecError) as e:
        RunSpec.from_dict({"modle": "tiny"})
    assert e.value.problems == [("modle", "unknown field")]
    with pytest.raises(SpecError) as e:
        RunSpec.from_dict({"tp": "2"})
    assert e.value.problems[0][0] == "tp"


def test_hsdp_layout_name():
    s = RunSpec(nodes=2, procs_per_node=2, dp_replicate=2)
    assert s.layout == "hsdp" and s.dp_shard == 2
    assert RunSpec(nodes=2, procs_per_node=4, dp_replicate=2, tp=2).layout == "hsdp+tp"
    assert RunSpec(nodes=2, procs_per_node=2, dp_replicate=2, tp=2).layout == "ddp+tp"


def test_paper_shapes_parameter_counts():
    # public figures: Llama-2 7B has 6.74e9 parameters, 13B 13.0e9, 70B 69.0e9
    assert abs(parameter_counts(catalog.model("llama2-7b"))["n_params"] / 6.738e9 - 1) < 0.002
    assert abs(parameter_counts(catalog.model("llama2-13b"))["n_params"] / 13.016e9 - 1) < 0.002
    assert abs(parameter_counts(catalog.model("llama2-70b"))["n_params"] / 68.977e9 - 1) < 0.002
    assert abs(parameter_counts(catalog.model("llama-1b"))["n_params"] / 1.100e9 - 1) < 0.01
    assert set(catalog.models()) >= {"tiny", "llama-1b", "llama2-7b", "llama2-13b", "llama2-70b"}


def test_spec_is_pure_data():
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['torch'] = None; import scalestudy.spec.run, scalestudy.measure.rawlog, "
        "scalestudy.spec.memory_estimate, scalestudy.spec.catalog.models"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
