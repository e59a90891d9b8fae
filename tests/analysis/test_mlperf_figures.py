"""The mlperf study's three figures as a reader sees them (from the committed tables): each family a
colour no other family of its figure comes near, unless their markers differ; the performance model
beside a family in the family's colour and marker, hollow and dotted; hardware_generations a hue a
GPU kind, the paper's two reference lines in dash patterns of their own; no point drawn on another
(seven B200 systems at 8 GPUs, h100-azure's one point in step_time_microbatches)."""

import functools
from pathlib import Path

import matplotlib
import numpy as np
import pytest
from matplotlib.collections import PathCollection
from matplotlib.colors import to_rgba
from matplotlib.legend import Legend

from scalestudy.analysis.figures import colors, drawing, figure_data, prepare
from scalestudy.analysis.figures import draw as draw_figure

matplotlib.use("Agg")

REPO = Path(__file__).resolve().parents[2]
FIGURES = ("weak_scaling", "hardware_generations", "step_time_microbatches")
APART_PT = 2.0  # two markers' centres nearer than this (points; a marker is 5.5 pt across): one on the other
NEIGHBOUR_X = 0.10  # relative: two scales this close are neighbours on a log axis (not told apart by dodging)


@functools.lru_cache(maxsize=None)
def _drawn(name: str):
    from scalestudy.analysis.aggregate import load_tables
    from scalestudy.spec.studies import load_study

    study = load_study("mlperf", REPO)
    tables = load_tables(study.tables_dir)
    with matplotlib.rc_context(drawing.style()):
        fd = figure_data(name, tables, study)
        fig = draw_figure(name, fd, study)
    fig.canvas.draw()
    return fd, fig


def _handles(fig) -> dict:
    """label -> the legend's handle."""
    return {t.get_text(): h for lg in fig.findobj(Legend) for h, t in zip(lg.legend_handles, lg.get_texts())}


def _rgb(c) -> tuple:
    return tuple(round(v, 3) for v in to_rgba(c)[:3])


def _families(fd) -> list[str]:
    return sorted(
        {r["series"] for r in fd.rows if r.get("y") is not None and drawing.variant_base(r["series"]) is None}
        - {s for s in (r["series"] for r in fd.rows) if s.endswith(prepare.FIT_SERIES)}
    )


def _marker(h) -> str:
    return str(h.get_marker())


def _dashes(line) -> tuple | None:
    if line.get_linestyle() in ("None", "none", "", " "):
        return None
    return tuple(round(float(v), 2) for v in (line._unscaled_dash_pattern[1] or ()))


@pytest.mark.parametrize("name", FIGURES)
def test_no_two_families_look_alike(name):
    """weak_scaling gave both gpt3-175b h100-eos families one olive, three families one pink; two
    families' colours closer than the colour-blind palette's closest pair must differ in marker."""
    fd, fig = _drawn(name)
    handles = _handles(fig)
    fams = _families(fd)
    assert len(fams) >= 10 and all(f in handles for f in fams)
    problems = []
    for i, a in enumerate(fams):
        for b in fams[i + 1 :]:
            ha, hb = handles[a], handles[b]
            d = colors.distance(ha.get_color(), hb.get_color())
            if d < colors.MIN_DISTANCE and _marker(ha) == _marker(hb):
                problems.append(f"{a!r} and {b!r}: ΔE00 {d:.1f}, both {_marker(ha)!r}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", ("weak_scaling", "step_time_microbatches"))
def test_families_without_groups_are_colours_apart(name):
    fd, fig = _drawn(name)
    handles = _handles(fig)
    d, i, j = colors.closest_pair([handles[f].get_color() for f in _families(fd)])
    assert d >= colors.MIN_DISTANCE, (d, _families(fd)[i], _families(fd)[j])


@pytest.mark.parametrize("name", ("weak_scaling", "hardware_generations"))
def test_the_model_beside_a_family_is_drawn_in_its_colour_and_marker_hollow_and_dotted(name):
    fd, fig = _drawn(name)
    handles = _handles(fig)
    models = [s for s in handles if s.endswith(prepare.MODEL_SERIES)]
    assert models
    for m in models:
        fam, h = handles[m.removesuffix(prepare.MODEL_SERIES)], handles[m]
        assert _rgb(h.get_color()) == _rgb(fam.get_color()), m
        assert _marker(h) == _marker(fam), m
        assert _rgb(h.get_markerfacecolor()) == (1.0, 1.0, 1.0), m  # hollow
        assert _rgb(h.get_markeredgecolor()) == _rgb(fam.get_color()), m
        assert _dashes(h) == tuple(float(v) for v in drawing.DOTTED) and _dashes(fam) == (), m
    ax = next(a for a in fig.findobj(matplotlib.axes.Axes) if a.get_title().startswith("tokens/s per device"))
    hollow = [ln for ln in ax.get_lines() if len(ln.get_xdata()) and ln.get_markerfacecolor() == "white"]
    drawn = {r["series"] for r in fd.rows if r["panel"] == ax.get_title() and r["series"] in models and r.get("y")}
    assert len(hollow) == len(drawn)  # a line each model series, and only they are hollow


