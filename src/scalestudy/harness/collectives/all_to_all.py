"""AllToAll: rank r sends its chunk j to rank j, which stores it as its chunk r. Rank r's chunk j
holds values(r * n + j), so rank r receives values(k * n + r) as chunk k."""

from __future__ import annotations

import torch
import torch.distributed as dist

from scalestudy.harness.collectives.buffers import TORCH_DTYPES, Buffers, count_mismatches, value_column
from scalestudy.measure.bandwidth import Message

REDOP = ""
IN_PLACE = False


def allocate(msg: Message, device: torch.device) -> Buffers:
    dtype = TORCH_DTYPES[msg.dtype]
    n = msg.count * msg.nranks
    return Buffers(send=torch.empty(n, dtype=dtype, device=device), recv=torch.empty(n, dtype=dtype, device=device))


def fill(b: Buffers, rank: int, nranks: int) -> None:
    b.send.view(nranks, -1).copy_(value_column(rank * nranks + torch.arange(nranks), b.send))
    b.recv.zero_()


def call(b: Buffers) -> None:
    dist.all_to_all_single(b.recv, b.send)


def wrong_elements(b: Buffers, rank: int, nranks: int) -> int:
    return count_mismatches(b.recv.view(nranks, -1), value_column(torch.arange(nranks) * nranks + rank, b.recv))
