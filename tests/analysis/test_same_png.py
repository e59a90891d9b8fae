import io

import numpy as np
from PIL import Image

from scalestudy.analysis.audit import PNG_TOLERANCE_LEVELS, PNG_TOLERANCE_PIXELS, png_difference, same_png


def _png(pixels: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels.astype(np.uint8), "RGBA").save(out, format="png")
    return out.getvalue()


def test_layout_noise_passes_an_edit_does_not():
    base = np.full((60, 80, 4), 255)
    base[20:22, 5:75, :3] = 40  # a line
    noisy = base.copy()
    noisy[22, 5:9, :3] = 254  # a few edge pixels one level off: a line moved by a sub-pt amount
    edited = base.copy()
    edited[30:45, 10:40, :3] = 0  # a block drawn over the image
    a, b, c = _png(base), _png(noisy), _png(edited)
    assert same_png(a, a) and same_png(a, b)
    assert not same_png(a, c)
    assert not same_png(a, _png(base[:, :79]))  # another size
    many = base.copy()
    many.reshape(-1, 4)[: PNG_TOLERANCE_PIXELS + 1, 0] = 250  # too many pixels off, each a little
    assert not same_png(a, _png(many))
    assert not same_png(a, b"not a png")


def test_the_difference_is_said():
    base = np.full((60, 80, 4), 255)
    edited = base.copy()
    edited[30:45, 10:40, :3] = 0
    assert png_difference(_png(base), _png(base)) is None
    assert png_difference(_png(base), _png(edited)) == (
        f"450 pixels differ, by up to 255 levels of 255 (tolerated: {PNG_TOLERANCE_PIXELS} pixels, "
        f"{PNG_TOLERANCE_LEVELS} levels)"
    )
    assert png_difference(_png(base), _png(base[:, :79])) == "80x60 RGBA pixels against 79x60 RGBA"


def test_a_figure_draws_the_same_whichever_formats_are_saved(tmp_path):
    """The layout is solved once and frozen before saving (figures.save): the PNG saved alone equals
    the PNG saved after a PDF, so an image does not depend on what was drawn before it."""
    import matplotlib

    matplotlib.use("agg")
    from matplotlib.figure import Figure

    from scalestudy.analysis.figures import save

    def fig():
        f = Figure(figsize=(6, 3), layout="constrained")
        for i, ax in enumerate(f.subplots(1, 3)):
            ax.errorbar([8, 64, 512, 2048], [12000 - 300 * i, 11000, 10500, 9800], yerr=500, marker="o", label=f"s{i}")
            ax.set_xscale("log", base=2)
            ax.set(title=f"panel {i} (tokens/s)", xlabel="GPUs (world size, log 2)", ylabel="tokens/s per device")
            ax.tick_params(axis="x", labelrotation=45)
        f.legend(loc="outside lower center", ncols=3)
        f.suptitle("A title of the figure")
        return f

    both = save.save(fig(), tmp_path / "both", ["pdf", "png"], version="v")
    alone = save.save(fig(), tmp_path / "alone", ["png"], version="v")
    assert both[1].read_bytes() == alone[0].read_bytes()


def test_a_saved_figures_legend_clears_its_axis_labels(tmp_path):
    """The layout is solved at the PNG's resolution (savefig.dpi) before it is frozen: solved at the
    figure's own dpi, mlperf's weak_scaling legend sat on its panels' x labels in the PNG."""
    from pathlib import Path

    import matplotlib

    from scalestudy.analysis import aggregate as agg
    from scalestudy.analysis.figures import draw, drawing, figure_data, save
    from scalestudy.spec.studies import load_study

    repo = Path(__file__).resolve().parents[2]
    study = load_study("mlperf", repo)
    tables = agg.load_tables(study.tables_dir)
    with matplotlib.rc_context(drawing.style()):
        fig = draw("weak_scaling", figure_data("weak_scaling", tables, study), study)
        save.save(fig, tmp_path / "weak_scaling", ["png"], version="v")
        fig.set_dpi(matplotlib.rcParams["savefig.dpi"])  # measured as the PNG draws it
        fig.draw_without_rendering()
        renderer = fig.canvas.get_renderer()
        legends = [leg.get_window_extent(renderer) for f in (fig, *fig.subfigs) for leg in f.legends]
        labels = [ax.xaxis.label.get_window_extent(renderer) for ax in fig.get_axes() if ax.get_xlabel()]
    assert legends and labels
    assert not [(leg, lab) for leg in legends for lab in labels if leg.overlaps(lab)]
