"""Message sizes and bus-bandwidth factors against numbers worked by hand from nccl-tests'
definitions (doc/PERFORMANCE.md and the *GetCollByteCount / *GetBw functions of src/*.cu)."""

import pytest

from scalestudy.measure import bandwidth as bw
from scalestudy.spec.collectives import format_size, parse_size


@pytest.mark.parametrize(
    "op,requested,n,dtype,count,size",
    [
        # all_reduce: count = S / typesize on every rank; size = the per-rank buffer
        ("all_reduce", 1 << 20, 8, "float32", 262144, 1 << 20),
        ("all_reduce", 1001, 3, "float32", 250, 1000),
        ("all_reduce", 6, 4, "bfloat16", 3, 6),
        # the split collectives: per-rank count = (S / typesize) // n, rounded down to 16 bytes;
        # size = per-rank count * n * typesize
        ("all_gather", 1 << 20, 8, "float32", 32768, 1 << 20),
        ("all_gather", 1000, 3, "float32", 80, 960),  # 250 // 3 = 83 -> 80 (multiple of 4)
        ("reduce_scatter", 1000, 3, "bfloat16", 160, 960),  # 500 // 3 = 166 -> 160 (multiple of 8)
        ("reduce_scatter", 1 << 30, 16, "float32", 16777216, 1 << 30),
        ("all_to_all", 4096, 4, "float16", 512, 4096),
        ("all_to_all", 100, 3, "float32", 8, 96),  # 25 // 3 = 8, already a multiple of 4
        ("all_gather", 64, 4, "float32", 4, 64),  # the smallest valid size: 16 B per rank
    ],
)
def test_message_size_and_count(op, requested, n, dtype, count, size):
    m = bw.message(op, requested, n, dtype)
    assert (m.count, m.size_bytes, m.requested_bytes) == (count, size, requested)


@pytest.mark.parametrize(
    "op,requested,n,dtype,smallest",
    [
        ("all_gather", 32, 4, "float32", 64),  # 8 elements // 4 = 2 -> 0 after 16-byte rounding
        ("reduce_scatter", 1023, 64, "float32", 1024),
        ("all_to_all", 8191, 512, "bfloat16", 8192),
        ("all_reduce", 3, 4, "float32", 4),
        ("all_reduce", 1, 2, "bfloat16", 2),
    ],
)
def test_sizes_that_round_to_nothing_are_refused(op, requested, n, dtype, smallest):
    assert bw.min_valid_bytes(op, n, dtype) == smallest
    assert not bw.is_valid_size(op, requested, n, dtype)
    assert bw.is_valid_size(op, smallest, n, dtype)
    with pytest.raises(ValueError, match=f"smallest valid size is {smallest} B"):
        bw.message(op, requested, n, dtype)
    assert bw.message(op, smallest, n, dtype).count >= 1


@pytest.mark.parametrize(
    "op,n,factor",
    [
        ("all_reduce", 2, 1.0),
        ("all_reduce", 8, 1.75),
        ("all_reduce", 4096, 8190 / 4096),
        ("all_gather", 2, 0.5),
        ("all_gather", 8, 0.875),
        ("reduce_scatter", 32, 31 / 32),
        ("all_to_all", 16, 15 / 16),
        ("all_reduce", 1, 0.0),
    ],
)
def test_busbw_factor(op, n, factor):
    assert bw.busbw_factor(op, n) == pytest.approx(factor, rel=1e-15)


def test_in_network_reduction_factor_only_for_all_reduce():
    assert bw.busbw_factor("all_reduce", 8, "NVLS") == pytest.approx(7 / 9)
    assert bw.busbw_factor("all_reduce", 8, "nvlstree") == pytest.approx(7 / 9)
    assert bw.busbw_factor("all_reduce", 8, "Ring") == pytest.approx(1.75)
    assert bw.busbw_factor("all_gather", 8, "NVLS") == pytest.approx(0.875)


def test_bandwidths_in_GB_of_1e9_bytes():
    # 1 MiB all_reduce over 8 ranks in 100 us: algbw = 1048576 / 1e9 / 1e-4
    assert bw.algbw_GBps(1 << 20, 100e-6) == pytest.approx(10.48576)
    assert bw.busbw_GBps("all_reduce", 1 << 20, 100e-6, 8) == pytest.approx(10.48576 * 1.75)
    # 128 MiB all_gather over 16 ranks in 1 ms: 134.217728 GB/s, bus 125.829...
    assert bw.algbw_GBps(1 << 27, 1e-3) == pytest.approx(134.217728)
    assert bw.busbw_GBps("all_gather", 1 << 27, 1e-3, 16) == pytest.approx(134.217728 * 15 / 16)


@pytest.mark.parametrize(
    "text,n",
    [
        ("512", 512),
        ("1K", 1024),
        ("1k", 1024),
        ("16M", 16 << 20),
        ("16G", 16 << 30),
        ("1.5K", 1536),
        (" 8 M ", 8 << 20),
        (".5m", 1 << 19),
        (4096, 4096),
    ],
)
def test_parse_size_reads_nccl_tests_suffixes(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("text", ["", "1T", "abc", "-1K", "1KB", "K"])
def test_parse_size_refuses_other_text(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_format_size_round_trips():
    for n in (1, 512, 1000, 1024, 1536, 16 << 20, 1 << 30, 16 << 30):
        assert parse_size(format_size(n)) == n
    assert format_size(16 << 20) == "16M" and format_size(1536) == "1536"


def test_unknown_op_or_dtype_is_refused():
    with pytest.raises(ValueError, match="unknown collective"):
        bw.message("broadcast", 1024, 2)
    with pytest.raises(ValueError, match="unknown dtype"):
        bw.message("all_reduce", 1024, 2, "int8")
