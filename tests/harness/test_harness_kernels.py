"""The harness's optimised pieces compute what the plain ones do (CPU, float32 and bfloat16)."""

import pytest
import torch
import torch.nn.functional as F

from scalestudy.harness import optimisations
from scalestudy.harness.llama import RMSNorm, Transformer
from scalestudy.harness.loss import linear_cross_entropy
from scalestudy.spec.catalog.models import ModelConfig


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-6), (torch.bfloat16, 1e-2)])
def test_chunked_loss_matches_full_logits(dtype, tol):
    g = torch.Generator().manual_seed(0)
    h = torch.randn(37, 16, generator=g).to(dtype).requires_grad_()
    w = torch.randn(50, 16, generator=g).to(dtype).requires_grad_()
    y = torch.randint(0, 50, (37,), generator=g)
    ref = F.cross_entropy(F.linear(h, w).float(), y)
    (ref * 0.5).backward()
    gh, gw = h.grad, w.grad
    h.grad = w.grad = None
    out = linear_cross_entropy(h, w, y, chunk_tokens=8)  # 37 tokens: a ragged last chunk
    (out * 0.5).backward()
    assert out.dtype == torch.float32
    assert out.item() == pytest.approx(ref.item(), rel=1e-6)
    assert torch.allclose(h.grad.float(), gh.float(), atol=tol * gh.abs().max().item())
    assert torch.allclose(w.grad.float(), gw.float(), atol=tol * gw.abs().max().item())


def test_chunked_loss_refuses_unflattened_hidden():
    with pytest.raises(ValueError, match="tokens, dim"):
        linear_cross_entropy(torch.zeros(2, 3, 4), torch.zeros(5, 4), torch.zeros(2, 3, dtype=torch.long))


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-6), (torch.bfloat16, 2e-2)])
def test_fused_norm_matches_manual(monkeypatch, dtype, tol):
    x = torch.randn(3, 5, 64, generator=torch.Generator().manual_seed(0)).to(dtype)
    fused = RMSNorm(64, 1e-5)
    monkeypatch.setenv(optimisations.OFF_ENV, "norm")
    manual = RMSNorm(64, 1e-5)
    assert fused.fused and not manual.fused
    with torch.no_grad():
        for n in (fused, manual):
            n.weight.copy_(torch.linspace(0.5, 1.5, 64))
            n.to(dtype)
        # bfloat16: the two round differently, one ulp apart at most, so the bound is relative
        torch.testing.assert_close(fused(x).float(), manual(x).float(), rtol=tol, atol=tol)


def test_model_loss_same_with_optimisations_off(monkeypatch):
    cfg = ModelConfig(name="tiny", n_layers=2, dim=32, n_heads=4, n_kv_heads=2, ffn_dim=64, vocab_size=40)
    tokens, labels = torch.randint(0, 40, (2, 2, 9)).unbind(0)
    losses = []
    for off in ("", "all"):
        monkeypatch.setenv(optimisations.OFF_ENV, off)
        torch.manual_seed(0)
        model = Transformer(cfg, 9)
        loss = model(tokens, labels)
        loss.backward()
        losses.append((loss.item(), model.output.weight.grad.clone(), model.layers["0"].attention.wq.weight.grad))
        assert model.loss_chunk_tokens == (0 if off else 1024)
    assert losses[0][0] == pytest.approx(losses[1][0], rel=1e-6)
    for a, b in zip(losses[0][1:], losses[1][1:]):
        assert torch.allclose(a, b, atol=1e-6)


def test_unknown_optimisation_is_named(monkeypatch):
    monkeypatch.setenv(optimisations.OFF_ENV, "norm,fastmath")
    with pytest.raises(ValueError, match="fastmath"):
        optimisations.enabled("norm")
    monkeypatch.setenv(optimisations.OFF_ENV, "all")
    assert not any(optimisations.enabled(n) for n in optimisations.NAMES)


def test_real_rope_matches_complex():
    from scalestudy.harness.llama import apply_rotary_emb, rope_table

    xq, xk = torch.randn(2, 12, 4, 8), torch.randn(2, 12, 2, 8)
    ref = apply_rotary_emb(xq, xk, rope_table(8, 16, 10000.0, real=False))
    out = apply_rotary_emb(xq, xk, rope_table(8, 16, 10000.0, real=True))
    for a, b in zip(out, ref):
        torch.testing.assert_close(a, b)


def test_compiled_blocks_get_the_real_rope_table(monkeypatch):
    from scalestudy.harness.llama import init_weights
    from scalestudy.harness.parallelize import apply_compile

    cfg = ModelConfig(name="tiny", n_layers=1, dim=32, n_heads=4, n_kv_heads=4, ffn_dim=64, vocab_size=40)
    for off, real in (("", True), ("rope", False)):
        monkeypatch.setenv(optimisations.OFF_ENV, off)
        model = Transformer(cfg, 8)
        apply_compile(model)
        init_weights(model, cfg, 0, torch.device("cpu"))
        assert model.freqs_cis.is_complex() != real


def test_fused_kernel_path_computes_the_plain_block_on_cpu():
    """ekern's functions as written (what torch.compile turns into one kernel each on CUDA):
    RoPE with the real table through the fused path equals the complex product, SwiGLU equals
    silu(a) * b, and on CPU nothing is compiled."""
    from scalestudy.harness import fused_ops
    from scalestudy.harness.llama import apply_rotary_emb, rope_table

    xq, xk = torch.randn(2, 12, 4, 8), torch.randn(2, 12, 4, 8)
    ref = apply_rotary_emb(xq, xk, rope_table(8, 16, 10000.0, real=False))
    out = apply_rotary_emb(xq, xk, rope_table(8, 16, 10000.0, real=True), fused_kernel=True)
    for a, b in zip(out, ref):
        torch.testing.assert_close(a, b)
    a, b = torch.randn(5, 6), torch.randn(5, 6)
    assert torch.equal(fused_ops.fused(fused_ops.swiglu, a, b), F.silu(a) * b)
    assert fused_ops._kernel(fused_ops.swiglu, a, b) is fused_ops.swiglu and not fused_ops._COMPILED
