"""Layout checks of a drawn figure, from the renderer's bounding boxes (no pixel comparisons):
text inside the canvas with a margin, legends and labels clear of each other and of the panels'
data areas, text in a panel clear of its data (markers, lines, error bars), few series a panel,
multi-x series drawn as connected lines, tick labels apart, values in range.
Each check returns a list of problems (empty: fine)."""

from __future__ import annotations

from itertools import combinations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.container import BarContainer
from matplotlib.collections import LineCollection, PathCollection, QuadMesh
from matplotlib.legend import Legend
from matplotlib.text import Text

TOL = 1.0  # pixels
MARGIN_PT = 3.0  # the least space between any text or legend and the canvas's edge


def _boxes_overlap(a, b, tol: float = TOL) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > tol) and (min(a.y1, b.y1) - max(a.y0, b.y0) > tol)


def _undrawn_tick_labels(fig) -> set[int]:
    """Tick labels of ticks outside their axis's view: matplotlib keeps them but does not draw them."""
    out: set[int] = set()
    for ax in fig.findobj(Axes):
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            eps = 1e-9 * max(abs(lo), abs(hi), 1.0)
            for locs, ticks in (
                (axis.get_majorticklocs(), axis.get_major_ticks(len(axis.get_majorticklocs()))),
                (axis.get_minorticklocs(), axis.get_minor_ticks(len(axis.get_minorticklocs()))),
            ):
                for loc, tick in zip(locs, ticks):
                    if not lo - eps <= loc <= hi + eps:
                        out.update((id(tick.label1), id(tick.label2)))
    return out


def _visible_texts(fig) -> list[Text]:
    undrawn = _undrawn_tick_labels(fig)
    return [
        t
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and t.figure is not None and id(t) not in undrawn
    ]


def _data_axes(fig) -> list[Axes]:
    """Panels (not colorbars)."""
    return [ax for ax in fig.findobj(Axes) if ax.get_visible() and ax.axison and ax.get_label() != "<colorbar>"]


def _legends(fig) -> list[Legend]:
    return [lg for lg in fig.findobj(Legend) if lg.get_visible()]


def _name(t) -> str:
    return repr(t.get_text()[:40]) if isinstance(t, Text) else type(t).__name__


def _drawn_extent(t: Text, r):
    """A text's box as drawn: clipped to its clip box where it is clipped."""
    b = t.get_window_extent(r)
    clip = t.get_clip_box() if t.get_clip_on() else None
    if clip is not None:
        from matplotlib.transforms import Bbox

        inter = Bbox.intersection(b, clip)
        return inter if inter is not None else Bbox([[b.x0, b.y0], [b.x0, b.y0]])
    return b


def text_inside_canvas(fig, r, margin_pt: float = MARGIN_PT) -> list[str]:
    """Every text and legend inside the canvas, at least margin_pt from its edges (a title that
    touches the top edge reads as cut)."""
    m = margin_pt * fig.dpi / 72
    canvas = fig.bbox
    out = []

    def outside(b):
        return (
            b.x0 < canvas.x0 + m - TOL
            or b.y0 < canvas.y0 + m - TOL
            or b.x1 > canvas.x1 - m + TOL
            or b.y1 > canvas.y1 - m + TOL
        )

    for t in _visible_texts(fig):
        b = _drawn_extent(t, r)
        if b.width > 0 and outside(b):
            out.append(
                f"text {_name(t)} within {margin_pt:g} pt of the canvas's edge or beyond "
                f"({b.x0:.0f},{b.y0:.0f})-({b.x1:.0f},{b.y1:.0f} of {canvas.x1:.0f}x{canvas.y1:.0f} px)"
            )
    for lg in _legends(fig):
        if outside(lg.get_window_extent(r)):
            out.append(f"a legend within {margin_pt:g} pt of the canvas's edge or beyond")
    return out


