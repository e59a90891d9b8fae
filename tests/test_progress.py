"""Rank 0's progress lines and summary (scalestudy.harness.progress) and the launcher's summary
of a finished run directory (scalestudy.run_summary)."""

from scalestudy.harness.progress import Progress, default_every, format_duration


def test_a_line_every_n_steps_and_at_the_last():
    p = Progress(total_steps=5, tokens_per_step=1000, world_size=2, every=2, flops_per_token=1e6,
                 peak_flops_per_s=1e12)
    mem = {"peak_rss_bytes": 3 * 1024**3}
    lines = [p.update(s, "measured", 0.5, 2.0, mem) for s in range(5)]
    assert [line is not None for line in lines] == [False, True, False, True, True]
    # 1000 tokens in 0.5 s over 2 devices at 1e6 FLOPs a token against 1e12: 0.1%
    assert lines[1] == ("[progress] step 2/5 measured | loss 2.0000 | 2,000 tok/s | MFU 0.1% | mem 3.00 GiB | "
                        f"elapsed {lines[1].split('elapsed ')[1].split(',')[0]}, left ~0:00:02")
    assert "[summary] run r: ok | 2,000 tok/s | MFU 0.1% | peak mem 3.00 GiB" in p.summary("r", "ok", "d")


def test_no_peak_no_mfu_and_zero_means_silent():
    p = Progress(total_steps=2, tokens_per_step=10, world_size=1, every=1)
    assert "MFU n/a (no peak)" in p.update(0, "warmup", 1.0, 1.0, {})
    quiet = Progress(total_steps=2, tokens_per_step=10, world_size=1, every=0)
    assert quiet.update(1, "measured", 1.0, 1.0, {}) is None
    assert "no measured steps" in Progress(1, 1, 1, 1).summary("r", "oom", "d")


def test_defaults():
    assert default_every(7) == 1 and default_every(60) == 6
    assert format_duration(3725.4) == "1:02:05"
