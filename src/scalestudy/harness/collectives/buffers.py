"""What the per-collective modules share: their buffers, the input values they fill in, and the
comparison of a result with the values expected.

Values are small integers (1 to 251), exact in float32, bfloat16 and float16. A reduction only
ever adds one such value to zeros (each element has one owner rank), so its result is exact in
every dtype, in any order of summation and for any number of ranks: a check needs no tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_CHUNK_ELEMENTS = 1 << 26  # bounds the temporary of a comparison


@dataclass
class Buffers:
    send: torch.Tensor
    recv: torch.Tensor  # the same tensor as send for an in-place collective


def values(index):
    """The input value that index k stands for (an int or an integer tensor)."""
    return index % 251 + 1


def value_column(indices: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """values(indices) as a column (len, 1) of like's dtype and device, to broadcast over rows."""
    return values(indices).to(dtype=like.dtype, device=like.device).view(-1, 1)


def count_mismatches(actual: torch.Tensor, expected: torch.Tensor) -> int:
    """Elements of the 2-D `actual` that differ from `expected`, a (rows, 1) or (1, cols) tensor;
    compared block by block, so that the temporaries stay small however large the message."""
    rows, cols = actual.shape
    step_c = min(max(cols, 1), _CHUNK_ELEMENTS)
    step_r = max(1, _CHUNK_ELEMENTS // step_c)
    wrong = 0
    for r0 in range(0, rows, step_r):
        for c0 in range(0, cols, step_c):
            exp = expected[r0 : r0 + step_r] if expected.shape[0] > 1 else expected
            exp = exp[:, c0 : c0 + step_c] if expected.shape[1] > 1 else exp
            wrong += int(torch.count_nonzero(actual[r0 : r0 + step_r, c0 : c0 + step_c] != exp))
    return wrong


def periodic_mismatches(actual: torch.Tensor, pattern: torch.Tensor) -> int:
    """Elements of the 1-D `actual` that differ from `pattern` repeated over it."""
    period = pattern.numel()
    full = actual.numel() // period * period
    wrong = count_mismatches(actual[:full].view(-1, period), pattern.view(1, -1)) if full else 0
    if full < actual.numel():
        wrong += count_mismatches(actual[full:].view(1, -1), pattern[: actual.numel() - full].view(1, -1))
    return wrong
