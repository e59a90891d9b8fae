import pytest

from analysis_fixtures import build_rich_study, rich_specs
from scalestudy.analysis import aggregate as agg
from scalestudy.measure.csv_format import read_csv_rows, split_list
from scalestudy.analysis.figures import FIGURES, drawing, figure_data, prepare, render, render_all, save

EXPECTED = [
    "collectives_bandwidth",
    "weak_scaling",
    "kernel_breakdown",
    "strong_scaling",
    "tp_pp_grid",
    "model_sizes",
    "hardware_generations",
    "power",
    "rank_grid",
    "rank_memory",
    "step_time_microbatches",
    "claim_sensitivity",
]


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    root = tmp_path_factory.mktemp("figs")
    study = build_rich_study(root)
    agg.aggregate(study)
    tables = agg.load_tables(study.tables_dir)
    paths = render_all(study, tables)
    return study, tables, paths


def _rows(study, name):
    return read_csv_rows(study.figures_dir / f"{name}.csv")


def test_registry_names():
    assert list(FIGURES) == EXPECTED


def test_every_figure_writes_pdf_png_csv(drawn):
    study, _, paths = drawn
    names = {p.name for p in paths}
    for name in EXPECTED:
        for ext in ("pdf", "png", "csv"):
            assert f"{name}.{ext}" in names
        assert (study.figures_dir / f"{name}.pdf").read_bytes().startswith(b"%PDF")
        assert (study.figures_dir / f"{name}.png").read_bytes().startswith(b"\x89PNG")
        header = (study.figures_dir / f"{name}.csv").read_text().splitlines()[0]
        assert header == ",".join(save.FIGURE_COLUMNS)


def test_rows_name_their_runs(drawn):
    study, _, _ = drawn
    planned = {p.spec.run_id for p in study.runs} | {c.run_id for c in study.collectives}
    for name in EXPECTED:
        for r in _rows(study, name):
            ids = split_list(r["run_ids"])
            assert ids and set(ids) <= planned, (name, r)


def test_empty_experiment_gives_header_only_csv(drawn):
    study, tables, _ = drawn
    assert _rows(study, "model_sizes") == []
    fd = figure_data("model_sizes", tables, study)
    assert "no runs of experiment 'model_sizes'" in fd.empty_reason


def test_failed_configurations_are_marked(drawn):
    study, _, _ = drawn
    weak = _rows(study, "weak_scaling")
    oom = [r for r in weak if r["status"] == "oom"]
    assert {r["x"] for r in oom} == {"8"} and all(r["y"] == "" for r in oom)
    assert rich_specs()["fsdp8"].run_id in oom[0]["run_ids"]
    grid = _rows(study, "tp_pp_grid")
    failed = [r for r in grid if r["status"] == "oom"]
    assert failed and all(r["series"] == "TP=2" and r["x"] == "2" and r["y"] == "" for r in failed)
    coll = _rows(study, "collectives_bandwidth")
    assert any(r["status"] == "comm_error" and r["panel"] == "all collectives" for r in coll)


def test_strong_scaling_names_the_best_strategy(drawn):
    study, _, _ = drawn
    best = [r for r in _rows(study, "strong_scaling") if r["series"] == "best strategy"]
    assert {r["x"]: r["label"] for r in best} == {"2": "FSDP", "4": "TP=2, FSDP over 2"}
    assert float(next(r for r in best if r["x"] == "4")["y"]) == pytest.approx(8 * 128 / 0.45)


def test_weak_scaling_plots_mfu_in_percent_with_ci(drawn):
    study, tables, _ = drawn
    spec = rich_specs()["fsdp2"]
    row = next(r for r in _rows(study, "weak_scaling") if r["panel"] == "MFU (%)" and r["x"] == "2")
    summ = next(r for r in prepare.records(tables.summary) if r["config_id"] == spec.config_id)
    assert float(row["y"]) == pytest.approx(100 * summ["mfu_mean"])
    assert float(row["ci95_low"]) == pytest.approx(100 * summ["mfu_ci95_low"]) and row["n_seeds"] == "2"


