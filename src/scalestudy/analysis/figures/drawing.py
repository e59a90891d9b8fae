"""Drawing a figure from its rows: style and colours, the figure's frame (header, panels,
legend, footer), line panels with their legend and failed marks, axes.

A figure is three stacked subfigures: the header (title, study and hardware, CPU warning), the
panels with their legend below them (constrained layout), and the footer (notes). Header and
footer text is wrapped to the figure's width and their heights follow from their lines.
Heatmap panels are in figures.heatmap.

Seaborn draws the data: series, their colours, markers, dashes, error bars and legend entries
through its semantic mappings (sns.lineplot with hue and style the series, sns.scatterplot,
sns.barplot, sns.heatmap with annot); matplotlib formats the ticks (EngFormatter, LogLocator) and
lays the figure out (constrained layout, a legend "outside lower center"). Still written here by
hand, and why:
- the frame (new_figure, header, footer): subfigures sized from the wrapped header and notes, so
  that long notes never overlap the panels and the figure grows instead of its panels shrinking;
- one legend for all panels (figure_legend, legend_rows_for): seaborn's legends are per axes;
  the handles it made are gathered, deduplicated and ordered naturally (no natsort dependency)
  below the panels, and their rows reserved in the figure's height;
- the colours seaborn maps (palette, series_colors; perceptual distance in figures.colors): past the
  colour-blind nine each next colour the farthest from all before it, not evenly spaced hues (eleven
  series got two olive and three pink lines); a figure that declares a colour group
  (Description.hue_by: the GPU kind) gets a hue a group and shades of it, with a marker a series
  (group_styles);
- one style a series in every panel (figure_styles): the legend shows a series once, so its marker
  and dashes are decided for the whole figure before any panel is drawn; a series lying on an
  earlier one (coinciding) gets another marker (its dashes keep saying what kind of series it is);
  the model beside a series takes its colour and marker, hollow (a second sns.lineplot, HOLLOW) and
  dotted;
- dodging (dodge_slots, dodged_x): seaborn's lineplot has no dodge; a variant series (a prediction with a
  measured rank share, the model beside a measurement) is drawn a step right of the plain series
  at its x values, and a series lying on another a step further, so neither hides in the other's
  error bars (with every_point, a point lying on another where two lines only cross too); a step
  as wide as the room to the next ticked x allows;
- reference lines (reference_lines): a limit the data can sit at (a power limit, a memory cap),
  drawn and named in the legend;
- failed marks (mark_failed, failed_note): an 'x' at the foot of the axes, in axes coordinates;
- the axis rules of the issue (log2_axis at the data's x values, bound_axis, zero_based_if_flat, zero_based_if_one_x,
  compact_ticks choosing EngFormatter, paper_lines, leave_out_flat_panels): decisions about what
  a panel may show, not drawing.
"""

from __future__ import annotations

import math
import re
import textwrap
from typing import Callable, Iterable

from scalestudy.analysis.figures import colors, prepare
from scalestudy.analysis.figures.description import Description
from scalestudy.analysis.figures.prepare import FigureData
from scalestudy.spec.rank_share import MEASURED_BUSY_SERIES, MEASURED_SERIES, MEASURED_SERIES_SUFFIXES

CPU_WARNING = "CPU smoke data — not comparable to the paper"
FAILED_NOTE = (
    "x at the foot of a panel: a configuration that failed or has no value (which, and why: the note "
    "'Without a value' and the CSV's status and note)."
)
FAILED_LABEL = "x: failed / no value (see the notes)"
NOTE_FONTSIZE = 7.0  # points: the smallest text of a figure, readable when printed at the PDF's size

TITLE_FONTSIZE, SUBTITLE_FONTSIZE, WARNING_FONTSIZE = 11.0, 8.0, 9.0
LINE_SPACING = 1.3
MARGIN_IN = 0.07  # between the canvas's edges and anything drawn (about 5 pt)
CHAR_WIDTH_EM = 0.6  # a generous mean character width of DejaVu Sans, in ems


def style() -> dict:
    import seaborn as sns  # heavy: imported only when drawing

    rc: dict = {}
    rc.update(sns.axes_style("whitegrid"))
    rc.update(sns.plotting_context("paper", font_scale=1.1))
    rc.update(
        {
            "svg.hashsalt": "scalestudy",
            "pdf.fonttype": 42,
            "ps.fonttype": 42,
            "font.family": "DejaVu Sans",
            "axes.titlesize": 8.5,
            "axes.titleweight": "bold",
            "axes.labelsize": 8,
            "xtick.labelsize": 7.5,
            "ytick.labelsize": 7.5,
            "legend.fontsize": 7.5,
            "legend.title_fontsize": 7.5,
            "savefig.dpi": 120,
            "path.simplify": True,
        }
    )
    return rc


def _colorblind() -> list:
    """seaborn's colour-blind palette without its grey, which is the grey of the other strategies
    tried (MUTED): a series in it would read as one of them."""
    import seaborn as sns  # heavy: imported only when drawing

    cb = list(sns.color_palette("colorblind", 10))
    return cb[:7] + cb[8:]


def palette(n: int) -> list:
    """Categorical colours (strategies, backends): colour-blind safe up to its 9; past them its
    colours but the two lightest (its pink and yellow: a small marker of them is hard to see on white,
    colors.LIGHTNESS), then each next colour the one farthest (ΔE00) from all before it
    (colors.categorical), so that no two series of a figure are closer than the colour-blind palette's
    own closest pair (colors.MIN_DISTANCE); an evenly spaced hue circle gave two olive and three pink
    lines to eleven series."""
    base = _colorblind()
    if n <= len(base):
        return base[: max(n, 1)]
    dark_enough = tuple(tuple(c) for c in base if colors.lab(c)[0] <= colors.LIGHTNESS[1])
    return colors.categorical(dark_enough, n)


# The base colour of each colour group (series_colors' groups: the GPU kinds of hardware_generations),
# as places in _colorblind(), in the order of the groups: hues far apart first (blue, orange, green,
# purple), so that each group's shades (colors.shades) keep to a hue of their own.
GROUP_BASES = (0, 1, 2, 4, 3, 8, 5, 7, 6)
# the markers of one group's series (its shades alone can be too close to tell apart), in order
GROUP_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "p", "h", "*", "d", "H")


