"""Rank 0's progress lines and the run's one summary line (scalestudy.harness.progress), its
numbers in the harness (scalestudy.harness.train.summary_numbers) and from a finished run
directory (scalestudy.launch.run_summary), and the metrics sinks (scalestudy.harness.metrics_sink),
a study's included."""

import re

import pytest

from scalestudy.harness.progress import Progress, default_every, format_duration, summary_line


def test_a_line_every_n_steps_and_at_the_last():
    p = Progress(total_steps=5, tokens_per_step=1000, world_size=2, every=2, flops_per_token=1e6, peak_flops_per_s=1e12)
    mem = {"peak_rss_bytes": 3 * 1024**3}
    lines = [p.update(s, "measured", 0.5, 2.0, mem) for s in range(5)]
    assert [line is not None for line in lines] == [False, True, False, True, True]
    # 1000 tokens in 0.5 s over 2 devices at 1e6 FLOPs a token against 1e12: 0.1%
    assert lines[1] == (
        "[progress] step 2/5 measured | loss 2.0000 | 2,000 tok/s global | 1,000 tok/s per device | "
        f"MFU 0.1% | mem 3.00 GiB | elapsed {lines[1].split('elapsed ')[1].split(',')[0]}, left ~0:00:02"
    )


def test_the_summary_line_says_which_tokens_per_second_it_shows():
    t = {
        "n_steps": 5,
        "tokens_per_s": 5748.4,
        "tokens_per_s_per_device": 2874.2,
        "world_size": 2,
        "step_time_mean_s": 0.25,
    }
    assert summary_line("r", "ok", "d", throughput=t, mfu=0.012, peak_memory_bytes=3 << 30, elapsed_s=65) == (
        "[summary] run r: ok | 5 measured steps, each timed on its slowest rank | 5,748 tok/s global | "
        "2,874 tok/s per device | MFU 1.2% | peak mem 3.00 GiB | 0:01:05 | raw log d"
    )
    assert "| no MFU (no peak for x) |" in summary_line("r", "ok", "d", throughput=t, no_mfu="no peak for x")
    share = summary_line("r", "ok", "d", throughput=t, rank_share="one rank's share")
    assert "0.2500 s/step (one rank's share)" in share and "tok/s" not in share
    assert (
        summary_line("r", "oom", "d", detail="OutOfMemoryError: x")
        == "[summary] run r: oom | OutOfMemoryError: x | raw log d"
    )
    assert "| no measured steps |" in summary_line("r", "ok", "d")


def test_the_harness_and_the_launcher_print_the_same_summary_from_the_same_step_times(tmp_path):
    """The harness's line (its step times all-reduced to each step's slowest rank) and the
    launcher's (the tables' row of the raw log) agree; they once said 2,874 and 2,861 tok/s."""
    import torch
    from analysis_fixtures import rich_specs, write_train_run

    from scalestudy.harness.train import summary_numbers
    from scalestudy.launch.run_summary import summary_line as launcher_line
    from scalestudy.measure import metrics

    spec = rich_specs("cpu")["fsdp2"]
    times = [0.5 + 0.125 * (i % 3) for i in range(spec.measured_iters)]
    run_dir = write_train_run(tmp_path, spec, step_time_s=times, memory_bytes=3 << 30)
    fpt = metrics.flops_per_token(spec.model_config(), spec.seq_len)["flops_per_token"]
    # the largest rank's memory, as the all-reduce (MAX) leaves it; world 1: no process group needed
    numbers = summary_numbers(
        spec,
        1,
        torch.device("cpu"),
        times,
        {"peak_rss_bytes": (3 << 30) + spec.processes - 1},
        {"peak_flops_per_s": 1e12},
        fpt,
    )
    harness = summary_line(spec.run_id, "ok", run_dir, **numbers)
    launcher = re.sub(r" \| \d+:\d\d:\d\d(?= \| raw log)", "", launcher_line(run_dir))  # its wall time: run.json's
    assert harness == launcher, (harness, launcher)
    expected = spec.tokens_per_step * len(times) / sum(times)
    assert f"{expected:,.0f} tok/s global | {expected / spec.world_size:,.0f} tok/s per device" in harness


