"""Heatmap panels over two parallel degrees (tp_pp_grid, rank_grid): cells, hatches, values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from scalestudy.analysis.figures.drawing import NOTE_FONTSIZE


def compact(v: float) -> str:
    """12345 -> 12.3k, 2.591e6 -> 2.59M: at most four characters of digits."""
    a = abs(v)
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            x = v / div
            return f"{x:.3g}{suffix}" if abs(x) < 100 else f"{x:.0f}{suffix}"
    return f"{v:.3g}"


@dataclass(frozen=True)
class Cell:
    """One cell of a heatmap panel: its row and column values (TP and PP degrees), its value (None:
    not drawn), what is written under the value or alone (a status), and its hatch: FAILED_HATCH
    (red, a failure), BLANK_HATCH (grey, no value for another reason) or None."""

    row: int
    col: int
    value: float | None
    status: str = ""
    hatch: str | None = None


FAILED_HATCH, BLANK_HATCH = "failed", "blank"
# Quantities of opposite sense get different colour maps (Quantity.better): viridis where high is
# good, a reversed rocket (dark = high = bad) where low is good.
CMAPS = {"high": "viridis", "low": "rocket_r"}


def heatmap_panel(
    ax,
    cells: list[Cell],
    *,
    title: str,
    value_label: str,
    fmt: Callable[[float], str],
    compact_colorbar: bool = False,
    better: str = "high",
    row_label: str = "TP degree",
    col_label: str = "PP degree",
) -> None:
    """A heatmap of cells over row x column values (tp_pp_grid, rank_grid), drawn by sns.heatmap:
    the cells with a value coloured (CMAPS[better]) with their value (and status) as its annotation,
    in black or white by the cell's luminance; cells without a value but with a status get a flat
    layer of their own, their status as its annotation (red: failed), on a white box over their
    hatch; cells not in `cells` stay blank (grey). The hatches are matplotlib patches (seaborn
    draws none)."""
    import numpy as np  # heavy: imported only when drawing
    import seaborn as sns  # heavy: imported only when drawing
    from matplotlib.colors import ListedColormap  # heavy: imported only when drawing
    from matplotlib.patches import Rectangle  # heavy: imported only when drawing
    from matplotlib.ticker import EngFormatter  # heavy: imported only when drawing

    rows, cols = sorted({c.row for c in cells}), sorted({c.col for c in cells})
    grid = np.full((len(rows), len(cols)), np.nan)
    text = np.full(grid.shape, "", dtype=object)
    hatch = np.full(grid.shape, "", dtype=object)
    for c in cells:
        at = rows.index(c.row), cols.index(c.col)
        grid[at] = np.nan if c.value is None else c.value
        text[at] = "\n".join(t for t in (None if c.value is None else fmt(c.value), c.status) if t)
        hatch[at] = c.hatch or ""
    finite = grid[np.isfinite(grid)]
    vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if vmin == vmax:
        vmin, vmax = vmin - 0.5 * abs(vmin or 1), vmax + 0.5 * abs(vmax or 1)
    ax.set_facecolor("#f0f0f0")
    ax.grid(False)  # the style's axis grid would cross the cells' text; cells have their own white lines
    common = {
        "ax": ax,
        "annot": text,
        "fmt": "",
        "linewidths": 0.5,
        "linecolor": "white",
        "xticklabels": [str(c) for c in cols],
        "yticklabels": [str(r) for r in rows],
    }
    sns.heatmap(
        grid,
        mask=~np.isfinite(grid),
        cmap=CMAPS[better],
        vmin=vmin,
        vmax=vmax,
        cbar_kws={"label": value_label, "format": EngFormatter(sep="") if compact_colorbar else None},
        annot_kws={"fontsize": NOTE_FONTSIZE},
        **common,
    )
    for kind, color in ((FAILED_HATCH, "#b00020"), (BLANK_HATCH, "#555555"), ("", "#555555")):
        status_only = ~np.isfinite(grid) & (text != "") & (hatch == kind)
        if status_only.any():
            box = {"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1} if kind else None
            sns.heatmap(
                np.zeros(grid.shape),
                mask=~status_only,
                cmap=ListedColormap(["#f0f0f0"]),
                cbar=False,
                annot_kws={"fontsize": NOTE_FONTSIZE, "color": color, "bbox": box},
                **common,
            )
    for (i, j), kind in np.ndenumerate(hatch):
        if kind:
            failed = kind == FAILED_HATCH
            ax.add_patch(
                Rectangle(
                    (j, i),
                    1,
                    1,
                    fill=False,
                    hatch="///" if failed else "..",
                    edgecolor="#b00020" if failed else "#888888",
                    linewidth=0,
                )
            )
    ax.set_title(title, fontsize=7.5)
    ax.set_xlabel(col_label)
    ax.set_ylabel(row_label)