def color_groups(series: Iterable[str], groups: dict[str, str] | None) -> dict[str, list[str]]:
    """The plain series (variant_base None) of each group, groups in natural order, series in the
    given order; {} where fewer than two groups or more than GROUP_BASES have series, or a series
    has no group (then one categorical palette colours them)."""
    plain = [s for s in series if variant_base(s) is None and not s.endswith(prepare.FIT_SERIES)]
    if not groups or any(s not in groups for s in plain):
        return {}
    out: dict[str, list[str]] = {}
    for s in plain:
        out.setdefault(groups[s], []).append(s)
    if not 1 < len(out) <= len(GROUP_BASES):
        return {}
    return {g: out[g] for g in sorted(out, key=natural)}


# One colour a strategy family in every study (family_colors: figures compared across studies), in
# a fixed order, not in the order of the families one study happens to have.
FAMILY_ORDER = ("FSDP", "HSDP", "TP=2", "TP=4", "TP=8", "PP=2", "PP=4", "TP=8×PP=2", "TP=8×PP=4")


def family_colors(families: Iterable[str]) -> dict[str, object]:
    """The colour of each strategy family: FAMILY_ORDER's place in the colour-blind palette, and a
    family not in it a husl hue chosen by its name (the same in every study)."""
    import zlib

    import seaborn as sns  # heavy: imported only when drawing

    cb, hues = _colorblind(), list(sns.color_palette("husl", 24))
    return {
        f: cb[FAMILY_ORDER.index(f)] if f in FAMILY_ORDER else hues[zlib.crc32(f.encode()) % len(hues)]
        for f in families
    }


# (marker, dashes) of a micro batch (by its power of two: 1, 2, 4, 8, ...) in every study, where one
# strategy family's lines differ in micro batch (family_colors gives them one colour)
MICRO_BATCH_STYLES = (("s", (4, 2)), ("o", ""), ("^", (1, 1.5)), ("D", (4, 1.5, 1, 1.5)), ("v", (2, 1)), ("P", (6, 2)))


def micro_batch_style(micro_batch) -> tuple[str, object]:
    k = prepare.as_int(micro_batch)
    return MICRO_BATCH_STYLES[min(max(k, 1).bit_length() - 1, len(MICRO_BATCH_STYLES) - 1)]


def sequential(n: int) -> list:
    """Ordered colours (node counts, sizes): viridis from dark to light, in the values' order."""
    import seaborn as sns  # heavy: imported only when drawing

    return list(sns.color_palette("viridis", max(n, 1)))


def wrap(text: str, width_in: float, fontsize: float) -> list[str]:
    chars = max(20, int(width_in * 72 / (fontsize * CHAR_WIDTH_EM)))
    return textwrap.wrap(text, chars, break_on_hyphens=False) or [""]


def _height(lines: int, fontsize: float) -> float:
    return lines * fontsize * LINE_SPACING / 72


def figure_for(
    fd: FigureData, *, ncols: int | None = None, panel_w: float = 4.2, panel_h: float = 3.2, legend_rows: int = 0
):
    """A figure sized for fd's panels, its header, its notes (wrapped) and `legend_rows` rows of
    a legend below the panels; returns (figure, panel axes)."""
    return new_figure(
        len(fd.panels),
        ncols=ncols,
        panel_w=panel_w,
        panel_h=panel_h,
        title=fd.title,
        subtitle=getattr(fd, "subtitle", ""),
        cpu=fd.cpu,
        notes=fd.notes,
        legend_rows=legend_rows,
    )


def series_colors(series: list[str], after: int = 0, groups: dict[str, str] | None = None) -> dict[str, object]:
    """A palette colour a series; a measured-inputs series (MEASURED_SERIES_SUFFIXES), the model
    beside a series (prepare.MODEL_SERIES) and a series' fit (prepare.FIT_SERIES) take its base
    series' colour, and their own marker and dashes (line_style); two measured-inputs series of one
    base (wall step, GPU busy time) share a colour where the base itself is not drawn. `after`: the
    first colours of the palette are taken by other series of the figure. `groups` (series -> group,
    FigureData.groups: a GPU kind): each group a hue of its own (GROUP_BASES), its series shades of it
    (colors.shades; group_styles gives them a marker each), where color_groups finds two or more."""
    suffixes = (*MEASURED_SERIES_SUFFIXES, prepare.MODEL_SERIES, prepare.FIT_SERIES)

    def base(s: str) -> str:
        for x in suffixes:
            if s.endswith(x) and (s.removesuffix(x) in series or x in MEASURED_SERIES_SUFFIXES):
                return s.removesuffix(x)
        return s

    own = list(dict.fromkeys(base(s) for s in series))
    by_group = color_groups(own, groups)
    if by_group:
        cb = _colorblind()
        bases = tuple(tuple(cb[GROUP_BASES[k]]) for k in range(len(by_group)))
        hues = colors.shades(bases, tuple(len(m) for m in by_group.values()))
        shade = {s: hues[g][i] for g, members in enumerate(by_group.values()) for i, s in enumerate(members)}
    else:
        shade = dict(zip(own, palette(after + len(own))[after:]))
    return {s: shade[base(s)] for s in series}


def group_styles(series: list[str], groups: dict[str, str] | None) -> dict[str, tuple[str, object]]:
    """(marker, dashes) of the plain series of each colour group of several (color_groups): a
    GROUP_MARKERS marker each, in order, solid; their variants take it in figure_styles. {} without
    groups."""
    return {
        s: (GROUP_MARKERS[i % len(GROUP_MARKERS)], SOLID)
        for members in color_groups(series, groups).values()
        if len(members) > 1
        for i, s in enumerate(members)
    }


MUTED = "#aaaaaa"  # the other strategies tried, drawn as grey dots