def test_power_says_gpu_board_power_only(drawn):
    study, tables, _ = drawn
    fd = figure_data("power", tables, study)
    assert "GPU board power only" in fd.title and "NVML" not in fd.title  # the title fits a prediction too
    assert any("through NVML" in n for n in fd.notes)
    series = {r["series"] for r in fd.rows}
    assert "FSDP" in series and any(s.startswith("best TP/PP TP") for s in series)  # named by its winning layout


def test_rerender_is_byte_identical(drawn, tmp_path):
    study, tables, _ = drawn
    for p in render("weak_scaling", study, tables, tmp_path):
        assert p.read_bytes() == (study.figures_dir / p.name).read_bytes(), p.name


def test_cpu_study_labels_and_power_panel(tmp_path):
    study = build_rich_study(tmp_path, device="cpu", name="cpu")
    agg.aggregate(study)
    tables = agg.load_tables(study.tables_dir)
    fd = figure_data("power", tables, study)
    assert fd.cpu and fd.empty_reason == "no GPU power data (CPU run)"
    assert fd.rows and all(r["y"] is None and r["note"] == "no GPU power data (CPU run)" for r in fd.rows)
    paths = render("power", study, tables)
    assert {p.suffix for p in paths} == {".pdf", ".png", ".csv"}
    import matplotlib

    from scalestudy.analysis.figures import draw

    with matplotlib.rc_context(drawing.style()):
        wfd = figure_data("weak_scaling", tables, study)
        fig = draw("weak_scaling", wfd, study)
    texts = [t.get_text() for sub in fig.subfigs for t in sub.texts]
    assert drawing.CPU_WARNING in texts and any(study.hardware in t for t in texts)


def test_a_study_without_runs_draws_every_figure(tmp_path):
    from analysis_fixtures import make_study
    from scalestudy.analysis.claims import claims

    study = make_study(tmp_path, [], name="empty")
    agg.aggregate(study)
    paths = render_all(study, formats=("csv", "png"))
    assert len(paths) == 2 * len(FIGURES)
    for name in FIGURES:
        assert (study.figures_dir / f"{name}.csv").read_text() == ",".join(save.FIGURE_COLUMNS) + "\n"
    rows = read_csv_rows(claims(study)[0])
    assert {r["verdict"] for r in rows} == {"not comparable"}


def test_family_names_the_strategy_never_the_gpu_count():
    assert prepare.family({"tp": 1, "pp": 1, "dp_replicate": 1, "dp_shard": 1024}) == "FSDP"
    assert prepare.family({"tp": 1, "pp": 1, "dp_replicate": 128, "dp_shard": 8}) == "HSDP"
    assert prepare.family({"tp": 2, "pp": 1, "dp_shard": 512}) == "TP=2"
    assert prepare.family({"tp": 1, "pp": 4, "dp_shard": 64}) == "PP=4"
    assert prepare.family({"tp": 2, "pp": 2, "dp_shard": 8}) == "TP=2×PP=2"


def test_series_names_add_what_differs_and_never_join_two_configurations_at_one_x():
    def cfg(cid, world, **spec):
        return {"config_id": cid, "world_size": world, "model": spec.pop("model", "llama2-7b")}, {
            "tp": 1,
            "pp": 1,
            "dp_replicate": 1,
            "dp_shard": world,
            "backend": "torch",
            "compile": False,
            **spec,
        }

    pairs = [
        cfg("a8", 8),
        cfg("a16", 16),
        cfg("m8", 8, backend="megatron"),
        cfg("m16", 16, backend="megatron"),
        cfg("c8", 8, backend="megatron", compile=True),
        cfg("h16", 16, dp_replicate=2, dp_shard=8),
        cfg("x8", 8, lr=1e-4),
    ]
    cfgs = [c for c, _ in pairs]
    specs = {c["config_id"]: s for c, s in pairs}
    names = prepare.series_names(cfgs, specs, "world_size")
    assert names["m8"] == names["m16"] == "FSDP, megatron, eager"
    assert names["c8"] == "FSDP, megatron, compiled" and names["h16"] == "HSDP, torch, eager"
    keys = [(names[c["config_id"]], c["world_size"]) for c in cfgs]
    assert len(keys) == len(set(keys))  # torch FSDP at 8 GPUs twice: they differ in lr, and say so
    assert "lr=" in names["x8"] and "lr=" in names["a8"] and names["a16"] == "FSDP, torch, eager"


