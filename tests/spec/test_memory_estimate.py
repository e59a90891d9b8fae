from scalestudy.spec.memory_estimate import GIB, estimate_memory
from scalestudy.spec.run import RunSpec


def paper(**kw):
    base = dict(model="llama2-7b", seq_len=4096, micro_batch=2, device="cuda", nodes=1, procs_per_node=8)
    base.update(kw)
    return RunSpec(**base)


def test_fsdp_shards_states():
    one = estimate_memory(paper(procs_per_node=1))
    eight = estimate_memory(paper())
    # 16 bytes per parameter of sharded state: 6.74e9 params -> about 100 GiB on one GPU
    assert 95 * GIB < one.params_bytes + one.grads_bytes + one.optimizer_bytes < 105 * GIB
    assert abs(eight.optimizer_bytes * 8 / one.optimizer_bytes - 1) < 1e-6


def test_activation_checkpointing_and_tp_reduce_memory():
    base = estimate_memory(paper())
    assert estimate_memory(paper(activation_checkpointing="full")).activations_bytes < base.activations_bytes / 5
    assert estimate_memory(paper(tp=2, sequence_parallel=True)).activations_bytes < base.activations_bytes / 1.9


def test_fit_verdicts():
    assert not estimate_memory(paper(procs_per_node=1)).fits(80 * GIB)  # 7B + AdamW on one H100
    assert estimate_memory(paper(procs_per_node=8, activation_checkpointing="full")).fits(80 * GIB)
    assert not estimate_memory(paper(model="llama2-70b", procs_per_node=8)).fits(80 * GIB)


def test_reshard_after_forward_lowers_unsharded():
    assert estimate_memory(paper(reshard_after_forward=True)).unsharded_bytes < \
        estimate_memory(paper()).unsharded_bytes / 4
