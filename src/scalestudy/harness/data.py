"""Synthetic token batches: throughput does not depend on token values [assumed, STUDY.md]."""

from __future__ import annotations

import torch


def sequence(seed: int, step: int, index: int, seq_len: int, vocab_size: int) -> torch.Tensor:
    """Sequence `index` of the global batch of `step`: seq_len + 1 tokens (inputs and labels),
    the same whichever rank or layout asks for it."""
    gen = torch.Generator()
    gen.manual_seed(((seed * 1_000_003 + step) * 1_000_003 + index) % (2**63))
    return torch.randint(0, vocab_size, (seq_len + 1,), generator=gen)


def local_batch(
    seed: int, step: int, dp_rank: int, local_size: int, seq_len: int, vocab_size: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """This data-parallel rank's slice of the global batch: (inputs, labels), each [local_size, seq_len]."""
    start = dp_rank * local_size
    seqs = torch.stack([sequence(seed, step, start + i, seq_len, vocab_size) for i in range(local_size)])
    seqs = seqs.to(device, non_blocking=True)
    return seqs[:, :-1], seqs[:, 1:]