# (marker, dashes) of a series for seaborn's style mapping: a line's own, the model beside it, a
# prediction with a measured input (never joined to model-only points), a fit. The dashes say
# what kind of series a line is; a series lying on earlier ones (coinciding) keeps them and takes
# another marker (COINCIDE_MARKERS), in every panel, so that the legend shows it as drawn.
SOLID, DASHED, DOTTED, DASHDOT = "", (4, 2), (1, 1.5), (4, 1.5, 1, 1.5)
COINCIDE_MARKERS = ("^", "v", "<", ">", "p", "h", "X", "*")
VARIANT_SUFFIXES = (*MEASURED_SERIES_SUFFIXES, prepare.MODEL_SERIES)  # drawn beside their plain series
# the model beside a measured series (prepare.MODEL_SERIES): its series' colour and marker, hollow
HOLLOW = {"markerfacecolor": "white", "markeredgecolor": "auto", "markeredgewidth": 1.1}


def line_style(series: str) -> tuple[str, object]:
    if series.endswith(prepare.FIT_SERIES):
        return ".", DASHED
    if series.endswith(prepare.MODEL_SERIES):
        return "s", DOTTED
    if series.endswith(MEASURED_BUSY_SERIES):
        return "D", DASHED
    if series.endswith(MEASURED_SERIES):  # the wall step with communication faked
        return "P", DASHED
    return "o", SOLID


def variant_base(series: str) -> str | None:
    """The plain series a variant (measured rank share, the model beside a measurement) is drawn
    beside; None for a plain series."""
    for x in VARIANT_SUFFIXES:
        if series.endswith(x):
            return series.removesuffix(x)
    return None


def _on(a: list[dict], b: list[dict], tol: float) -> bool:
    """Series a lies on b: at half or more of a's x values its y is within `tol` (relative) of b's."""
    by_x = {r["x"]: r["y"] for r in b}
    hits = sum(1 for r in a if r["x"] in by_x and abs(r["y"] - by_x[r["x"]]) <= tol * max(abs(r["y"]), 1e-12))
    return bool(hits) and 2 * hits >= len(a)


def coinciding(pts: list[dict], drawn: list[list[dict]], tol: float = 0.03) -> int:
    """How many earlier series of the panel this one lies on (_on)."""
    return sum(1 for b in drawn if _on(pts, b, tol))


def figure_styles(
    fd: FigureData, series: list[str], given: dict[str, tuple[str, object]] | None = None, tol: float = 0.03
) -> dict[str, tuple]:
    """(marker, dashes) of each series for the whole figure: `given` or line_style; a plain series
    that lies on another in some panel (the one with fewer points: longest_first) takes the first
    COINCIDE_MARKERS marker no other series has (a variant keeps its kind's marker: dodge_slots draws
    it beside its plain series); the model beside a series (prepare.MODEL_SERIES) takes its series'
    marker, drawn hollow (HOLLOW) and dotted. No two series of one colour look alike, so no two
    legend entries do."""
    given = given or {}
    styles = {s: given.get(s) or line_style(s) for s in series}
    valued = [r for r in fd.rows if r.get("y") is not None and r.get("x") is not None]
    hidden = set()
    for panel in fd.panels:
        points = {s: [r for r in valued if r["panel"] == panel and r["series"] == s] for s in series}
        drawn: list[list[dict]] = []
        for s in longest_first({s: p for s, p in points.items() if p}):
            if coinciding(points[s], drawn, tol):
                hidden.add(s)
            drawn.append(points[s])

    for s in series:
        if s in hidden and s not in given and variant_base(s) is None:
            used = {styles[t][0] for t in series if t != s}
            marker = next((m for m in COINCIDE_MARKERS if m not in used), styles[s][0])
            styles[s] = (marker, styles[s][1])
    for s in series:
        base = variant_base(s)
        if s.endswith(prepare.MODEL_SERIES) and s not in given and base in styles:
            styles[s] = (styles[base][0], styles[s][1])
    return styles


def longest_first(points: dict[str, list[dict]]) -> list[str]:
    """Series with the most points first (else in the given order): where two lie on each other, the
    one with fewer points is the one moved (dodge_slots) or given another marker (figure_styles),
    not a whole line for one point of another series."""
    order = list(points)
    return sorted(order, key=lambda s: (-len(points[s]), order.index(s)))


def _hidden_by(a: list[dict], b: list[dict]) -> bool:
    """At some x of both, a's point with its interval and b's overlap: drawn at one x, one hides in
    the other's error bar."""

    def span(r):
        ends = [r["y"], *(r[k] for k in ("ci95_low", "ci95_high") if r.get(k) is not None)]
        return min(ends), max(ends)

    by_x = {r["x"]: span(r) for r in b}
    return any(r["x"] in by_x and span(r)[0] <= by_x[r["x"]][1] and by_x[r["x"]][0] <= span(r)[1] for r in a)


def dodge_slots(points: dict[str, list[dict]], tol: float = 0.03) -> dict[str, int]:
    """The slot of each series of a panel (points by series, in drawing order), in steps right of
    its x values: a plain series right of the earlier ones it lies on (_on; longest_first, the
    variants after the plain ones likewise); a variant
    (variant_base) right of its plain series (of the panel's plain series where its own is not
    drawn) and of any plain series whose error bar it would sit in at one x (_hidden_by), so that a
    prediction with a measured input is never drawn on a model-only point of the same x."""
    slots: dict[str, int] = {}
    plain = longest_first({s: p for s, p in points.items() if variant_base(s) is None})
    for s in plain + longest_first({s: p for s, p in points.items() if s not in plain}):
        base = variant_base(s)
        if base is None:
            low = 0
        elif base in slots:
            low = slots[base] + 1
        else:
            xs = {r["x"] for r in points[s]}
            low = 1 if any(r["x"] in xs for t in plain for r in points[t]) else 0
        taken = {
            slots[t]
            for t in slots
            if _on(points[s], points[t], tol) or base is not None and t in plain and _hidden_by(points[s], points[t])
        }
        k = low
        while k in taken:
            k += 1
        slots[s] = k
    return slots


DODGE_NOTE = (
    "Dodged: a prediction with a measured rank share (or the model beside a measurement) is drawn a "
    "little right of the other points at its GPU count, so that neither hides in the other's error bar; "
    "its GPU count is the tick to its left."
)


