"""Figures that cannot mislead (issue 53): a series drawn as its legend shows it, no two legend
entries alike, measured-share points beside the model's at the same x, the power limit drawn where
series sit at it, one best TP/PP line, the best strong-scaling line's two bases explained, panels in
model-size order and one colour a configuration across studies.

Synthetic data for each problem (always run), and the committed rank studies' own figures
(paper-rank, h100-rank); paper-model's tables are generated (not committed): its checks run where
they are."""

from pathlib import Path

import matplotlib
import pytest
from matplotlib.colors import to_rgba
from matplotlib.legend import Legend

import figure_fixtures
from scalestudy.analysis.figures import colors, drawing, figure_data, prepare
from scalestudy.analysis.figures import draw as draw_figure
from scalestudy.analysis.figures.description import Description, Quantity
from scalestudy.spec.rank_share import MEASURED_BUSY_SERIES, MEASURED_SERIES, MEASURED_SERIES_SUFFIXES, MEASURED_SUFFIX

matplotlib.use("Agg")

REPO = Path(__file__).resolve().parents[2]
Q = Quantity("MFU", "%", "mfu", 100.0, 0.0, 100.0)
T = Quantity("tokens/s per device", "tokens/s", "tokens_per_s_per_device")
DESC = Description(
    name="t", title="t", paper="p", shows="s", series="s", x=Quantity("GPUs"), quantities=(Q, T), category="c"
)


# ---- what a legend shows and what is drawn -----------------------------------------------------------
def _look(line) -> tuple:
    """What a reader tells a line by: its colour, marker and dash pattern (None: no line)."""
    ls = line.get_linestyle()
    dashes = (
        None
        if ls in ("None", "none", "", " ")
        else tuple(round(float(v), 2) for v in (line._unscaled_dash_pattern[1] or ()))
    )
    return tuple(round(c, 3) for c in to_rgba(line.get_color())), str(line.get_marker()), dashes


def _legend(fig) -> dict:
    """label -> the legend's handle, over every legend of the figure."""
    out = {}
    for lg in fig.findobj(Legend):
        for h, t in zip(lg.legend_handles, lg.get_texts()):
            out[t.get_text()] = h
    return out


def legend_mismatches(fig, fd) -> list[str]:
    """Each series with values in a panel is drawn there by some line through its values (in x
    order) that looks like (colour, marker, dashes) its legend entry."""
    import numpy as np

    handles = _legend(fig)
    axes = {ax.get_title(): ax for ax in fig.findobj(matplotlib.axes.Axes) if ax.get_title()}
    out = []
    for panel in fd.panels:
        ax = axes.get(panel)
        if ax is None:
            continue
        lines = [ln for ln in ax.get_lines() if len(ln.get_xdata())]
        for s in sorted({r["series"] for r in fd.rows if r["panel"] == panel}):
            h = handles.get(s)
            pts = sorted(
                (r["x"], r["y"]) for r in fd.rows if r["panel"] == panel and r["series"] == s and r.get("y") is not None
            )
            if h is None or not pts or _look(h)[2] is None:  # no entry, no value, or grey points (no line)
                continue
            ys = np.array([y for _, y in pts])
            drawn = [
                ln
                for ln in lines
                if len(ln.get_ydata()) == len(ys)
                and np.allclose(np.asarray(ln.get_ydata(), dtype=float), ys, rtol=1e-9)
            ]
            if not any(_look(ln) == _look(h) for ln in drawn):
                out.append(f"{s!r} in panel {panel!r}: drawn as {[_look(ln) for ln in drawn]}, legend {_look(h)}")
    return out


def _drawn_x(ax, fd, panel: str, series: str) -> dict:
    """x value -> the x its point of `series` is drawn at in ax (a line through its values)."""
    import numpy as np

    pts = sorted(
        (r["x"], r["y"]) for r in fd.rows if r["panel"] == panel and r["series"] == series and r.get("y") is not None
    )
    ys = np.array([y for _, y in pts])
    for ln in ax.get_lines():
        if len(ln.get_ydata()) == len(ys) and len(ys) and np.allclose(np.asarray(ln.get_ydata(), dtype=float), ys):
            return dict(zip([x for x, _ in pts], (float(v) for v in ln.get_xdata())))
    return {}


def _variant_base(series: str):
    """The plain series a prediction with a measured rank share (or the model beside a
    measurement) varies; None for a plain series."""
    for x in (*MEASURED_SERIES_SUFFIXES, prepare.MODEL_SERIES):
        if series.endswith(x):
            return series.removesuffix(x)
    return None


