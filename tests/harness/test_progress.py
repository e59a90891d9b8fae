"""Rank 0's progress lines and summary (scalestudy.harness.progress) and the launcher's summary
of a finished run directory (scalestudy.launch.run_summary)."""

import pytest

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


def test_a_metrics_sink_gets_every_step_and_a_missing_library_is_one_sentence(capsys, monkeypatch):
    import importlib.util

    from scalestudy.cli import main

    got = []

    class Sink:
        def log(self, step, metrics):
            got.append((step, metrics))

    p = Progress(total_steps=3, tokens_per_step=100, world_size=1, every=0, flops_per_token=1e6,
                 peak_flops_per_s=1e9, sink=Sink())
    for s in range(3):
        p.update(s, "measured", 0.5, 1.5, {"peak_rss_bytes": 1024**3})
    assert [s for s, _ in got] == [0, 1, 2]
    assert got[0][1] == {"loss": 1.5, "step_time_s": 0.5, "tokens_per_s": 200.0, "mfu": 0.2, "memory_gib": 1.0}
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard" else find_spec(name, *a))
    assert main(["train", "--metrics-sink", "tensorboard"]) == 2
    assert capsys.readouterr().err == ("scalestudy train: --metrics-sink tensorboard needs the tensorboard "
                                       "package, which is not installed: pip install tensorboard\n")


def test_the_tensorboard_sink_writes_the_steps_tensorboard_reads_back(tmp_path):
    pytest.importorskip("tensorboard")  # an optional extra: pip install scalestudy[tensorboard]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from scalestudy.harness.metrics_sink import open_sink

    sink = open_sink("tensorboard", tmp_path, "run-x", {"model": "tiny"})
    p = Progress(total_steps=3, tokens_per_step=100, world_size=1, every=0, flops_per_token=1e6,
                 peak_flops_per_s=1e9, sink=sink)
    for s, loss in enumerate((6.5, 6.25, 6.0)):
        p.update(s, "measured", 0.5, loss, {"peak_rss_bytes": 1024**3})
    sink.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert set(events.Tags()["scalars"]) == {"loss", "step_time_s", "tokens_per_s", "mfu", "memory_gib"}
    assert [(e.step, e.value) for e in events.Scalars("loss")] == [(0, 6.5), (1, 6.25), (2, 6.0)]
    assert [e.value for e in events.Scalars("tokens_per_s")] == [200.0, 200.0, 200.0]


def test_the_launchers_summary_shows_the_tables_numbers_without_reading_the_traces(tmp_path, monkeypatch):
    from analysis_fixtures import rich_specs, write_train_run

    from scalestudy.analysis import run_table
    from scalestudy.analysis.run_table import run_row
    from scalestudy.launch.run_summary import summary_line
    from scalestudy.measure import exposed_comm, rawlog

    run_dir = write_train_run(tmp_path, rich_specs("cpu")["fsdp2"], trace=(300.0, 100.0, 50.0), memory_bytes=3 << 30)
    row = run_row(rawlog.read_run(run_dir))
    assert row["n_traces"]  # the tables read the traces ...

    def no_traces(*_a, **_k):
        raise AssertionError("the summary analysed a trace")

    monkeypatch.setattr(exposed_comm, "analyse_trace", no_traces)  # ... the summary does not
    with pytest.raises(AssertionError, match="analysed a trace"):
        run_row(rawlog.read_run(run_dir))
    light = run_row(rawlog.read_run(run_dir), traces=False)
    exposed = set(run_table.EXPOSED_COLUMNS)
    assert {k: v for k, v in light.items() if k not in exposed} == {k: v for k, v in row.items() if k not in exposed}
    assert light["n_traces"] is None and light["exposed_comm_reason"] == run_table.NOT_ANALYSED
    line = summary_line(run_dir)
    assert f"{row['tokens_per_s']:,.0f} tok/s" in line and f"MFU {100 * row['mfu']:.1f}%" in line
    assert "peak mem 3.00 GiB" in line and line.startswith(f"[summary] run {row['run_id']}: ok | ")
