"""ReduceScatter, sum: rank j ends with the elementwise sum of all ranks' chunk j. Element i of
chunk j is owned by rank i mod n, which puts values(owner * n + j) there; the others put 0, so
rank j receives values((i mod n) * n + j)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from scalestudy.harness.collectives.buffers import TORCH_DTYPES, Buffers, periodic_mismatches, value_column, values
from scalestudy.measure.bandwidth import Message

REDOP = "sum"
IN_PLACE = False
# reduce_scatter_single replaces reduce_scatter_tensor from torch 2.13 on
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def allocate(msg: Message, device: torch.device) -> Buffers:
    dtype = TORCH_DTYPES[msg.dtype]
    return Buffers(
        send=torch.empty(msg.count * msg.nranks, dtype=dtype, device=device),
        recv=torch.empty(msg.count, dtype=dtype, device=device),
    )


def fill(b: Buffers, rank: int, nranks: int) -> None:
    b.send.zero_()
    b.send.view(nranks, -1)[:, rank::nranks] = value_column(rank * nranks + torch.arange(nranks), b.send)
    b.recv.zero_()


def call(b: Buffers) -> None:
    _reduce_scatter(b.recv, b.send, op=dist.ReduceOp.SUM)


def wrong_elements(b: Buffers, rank: int, nranks: int) -> int:
    pattern = values(torch.arange(nranks) * nranks + rank).to(dtype=b.recv.dtype, device=b.recv.device)
    return periodic_mismatches(b.recv, pattern)