def _span(r: dict) -> tuple:
    ends = [r["y"], *(r[k] for k in ("ci95_low", "ci95_high") if r.get(k) is not None)]
    return min(ends), max(ends)


def variants_on_plain_points(fig, fd) -> list[str]:
    """A variant's point (a prediction with a measured rank share, the model beside a measurement)
    drawn at the x of a plain series' point of the same x value whose interval overlaps its own:
    one would hide in the other's error bar."""
    axes = {ax.get_title(): ax for ax in fig.findobj(matplotlib.axes.Axes) if ax.get_title()}
    out = []
    for panel in fd.panels:
        ax = axes.get(panel)
        series = {r["series"] for r in fd.rows if r["panel"] == panel and r.get("y") is not None}
        if ax is None:
            continue
        drawn = {s: _drawn_x(ax, fd, panel, s) for s in series}
        span = {(r["series"], r["x"]): _span(r) for r in fd.rows if r["panel"] == panel and r.get("y") is not None}
        for v in (s for s in series if drawn[s] and _variant_base(s) is not None):
            for x, at in drawn[v].items():
                for p in (s for s in series if _variant_base(s) is None and x in drawn[s]):
                    (a, b), (c, d) = span[(v, x)], span[(p, x)]
                    if abs(drawn[p][x] - at) <= 1e-9 * max(abs(at), 1.0) and a <= d and c <= b:
                        out.append(f"{v!r} at x={x:g} is drawn on {p!r}'s point in panel {panel!r}")
    return out


def alike_entries(fig) -> list[str]:
    """Legend entries (other than the failed mark) that look the same."""
    seen: dict[tuple, str] = {}
    out = []
    for label, h in _legend(fig).items():
        if label.startswith("x: ") or not hasattr(h, "get_marker"):
            continue
        other = seen.setdefault(_look(h), label)
        if other != label:
            out.append(f"{other!r} and {label!r} look alike: {_look(h)}")
    return out


def _rows(series_ys: dict, panel: str, xs, y_quantity: str | None = None, spread: float = 0.0) -> list[dict]:
    return [
        {
            "panel": panel,
            "series": s,
            "x": x,
            "y": y,
            "x_quantity": "GPUs",
            "y_quantity": y_quantity or panel,
            "ci95_low": y * (1 - spread) if spread else None,
            "ci95_high": y * (1 + spread) if spread else None,
            "config_ids": [f"{s}@{x}@{panel}"],
        }
        for s, ys in series_ys.items()
        for x, y in zip(xs, ys)
        if y is not None
    ]


def _draw(fd, **kw):
    with matplotlib.rc_context(drawing.style()):
        fig, axes = drawing.figure_for(fd, legend_rows=drawing.legend_rows_for(fd))
        drawing.draw_lines(fig, axes, fd, **kw)
    fig.canvas.draw()
    return fig, axes


XS = (8, 32, 128, 512, 2048)


def test_a_series_coinciding_in_one_panel_only_is_drawn_there_as_its_legend_shows_it():
    """model_sizes: llama2-13b lay on another line in the MFU panel only and was drawn there with
    another marker and dashes than its legend (made from the first panel) showed."""
    tput = _rows(
        {
            "7b": [11000, 10900, 10800, 10500, 10000],
            "13b": [6000, 5900, 5800, 5700, 5300],
            f"7b{MEASURED_SERIES}": [10500, 10400, 10300, 10000, 9500],
        },
        T.label,
        XS,
    )
    mfu = _rows(
        {
            "7b": [53.0, 53.0, 52.5, 51.0, 48.0],
            "13b": [54.0, 53.5, 53.0, 52.0, 47.0],
            f"7b{MEASURED_SERIES}": [50.0, 50.5, 50.0, 49.5, 46.0],
        },
        Q.label,
        XS,
    )
    fd = prepare.FigureData("t", "t", rows=tput + mfu, panels=[T.label, Q.label], description=DESC)
    fig, _ = _draw(fd)
    assert not legend_mismatches(fig, fd)
    assert not alike_entries(fig)


def test_variants_of_one_colour_that_coincide_keep_legend_entries_of_their_own():
    """Two variants of one base (wall step, GPU busy time) lying on each other and on their base:
    each keeps a marker and dashes no other series of its colour has."""
    ys = [10.0, 10.1, 10.0, 9.9, 9.8]
    fd = prepare.FigureData(
        "t",
        "t",
        rows=_rows({"TP=8": ys, f"TP=8{MEASURED_SERIES}": ys, f"TP=8{MEASURED_BUSY_SERIES}": ys}, Q.label, XS),
        panels=[Q.label],
        description=DESC,
    )
    fig, _ = _draw(fd)
    assert not alike_entries(fig) and not legend_mismatches(fig, fd)


