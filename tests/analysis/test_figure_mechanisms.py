"""The drawing mechanisms that keep a panel from misleading (issue 25): opposite-sense colour maps,
compact ticks, flat panels left out, zero-based axes below the noise, coinciding series kept
visible, the best series naming its layout, the paper's own values drawn."""

import matplotlib
import pytest

from scalestudy.analysis.figures import drawing, heatmap, prepare
from scalestudy.analysis.figures.description import Description, Quantity

matplotlib.use("Agg")

Q = Quantity("MFU", "%", "mfu", 100.0, 0.0, 100.0)
DESC = Description(
    name="t",
    title="t",
    paper="p",
    shows="s",
    series="s",
    x=Quantity("GPUs"),
    quantities=(Q,),
    category="c",
    paper_values=(("MFU (%)", 59.67, "A100"),),
)


def _fd(ys_by_series, panel="MFU (%)", xs=(8, 16, 32)):
    rows = [
        {
            "panel": panel,
            "series": s,
            "x": x,
            "y": y,
            "x_quantity": "GPUs",
            "y_quantity": panel,
            "config_ids": [f"{s}{x}"],
        }
        for s, ys in ys_by_series.items()
        for x, y in zip(xs, ys)
    ]
    return prepare.FigureData(name="t", title="t", rows=rows, panels=[panel], description=DESC)


def _draw(fd):
    with matplotlib.rc_context(drawing.style()):
        fig, axes = drawing.figure_for(fd)
        drawing.draw_lines(fig, axes, fd)
    return axes[0]


def test_quantities_of_opposite_sense_get_different_colour_maps():
    import matplotlib.pyplot as plt

    cells = [heatmap.Cell(1, p, float(p), None, None) for p in (1, 2, 4)]
    maps = []
    for better in ("high", "low"):
        fig, ax = plt.subplots()
        heatmap.heatmap_panel(ax, cells, title="t", value_label="v", fmt="{:g}".format, better=better)
        maps.append(ax.collections[0].get_cmap().name)
        plt.close(fig)
    assert maps[0] != maps[1]
    from scalestudy.analysis.figures import tp_pp_grid

    assert tp_pp_grid.SHARE.better == "low" and tp_pp_grid.WPS.better == "high"


def test_large_axes_get_compact_tick_labels():
    ax = _draw(_fd({"a": [200_000, 400_000, 800_000]}, panel="WPS"))
    assert isinstance(ax.yaxis.get_major_formatter(), matplotlib.ticker.EngFormatter)
    small = _draw(_fd({"a": [20, 40, 80]}))
    assert not isinstance(small.yaxis.get_major_formatter(), matplotlib.ticker.EngFormatter)


def test_a_range_below_the_noise_gets_a_zero_based_axis():
    ax = _draw(_fd({"a": [684.4, 684.9, 684.6]}, panel="W"))
    assert ax.get_ylim()[0] == 0
    ax = _draw(_fd({"a": [400, 600, 700]}, panel="W"))
    assert ax.get_ylim()[0] > 0


def test_an_all_zero_panel_is_left_out_with_a_note():
    fd = _fd({"a": [1.0, 2.0, 3.0]}, panel="time")
    fd.rows += _fd({"a": [0.0, 0.0, 0.01]}, panel="share").rows
    fd.panels = ["time", "share"]
    drawing.leave_out_flat_panels(fd)
    assert fd.panels == ["time"] and any("Left out: share" in n for n in fd.notes)
    assert any(r["panel"] == "share" for r in fd.rows)  # the CSV keeps them


def test_coinciding_series_stay_visible():
    ax = _draw(_fd({"a": [50.0, 40.0, 30.0], "b": [50.5, 40.2, 30.1]}))
    lines = [l for l in ax.get_lines() if len(l.get_xdata()) == 3 and l.get_linestyle() != "None"]  # data lines
    assert len(lines) == 2 and len({l.get_marker() for l in lines}) == 2
    assert lines[0].get_xdata()[0] != lines[1].get_xdata()[0]  # nudged apart


