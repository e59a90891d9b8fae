"""Every figure drawn from a paper-scale synthetic study (the paper's grid, 3 seeds, failures,
two backends) and from a smoke-like CPU study passes the layout checks of figure_layout: checked
on the rendered figure, not on pixels."""

import matplotlib
import pytest

import figure_fixtures
import figure_layout
from scalestudy.analysis import figures
from scalestudy.analysis.figures import FIGURES, drawing, figure_data

SERIES_LIMIT = {"collectives_bandwidth": 10}  # one line a node count, as the paper's Fig. 2
# figures of rank shares (tables of their own): the paper fixture writes them, the smoke one has
# none and draws their explicit empty panel, which is checked too
NO_SMOKE_DATA = {"rank_grid", "rank_memory", "power", "step_time_microbatches", "claim_sensitivity"}


def _draw(name, fd, study):
    if hasattr(figures, "draw"):
        return figures.draw(name, fd, study)
    fig, axes = (drawing.new_figure(1), None) if fd.empty_reason else (FIGURES[name].draw(fd, study), None)
    drawing.header(fig, fd, study)
    drawing.footer(fig, fd.notes)
    return fig


@pytest.fixture(scope="module", params=["paper", "smoke"])
def fixture(request, tmp_path_factory):
    if request.param == "paper":
        return figure_fixtures.paper_fixture(tmp_path_factory.mktemp("paper-tables"))
    return figure_fixtures.smoke_fixture()


@pytest.mark.parametrize("name", list(FIGURES))
def test_figure_layout(fixture, name):
    study, tables = fixture
    with matplotlib.rc_context(drawing.style()):
        fd = figure_data(name, tables, study)
        assert not fd.empty_reason or name in NO_SMOKE_DATA and study.name.startswith("smoke"), fd.empty_reason
        fig = _draw(name, fd, study)
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        if not hasattr(fig.canvas, "get_renderer"):
            FigureCanvasAgg(fig)
        problems = figure_layout.check(fig, fd, series_limit=SERIES_LIMIT.get(name, 8))
    assert not problems, f"{study.name}/{name}:\n" + "\n".join(problems[:15])


def test_model_validation_layout(tmp_path):
    """model_validation draws the external ledger (not a study's tables): the same checks."""
    from scalestudy.analysis.figures import model_validation

    ledger = tmp_path / "ledger.csv"
    figure_fixtures.write_ledger(ledger)
    with matplotlib.rc_context(drawing.style()):
        fd = model_validation.data(ledger)
        assert not fd.empty_reason and any("Not expressible" in n for n in fd.notes)
        fig = model_validation.draw(fd)
        problems = figure_layout.check(fig, fd, series_limit=8)
    assert not problems, "model_validation:\n" + "\n".join(problems[:15])


def test_failed_points_are_listed_in_the_notes_not_written_over_the_data():
    study, tables = figure_fixtures.paper_fixture()
    weak = figure_data("weak_scaling", tables, study)
    assert "Without a value: FSDP, torch: oom at 512 GPUs; TP=4, torch: timeout at 2048 GPUs." in weak.notes
    assert drawing.FAILED_NOTE in weak.notes
    kernels = figure_data("kernel_breakdown", tables, study)  # named by family, not by bar part
    assert "Without a value: FSDP: oom at 512 GPUs." in kernels.notes
    sizes = figure_data("model_sizes", tables, study)  # same series on every quantity panel: named once
    assert "Without a value: llama2-70b, TP=8, micro_batch=1: oom at 8, 16 GPUs." in sizes.notes, sizes.notes
    grid = figure_data("tp_pp_grid", tables, study)  # a failed cell says its status itself
    assert not [n for n in grid.notes if n.startswith("Without a value")] and drawing.FAILED_NOTE not in grid.notes


def test_failed_points_name_their_panel_where_panels_hold_different_configurations(tmp_path):
    study, tables = figure_fixtures.paper_fixture(tmp_path)
    memory = figure_data("rank_memory", tables, study)  # one panel a model
    assert (
        "Without a value: llama2-13b, FSDP, micro batch 2: oom at 8 GPUs; llama2-70b, FSDP, micro batch 2: "
        "oom at 8, 16, 32 GPUs."
    ) in memory.notes, memory.notes