def test_a_measured_share_point_is_drawn_beside_the_model_point_at_its_x():
    """weak_scaling: PP=2's measured-share point at 256 GPUs (7% below the model's, inside its
    error bar) sat on the model point's x and vanished in its whiskers."""
    xs = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)
    rows = _rows({"PP=2": [8050, 8000, 7990, 7980, 7950, 7921, 7880, 7820, 7718]}, T.label, xs, spread=0.08)
    rows += _rows({f"PP=2{MEASURED_SERIES}": [7337]}, T.label, (256,), spread=0.07)
    fd = prepare.FigureData("t", "t", rows=rows, panels=[T.label], description=DESC)
    fig, axes = _draw(fd)
    model = next(ln for ln in axes[0].get_lines() if len(ln.get_ydata()) == len(xs))
    share = next(ln for ln in axes[0].get_lines() if list(ln.get_ydata()) == [7337])
    assert 256 in list(model.get_xdata())
    assert not variants_on_plain_points(fig, fd)
    x = share.get_xdata()[0]
    assert x > 256 * 2**0.1, x  # a marker or more to the right, not on the model point's x
    lo, hi = axes[0].get_xlim()
    assert lo < x < hi


def test_a_single_series_is_not_dodged():
    fd = prepare.FigureData(
        "t", "t", rows=_rows({"a": [1.0, 2.0, 3.0, 4.0, 5.0]}, Q.label, XS), panels=[Q.label], description=DESC
    )
    _, axes = _draw(fd)
    assert list(next(ln for ln in axes[0].get_lines() if len(ln.get_xdata()) == 5).get_xdata()) == list(XS)


def test_dodge_slots_put_a_variant_right_of_its_base_and_coinciding_series_apart():
    pts = {
        "FSDP": [{"x": 8, "y": 700.0}, {"x": 16, "y": 700.0}],
        "HSDP": [{"x": 8, "y": 700.0}, {"x": 16, "y": 700.0}],
        "PP=2": [{"x": 8, "y": 500.0}, {"x": 16, "y": 490.0}],
        f"FSDP{MEASURED_SERIES}": [{"x": 8, "y": 650.0}],
        f"TP=2{MEASURED_SERIES}": [{"x": 16, "y": 300.0}],
    }
    slots = drawing.dodge_slots(pts)
    assert slots["FSDP"] == 0 and slots["PP=2"] == 0
    assert slots["HSDP"] == 1  # on FSDP
    assert slots[f"FSDP{MEASURED_SERIES}"] == 1  # right of its base
    assert slots[f"TP=2{MEASURED_SERIES}"] == 1  # its base not drawn: right of the plain series at its x


def test_a_series_with_one_point_on_a_longer_one_is_the_one_dodged():
    """step_time_microbatches: h100-azure's one point (named before h100-eos) lay on h100-eos's at 8
    micro-batches; neither moved (the longer one does not lie on the shorter as a whole)."""
    pts = {
        "azure": [{"x": 8, "y": 0.952}],
        "eos": [{"x": 8, "y": 0.927}, {"x": 16, "y": 1.61}, {"x": 128, "y": 11.07}],
    }
    assert drawing.dodge_slots(pts) == {"eos": 0, "azure": 1}
    fd = prepare.FigureData(
        "t",
        "t",
        rows=[{**r, "series": s, "panel": Q.label} for s, rs in pts.items() for r in rs],
        panels=[Q.label],
    )
    styles = drawing.figure_styles(fd, ["azure", "eos"])
    assert styles["eos"][0] == "o" and styles["azure"][0] in drawing.COINCIDE_MARKERS


def test_lines_crossing_at_one_point_are_dodged_there_where_every_point_is_a_configuration():
    """weak_scaling (mlperf): two families 0.3% apart at 512 GPUs, neither lying on the other as a
    whole: one point hid the other."""
    rows = _rows({"a": [700.0, 740.8, 760.0], "b": [600.0, 743.2, 900.0]}, T.label, (256, 512, 1024))
    fd = prepare.FigureData("t", "t", rows=rows, panels=[T.label], description=DESC)
    _, axes = _draw(fd)
    assert _drawn_x(axes[0], fd, T.label, "a")[512] == _drawn_x(axes[0], fd, T.label, "b")[512]  # only when asked
    fig, axes = _draw(fd, every_point=True)
    a, b = _drawn_x(axes[0], fd, T.label, "a"), _drawn_x(axes[0], fd, T.label, "b")
    assert b[512] > a[512] * 2**0.04 and a[256] == 256 and b[1024] == 1024  # the crossing point only
    assert not legend_mismatches(fig, fd)
    assert drawing.dodge_note(rows, every_point=True).startswith("Dodged: where points of several series")
    assert drawing.dodge_note(rows) is None