def test_no_peak_no_mfu_and_zero_means_silent():
    p = Progress(total_steps=2, tokens_per_step=10, world_size=1, every=1)
    assert "MFU n/a (no peak)" in p.update(0, "warmup", 1.0, 1.0, {})
    quiet = Progress(total_steps=2, tokens_per_step=10, world_size=1, every=0)
    assert quiet.update(1, "measured", 1.0, 1.0, {}) is None


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

    p = Progress(
        total_steps=3,
        tokens_per_step=100,
        world_size=1,
        every=0,
        flops_per_token=1e6,
        peak_flops_per_s=1e9,
        sink=Sink(),
    )
    for s in range(3):
        p.update(s, "measured", 0.5, 1.5, {"peak_rss_bytes": 1024**3})
    assert [s for s, _ in got] == [0, 1, 2]
    assert got[0][1] == {
        "loss": 1.5,
        "step_time_s": 0.5,
        "tokens_per_s": 200.0,
        "tokens_per_s_per_device": 200.0,
        "mfu": 0.2,
        "memory_gib": 1.0,
    }
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard" else find_spec(name, *a)
    )
    assert main(["train", "--metrics-sink", "tensorboard"]) == 2
    assert capsys.readouterr().err == (
        "scalestudy train: --metrics-sink tensorboard needs the tensorboard "
        'package, which is not installed: pip install "scalestudy[tensorboard]" '
        "(or tensorboard)\n"
    )


