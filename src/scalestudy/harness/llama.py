"""A Llama-2 decoder in plain PyTorch, shaped for torchtitan-style parallelisation.

Layers live in a ModuleDict keyed by their global index, so that a pipeline stage that keeps a
subset of them keeps the parameter names of the full model; weights are initialised from the
parameter's name and the seed, so that every layout starts from the same weights.
"""

from __future__ import annotations

import math
import zlib

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import DTensor, distribute_tensor

from scalestudy.harness import fused_ops
from scalestudy.harness.loss import linear_cross_entropy
from scalestudy.harness.optimisations import enabled
from scalestudy.spec.catalog.models import ModelConfig


def precompute_freqs_cis(head_dim: int, seq_len: int, theta: float, device=None) -> torch.Tensor:
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device)[: head_dim // 2].float() / head_dim))
    t = torch.arange(seq_len, device=device, dtype=torch.float32)
    return torch.polar(torch.ones(seq_len, head_dim // 2, device=device), torch.outer(t, freqs))


def precompute_rope(head_dim: int, seq_len: int, theta: float, device=None) -> torch.Tensor:
    """The rotation table in real form: [seq_len, head_dim // 2, 2] holding (cos, sin)."""
    return torch.view_as_real(precompute_freqs_cis(head_dim, seq_len, theta, device)).contiguous()


def rope_table(head_dim: int, seq_len: int, theta: float, *, real: bool, device=None) -> torch.Tensor:
    if real:
        return precompute_rope(head_dim, seq_len, theta, device)
    return precompute_freqs_cis(head_dim, seq_len, theta, device)


def apply_rotary_emb(xq: torch.Tensor, xk: torch.Tensor, freqs_cis: torch.Tensor, fused_kernel: bool = False):
    """Rotary embedding with the complex table, or with the real one (cos, sin) that compiled
    blocks and fused kernels take; `fused_kernel`: q and k each as one generated kernel on CUDA."""
    if not freqs_cis.is_complex():
        rotate = fused_ops.fused if fused_kernel else fused_ops.unfused
        return rotate(fused_ops.rotate_real, xq, freqs_cis), rotate(fused_ops.rotate_real, xk, freqs_cis)
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    f = freqs_cis[: xq.shape[1]].view(1, xq.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * f).flatten(3)
    xk_out = torch.view_as_real(xk_ * f).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.fused = enabled("norm")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused:  # statistics in fp32 inside the kernel; one rounding of the output
            return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        xf = x.float()
        out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return out.type_as(x) * self.weight


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.head_dim = cfg.head_dim
        self.n_rep = cfg.n_heads // cfg.n_kv_heads
        self.wq = nn.Linear(cfg.dim, cfg.n_heads * cfg.head_dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.dim, bias=False)
        self.fused_kernels = enabled("ekern")

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
        bs, seqlen, _ = x.shape
        # -1: the heads held locally (all of them, or n_heads / tp under tensor parallelism)
        xq = self.wq(x).view(bs, seqlen, -1, self.head_dim)
        xk = self.wk(x).view(bs, seqlen, -1, self.head_dim)
        xv = self.wv(x).view(bs, seqlen, -1, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis, self.fused_kernels)
        if self.n_rep > 1:
            xk = xk.repeat_interleave(self.n_rep, dim=2)
            xv = xv.repeat_interleave(self.n_rep, dim=2)
        out = F.scaled_dot_product_attention(xq.transpose(1, 2), xk.transpose(1, 2), xv.transpose(1, 2), is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(bs, seqlen, -1))


class FeedForward(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.w2 = nn.Linear(cfg.ffn_dim, cfg.dim, bias=False)
        self.w3 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.fused_kernels = enabled("ekern")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        swiglu = fused_ops.fused if self.fused_kernels else fused_ops.unfused
        return self.w2(swiglu(fused_ops.swiglu, self.w1(x), self.w3(x)))


class TransformerBlock(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attention_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attention = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.feed_forward = FeedForward(cfg)

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), freqs_cis)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    """The whole model, or one pipeline stage of it (embedding, norm or output set to None)."""

    def __init__(self, cfg: ModelConfig, seq_len: int):
        super().__init__()
        if cfg.mlp != "swiglu" or cfg.tied_embeddings:
            raise ValueError(
                f"model {cfg.name!r} ({cfg.mlp} MLP, tied embeddings {cfg.tied_embeddings}): the harness "
                "builds Llama-style models only (SwiGLU, untied output head); the performance model "
                "takes it"
            )
        self.cfg = cfg
        self.seq_len = seq_len
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleDict({str(i): TransformerBlock(cfg) for i in range(cfg.n_layers)})
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        self.register_buffer("freqs_cis", precompute_freqs_cis(cfg.head_dim, seq_len, cfg.rope_theta), persistent=False)
        # tokens per chunk of the fused output projection + loss; 0: full logits (tensor parallelism
        # shards the output layer over the vocabulary, which the chunked loss does not handle)
        self.loss_chunk_tokens = 1024 if enabled("loss") else 0
        # RoPE in real arithmetic: for compiled blocks (True or False, set by parallelize.apply_compile)
        # and, when None, for fused kernels on CUDA; init_weights builds the table
        self.rope_real: bool | None = None

    def forward(self, tokens: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        """Logits in fp32, or with `labels` the mean cross-entropy loss; a stage without the
        output layer returns its hidden states."""
        h = self.tok_embeddings(tokens) if self.tok_embeddings is not None else tokens
        for layer in self.layers.values():
            h = layer(h, self.freqs_cis)
        h = self.norm(h) if self.norm is not None else h
        if self.output is None:
            return h
        if labels is not None and self.loss_chunk_tokens:
            return linear_cross_entropy(
                h.flatten(0, 1), self.output.weight, labels.flatten(0, 1), self.loss_chunk_tokens
            )
        logits = self.output(h).float()
        if labels is None:
            return logits
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten(0, 1))


def canonical_name(name: str) -> str:
    """A parameter's name in the unwrapped full model (strips checkpoint and compile wrappers)."""
    for wrapper in ("_checkpoint_wrapped_module.", "_orig_mod.", "_fsdp_wrapped_module."):
        name = name.replace(wrapper, "")
    return name


def init_values(name: str, shape: torch.Size, cfg: ModelConfig, seed: int, device) -> torch.Tensor:
    """The initial full (unsharded) value of parameter `name`: a function of its name and the seed
    only, so every layout and backend starts from the same weights."""
    if name.endswith("norm.weight"):
        return torch.ones(shape, device=device)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
    if name.startswith("tok_embeddings"):
        std = 1.0
    elif name.endswith(("wo.weight", "w2.weight")):
        std = 0.02 / math.sqrt(2 * cfg.n_layers)  # scaled residual projections (GPT-2/Megatron)
    elif name.startswith("output"):
        std = cfg.dim**-0.5
    else:
        std = 0.02
    return torch.randn(shape, generator=gen, device=device) * std


@torch.no_grad()
def init_weights(model: nn.Module, cfg: ModelConfig, seed: int, device: torch.device) -> None:
    """Fill every parameter (plain, TP- or FSDP-sharded DTensor) with the values that the same
    parameter of the unsharded model gets from this seed, and rebuild the RoPE table."""
    for name, p in model.named_parameters():
        cname = canonical_name(name)
        full = init_values(cname, p.shape, cfg, seed, device)
        if isinstance(p, DTensor):
            local = distribute_tensor(full, p.device_mesh, p.placements, src_data_rank=None).to_local()
            p.to_local().copy_(local)
        else:
            p.copy_(full)
    for mod in model.modules():
        if isinstance(mod, Transformer):
            real = mod.rope_real if mod.rope_real is not None else (device.type == "cuda" and enabled("ekern"))
            mod.freqs_cis = rope_table(cfg.head_dim, mod.seq_len, cfg.rope_theta, real=real, device=device)