def test_a_near_x_value_does_not_squeeze_the_points_dodged_elsewhere():
    """hardware_generations (mlperf): 72 GPUs beside 64 made one slot 0.05 octave in the whole panel,
    seven B200 systems at 8 GPUs a marker's width apart together."""
    pts = {f"s{i}": [{"x": 8, "y": 23.0 + 0.05 * i}] for i in range(7)}
    pts["t"] = [{"x": 16, "y": 30.0}, {"x": 64, "y": 29.0}]
    pts["u"] = [{"x": 72, "y": 28.0}]
    slots = drawing.drawn_slots(pts)
    assert sorted(slots.values()) == [0, 0, 0, 0, 1, 2, 3, 4, 5, 6]
    assert drawing.dodge_room_step(slots, log_x=True) == pytest.approx(0.45 / 6)  # by 8's room to 16, not 64's to 72


def test_the_papers_values_of_one_panel_differ_in_dash_pattern():
    """hardware_generations: 'paper: A100 59.67' and 'paper: H100 40.77' were drawn alike."""
    desc = Description(
        name="t",
        title="t",
        paper="p",
        shows="s",
        series="s",
        x=Quantity("GPUs"),
        quantities=(Q,),
        category="c",
        paper_values=((Q.label, 59.67, "A100"), (Q.label, 40.77, "H100")),
    )
    fd = prepare.FigureData("t", "t", rows=_rows({"a": [45.0, 44.0, 43.0, 42.0, 41.0]}, Q.label, XS), panels=[Q.label])
    fd.description = desc
    fig, axes = _draw(fd)
    lines = {ln.get_label(): ln for ln in axes[0].get_lines() if ln.get_label().startswith("paper:")}
    assert set(lines) == {"paper: A100 59.67", "paper: H100 40.77"}
    assert _look(lines["paper: A100 59.67"]) != _look(lines["paper: H100 40.77"])
    handles = _legend(fig)
    assert _look(handles["paper: A100 59.67"]) != _look(handles["paper: H100 40.77"])


def test_the_model_beside_a_series_is_its_colour_and_marker_hollow_and_dotted():
    ys = [1000.0, 990.0, 980.0, 970.0, 960.0]
    series = {"FSDP": ys, f"FSDP{prepare.MODEL_SERIES}": [y * 1.1 for y in ys], "HSDP": [y * 0.8 for y in ys]}
    series[f"HSDP{prepare.MODEL_SERIES}"] = [y * 0.85 for y in ys]
    fd = prepare.FigureData("t", "t", rows=_rows(series, T.label, XS, spread=0.02), panels=[T.label], description=DESC)
    fig, _ = _draw(fd)
    handles = _legend(fig)
    for base in ("FSDP", "HSDP"):
        h, model = handles[base], handles[f"{base}{prepare.MODEL_SERIES}"]
        assert _look(h)[:2] == _look(model)[:2]  # colour and marker
        assert _look(model)[2] == drawing.DOTTED and to_rgba(model.get_markerfacecolor()) == to_rgba("white")
        assert to_rgba(h.get_markerfacecolor()) == to_rgba(h.get_color())  # the measured series filled
    assert not legend_mismatches(fig, fd) and not alike_entries(fig) and not variants_on_plain_points(fig, fd)


# ---- colours ---------------------------------------------------------------------------------------
def test_the_colour_distance_is_ciede2000():
    """Reference pairs of Sharma, Wu and Dalal (2005), the CIEDE2000 test data."""
    import numpy as np

    pairs = [
        ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
        ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
        ((50.0, 2.5, 0.0), (50.0, 0.0, -2.5), 4.3065),
        ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
    ]
    for a, b, want in pairs:
        assert float(colors.delta_e(np.array(a), np.array(b))) == pytest.approx(want, abs=1e-4)
    assert colors.distance("#ffffff", "#ffffff") == 0.0