COINCIDE_NOTE = (
    "where points of several series lie on one another at one {x} ({rule}), each but the first (of the series "
    "with most points) is drawn a little right of it, so that none hides another (a series lying on another as "
    "a whole also takes a marker of its own); its {x} is the first point's."
)
COINCIDE_RULES = {  # COINCIDE_NOTE's rule: dodge_slots' alone, or point_slots' too (every_point)
    False: "a series within 3% of another at half its points or more",
    True: "values within 2%, or 3% for a series lying on another as a whole",
}


def dodge_note(
    rows: list[dict], coinciding: bool = False, x_unit: str = "GPU count", every_point: bool = False
) -> str | None:
    """DODGE_NOTE where some variant's point shares a panel and an x with a plain series' point
    (dodge_slots draws it beside); with `coinciding` (a figure whose every drawn series is dodged:
    no muted ones) or `every_point` (drawn so: drawn_slots), COINCIDE_NOTE too where a plain
    series' point is drawn beside another's (its x: `x_unit`); else None."""
    valued = [r for r in rows if r.get("y") is not None and r.get("x") is not None]
    plain = {(r["panel"], r["x"]) for r in valued if variant_base(r["series"]) is None}
    notes = []
    if any((r["panel"], r["x"]) in plain for r in valued if variant_base(r["series"]) is not None):
        notes.append(DODGE_NOTE)
    if coinciding or every_point:
        for panel in dict.fromkeys(r["panel"] for r in valued):
            mine = [
                r
                for r in valued
                if r["panel"] == panel
                and variant_base(r["series"]) is None
                and not r["series"].endswith(prepare.FIT_SERIES)
            ]
            points = {s: [r for r in mine if r["series"] == s] for s in dict.fromkeys(r["series"] for r in mine)}
            if any(drawn_slots(points, every_point).values()):
                note = COINCIDE_NOTE.format(x=x_unit, rule=COINCIDE_RULES[every_point])
                notes.append(("Also, " if notes else "Dodged: ") + note)
                break
    return " ".join(notes) or None


def dodge_step(xs: list[float], slots: Iterable[int], log_x: bool) -> float:
    """One slot's step: on a log-2 axis in octaves, about a marker apart at the panel's width, the
    widest slot kept within 0.45 of the gap between the nearest two x values (a dodged point reads
    as its own x, not the next); on a linear axis 2% of the span."""
    xs = sorted({x for x in xs if isinstance(x, (int, float)) and (x > 0 or not log_x)})
    most = max(slots, default=0)
    if not log_x:
        return 0.02 * ((xs[-1] - xs[0]) if len(xs) > 1 else 1.0)
    if len(xs) < 2:
        return 0.12
    octaves = [math.log2(b / a) for a, b in zip(xs, xs[1:])]
    step = max(0.12, 0.025 * math.log2(xs[-1] / xs[0]))
    return max(0.05, min(step, 0.45 * min(octaves) / most)) if most else step


POINT_TOL = 0.02  # relative: two series' points at one x this near are one on the other (point_slots)


def point_slots(points: dict[str, list[dict]], slots: dict[str, int], tol: float = POINT_TOL) -> dict[tuple, int]:
    """(series, x) -> the slot its point is drawn at: its series' (dodge_slots), or where that point
    would lie on another series' point drawn at the same x and slot (within `tol` of its y: two lines
    crossing at one x, neither lying on the other as a whole, as two mlperf families at 512 GPUs; a
    variant also where their intervals overlap, _hidden_by), the next slot free there; series in
    dodge_slots' order (plain ones longest_first, then the variants). Tighter than dodge_slots' 3%:
    lines that only run near each other stay lines, not zigzags (paper-model's weak_scaling: HSDP's
    one point on FSDP's, at 1024 GPUs, moves)."""
    plain = longest_first({s: p for s, p in points.items() if variant_base(s) is None})
    order = plain + longest_first({s: p for s, p in points.items() if s not in plain})
    drawn: dict[tuple, list[dict]] = {}  # (x, slot) -> the points drawn there
    out: dict[tuple, int] = {}
    for s in order:
        variant = variant_base(s) is not None
        for r in points[s]:

            def on(other: dict) -> bool:
                near = abs(r["y"] - other["y"]) <= tol * max(abs(r["y"]), 1e-12)
                return near or variant and _hidden_by([r], [other])

            k = slots.get(s, 0)
            while any(on(other) for other in drawn.get((r["x"], k), [])):
                k += 1
            drawn.setdefault((r["x"], k), []).append(r)
            out[(s, r["x"])] = k
    return out


def dodge_room_step(at: dict[tuple, int], log_x: bool) -> float:
    """One slot's step in a panel (`at`: point_slots): dodge_step's size, the slots at each x kept
    within 0.45 of the gap to the next x with a tick of its own (TICK_OCTAVES right of it or more; 72
    GPUs, untickable beside 64, would squeeze the points dodged at 64 into a marker's width), the x
    with the most slots for its room deciding (not the panel's closest two x values and most slots
    anywhere: 64 and 72 GPUs squeezed seven points at 8 GPUs onto one another)."""
    xs = sorted({x for _, x in at if isinstance(x, (int, float))})
    step = dodge_step(xs, [], log_x)
    if not log_x:
        return step
    for x in xs:
        most = max((k for (_, at_x), k in at.items() if at_x == x), default=0)
        after = [b for b in xs if x > 0 and b >= x * 2**TICK_OCTAVES]
        if most and after:
            step = min(step, 0.45 * math.log2(after[0] / x) / most)
    return max(0.05, step)


def drawn_slots(points: dict[str, list[dict]], every_point: bool = False) -> dict[tuple, int]:
    """(series, x) -> the slot its point is drawn at: its series' (dodge_slots); with `every_point`
    (a figure whose every point is a configuration to be found, not a sample of a curve) also a point
    lying on another series' point where the series as a whole do not (point_slots)."""
    slots = dodge_slots(points)
    if every_point:
        return point_slots(points, slots)
    return {(s, r["x"]): slots.get(s, 0) for s, pts in points.items() for r in pts}