def test_the_tensorboard_sink_writes_the_steps_tensorboard_reads_back(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from scalestudy.harness.metrics_sink import open_sink

    sink = open_sink("tensorboard", tmp_path, "run-x", {"model": "tiny"})
    p = Progress(
        total_steps=3, tokens_per_step=100, world_size=1, every=0, flops_per_token=1e6, peak_flops_per_s=1e9, sink=sink
    )
    for s, loss in enumerate((6.5, 6.25, 6.0)):
        p.update(s, "measured", 0.5, loss, {"peak_rss_bytes": 1024**3})
    sink.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert set(events.Tags()["scalars"]) == {
        "loss",
        "step_time_s",
        "tokens_per_s",
        "tokens_per_s_per_device",
        "mfu",
        "memory_gib",
    }
    assert [(e.step, e.value) for e in events.Scalars("loss")] == [(0, 6.5), (1, 6.25), (2, 6.0)]
    assert [e.value for e in events.Scalars("tokens_per_s")] == [200.0, 200.0, 200.0]


def test_the_wandb_sink_writes_an_offline_run_with_every_step(tmp_path, monkeypatch):
    import wandb  # the extra scalestudy[wandb], in the test environment

    from scalestudy.harness.metrics_sink import open_sink

    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    sink = open_sink({"kind": "wandb", "project": "p", "dir": str(tmp_path)}, tmp_path, "run-x", {"model": "tiny"})
    p = Progress(
        total_steps=3, tokens_per_step=100, world_size=1, every=0, flops_per_token=1e6, peak_flops_per_s=1e9, sink=sink
    )
    for s, loss in enumerate((6.5, 6.25, 6.0)):
        p.update(s, "measured", 0.5, loss, {"peak_rss_bytes": 1024**3})
    sink.close()
    wandb.teardown()  # wandb's service process writes the run file behind finish(): wait for it
    runs = list((tmp_path / "wandb").glob("offline-run-*"))  # offline: nothing leaves the machine
    assert len(runs) == 1 and wandb.run is None, list((tmp_path / "wandb").iterdir())
    (log,) = runs[0].glob("run-*.wandb")  # wandb's own record format: each step's metrics by name
    data = log.read_bytes()
    assert all(name.encode() in data for name in ("loss", "tokens_per_s_per_device", "mfu", "memory_gib"))
    assert b"6.25" in data


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


# ---- a study's metrics sink ------------------------------------------------------------------
class FakeWriter:
    """torch.utils.tensorboard.SummaryWriter's part a sink uses."""

    def __init__(self, log_dir):
        self.log_dir, self.scalars, self.closed = log_dir, [], False

    def add_scalar(self, name, value, step):
        self.scalars.append((name, value, step))

    def close(self):
        self.closed = True


def test_a_studys_metrics_sink_reaches_its_runs_and_changes_no_run_id(tmp_path, monkeypatch):
    import yaml

    from scalestudy.cli.launch import _study_sink
    from scalestudy.harness import metrics_sink
    from scalestudy.spec.studies import StudyError, study_from_dict

    repo = __import__("pathlib").Path(__file__).resolve().parents[2]
    data = yaml.safe_load((repo / "workflow" / "studies" / "smoke.yaml").read_text())
    plain = study_from_dict("smoke", data, root=repo)
    study = study_from_dict("smoke", {**data, "metrics_sink": {"kind": "tensorboard", "dir": "tb"}}, root=repo)
    assert [r.run_id for r in study.runs] == [r.run_id for r in plain.runs] and plain.metrics_sink is None
    monkeypatch.setattr(metrics_sink, "check", lambda *a, **k: None)  # tensorboard and wandb need not be installed
    sink = _study_sink(study)
    assert sink == {"kind": "tensorboard", "dir": str(repo / "tb")}
    # scalestudy launch hands it to its workers; a worker's "none" (no --metrics-sink) takes it
    env = {metrics_sink.SINK_ENV: metrics_sink.to_env(sink)}
    assert metrics_sink.resolve("none", env) == sink and metrics_sink.resolve("wandb", env) == {"kind": "wandb"}
    assert metrics_sink.resolve("none", {}) == {"kind": "none"}
    run = study.runs[0]
    writer = metrics_sink.MetricsSink(
        metrics_sink.resolve("none", env), tmp_path / "run", run.run_id, {}, writer_factory=FakeWriter
    )
    p = Progress(total_steps=2, tokens_per_step=100, world_size=2, every=0, sink=writer)
    p.update(0, "measured", 0.5, 1.5, {})
    writer.close()
    assert writer._writer.log_dir == str(repo / "tb" / run.run_id) and writer._writer.closed
    assert ("tokens_per_s_per_device", 100.0, 0) in writer._writer.scalars
    # by default next to the study's data, not in a raw log; W&B offline, grouped by study
    wb = study_from_dict("smoke", {**data, "metrics_sink": {"kind": "wandb", "project": "p"}}, root=repo)
    assert _study_sink(wb) == {
        "kind": "wandb",
        "project": "p",
        "dir": str(repo / "data" / "smoke" / "wandb"),
        "group": "smoke",
    }
    monkeypatch.delenv("WANDB_MODE", raising=False)
    got = {}
    metrics_sink.MetricsSink(
        _study_sink(wb) | {"dir": str(tmp_path / "wandb")},
        tmp_path,
        "run-x",
        {"a": 1},
        writer_factory=lambda **kw: got.update(kw),
    )
    assert got == {
        "project": "p",
        "name": "run-x",
        "group": "smoke",
        "config": {"a": 1},
        "dir": str(tmp_path / "wandb"),
        "mode": "offline",
    }
    # the study file's schema names a bad setting
    with pytest.raises(StudyError, match="metrics_sink"):
        study_from_dict("smoke", {**data, "metrics_sink": {"kind": "mlflow"}}, root=repo)


def test_a_study_sink_whose_package_is_missing_stops_the_launch_in_one_sentence(tmp_path, monkeypatch, capsys):
    import importlib.util

    import yaml

    from scalestudy.cli import main
    from scalestudy.harness import metrics_sink

    repo = __import__("pathlib").Path(__file__).resolve().parents[2]
    data = yaml.safe_load((repo / "workflow" / "studies" / "smoke.yaml").read_text())
    path = tmp_path / "smoke-tb.yaml"
    path.write_text(yaml.safe_dump({**data, "metrics_sink": {"kind": "tensorboard"}}))
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard" else find_spec(name, *a)
    )
    monkeypatch.delenv(metrics_sink.SINK_ENV, raising=False)
    from scalestudy.spec.studies import load_study

    run_id = load_study(str(path), repo).runs[0].run_id
    assert main(["launch", "--study", str(path), "--run-id", run_id, "--root", str(repo)]) == 2
    assert capsys.readouterr().err == (
        f"scalestudy launch: metrics_sink in {path}: tensorboard needs the "
        'tensorboard package, which is not installed: pip install "scalestudy[tensorboard]" '
        "(or tensorboard)\n"
    )