@pytest.mark.parametrize("n", [9, 10, 11, 15, 20, 24])
def test_past_the_colour_blind_nine_no_two_colours_are_nearly_alike(n):
    """weak_scaling (mlperf, 11 families): evenly spaced hues gave two olive, two teal and three pink
    lines."""
    pal = drawing.palette(n)
    dark_cb = [c for c in drawing.palette(9) if colors.lab(c)[0] <= colors.LIGHTNESS[1]]  # all but pink, yellow
    assert len(pal) == n and (pal == drawing.palette(9) if n == 9 else pal[:7] == dark_cb)
    d, i, j = colors.closest_pair(pal)
    assert d >= colors.MIN_DISTANCE, (n, d, i, j)
    assert all(colors.distance(c, drawing.MUTED) >= colors.MIN_DISTANCE for c in pal)  # none the grey of the others
    if n > 9:  # none too light for a small marker on white (the colour-blind pink and yellow)
        assert all(colors.lab(c)[0] <= colors.LIGHTNESS[1] for c in pal)


def test_colour_groups_give_a_hue_a_group_and_its_series_a_marker_each():
    """hardware_generations: the GPU kind (a group) at a glance; its systems by shade and marker."""
    groups = {f"B200 s{i}": "B200" for i in range(14)} | {f"GB200 s{i}": "GB200" for i in range(3)}
    groups |= {"H100 s0": "H100", "H100 s1": "H100", "H200 s0": "H200"}
    series = sorted(groups)
    cols = drawing.series_colors(series + [f"B200 s0{prepare.MODEL_SERIES}"], groups=groups)
    styles = drawing.group_styles(series, groups)
    assert cols[f"B200 s0{prepare.MODEL_SERIES}"] == cols["B200 s0"]
    for i, a in enumerate(series):
        for b in series[i + 1 :]:
            if groups[a] != groups[b]:
                assert colors.distance(cols[a], cols[b]) >= colors.MIN_DISTANCE, (a, b)
            else:
                assert cols[a] != cols[b] and styles.get(a, ("o",))[0] != styles.get(b, ("o",))[0], (a, b)
    assert "H200 s0" not in styles  # alone in its group: the default marker
    assert drawing.series_colors(series, groups={s: "one" for s in series}) == drawing.series_colors(series)