def dodged_x(points: dict[str, list[dict]], log_x: bool = True, every_point: bool = False) -> Callable[[dict], float]:
    """A panel's dodge (points by series, in drawing order): row -> the x its point is drawn at,
    its slot's steps right of its own (drawn_slots, dodge_room_step)."""
    at = drawn_slots(points, every_point)
    step = dodge_room_step(at, log_x)

    def x_of(r: dict) -> float:
        k = at.get((r["series"], r["x"]), 0)
        if not k or not isinstance(r["x"], (int, float)):
            return r["x"]
        return r["x"] * 2 ** (step * k) if log_x else r["x"] + step * k

    return x_of


def draw_line_figure(fd: FigureData, study=None, *, ncols: int | None = None, panel_w: float = 4.2, **kw):
    fig, axes = figure_for(fd, ncols=ncols, panel_w=panel_w, legend_rows=legend_rows_for(fd, ncols, panel_w=panel_w))
    draw_lines(fig, axes, fd, **kw)
    return fig


def new_figure(
    n_panels: int,
    *,
    ncols: int | None = None,
    panel_w: float = 4.2,
    panel_h: float = 3.2,
    title: str = "",
    subtitle: str = "",
    cpu: bool = False,
    notes: Iterable[str] = (),
    legend_rows: int = 0,
):
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # heavy: imported only when drawing
    from matplotlib.figure import Figure  # heavy: imported only when drawing

    ncols = ncols or min(max(n_panels, 1), 3)
    nrows = max(1, math.ceil(max(n_panels, 1) / ncols))
    width = figure_width(n_panels, ncols, panel_w)
    text_w = width - 2 * MARGIN_IN - 0.15
    head = [(line, TITLE_FONTSIZE, "bold", "black") for line in wrap(title, text_w, TITLE_FONTSIZE)]
    head += [
        (line, SUBTITLE_FONTSIZE, "normal", "black") for line in wrap(subtitle, text_w, SUBTITLE_FONTSIZE) if subtitle
    ]
    if cpu:
        head.append((CPU_WARNING, WARNING_FONTSIZE, "bold", "#b00020"))
    foot = [line for n in notes if n for line in wrap(n, text_w, NOTE_FONTSIZE)]
    head_in = MARGIN_IN + sum(_height(1, fs) for _, fs, _, _ in head) + 0.12
    foot_in = _height(len(foot), NOTE_FONTSIZE) + 0.05 + MARGIN_IN if foot else MARGIN_IN
    body_in = panel_h * nrows + legend_rows * LEGEND_FONTSIZE * 1.9 / 72 + (0.1 if legend_rows else 0)
    fig = Figure(figsize=(width, head_in + body_in + foot_in), layout="constrained")
    FigureCanvasAgg(fig)
    fig.get_layout_engine().set(h_pad=MARGIN_IN, w_pad=MARGIN_IN, hspace=0.0, wspace=0.0)  # type: ignore[union-attr, call-arg]  # the figure is made with layout="constrained"
    top, body, bottom = fig.subfigures(3, 1, height_ratios=[head_in, body_in, foot_in])  # type: ignore[misc]  # subfigures(3, 1) returns an array of three
    for sub in (top, body, bottom):
        sub.patch.set_visible(False)  # the figure's own background; theirs drew at float-noise offsets
    fig.scalestudy = {"head": top, "body": body, "foot": bottom, "head_lines": head, "foot_lines": foot}  # type: ignore[attr-defined]  # the panels, kept on the figure
    axes = [body.add_subplot(nrows, ncols, i + 1) for i in range(max(n_panels, 1))]
    return fig, axes


def body(fig):
    return fig.scalestudy["body"] if hasattr(fig, "scalestudy") else fig


def _text_lines(sub, lines, top_in: float) -> None:
    """Lines of (text, font size, weight, colour) from `top_in` below the subfigure's top left corner."""
    from matplotlib.transforms import offset_copy  # heavy: imported only when drawing

    y = top_in * 72
    for line, fs, weight, color in lines:
        at = offset_copy(sub.transSubfigure, fig=sub.figure, x=MARGIN_IN * 72, y=-y, units="points")
        sub.text(0, 1, line, transform=at, ha="left", va="top", fontsize=fs, fontweight=weight, color=color)
        y += fs * LINE_SPACING


def header(fig, fd: FigureData, study) -> None:
    """The figure's title, study and hardware (and the CPU warning), as laid out by new_figure."""
    _text_lines(fig.scalestudy["head"], fig.scalestudy["head_lines"], MARGIN_IN)


def footer(fig, notes: list[str] | None = None) -> None:
    _text_lines(
        fig.scalestudy["foot"], [(n, NOTE_FONTSIZE, "normal", "#444444") for n in fig.scalestudy["foot_lines"]], 0.04
    )


def assumptions_note(study, limit: int = 400) -> str | None:
    """The study's [assumed] settings, as STUDY.md asks every figure to name them."""
    items = [str(a).rstrip(".") for a in (getattr(study, "assumptions", ()) or ())]
    if not items:
        return None
    text = f"Assumptions of study {study.name}: " + "; ".join(items) + "."
    return text if len(text) <= limit else text[: limit - 30].rsplit(" ", 1)[0] + " ... (see the study file)"


def message_panel(ax, text: str, color: str = "#666666") -> None:
    ax.set_axis_off()
    ax.text(
        0.5,
        0.5,
        "\n".join(textwrap.wrap(text, 60)),
        ha="center",
        va="center",
        fontsize=9,
        color=color,
        transform=ax.transAxes,
        bbox={"boxstyle": "round", "facecolor": "#f4f4f4", "edgecolor": "#999999"},
    )


TICK_OCTAVES = 0.3  # a log-2 axis ticks no x this near the tick before it (its label would print over it)


