"""AllGather: every rank ends with all ranks' chunks in rank order. Rank r's chunk holds values(r)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from scalestudy.harness.collectives.buffers import TORCH_DTYPES, Buffers, count_mismatches, value_column, values
from scalestudy.measure.bandwidth import Message

REDOP = ""
IN_PLACE = False
# all_gather_single replaces all_gather_into_tensor from torch 2.13 on
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def allocate(msg: Message, device: torch.device) -> Buffers:
    dtype = TORCH_DTYPES[msg.dtype]
    return Buffers(
        send=torch.empty(msg.count, dtype=dtype, device=device),
        recv=torch.empty(msg.count * msg.nranks, dtype=dtype, device=device),
    )


def fill(b: Buffers, rank: int, nranks: int) -> None:
    b.send.fill_(values(rank))
    b.recv.zero_()


def call(b: Buffers) -> None:
    _all_gather(b.recv, b.send)


def wrong_elements(b: Buffers, rank: int, nranks: int) -> int:
    return count_mismatches(b.recv.view(nranks, -1), value_column(torch.arange(nranks), b.recv))
