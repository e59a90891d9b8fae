"""Writing a figure: its PDF and PNG, and its CSV of the rows drawn, each recording the code version.

CSV columns (FIGURE_COLUMNS): panel, series, x_quantity, x, y_quantity, y, ci95_low, ci95_high
(Student-t 95% CI over seeds, empty with one seed; truncated at the quantity's bound with a note
where it reached beyond), n_seeds (seeds with a value), status (the configuration's status; a failed
one has an empty y and is drawn as an 'x' with its status; `invalid` where the value cannot be: it
is not drawn, its reason is in note), note, label (the study's name for the strategy), measured_inputs
(a prediction's inputs taken from a measurement, e.g. "compute, memory" of a rank share; empty: the
model alone, or a measurement), model_error (a prediction drawn beside a measurement: predicted over
the measured seed mean, minus one; empty elsewhere), config_ids and run_ids (';'-joined), code_version
(the package version and analysis-source hash that wrote the row, scalestudy.measure.code_version).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from scalestudy.measure.code_version import code_version
from scalestudy.measure.csv_format import write_csv
from scalestudy.measure.rawlog import atomic_output

FIGURE_COLUMNS = [
    "panel",
    "series",
    "x_quantity",
    "x",
    "y_quantity",
    "y",
    "ci95_low",
    "ci95_high",
    "n_seeds",
    "status",
    "note",
    "label",
    "measured_inputs",
    "model_error",
    "config_ids",
    "run_ids",
    "code_version",
]
FORMATS = ("pdf", "png", "csv")
PDF_METADATA = {"CreationDate": None, "ModDate": None, "Producer": "scalestudy", "Creator": "scalestudy"}
PNG_METADATA = {"Software": "scalestudy"}


def write_rows(path: Path, rows: list[dict], version: str | None = None) -> Path:
    """The figure's CSV; every row's code_version is `version` (default: this analysis code's)."""
    version = version or code_version()
    return write_csv(path, FIGURE_COLUMNS, [{**r, "code_version": version} for r in rows])


LAYOUT_PASSES = 6  # constrained layout passes at most; an outside legend takes two or three to settle
LAYOUT_SETTLED = 1e-6  # of the figure's size: an axes that moves less has settled (the solver's jitter is 1e-15)


def settle_layout(fig) -> int:
    """Run the figure's layout engine until no axes moves (at most LAYOUT_PASSES passes): one pass
    sizes an outside legend from positions the pass itself then changes. Returns the passes run."""
    before: list[tuple[float, ...]] = []
    for n in range(1, LAYOUT_PASSES + 1):
        fig.draw_without_rendering()
        now = [tuple(ax.get_position().bounds) for ax in fig.get_axes()]
        if before and all(abs(a - b) < LAYOUT_SETTLED for p, q in zip(now, before) for a, b in zip(p, q)):
            return n
        before = now
    return LAYOUT_PASSES


LAYOUT_GRID = 1e-7  # of the figure's size: well under a pixel, well over the solver's jitter


def snap_positions(fig) -> None:
    """Round every axes' position to LAYOUT_GRID: the layout solver's result differs from run to run in
    the last bits (its sums run in an order set by memory addresses), which a PDF's ten decimals show."""
    for ax in fig.get_axes():
        ax.set_position([round(v / LAYOUT_GRID) * LAYOUT_GRID for v in ax.get_position().bounds])


def save(fig, out_base: Path, formats: Iterable[str], version: str | None = None) -> list[Path]:
    """The figure's PDF and PNG, recording `version` (default: this analysis code's) in their metadata."""
    version = version or code_version()
    # one layout for every format: constrained layout solved until it settles, then frozen, so that
    # the PNG does not depend on whether (or in which process state) a PDF was drawn before it
    if fig.get_layout_engine() is not None:
        import matplotlib  # heavy: only when drawing

        dpi = matplotlib.rcParams["savefig.dpi"]
        if dpi != "figure":  # text is measured at the PNG's resolution, as the PNG draws it
            fig.set_dpi(dpi)
        settle_layout(fig)
        fig.set_layout_engine("none")
        snap_positions(fig)
    paths = []
    for fmt in formats:
        if fmt == "csv":
            continue
        p = out_base.with_name(f"{out_base.name}.{fmt}")
        if fmt not in ("pdf", "png"):
            raise ValueError(f"unknown figure format {fmt!r}")
        with atomic_output(p) as tmp:
            if fmt == "pdf":
                fig.savefig(tmp, format="pdf", metadata={**PDF_METADATA, "Creator": version})
            else:
                fig.savefig(tmp, format="png", metadata={**PNG_METADATA, "Software": version})
        paths.append(p)
    return paths