def log2_axis(ax, xs: list[float], formatter: Callable[[float], str] | None = None, max_ticks: int = 12) -> None:
    """A log-2 x axis ticked at the data's x values (every other one, ... when there are more
    than max_ticks)."""
    xs = sorted({x for x in xs if isinstance(x, (int, float)) and x > 0})
    if not xs:
        return
    ax.set_xscale("log", base=2)
    step = max(1, math.ceil(len(xs) / max_ticks))
    ticks: list = []
    for x in xs[::step]:  # a tick too close to the one before it would print over it
        if not ticks or x >= ticks[-1] * 2**TICK_OCTAVES:
            ticks.append(x)
        elif x == xs[-1] and len(ticks) > 1:  # the largest scale keeps its tick, its close neighbour gives way
            ticks[-1] = x
    ax.set_xticks(ticks)
    ax.set_xticklabels(
        [formatter(x) if formatter else f"{x:g}" for x in ticks],
        rotation=45 if len(ticks) > 6 else 0,
        ha="right" if len(ticks) > 6 else "center",
    )
    ax.minorticks_off()
    lo, hi = xs[0], xs[-1]
    ax.set_xlim(lo / 2**0.4, hi * 2**0.4) if len(xs) > 1 else ax.set_xlim(lo / 2, lo * 2)


def mark_failed(ax, xs: list, colors: list) -> None:
    """An 'x' at the foot of the axes at each data x, in its colour. Its status is in the figure's
    notes (failed_note), not written in the panel, where it would cover the data."""
    ax.scatter(
        xs,
        [0.04] * len(xs),
        marker="x",
        color=colors,
        s=49,
        linewidths=2,
        transform=ax.get_xaxis_transform(),
        clip_on=False,
    )


def failed_note(rows: list[dict], limit: int = 12) -> str | None:
    """'Without a value: FSDP: oom at 512 GPUs; ...': each configuration drawn as an 'x', by series
    and status, with its x values. A configuration in several panels is named once, by the series
    of its last panel (kernel_breakdown's share panel names the family, its bar panels the part),
    and by that panel too where the configurations' last panels differ (one panel a model)."""
    by_config: dict[str, dict] = {}
    for r in rows:
        if r.get("y") is None and r.get("x") is not None:
            by_config[";".join(r.get("config_ids") or []) or f"{r['series']}@{r['x']}"] = r
    if not by_config:
        return None
    by_panel = len({r["panel"] for r in by_config.values()}) > 1  # one panel a model, a batch: name it
    groups: dict[tuple[str, str], list] = {}
    for r in by_config.values():
        name = f"{r['panel']}, {r['series']}" if by_panel else str(r["series"])
        groups.setdefault((name, short_status(r)), []).append(r["x"])
    unit = str(next(iter(by_config.values())).get("x_quantity") or "").split(" (")[0]
    items = []
    for (series, status), xs in sorted(groups.items(), key=lambda kv: (natural(kv[0][0]), kv[0][1])):
        xs = sorted(
            set(xs), key=lambda x: (not isinstance(x, (int, float)), x if isinstance(x, (int, float)) else 0, str(x))
        )
        shown = ", ".join(f"{x:g}" if isinstance(x, (int, float)) else str(x) for x in xs)
        items.append(f"{series}: {status} at {shown}{' ' + unit if unit else ''}")
    more = len(items) - limit
    text = "; ".join(items[:limit]) + (f"; and {more} more (see the CSV)" if more > 0 else "")
    return f"Without a value: {text}."


def short_status(row: dict) -> str:
    s = row.get("status") or "?"
    if s == "ok":
        note = row.get("note") or "no value"
        return note.replace("predicted by the model; ", "")
    return s


def natural(s: str) -> tuple:
    """A sort key that orders the numbers in names by value: llama2-7b before llama2-13b, 2 nodes
    before 16 nodes."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", str(s)) if p)


def model_size(name: str) -> tuple:
    """A sort key that orders names starting with a catalog model by its parameter count
    (llama-1b, llama2-7b, llama2-13b, llama2-70b: not as strings, where 70b comes before 7b),
    then naturally; names of no catalog model after them, naturally."""
    from scalestudy.spec import catalog
    from scalestudy.spec.catalog.models import parameter_counts

    name = str(name)
    known = [
        m
        for m in catalog.models()
        if name == m or name.startswith(m) and not name[len(m)].isalnum() and name[len(m)] not in ".-_"
    ]
    if not known:
        return (1, 0, natural(name))
    m = max(known, key=len)
    return (0, parameter_counts(catalog.model(m))["n_params"], natural(name))


LEGEND_FONTSIZE = 7.5


def legend_columns(labels: Iterable[str], width_in: float, most: int = 6) -> int:
    """As many legend columns as the longest label lets fit across the figure (at most `most`)."""
    labels = list(labels)
    if not labels:
        return 1
    entry_in = (max(len(x) for x in labels) * LEGEND_FONTSIZE * CHAR_WIDTH_EM + 40) / 72  # marker and gap
    return max(1, min(most, len(labels), int((width_in - 0.3) // entry_in)))


def figure_width(n_panels: int, ncols: int | None = None, panel_w: float = 4.2) -> float:
    ncols = ncols or min(max(n_panels, 1), 3)
    return max(panel_w * ncols, 7.5)


def legend_rows_for(fd: FigureData, ncols: int | None = None, extra: int = 0, panel_w: float = 4.2) -> int:
    """The rows fd's legend (one entry a series, one for the failed mark) takes below its panels."""
    labels = sorted({r["series"] for r in fd.rows})
    if any(r.get("y") is None for r in fd.rows):
        labels.append(FAILED_LABEL)
    labels += [""] * extra
    if not labels:
        return 0
    return math.ceil(len(labels) / legend_columns(labels, figure_width(len(fd.panels), ncols, panel_w)))


def figure_legend(fig, axes, ncol: int = 6, title: str | None = None, order: Callable | None = None) -> None:
    """One legend for every panel, below them, in as many columns as fit (entries in `order`,
    natural order by default)."""
    entries: dict[str, object] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(lab, h)
    if not entries:
        return
    labels = sorted(entries, key=lambda k: (k.startswith("x: "), order(k) if order else natural(k)))
    ncol = min(ncol, legend_columns(labels, fig.get_figwidth()))
    body(fig).legend(
        [entries[k] for k in labels],
        labels,
        loc="outside lower center",
        ncol=ncol,
        frameon=False,
        title=title,
        fontsize=LEGEND_FONTSIZE,
    )


