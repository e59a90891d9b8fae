"""The megatron-core GPTModel that the megatron backend builds, against the torch backend's
Transformer, on CPU (gloo): weights copied by name (harness/megatron_backend/model.py) give the
same logits, loss and gradients (float32), at TP=1 and TP=2; pipeline and interleaved chunks hold
the layers, and the weights, that the torch backend's pipeline stages hold. GPTModel.forward
itself needs CUDA (its rotary table), so the worker calls its embedding, decoder and output layer.
The cases run in one start of two forked processes (TP=1: two data-parallel ranks;
tests/harness/forked_ranks.py)."""

import pytest

from test_megatron_tp_layers import assert_close, pytestmark, run_worker  # noqa: F401


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    return run_worker(["decoder", "decoder_tp1", "pp_chunks"], 2, tmp_path_factory.mktemp("megatron-2"))


@pytest.mark.parametrize("tp", [1, 2])
def test_gptmodel_with_copied_weights_matches_the_torch_model(tp, two_processes):
    ranks = two_processes["decoder" if tp == 2 else "decoder_tp1"]
    for r in ranks:
        checks = r["checks"]
        assert {"logits", "loss"} <= set(checks)
        assert sum(k.startswith("grad:") for k in checks) == 1 + 8 * 6 + 2  # every parameter of the tiny model
        assert_close(checks, rel=1e-5)


def test_pipeline_chunks_hold_the_torch_stages_layers(two_processes):
    ranks = two_processes["pp_chunks"]
    for r in ranks:
        for name, c in r["chunks"].items():
            assert c["got_layers"] == c["want_layers"], (r["rank"], name)
            assert c["max_weight_error"] == 0.0
    assert ranks[0]["chunks"]["interleaved"]["pre_post"] == [[True, False], [False, False]]
    assert ranks[1]["chunks"]["interleaved"]["pre_post"] == [[False, False], [False, True]]