def test_the_papers_values_are_drawn_and_named_in_the_legend():
    ax = _draw(_fd({"a": [50.0, 40.0, 30.0]}))
    line = next(l for l in ax.get_lines() if list(l.get_ydata()) == [59.67, 59.67])
    assert line.get_label() == "paper: A100 59.67"
    assert "paper: A100 59.67" in [t.get_text() for lg in ax.figure.legends for t in lg.get_texts()]
    assert not any(t.get_text().startswith("paper:") for t in ax.texts)  # no label over the data


@pytest.fixture(scope="module")
def rich(tmp_path_factory):
    from analysis_fixtures import build_rich_study
    from scalestudy.analysis import aggregate as agg

    study = build_rich_study(tmp_path_factory.mktemp("mech"))
    agg.aggregate(study)
    return study, agg.load_tables(study.tables_dir)


def test_the_best_tp_pp_series_names_its_layout_per_point(rich):
    from scalestudy.analysis.figures import figure_data

    study, tables = rich
    fd = figure_data("power", tables, study)
    best = [r for r in fd.rows if r["series"].startswith("best TP/PP")]
    assert best and all(r["layout"].startswith("TP") and r["layout"] in r["note"] for r in best)
    assert any(q.metric == "power_w_per_gpu" for q in fd.description.quantities)


def test_heatmap_cells_are_annotated_by_seaborn_with_value_and_status():
    import matplotlib.pyplot as plt

    cells = [
        heatmap.Cell(1, 1, 10.0),
        heatmap.Cell(1, 2, None, "oom", heatmap.FAILED_HATCH),
        heatmap.Cell(2, 1, 30.0, "oom", heatmap.FAILED_HATCH),
        heatmap.Cell(2, 2, None, "planned"),
    ]
    fig, ax = plt.subplots()
    heatmap.heatmap_panel(ax, cells, title="t", value_label="v", fmt="{:g}".format)
    texts = {t.get_text(): t for t in ax.texts}
    plt.close(fig)
    assert set(texts) == {"10", "oom", "30\noom", "planned"}
    assert texts["oom"].get_color() == "#b00020"  # a failure's status in red
    assert texts["10"].get_color() != texts["30\noom"].get_color()  # white on the dark cell, black on the light one


def test_a_shares_two_measured_series_keep_one_colour_and_differ_in_marker():
    from scalestudy.spec.rank_share import MEASURED_BUSY_SERIES, MEASURED_SERIES

    wall, busy = f"TP=8{MEASURED_SERIES}", f"TP=8{MEASURED_BUSY_SERIES}"
    colors = drawing.series_colors([wall, busy, "FSDP"])
    assert colors[wall] == colors[busy] != colors["FSDP"]
    assert drawing.line_style(wall)[0] != drawing.line_style(busy)[0]


def test_more_series_than_the_palette_still_get_distinct_colours():
    names = [f"s{i}" for i in range(13)]
    colors = drawing.series_colors(names)
    assert len({tuple(round(c, 4) for c in colors[n]) for n in names}) == 13


def test_muted_series_take_no_palette_colour():
    fd = _fd({f"s{i}": [1.0 + i, 2.0 + i, 3.0 + i] for i in range(10)} | {"other": [0.5, 0.6, 0.7]})
    with matplotlib.rc_context(drawing.style()):
        fig, axes = drawing.figure_for(fd)
        drawing.draw_lines(fig, axes, fd, muted_series={"other"})
    colours = {
        tuple(round(c, 4) for c in line.get_color()[:3])
        for line in axes[0].get_lines()
        if line.get_label().startswith("s")
    }
    assert colours == {tuple(round(c, 4) for c in rgb) for rgb in drawing.palette(10)}  # the colour-blind 10


def test_series_drawn_beside_other_colours_start_past_them_and_keep_their_base_colour():
    """kernel_breakdown: the share panel's lines take the colours after the bars' parts, and a
    measured-share line its strategy's colour."""
    from scalestudy.spec.rank_share import MEASURED_SERIES

    parts = drawing.palette(5)[:3]
    colors = drawing.series_colors(["FSDP", f"FSDP{MEASURED_SERIES}", "HSDP"], after=3)
    assert colors["FSDP"] == colors[f"FSDP{MEASURED_SERIES}"] != colors["HSDP"]
    assert {tuple(colors["FSDP"]), tuple(colors["HSDP"])} == {tuple(c) for c in drawing.palette(5)[3:]}
    assert not {tuple(c) for c in parts} & {tuple(c) for c in colors.values()}
