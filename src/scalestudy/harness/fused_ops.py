"""Elementwise pieces of eager transformer blocks as single generated kernels (torch.compile of a
small function): the rotary embedding and SwiGLU. Each function here is also the plain reference:
on CPU, inside a compiled block, or with the optimisation off, it runs as written.

Like Megatron-core's fused RoPE and SwiGLU kernels, they change how many passes over memory a
step makes, not what it computes (fp32 arithmetic where the plain path has it).
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

_COMPILED: dict[Callable, Callable] = {}


def _kernel(fn: Callable, *tensors: torch.Tensor) -> Callable:
    """`fn` compiled (once, for CUDA tensors outside a compiled region), else `fn` itself."""
    if not tensors[0].is_cuda or torch.compiler.is_compiling():
        return fn
    if fn not in _COMPILED:
        _COMPILED[fn] = torch.compile(fn, dynamic=False, fullgraph=True)
    return _COMPILED[fn]


def rotate_real(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """The complex product x * exp(i theta) of rotary embedding, on (re, im) pairs in fp32;
    `table` is [seq_len, head_dim // 2, 2] holding (cos, sin)."""
    seqlen = x.shape[1]
    cos = table[:seqlen, :, 0].view(1, seqlen, 1, -1)
    sin = table[:seqlen, :, 1].view(1, seqlen, 1, -1)
    xf = x.float().unflatten(-1, (-1, 2))
    re, im = xf[..., 0], xf[..., 1]
    return torch.stack((re * cos - im * sin, re * sin + im * cos), dim=-1).flatten(3).type_as(x)


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return F.silu(gate) * up


def fused(fn: Callable, *args: torch.Tensor):
    """Call `fn` as one generated kernel where it can be (CUDA, eager), else as written."""
    return _kernel(fn, *args)(*args)


def unfused(fn: Callable, *args: torch.Tensor):
    return fn(*args)