def test_a_measured_oom_verdict_joins_its_configurations_measured_series_of_one_kind():
    from scalestudy.spec.rank_share import MEASURED_BUSY_SERIES, MEASURED_SERIES, MEASURED_SUFFIX

    def cfg(world, inputs, tp=2):
        return {
            "config_id": f"t{tp}-{world}{MEASURED_SUFFIX}",
            "world_size": world,
            "model": "llama2-13b",
            "measured_inputs": inputs,
        }, {"tp": tp, "pp": 1, "dp_replicate": 1, "dp_shard": world // tp}

    busy = "compute (GPU busy time), memory"
    pairs = [
        cfg(8, None),
        cfg(32, busy),
        cfg(128, busy),
        cfg(8, None, tp=4),
        cfg(32, "compute, memory", tp=4),
        cfg(128, busy, tp=4),
        cfg(8, None, tp=8),
    ]
    names = prepare.series_names([c for c, _ in pairs], {c["config_id"]: s for c, s in pairs}, "world_size")
    assert names["t2-8--measured-inputs"] == names["t2-32--measured-inputs"] == "TP=2" + MEASURED_BUSY_SERIES
    assert names["t4-8--measured-inputs"] == "TP=4" + MEASURED_SERIES  # its series has two kinds: none taken
    assert names["t4-128--measured-inputs"] == "TP=4" + MEASURED_BUSY_SERIES
    assert names["t8-8--measured-inputs"] == "TP=8" + MEASURED_SERIES


def test_measured_suffixes_join_an_oom_verdict_within_the_group_each_figure_names():
    from scalestudy.spec.rank_share import MEASURED_BUSY_SERIES, MEASURED_SERIES, MEASURED_SUFFIX

    def cfg(cid, world, inputs):
        return {"config_id": cid + MEASURED_SUFFIX, "world_size": world, "measured_inputs": inputs}

    busy = "compute (GPU busy time), memory"
    cfgs = [
        cfg("a", 256, None),
        cfg("b", 256, busy),
        cfg("c", 256, busy),
        cfg("d", 512, None),
        cfg("e", 512, "compute, memory"),
        cfg("f", 1024, None),
        {"config_id": "g", "world_size": 1024},
    ]
    kind = prepare.measured_suffixes(cfgs, lambda c: c["world_size"])  # as tp_pp_grid's row of panels
    assert kind["a" + MEASURED_SUFFIX] == MEASURED_BUSY_SERIES
    assert kind["d" + MEASURED_SUFFIX] == kind["e" + MEASURED_SUFFIX] == MEASURED_SERIES
    assert kind["f" + MEASURED_SUFFIX] == MEASURED_SERIES  # no measured share beside it: the default kind
    assert kind["g"] == ""  # the model alone has no suffix
    assert (
        prepare.measured_suffixes(cfgs, lambda c: 0)["a" + MEASURED_SUFFIX] == MEASURED_SERIES
    )  # two kinds: none taken


def test_a_caveat_in_the_summary_notes_marks_the_figure_rows_and_a_short_footnote():
    import pandas as pd
    from types import SimpleNamespace

    summary = pd.DataFrame(
        [
            {"config_id": "a", "notes": "PREDICTED;caveat: the input x has a known artefact: y"},
            {"config_id": "b", "notes": "PREDICTED"},
        ]
    )
    fd = prepare.FigureData(
        name="weak_scaling",
        title="t",
        rows=[{"config_ids": ["a"], "note": "predicted by the model"}, {"config_ids": ["b"], "note": None}],
    )
    foot = prepare.mark_caveats(fd, SimpleNamespace(summary=summary))
    assert fd.rows[0]["note"] == "predicted by the model; " + prepare.CAVEAT_ROW_NOTE
    assert fd.rows[1]["note"] is None
    assert foot.startswith("caveat: 1 configuration drawn takes a measured input with a known artefact")
    assert prepare.mark_caveats(fd, SimpleNamespace(summary=summary.iloc[1:])) is None