def long_frame(points: list[dict], x_of: Callable[[dict], float | str]):
    """Points with y as seaborn's long form: three rows a point (its interval's low end, its value,
    its high end), so that seaborn's median (estimator="median") and 100% percentile interval
    (errorbar=("pi", 100)) give back exactly the value and interval the CSV holds (a Student-t CI
    over seeds, or the model's band): seaborn draws the error bars, it computes no statistic."""
    import pandas as pd  # heavy: imported only when drawing

    def end(r, key, pick):
        return r["y"] if r.get(key) is None else pick(r["y"], r[key])

    seen: dict[tuple, dict] = {}
    for r in points:  # two points at one x of a series would be merged into one median: refused
        other = seen.setdefault((r["series"], x_of(r)), r)
        if other is not r:
            raise ValueError(
                f"series {r['series']!r} has two points at x={x_of(r)} "
                f"({other.get('config_id')}, {r.get('config_id')}): draw them as separate series"
            )
    rows = [
        {"series": r["series"], "x": x_of(r), "y": y}
        for r in points
        for y in (end(r, "ci95_low", min), r["y"], end(r, "ci95_high", max))
    ]
    return pd.DataFrame(rows, columns=["series", "x", "y"])


def draw_lines(
    fig,
    axes,
    fd: FigureData,
    *,
    log_x: bool = True,
    x_format=None,
    muted_series: set[str] | frozenset[str] = frozenset(),
    colors: dict[str, object] | None = None,
    styles: dict[str, tuple[str, object]] | None = None,
    order: Callable[[str], object] | None = None,
    legend_ncol: int = 6,
    legend: bool = True,
    every_point: bool | None = None,
) -> None:
    """Line panels through seaborn's semantic mappings: per panel one sns.lineplot, hue and style
    the series (colour from series_colors or `colors`, by fd.groups where the figure has them;
    marker and dashes from figure_styles or `styles`, the same in every panel; error bars its
    interval), and one more for the model beside them (prepare.MODEL_SERIES: hollow markers,
    HOLLOW); variants and coinciding series dodged along x (dodged_x; with `every_point`, by default
    the figure's Description.every_point, also a point lying on another series' point where the lines
    only cross there); muted series as
    grey points (sns.scatterplot, their marker their kind's); an 'x' for each row without y; the
    figure's reference lines (reference_lines); one legend below the panels."""
    import seaborn as sns  # heavy: imported only when drawing

    order = order or (lambda s: (s in muted_series, natural(s)))
    if every_point is None:
        every_point = bool(fd.description and fd.description.every_point)
    all_series = sorted({r["series"] for r in fd.rows}, key=order)  # type: ignore[arg-type]  # order returns comparable keys
    drawn_series = [s for s in all_series if s not in muted_series]
    colors = colors or {
        **series_colors(drawn_series, groups=fd.groups),
        **{s: MUTED for s in muted_series},
    }
    styles = figure_styles(fd, drawn_series, styles or group_styles(drawn_series, fd.groups))  # its legend's
    failed_seen = False
    for ax, panel in zip(axes, fd.panels):
        rows = [r for r in fd.rows if r["panel"] == panel]
        valued = [r for r in rows if r.get("y") is not None]
        lines = [s for s in drawn_series if any(r["series"] == s for r in valued)]
        x_of = dodged_x({s: [r for r in valued if r["series"] == s] for s in lines}, log_x, every_point)
        for layer in (  # the measured series, then the model's beside them: hollow markers, their colours
            [s for s in lines if not s.endswith(prepare.MODEL_SERIES)],
            [s for s in lines if s.endswith(prepare.MODEL_SERIES)],
        ):
            if not layer:
                continue
            hollow = layer[0].endswith(prepare.MODEL_SERIES)
            sns.lineplot(
                long_frame([r for r in valued if r["series"] in layer], x_of),
                x="x",
                y="y",
                hue="series",
                style="series",
                hue_order=layer,
                style_order=layer,
                palette={s: colors[s] for s in layer},
                markers={s: styles[s][0] for s in layer},
                dashes={s: styles[s][1] for s in layer},
                estimator="median",
                errorbar=("pi", 100),
                err_style="bars",
                err_kws={"capsize": 2.5, "elinewidth": 0.9},
                linewidth=1.3,
                markersize=5.5,
                ax=ax,
                **(HOLLOW if hollow else {"markeredgewidth": 0.6}),
            )
        muted = [r for r in valued if r["series"] in muted_series]
        if muted:  # the others tried: grey points, no line, no interval; a marker of their kind (line_style)
            kinds = sorted({r["series"] for r in muted}, key=order)  # type: ignore[arg-type]  # order returns comparable keys
            sns.scatterplot(
                x=[r["x"] for r in muted],
                y=[r["y"] for r in muted],
                hue=[r["series"] for r in muted],
                style=[r["series"] for r in muted],
                hue_order=kinds,
                style_order=kinds,
                palette={s: colors.get(s, MUTED) for s in kinds},
                markers={s: line_style(s)[0] for s in kinds},
                s=14,
                linewidth=0,
                ax=ax,
            )
        for s in all_series:  # a series only failed in this panel: its legend entry says so
            if s not in muted_series and s not in lines and any(r["series"] == s for r in rows):
                ax.plot([], [], marker="x", linestyle="none", color=colors[s], mew=2, label=f"{s} (no value)")
        if ax.get_legend() is not None:
            ax.get_legend().remove()  # one legend for the figure (figure_legend)
        fails: dict = {}  # x -> the series without a value there: one 'x' in its colour (grey for several)
        for r in (r for r in rows if r.get("y") is None and r.get("x") is not None and r["series"] in colors):
            fails.setdefault(r["x"], set()).add(r["series"])
        if fails:
            xs = sorted(fails, key=str)
            mark_failed(ax, xs, [colors[min(fails[x])] if len(fails[x]) == 1 else "#555555" for x in xs])
            failed_seen = True
        if log_x:
            log2_axis(ax, [r["x"] for r in rows if r.get("x") is not None], x_format)
            if any(x_of(r) != r["x"] for r in valued):  # room for the points dodged right of the last x
                ax.set_xlim(right=max(ax.get_xlim()[1], max(x_of(r) for r in valued) * 2**0.25))
        ax.set(
            title=panel, xlabel=rows[0]["x_quantity"] if rows else "", ylabel=rows[0]["y_quantity"] if rows else panel
        )
        if not valued:
            ax.set_ylim(0, 1)
        elif fd.description is not None:
            bound_axis(ax, rows[0]["y_quantity"], fd.description, [r["y"] for r in valued])
        if not zero_based_if_flat(ax, [r["y"] for r in valued]):
            zero_based_if_one_x(ax, valued)
        if fd.description is not None and rows:
            paper_lines(ax, fd.description, rows[0]["y_quantity"])
        if rows:
            reference_lines(ax, fd.references, rows[0]["y_quantity"])
        compact_ticks(ax)
    if failed_seen:
        axes[0].plot([], [], marker="x", linestyle="none", color="#555555", mew=2, label=FAILED_LABEL)
    if legend:
        figure_legend(fig, axes, ncol=legend_ncol, order=order)