def test_hardware_generations_gives_each_gpu_kind_a_hue_of_its_own():
    """31 entries in near-identical hues: which GPU a line is could not be seen. Each kind now a hue,
    its families shades of it with a marker each."""
    fd, fig = _drawn("hardware_generations")
    handles = _handles(fig)
    kinds = {f: fd.groups[f] for f in _families(fd)}
    assert {"NVIDIA B200", "NVIDIA GB200", "NVIDIA H200"} <= set(kinds.values())
    fams = list(kinds)
    for i, a in enumerate(fams):
        for b in fams[i + 1 :]:
            ca, cb = handles[a].get_color(), handles[b].get_color()
            if kinds[a] != kinds[b]:
                assert colors.distance(ca, cb) >= colors.MIN_DISTANCE, (a, b)
            else:
                assert _marker(handles[a]) != _marker(handles[b]), (a, b)
    for kind in set(kinds.values()):  # a kind's shades keep to a hue of their own
        mine = [colors.lab(handles[f].get_color()) for f in fams if kinds[f] == kind]
        hues = colors.hue_deg(np.array(mine))
        assert np.ptp((hues - hues[0] + 180) % 360) <= 2 * colors.SECTOR_DEG + 1e-6, kind


def test_hardware_generations_draws_the_papers_two_values_in_dash_patterns_of_their_own():
    fd, fig = _drawn("hardware_generations")
    ax = next(a for a in fig.findobj(matplotlib.axes.Axes) if a.get_title() == "MFU (%)")
    lines = {ln.get_label(): ln for ln in ax.get_lines() if ln.get_label().startswith("paper:")}
    assert set(lines) == {"paper: A100 59.67", "paper: H100 40.77"}
    a, h = lines["paper: A100 59.67"], lines["paper: H100 40.77"]
    assert _dashes(a) != _dashes(h)
    handles = _handles(fig)
    assert _dashes(handles["paper: A100 59.67"]) != _dashes(handles["paper: H100 40.77"])


def _positions(fig, fd, name: str) -> dict[str, list[tuple]]:
    """panel -> [(series, (x, y) in points on the canvas)] of every drawn marker of a series (lines'
    markers and scatter points, told apart by colour and y value; error bar caps and fit lines left out)."""
    handles = _handles(fig)
    out: dict[str, list[tuple]] = {}
    for ax in fig.findobj(matplotlib.axes.Axes):
        panel = ax.get_title()
        rows = [
            r
            for r in fd.rows
            if r["panel"] == panel and r.get("y") is not None and not r["series"].endswith(prepare.FIT_SERIES)
        ]
        if not rows:
            continue
        drawn = []  # (x, y, colour) in data units
        for ln in ax.get_lines():
            if ln.get_marker() in ("None", None, "", "_", "|") or not len(ln.get_xdata()):
                continue
            drawn += [(float(x), float(y), _rgb(ln.get_color())) for x, y in zip(ln.get_xdata(), ln.get_ydata())]
        for pc in ax.collections:
            if isinstance(pc, PathCollection) and len(pc.get_offsets()):
                fcs = pc.get_facecolors()
                drawn += [
                    (float(x), float(y), _rgb(fcs[i % len(fcs)]))
                    for i, (x, y) in enumerate(np.asarray(pc.get_offsets()))
                ]
        for r in rows:
            colour = _rgb(handles[r["series"]].get_color())
            at = [
                (x, y)
                for x, y, c in drawn
                if c == colour and np.isclose(y, r["y"], rtol=1e-9) and r["x"] <= x <= r["x"] * 1.5 + 30
            ]
            assert at, f"{name}: {r['series']!r} at {r['x']} in {panel!r} is not drawn"
            px = ax.transData.transform(np.array(at[:1], dtype=float))[0] * 72 / fig.dpi
            out.setdefault(panel, []).append((r["series"], tuple(px), r["x"]))
    return out


@pytest.mark.parametrize("name", FIGURES)
def test_no_point_is_drawn_on_another_series_point(name):
    """hardware_generations: five B200 nvfp4/fp8 families' markers on one another at 8 and 16 GPUs;
    step_time_microbatches: h100-azure's one point under h100-eos's at 8 micro-batches. Two points of
    scales less than NEIGHBOUR_X apart (2432 and 2560 GPUs, 5%) are not compared: a log axis of a
    panel's width cannot put a dodged point of one between them and the other's (the CSV holds both)."""
    fd, fig = _drawn(name)
    problems = []
    for panel, pts in _positions(fig, fd, name).items():
        for i, (s, (x, y), a) in enumerate(pts):
            for t, (u, v), b in pts[i + 1 :]:
                neighbours = a != b and max(a, b) < (1 + NEIGHBOUR_X) * min(a, b)
                if s != t and not neighbours and np.hypot(x - u, y - v) < APART_PT:
                    problems.append(f"{panel}: {s!r} on {t!r} ({np.hypot(x - u, y - v):.1f} pt)")
    assert not problems, "\n".join(problems)


def test_step_time_draws_h100_azure_beside_h100_eos():
    fd, fig = _drawn("step_time_microbatches")
    pts = dict(
        (s, p) for s, p, _ in _positions(fig, fd, "step_time_microbatches")["step time (s)"] if "h100-azure" in s
    )
    assert len(pts) == 1
    assert any(n.startswith("Dodged:") for n in fd.notes)