# ---- power -----------------------------------------------------------------------------------------
def _power_grid(fsdp_w: float = 700.0):
    """A power study like paper-model's: FSDP and HSDP at the 700 W limit, TP/PP configurations
    that differ in sequence parallelism and micro batch (one of them at the limit too), and
    measured-share variants of FSDP and of two TP/PP configurations."""
    g = figure_fixtures.Grid()
    worlds = (8, 16, 32, 64)
    layouts = (
        (2, 1, True, 4, 700.0, 16.0),
        (4, 1, True, 8, 700.0, 14.8),
        (1, 2, False, 2, 600.0, 13.4),
        (1, 4, False, 2, 590.0, 11.7),
        (2, 2, True, 4, 680.0, 11.8),
    )
    for w in worlds:
        figure_fixtures._add(g, experiments=["power"], world=w, per_device=11000.0, seeds=1)
        _power(g, fsdp_w, 16.3)
        if w >= 16:
            figure_fixtures._add(g, experiments=["power"], world=w, replicate=w // 8, per_device=10900.0, seeds=1)
            _power(g, fsdp_w, 15.9)
        for tp, pp, sp, mb, watts, tpj in layouts:
            figure_fixtures._add(
                g, experiments=["power"], world=w, tp=tp, pp=pp, micro_batch=mb, per_device=tpj * watts, seeds=1
            )
            _power(g, watts, tpj)
            for r in g.runs[-1:]:
                r["spec.sequence_parallel"] = sp
    for base in [
        c
        for c in g.summary
        if c["world_size"] == 32 and (c["tp"], c["pp"]) in ((1, 1), (1, 2), (1, 4)) and c["dp_replicate"] == 1
    ]:
        twin = {**base, "config_id": base["config_id"] + MEASURED_SUFFIX, "measured_inputs": "compute, memory"}
        twin["power_w_per_gpu_mean"] *= 0.99
        twin["tokens_per_joule_mean"] *= 0.9
        g.summary.append(twin)
        g.runs += [
            {**r, "config_id": twin["config_id"], "run_id": r["run_id"] + MEASURED_SUFFIX}
            for r in g.runs
            if r["config_id"] == base["config_id"]
        ]
    return g


def _power(g, watts: float, tokens_per_joule: float) -> None:
    row = g.summary[-1]
    row.update(
        {
            "power_w_per_gpu_mean": watts,
            "power_w_per_gpu_n": 1,
            "power_w_per_gpu_ci95_low": None,
            "power_w_per_gpu_ci95_high": None,
            "tokens_per_joule_mean": tokens_per_joule,
            "tokens_per_joule_n": 1,
            "tokens_per_joule_ci95_low": None,
            "tokens_per_joule_ci95_high": None,
            "measured_inputs": None,
        }
    )


def _power_figure(g):
    study = figure_fixtures.study("power-t", g, hardware="H100 (synthetic)", predicted=True)
    with matplotlib.rc_context(drawing.style()):
        fd = figure_data("power", figure_fixtures.tables(g), study)
        fig = draw_figure("power", fd, study)
    fig.canvas.draw()
    return fd, fig


def test_power_joins_one_best_tp_pp_line_over_every_tp_pp_configuration():
    """power drew four 'best TP/PP' lines: one a sequence-parallel setting and micro batch."""
    fd, fig = _power_figure(_power_grid())
    best = sorted({r["series"] for r in fd.rows if r["series"].startswith("best TP/PP")})
    assert best == ["best TP/PP TP2/PP1 SP micro_batch=4"], best  # the best of all five at every GPU count
    others = sorted({r["series"] for r in fd.rows if r["series"].startswith("other TP/PP")})
    assert others == ["other TP/PP", f"other TP/PP{MEASURED_SERIES}"], others
    assert all(r["layout"].startswith("TP") for r in fd.rows if r["series"].startswith(("best", "other")))


def test_power_draws_the_limit_where_series_sit_at_it_and_says_which():
    fd, fig = _power_figure(_power_grid())
    ax = next(a for a in fig.findobj(matplotlib.axes.Axes) if a.get_title() == "power per GPU (W)")
    caps = [ln for ln in ax.get_lines() if list(ln.get_ydata()) == [700.0, 700.0]]
    assert caps and caps[0].get_label().startswith("power limit 700 W")
    assert ax.get_ylim()[1] > 700.0  # the limit inside the panel, above the values at it
    assert any(label.startswith("power limit 700 W") for label in _legend(fig))
    note = next(n for n in fd.notes if n.startswith("Power limit: 700 W"))
    assert "FSDP" in note and "HSDP" in note and "best TP/PP TP2/PP1" in note


def test_power_draws_no_limit_far_below_it():
    fd, fig = _power_figure(_power_grid(fsdp_w=400.0))
    ax = next(a for a in fig.findobj(matplotlib.axes.Axes) if a.get_title() == "power per GPU (W)")
    assert [ln for ln in ax.get_lines() if list(ln.get_ydata()) == [700.0, 700.0]]  # TP2/PP1 sits at 700 W
    fd, fig = _power_figure(_low_power_grid())
    ax = next(a for a in fig.findobj(matplotlib.axes.Axes) if a.get_title() == "power per GPU (W)")
    assert not [ln for ln in ax.get_lines() if list(ln.get_ydata()) == [700.0, 700.0]]
    assert not any(n.startswith("Power limit") for n in fd.notes)


def _low_power_grid():
    g = figure_fixtures.Grid()
    for w in (8, 16, 32):
        figure_fixtures._add(g, experiments=["power"], world=w, per_device=5000.0, seeds=1)
        _power(g, 350.0, 14.0)
        figure_fixtures._add(g, experiments=["power"], world=w, tp=2, per_device=5000.0, seeds=1)
        _power(g, 360.0, 13.0)
    return g


def test_power_legend_entries_are_each_drawn_as_shown_and_none_alike():
    """power had three identical grey 'other TP/PP' entries."""
    fd, fig = _power_figure(_power_grid())
    assert not alike_entries(fig)
    assert not legend_mismatches(fig, fd)


# ---- strong scaling ---------------------------------------------------------------------------------
def _strong_grid():
    g = figure_fixtures.Grid()
    for w in (16, 32, 64, 128, 256):
        for tp, pp, rate in ((1, 1, 120.0), (2, 1, 110.0), (8, 2, 60.0 if w < 256 else 200.0)):
            if w // (tp * pp) >= 1:
                figure_fixtures._add(
                    g,
                    experiments=["strong_scaling"],
                    world=w,
                    tp=tp,
                    pp=pp,
                    global_batch=32,
                    per_device=32 * rate / w * (1 + 0.002 * w),
                    seeds=1,
                )
    for base in [c for c in g.summary if (c["tp"], c["pp"]) in ((8, 2), (2, 1))]:  # measured twins, 10% lower
        twin = {
            **base,
            "config_id": base["config_id"] + MEASURED_SUFFIX,
            "measured_inputs": "compute (GPU busy time), memory",
        }
        for k in ("tokens_per_s_mean", "tokens_per_s_ci95_low", "tokens_per_s_ci95_high"):
            twin[k] = None if base[k] is None else base[k] * 0.9
        g.summary.append(twin)
        g.runs += [
            {**r, "config_id": twin["config_id"], "run_id": r["run_id"] + MEASURED_SUFFIX}
            for r in g.runs
            if r["config_id"] == base["config_id"]
        ]
    return g


def test_strong_scaling_says_why_a_configuration_has_two_values_and_draws_them_side_by_side():
    """The best line (the model alone) and the coloured measured-share lines are two bases: TP=8×PP=2
    at 256 GPUs showed as two values with no word why."""
    from scalestudy.analysis.figures import strong_scaling

    g = _strong_grid()
    study = figure_fixtures.study("strong-t", g, hardware="H100 (synthetic)", predicted=True)
    with matplotlib.rc_context(drawing.style()):
        fd = figure_data("strong_scaling", figure_fixtures.tables(g), study)
        fig = draw_figure("strong_scaling", fd, study)
    fig.canvas.draw()
    best256 = next(r for r in fd.rows if r["series"] == strong_scaling.BEST and r["x"] == 256)
    assert best256["annotation"] == "TP=8×PP=2" and "with its measured rank share" in best256["note"]
    note = next(n for n in fd.notes if n.startswith("Two bases"))
    assert "256 GPUs, TP=8×PP=2" in note
    ax = next(a for a in fig.findobj(matplotlib.axes.Axes) if a.get_title().startswith("global batch"))
    twin_y = next(r["y"] for r in fd.rows if r["x"] == 256 and r["series"].startswith("TP=8×PP=2"))
    twin_line = next(ln for ln in ax.get_lines() if len(ln.get_ydata()) and ln.get_ydata()[-1] == twin_y)
    assert twin_line.get_xdata()[-1] > 256 * 2**0.1  # beside the best point, not under its marker
    handles = _legend(fig)
    best_colour = _look(handles[strong_scaling.BEST])[0]
    coloured = [_look(h)[0] for s, h in handles.items() if MEASURED_SERIES.split(")")[0] in s]
    assert coloured and best_colour not in coloured  # the best line has no strategy's colour
    grey = _look(handles[strong_scaling.OTHER])[0]
    assert grey not in coloured  # no strategy in the grey of the others tried
    assert not legend_mismatches(fig, fd) and not alike_entries(fig) and not variants_on_plain_points(fig, fd)


# ---- rank_memory: model-size order, one colour a configuration across studies ----------------------
def _rank_study(tmp_path, name: str, rows: list[dict]):
    from scalestudy.analysis.rank_shares import CONFIGS_FILE
    from scalestudy.measure.csv_format import write_csv

    tables = tmp_path / name
    tables.mkdir()
    write_csv(tables / CONFIGS_FILE, figure_fixtures.RANK_COLUMNS, rows)
    g = figure_fixtures.Grid()
    s = figure_fixtures.study(name, g, hardware="one GPU (synthetic)")
    s.tables_dir = str(tables)
    return s, figure_fixtures.tables(g)


def _rank_row(model, world, tp, pp, micro_batch, mem_gib, status="ok"):
    gid = f"{model}-w{world}-t{tp}p{pp}-mb{micro_batch}"
    return {
        "group_id": gid,
        "experiments": "model_sizes",
        "model": model,
        "world_size": world,
        "layout": "+".join(["fsdp"] + (["tp"] if tp > 1 else []) + (["pp"] if pp > 1 else [])),
        "tp": tp,
        "pp": pp,
        "dp_replicate": 1,
        "dp_shard": world // (tp * pp),
        "micro_batch": micro_batch,
        "global_batch": 2 * world,
        "device_memory_cap_gib": 79.6,
        "status": status,
        "stages_measured": pp,
        "stages_planned": pp,
        "rank_step_time_s": 1.0 if status == "ok" else None,
        "peak_allocated_bytes": mem_gib * 2**30,
        "run_ids": f"{gid}-seed0",
    }


def _rank_figure(study, tables):
    with matplotlib.rc_context(drawing.style()):
        fd = figure_data("rank_memory", tables, study)
        fig = draw_figure("rank_memory", fd, study)
    fig.canvas.draw()
    return fd, fig


def test_rank_memory_panels_are_in_model_size_order(tmp_path):
    """Panels ordered as strings put llama2-70b before llama2-7b."""
    study, tables = figure_fixtures.paper_fixture(tmp_path)
    fd = figure_data("rank_memory", tables, study)
    assert fd.panels == ["llama-1b", "llama2-7b", "llama2-13b", "llama2-70b"]


def test_model_size_orders_names_by_the_catalog_models_parameters():
    names = ["llama2-70b, TP=8", "llama-1b, FSDP", "llama2-7b", "llama2-13b, TP=2", "FSDP", "llama3.1-405b"]
    assert sorted(names, key=drawing.model_size) == [
        "llama-1b, FSDP",
        "llama2-7b",
        "llama2-13b, TP=2",
        "llama2-70b, TP=8",
        "llama3.1-405b",
        "FSDP",
    ]


def test_a_configuration_has_one_colour_and_marker_in_two_studies(tmp_path):
    """h100-rank's rank_memory coloured FSDP and TP=2 otherwise than paper-rank's: colours were the
    palette's in the order of the series a study happened to have."""
    many = [_rank_row("llama2-13b", w, 1, 1, 1, 90.0, "oom") for w in (8, 32)]
    many += [_rank_row(m, w, 1, 1, 2, mem) for m, mem in (("llama-1b", 15.0), ("llama2-7b", 50.0)) for w in (8, 32)]
    many += [_rank_row("llama2-13b", w, 2, 1, 2, 72.0) for w in (8, 32)]
    many += [_rank_row("llama2-70b", w, 8, pp, 1, 60.0) for w in (32, 128) for pp in (2, 4)]
    few = [_rank_row("llama2-13b", w, 2, 1, 2, 72.0) for w in (8, 32)]
    few += [_rank_row("llama2-7b", w, 1, 1, 2, 50.0) for w in (8, 32)]
    looks = []
    for name, rows in (("many", many), ("few", few)):
        fd, fig = _rank_figure(*_rank_study(tmp_path, name, rows))
        assert not legend_mismatches(fig, fd) and not alike_entries(fig), name
        looks.append({label: _look(h) for label, h in _legend(fig).items()})
    common = [s for s in ("FSDP, micro batch 2", "TP=2, micro batch 2") if s in looks[0] and s in looks[1]]
    assert len(common) == 2
    for s in common:
        assert looks[0][s] == looks[1][s], s


def test_the_memory_cap_is_drawn_from_the_figure_s_data_and_named_in_the_legend(tmp_path):
    fd, fig = _rank_figure(*_rank_study(tmp_path, "cap", [_rank_row("llama2-7b", w, 1, 1, 2, 70.0) for w in (8, 16)]))
    ax = next(a for a in fig.findobj(matplotlib.axes.Axes) if a.get_title() == "llama2-7b")
    assert [ln for ln in ax.get_lines() if list(ln.get_ydata()) == [79.6, 79.6]]
    assert "memory cap 79.6 GiB" in _legend(fig)


# ---- the committed studies' own figures --------------------------------------------------------------
def _committed(study_name: str, name: str):
    from scalestudy.analysis.aggregate import load_tables
    from scalestudy.spec.studies import load_study

    study = load_study(study_name, REPO)
    if not (Path(study.tables_dir) / "summary.csv").exists():
        pytest.skip(f"{study_name}'s tables are not here (generated, not committed)")
    tables = load_tables(study.tables_dir)
    with matplotlib.rc_context(drawing.style()):
        fd = figure_data(name, tables, study)
        fig = draw_figure(name, fd, study)
    fig.canvas.draw()
    return fd, fig


@pytest.mark.parametrize(
    "study_name,name",
    [
        ("paper-rank", "rank_memory"),
        ("h100-rank", "rank_memory"),
        ("paper-model", "model_sizes"),
        ("paper-model", "weak_scaling"),
        ("paper-model", "strong_scaling"),
        ("paper-model", "power"),
        ("paper-model", "hardware_generations"),
        ("mlperf", "weak_scaling"),
        ("mlperf", "hardware_generations"),
    ],
)
def test_the_studies_figures_draw_each_series_as_its_legend_shows_it(study_name, name):
    fd, fig = _committed(study_name, name)
    problems = legend_mismatches(fig, fd) + alike_entries(fig) + variants_on_plain_points(fig, fd)
    assert not problems, "\n".join(problems)


def test_committed_rank_studies_colour_a_configuration_alike():
    _, paper = _committed("paper-rank", "rank_memory")
    fd, h100 = _committed("h100-rank", "rank_memory")
    a, b = _legend(paper), _legend(h100)
    common = sorted(set(a) & set(b) - {drawing.FAILED_LABEL})
    assert common
    assert all(_look(a[s]) == _look(b[s]) for s in common), {s: (_look(a[s]), _look(b[s])) for s in common}
    assert fd.panels == sorted(fd.panels, key=drawing.model_size)