def _is_data_label(t: Text, axes: list[Axes]) -> bool:
    """Text drawn in a panel's data coordinates on purpose: cell values, status marks, point labels."""
    return any(t in ax.texts for ax in axes)


def _frame_texts(fig, axes) -> list[Text]:
    """Titles, axis labels, figure texts (header, notes), legend texts excluded."""
    out = []
    legend_texts = {id(x) for lg in _legends(fig) for x in lg.get_texts() + [lg.get_title()]}
    ticks = {id(x) for ax in fig.findobj(Axes) for x in ax.get_xticklabels() + ax.get_yticklabels()}
    for t in _visible_texts(fig):
        if id(t) in legend_texts or id(t) in ticks or _is_data_label(t, axes):
            continue
        out.append(t)
    return out


def no_overlaps(fig, r) -> list[str]:
    axes = _data_axes(fig)
    out = []
    legends = _legends(fig)
    frame = _frame_texts(fig, axes)
    for lg in legends:
        b = lg.get_window_extent(r)
        for ax in axes:
            if _boxes_overlap(b, ax.bbox):
                out.append(f"a legend overlaps the data area of panel {ax.get_title()[:40]!r}")
        for t in frame:
            if _boxes_overlap(b, t.get_window_extent(r)):
                out.append(f"a legend overlaps text {_name(t)}")
    for a, b in combinations(legends, 2):
        if _boxes_overlap(a.get_window_extent(r), b.get_window_extent(r)):
            out.append("two legends overlap")
    boxes = [(t, t.get_window_extent(r)) for t in frame]
    for (t1, b1), (t2, b2) in combinations(boxes, 2):
        if _boxes_overlap(b1, b2):
            out.append(f"texts {_name(t1)} and {_name(t2)} overlap")
    for t, b in boxes:
        for ax in axes:
            if _boxes_overlap(b, ax.bbox):
                out.append(f"text {_name(t)} overlaps the data area of panel {ax.get_title()[:40]!r}")
    for ax in axes:
        labels = [(t, t.get_window_extent(r)) for t in ax.texts if t.get_visible() and t.get_text().strip()]
        for (t1, b1), (t2, b2) in combinations(labels, 2):
            if _boxes_overlap(b1, b2):
                out.append(f"labels {_name(t1)} and {_name(t2)} overlap in panel {ax.get_title()[:40]!r}")
    return out


def _data_marks(ax: Axes, r) -> list[tuple[str, object]]:
    """What a panel draws as data, in display pixels: ('point', (x, y, half-size)) for each marker,
    ('segment', ((x0, y0), (x1, y1))) for each piece of a line or an error bar. Grid lines are not
    data; heatmap cells and bars are areas that a cell or bar label may sit on."""
    px = ax.figure.dpi / 72
    marks: list[tuple[str, object]] = []
    for ln in ax.get_lines():
        if not ln.get_visible():
            continue
        xy = ln.get_transform().transform(np.column_stack([ln.get_xdata(orig=False), ln.get_ydata(orig=False)]))
        xy = xy[np.all(np.isfinite(xy), axis=1)]
        if ln.get_marker() not in (None, "None", "none", "", " ") and ln.get_markersize() > 0:
            half = ln.get_markersize() * px / 2
            marks += [("point", (x, y, half)) for x, y in xy]
        if ln.get_linestyle() not in ("None", "none", "", " ") and len(xy) > 1:
            marks += [("segment", (tuple(a), tuple(b))) for a, b in zip(xy[:-1], xy[1:])]
    for c in ax.collections:
        if not c.get_visible():
            continue
        if isinstance(c, LineCollection):
            tr = c.get_transform()
            for seg in c.get_segments():
                xy = tr.transform(np.asarray(seg, dtype=float))
                marks += [("segment", (tuple(a), tuple(b))) for a, b in zip(xy[:-1], xy[1:])]
        elif isinstance(c, PathCollection) and len(c.get_offsets()):
            xy = c.get_offset_transform().transform(np.asarray(c.get_offsets(), dtype=float))
            sizes = c.get_sizes() if len(c.get_sizes()) else [36.0]
            for k, (x, y) in enumerate(xy):
                half = (float(sizes[k % len(sizes)]) ** 0.5) * px / 2
                marks.append(("point", (x, y, half)))
    return marks


