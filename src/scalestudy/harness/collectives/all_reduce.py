"""AllReduce, sum, in place (torch's all_reduce has no separate output): every rank ends with the
elementwise sum of all ranks' buffers. Element i is owned by rank i mod n, which puts values(r)
there; the others put 0, so the sum is values(i mod n)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from scalestudy.harness.collectives.buffers import TORCH_DTYPES, Buffers, periodic_mismatches, values
from scalestudy.measure.bandwidth import Message

REDOP = "sum"
IN_PLACE = True


def allocate(msg: Message, device: torch.device) -> Buffers:
    buf = torch.empty(msg.count, dtype=TORCH_DTYPES[msg.dtype], device=device)
    return Buffers(send=buf, recv=buf)


def fill(b: Buffers, rank: int, nranks: int) -> None:
    b.send.zero_()
    b.send[rank::nranks] = values(rank)


def call(b: Buffers) -> None:
    dist.all_reduce(b.send, op=dist.ReduceOp.SUM)


def wrong_elements(b: Buffers, rank: int, nranks: int) -> int:
    pattern = values(torch.arange(nranks)).to(dtype=b.recv.dtype, device=b.recv.device)
    return periodic_mismatches(b.recv, pattern)
