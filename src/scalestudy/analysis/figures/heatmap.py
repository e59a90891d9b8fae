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


def heatmap_panel(ax, cells: list[Cell], *, title: str, value_label: str, fmt: Callable[[float], str],
                  compact_colorbar: bool = False, better: str = "high", row_label: str = "TP degree", col_label: str = "PP degree") -> None:
    """A heatmap of cells over row x column values (tp_pp_grid, rank_grid): viridis over the
    cells with a value, each written in it; hatched cells with their status on a white box;
    cells not in `cells` stay blank (grey)."""
    import numpy as np
    import seaborn as sns
    from matplotlib.patches import Rectangle

    rows = sorted({c.row for c in cells})
    cols = sorted({c.col for c in cells})
    grid = np.full((len(rows), len(cols)), np.nan)
    for c in cells:
        if c.value is not None:
            grid[rows.index(c.row), cols.index(c.col)] = c.value
    finite = grid[np.isfinite(grid)]
    vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if vmin == vmax:
        vmin, vmax = vmin - 0.5 * abs(vmin or 1), vmax + 0.5 * abs(vmax or 1)
    cmap = CMAPS[better]
    ax.set_facecolor("#f0f0f0")
    ax.grid(False)  # the style's axis grid would cross the cells' text; cells have their own white lines
    sns.heatmap(grid, ax=ax, mask=~np.isfinite(grid), annot=False, cmap=cmap, vmin=vmin, vmax=vmax, cbar=True,
                cbar_kws={"label": value_label}, linewidths=0.5, linecolor="white",
                xticklabels=[str(c) for c in cols], yticklabels=[str(r) for r in rows])
    if compact_colorbar and ax.collections and ax.collections[0].colorbar is not None:
        from matplotlib.ticker import FuncFormatter

        ax.collections[0].colorbar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: compact(v)))
    for c in cells:
        i, j = rows.index(c.row), cols.index(c.col)
        failed = c.hatch == FAILED_HATCH
        if c.hatch:
            ax.add_patch(Rectangle((j, i), 1, 1, fill=False, hatch="///" if failed else "..",
                                   edgecolor="#b00020" if failed else "#888888", linewidth=0))
        if c.value is not None:
            r, g, b, _ = sns.color_palette(cmap, as_cmap=True)((c.value - vmin) / (vmax - vmin))
            dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
            ax.text(j + 0.5, i + 0.5, fmt(c.value) + (f"\n{c.status}" if c.status else ""), ha="center", va="center",
                    fontsize=NOTE_FONTSIZE, color="white" if dark else "black")
        elif c.status:
            ax.text(j + 0.5, i + 0.5, c.status, ha="center", va="center", fontsize=NOTE_FONTSIZE,
                    color="#b00020" if failed else "#555555",
                    bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1} if c.hatch else None)
    ax.set_title(title, fontsize=7.5)
    ax.set_xlabel(col_label)
    ax.set_ylabel(row_label)