def _segment_hits_box(a, b, box, tol: float = TOL) -> bool:
    """Whether the segment a-b passes through the box shrunk by tol (Liang-Barsky clipping)."""
    x0, y0, x1, y1 = box.x0 + tol, box.y0 + tol, box.x1 - tol, box.y1 - tol
    if x1 <= x0 or y1 <= y0:
        return False
    dx, dy = b[0] - a[0], b[1] - a[1]
    t0, t1 = 0.0, 1.0
    for p, q in ((-dx, a[0] - x0), (dx, x1 - a[0]), (-dy, a[1] - y0), (dy, y1 - a[1])):
        if p == 0:
            if q < 0:
                return False
            continue
        t = q / p
        if p < 0:
            t0 = max(t0, t)
        else:
            t1 = min(t1, t)
        if t0 > t1:
            return False
    return True


def text_clear_of_data(fig, r) -> list[str]:
    """No text over a panel's data: a status, an annotation or any other label drawn in a panel
    (or reaching into one) does not cover a data marker, a line or an error bar. Texts with a
    background box of their own (heatmap cell statuses) are covered by the cell checks."""
    out = []
    axes = _data_axes(fig)
    texts = _visible_texts(fig)
    for ax in axes:
        marks = _data_marks(ax, r)
        if not marks:
            continue
        for t in texts:
            b = _drawn_extent(t, r)
            if b.width <= 0 or not _boxes_overlap(b, ax.bbox):
                continue
            for kind, m in marks:
                if kind == "point":
                    x, y, half = m
                    hit = (
                        min(b.x1, x + half) - max(b.x0, x - half) > TOL
                        and min(b.y1, y + half) - max(b.y0, y - half) > TOL
                    )
                else:
                    hit = _segment_hits_box(m[0], m[1], b)
                if hit:
                    out.append(
                        f"text {_name(t)} covers a data {'marker' if kind == 'point' else 'line'} in panel "
                        f"{ax.get_title()[:40]!r}"
                    )
                    break
    return out


def data_labels_clear_of_text(fig, r) -> list[str]:
    """A label drawn in a panel (status, annotation, cell value) overlaps no other text: titles,
    axis and tick labels, legends, header and notes."""
    axes = _data_axes(fig)
    labels = [t for ax in axes for t in ax.texts if t.get_visible() and t.get_text().strip()]
    ids = {id(t) for t in labels}
    others = [t for t in _visible_texts(fig) if id(t) not in ids]
    out = []
    for t in labels:
        b = _drawn_extent(t, r)
        for o in others:
            if _boxes_overlap(b, o.get_window_extent(r)):
                out.append(f"label {_name(t)} overlaps text {_name(o)}")
    return out


def tick_labels_apart(fig, r) -> list[str]:
    out = []
    drawn = {id(t) for t in _visible_texts(fig)}
    for ax in fig.findobj(Axes):
        for axis, labels in (
            ("x", ax.get_xticklabels(minor=False) + ax.get_xticklabels(minor=True)),
            ("y", ax.get_yticklabels(minor=False) + ax.get_yticklabels(minor=True)),
        ):
            boxes = [(t.get_text(), t.get_window_extent(r)) for t in labels if id(t) in drawn]
            for (s1, b1), (s2, b2) in combinations(boxes, 2):
                if _boxes_overlap(b1, b2):
                    out.append(f"{axis} tick labels {s1!r} and {s2!r} collide in panel {ax.get_title()[:40]!r}")
                    break
    return out