REFERENCE_LINE = {"color": "#b00020", "linestyle": "--", "linewidth": 1.0, "zorder": 2.5}  # over the series at it


def reference_lines(ax, references: Iterable[tuple[str, float, str]], quantity_label: str) -> None:
    """A limit the data can sit at, (quantity label, value, what) as a figure module declares it
    (a GPU's power limit, a memory cap): a dashed red line across this panel of that quantity,
    named in the figure's legend; the axis reaches past it so that a value at the limit reads so."""
    for label, value, what in references:
        if label == quantity_label and value is not None:
            lo, hi = ax.get_ylim()
            ax.axhline(value, label=what, **REFERENCE_LINE)
            ax.set_ylim(min(lo, value * 0.95) if ax.get_yscale() == "log" else lo, max(hi, value * 1.03))


PAPER_LINE = {"color": "#444444", "linewidth": 1.1, "zorder": 1}
# one dash pattern each of a panel's paper values, in their order: dotted, dashed, dash-dot, long dashes
PAPER_LINESTYLES = (":", "--", "-.", (0, (8, 2)))


def paper_lines(ax, desc: Description, quantity_label: str) -> None:
    """The paper's own values of this panel's quantity (Description.paper_values) as grey reference
    lines, each in a dash pattern of its own (PAPER_LINESTYLES) and named 'paper: <what> <value>' in
    the figure's legend (a label on the axes would cover the data where a line ends or starts near
    the paper's value)."""
    mine = [(value, what) for label, value, what in desc.paper_values if label == quantity_label]
    for (value, what), linestyle in zip(mine, PAPER_LINESTYLES * len(mine)):
        lo, hi = ax.get_ylim()
        if lo / 2 <= value <= hi * 2:  # far off the panel's range: only in the caption
            ax.set_ylim(min(lo, value * 0.95), max(hi, value * 1.05))
            ax.axhline(value, label=f"paper: {what} {value:g}", linestyle=linestyle, **PAPER_LINE)


NOISE = 0.01  # relative: a panel's spread below this share of its values is noise, not a difference


def leave_out_flat_panels(fd: FigureData, floor: float = 0.05) -> None:
    """Leave out (from the drawing, not the CSV) each panel of fd whose values are all zero or below
    `floor` in its unit, with a one-line note; a figure keeps at least one panel."""
    flat = [
        p
        for p in fd.panels
        if all(abs(r["y"]) <= floor for r in fd.rows if r["panel"] == p and r.get("y") is not None)
        and any(r.get("y") is not None for r in fd.rows if r["panel"] == p)
    ]
    if flat and len(flat) < len(fd.panels):
        fd.panels = [p for p in fd.panels if p not in flat]
        fd.notes.append("Left out: " + "; ".join(flat) + f" (every value is zero or below {floor:g}).")


def zero_based_if_flat(ax, ys: list[float], noise: float = NOISE) -> bool:
    """A panel whose values differ by less than the noise would fill the axis with that noise:
    start its axis at zero instead, so the values read as equal."""
    if ys and min(ys) > 0 and ax.get_yscale() == "linear" and max(ys) - min(ys) <= noise * max(ys):
        ax.set_ylim(0, max(ys) * 1.15)
        return True
    return False


def zero_based_if_one_x(ax, rows: list[dict]) -> bool:
    """A panel of one x compares its points by size alone (no trend to read): its axis starts at
    zero, as a bar's would, so a 10% difference does not fill the panel."""
    ys = [r["y"] for r in rows]
    if len({r["x"] for r in rows}) == 1 and ys and min(ys) > 0 and ax.get_yscale() == "linear":
        ax.set_ylim(0, max(ax.get_ylim()[1], max(ys) * 1.15))
        return True
    return False


def compact_ticks(ax, above: float = 1e4) -> None:
    """Engineering tick labels (800k, 1.2M) on each linear axis whose values exceed `above`."""
    from matplotlib.ticker import EngFormatter  # heavy: imported only when drawing

    for axis, lim in ((ax.yaxis, ax.get_ylim()), (ax.xaxis, ax.get_xlim())):
        if axis.get_scale() == "linear" and max(abs(v) for v in lim) > above:
            axis.set_major_formatter(EngFormatter(sep=""))


def bound_axis(ax, quantity_label: str, desc: Description, ys: Iterable[float] = ()) -> None:
    """Keep a panel's y axis within its quantity's possible range (no axis below zero for a
    quantity that cannot be negative); a log axis for a quantity drawn so whose values span more
    than a factor of ten."""
    try:
        q = desc.quantity(quantity_label)
    except KeyError:
        return
    ys = [y for y in ys if y > 0]
    if q.log and ys and max(ys) > 10 * min(ys):
        ax.set_yscale("log")
        return
    lo, hi = ax.get_ylim()
    if q.low is not None and lo < q.low:
        ax.set_ylim(bottom=q.low)
    if q.high is not None and hi > q.high:
        ax.set_ylim(top=q.high)
