"""Message sizes and bandwidths of collectives, counted as NVIDIA's nccl-tests counts them.

Pure Python (no torch): the harness uses it to size buffers and the analysis side to check
and recompute the bandwidths of a raw log. Definitions follow nccl-tests' doc/PERFORMANCE.md
and the *GetCollByteCount / *GetBw functions of its src/*.cu:

- A requested size S (bytes) gives count = S // typesize elements.
- all_reduce works on that count on every rank; the size is the per-rank buffer.
- all_gather, reduce_scatter and all_to_all split it over the n ranks: the per-rank count is
  count // n rounded down to a multiple of 16 bytes; the size is the gathered output, the
  scattered input, or the per-rank send buffer of all_to_all: per-rank count * n * typesize.
- algbw = size / time; busbw = algbw * factor, with factor 2(n-1)/n for all_reduce
  ((n-1)/(n+1) when NCCL_ALGO is NVLS or NVLSTREE: in-network reduction) and (n-1)/n for
  all_gather, reduce_scatter and all_to_all. GB/s are 1e9 bytes per second.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from scalestudy.spec.collectives import DTYPES as TYPE_SIZES
from scalestudy.spec.collectives import OPS

GB = 1e9
ALIGN_BYTES = 16  # per-rank chunks of the split collectives are whole multiples of this
IN_NETWORK_REDUCTION_ALGOS = ("NVLS", "NVLSTREE")
_SPLIT_OPS = ("all_gather", "reduce_scatter", "all_to_all")


@dataclass(frozen=True)
class Message:
    """One message as nccl-tests reports it.

    `count` is the element count nccl-tests prints: the per-rank count for all_reduce, the
    per-rank chunk for the others (the input of all_gather, the output of reduce_scatter, the
    block sent to each peer in all_to_all). `size_bytes` is the size it prints and divides by
    the time. `requested_bytes` is the size asked for, before rounding.
    """

    op: str
    nranks: int
    dtype: str
    requested_bytes: int
    count: int
    size_bytes: int

    @property
    def typesize(self) -> int:
        return TYPE_SIZES[self.dtype]

    def as_dict(self) -> dict:
        return asdict(self)


def _check(op: str, nranks: int, dtype: str) -> None:
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r}; known: {', '.join(OPS)}")
    if dtype not in TYPE_SIZES:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(TYPE_SIZES)}")
    if nranks < 1:
        raise ValueError(f"nranks must be at least 1, got {nranks}")


def message(op: str, requested_bytes: int, nranks: int, dtype: str = "float32") -> Message:
    """The message nccl-tests runs for a requested size. Sizes round down as nccl-tests rounds
    them; a size that rounds to no element at all is refused (ValueError), where nccl-tests
    would print a row of size 0."""
    _check(op, nranks, dtype)
    typesize = TYPE_SIZES[dtype]
    count = requested_bytes // typesize
    if op in _SPLIT_OPS:
        align = max(1, ALIGN_BYTES // typesize)
        count = (count // nranks) // align * align
        size = count * nranks * typesize
    else:
        size = count * typesize
    if count == 0:
        raise ValueError(
            f"{op} of {requested_bytes} B over {nranks} ranks in {dtype} rounds to no element; "
            f"the smallest valid size is {min_valid_bytes(op, nranks, dtype)} B"
        )
    return Message(op, nranks, dtype, requested_bytes, count, size)


def min_valid_bytes(op: str, nranks: int, dtype: str = "float32") -> int:
    """The smallest requested size that gives at least one element (one aligned chunk per rank)."""
    _check(op, nranks, dtype)
    typesize = TYPE_SIZES[dtype]
    if op in _SPLIT_OPS:
        return max(ALIGN_BYTES, typesize) * nranks
    return typesize


def is_valid_size(op: str, requested_bytes: int, nranks: int, dtype: str = "float32") -> bool:
    """Whether `requested_bytes` gives at least one element per rank (min_valid_bytes)."""
    return requested_bytes >= min_valid_bytes(op, nranks, dtype)


def busbw_factor(op: str, nranks: int, nccl_algo: str | None = None) -> float:
    """busbw / algbw for `op` over `nranks` ranks (nccl-tests' correction factor)."""
    _check(op, nranks, "float32")
    n = nranks
    if op == "all_reduce":
        if nccl_algo is not None and nccl_algo.upper() in IN_NETWORK_REDUCTION_ALGOS:
            return (n - 1) / (n + 1)
        return 2 * (n - 1) / n
    return (n - 1) / n


def algbw_GBps(size_bytes: int, time_s: float) -> float:
    """Algorithm bandwidth: bytes moved over time, in GB/s."""
    return size_bytes / GB / time_s


def busbw_GBps(op: str, size_bytes: int, time_s: float, nranks: int, nccl_algo: str | None = None) -> float:
    """Bus bandwidth in GB/s: algbw times nccl-tests' factor for `op` over `nranks`."""
    return algbw_GBps(size_bytes, time_s) * busbw_factor(op, nranks, nccl_algo)