def series_per_panel(fig, limit: int) -> list[str]:
    out = []
    for ax in _data_axes(fig):
        labels = {
            lab
            for lab in ax.get_legend_handles_labels()[1]
            if not lab.startswith("x: ") and not lab.startswith("other")
        }
        if len(labels) > limit:
            out.append(f"panel {ax.get_title()[:40]!r} draws {len(labels)} series (at most {limit})")
    return out


def text_size(fig, minimum: float = 7.0) -> list[str]:
    return [
        f"text {_name(t)} at {t.get_fontsize():.1f} pt (< {minimum} pt)"
        for t in _visible_texts(fig)
        if t.get_fontsize() < minimum - 1e-6
    ]


def connected_series(fig, fd) -> list[str]:
    """A series with values at more than one x in a panel is one line through them: some drawn
    line (linestyle not none; seaborn leaves its data lines unlabelled) passes through every one of
    its y values in the order of x (its x may be nudged apart from a coinciding series)."""
    out = []
    by_title = {}
    for ax in _data_axes(fig):
        by_title.setdefault(ax.get_title(), ax)
    for panel in fd.panels:
        ax = by_title.get(panel)
        if (
            ax is None
            or any(isinstance(c, QuadMesh) for c in ax.collections)
            or any(isinstance(c, BarContainer) for c in ax.containers)
        ):
            continue  # a heatmap or bars: no line to join
        lines = [
            np.asarray(ln.get_ydata(), dtype=float)
            for ln in ax.get_lines()
            if ln.get_visible() and ln.get_linestyle() not in ("None", "none", "", " ") and len(ln.get_xdata()) > 1
        ]
        for s in sorted({r["series"] for r in fd.rows if r["panel"] == panel}):
            pts = sorted(
                (r["x"], r["y"]) for r in fd.rows if r["panel"] == panel and r["series"] == s and r.get("y") is not None
            )
            if len({x for x, _ in pts}) < 2 or s.startswith("other"):
                continue
            ys = np.array([y for _, y in pts])
            if not any(len(ln) == len(ys) and np.allclose(ln, ys, rtol=1e-9, atol=1e-12) for ln in lines):
                out.append(f"series {s!r} of panel {panel[:40]!r} has {len(pts)} x values but no line joins them")
    return out


def values_in_range(fd) -> list[str]:
    desc = getattr(fd, "description", None)
    if desc is None:
        return []
    out = []
    for r in fd.rows:
        try:
            q = desc.quantity(r["y_quantity"])
        except KeyError:
            continue
        for k in ("y", "ci95_low", "ci95_high"):
            v = r.get(k)
            if v is not None and not q.possible(v):
                out.append(f"{fd.name}: {k}={v:.4g} of {q.label} ({r['series']}, x={r['x']}) is outside its range")
    return out


def one_point_per_x(fd) -> list[str]:
    """No series holds two configurations at one x (grey 'other' dots excepted): the legend would
    not say what differs between them."""
    seen: dict[tuple, str] = {}
    out = []
    for r in fd.rows:
        if r.get("x") is None or str(r["series"]).startswith("other"):
            continue
        key = (r["panel"], r["series"], str(r["x"]))
        cfg = ";".join(r.get("config_ids") or [])
        if key in seen and seen[key] != cfg:
            out.append(f"series {r['series']!r} of panel {r['panel'][:40]!r} has two configurations at x={r['x']}")
        seen.setdefault(key, cfg)
    return out


def check(fig, fd, *, series_limit: int = 8) -> list[str]:
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    return (
        text_inside_canvas(fig, r)
        + no_overlaps(fig, r)
        + text_clear_of_data(fig, r)
        + data_labels_clear_of_text(fig, r)
        + tick_labels_apart(fig, r)
        + series_per_panel(fig, series_limit)
        + text_size(fig)
        + connected_series(fig, fd)
        + values_in_range(fd)
        + one_point_per_x(fd)
    )
