"""The study's figures: a registry of figure modules, one per figure, each with
`data(tables, study) -> FigureData` (the rows = the CSV) and `draw(data, study) -> Figure`.

`render(name, study, ...)` writes `<out>/<name>.pdf`, `.png` and `.csv`. A figure whose
experiment has no runs in the study writes an explicit empty panel saying so and a CSV with its
header only, so every study draws every figure. Output is deterministic (no dates in the PDF,
fixed PNG metadata, a fixed SVG hash salt).

Experiments: a figure draws the configurations whose PlannedRun.experiments name the figure
(`weak_scaling`, `kernel_breakdown`, `strong_scaling`, `tp_pp_grid`, `model_sizes`,
`hardware_generations`, `power`); `collectives_bandwidth` draws study.collectives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from scalestudy.analysis.figures import (collectives_bandwidth, common, hardware_generations, kernel_breakdown,
                                         model_sizes, power, strong_scaling, tp_pp_grid, weak_scaling)

FIGURES = {m.NAME: m for m in (collectives_bandwidth, weak_scaling, kernel_breakdown, strong_scaling, tp_pp_grid,
                               model_sizes, hardware_generations, power)}
FORMATS = common.FORMATS


class UnknownFigureError(KeyError):
    pass


def module(name: str):
    try:
        return FIGURES[name]
    except KeyError:
        raise UnknownFigureError(f"unknown figure {name!r}; known: {', '.join(FIGURES)}") from None


def figure_data(name: str, tables, study) -> common.FigureData:
    fd = module(name).data(tables, study)
    common.mark_predicted(fd, tables)
    fd.rows = common.sort_rows(fd.rows, fd.panels)
    fd.notes = [n for n in fd.notes + [common.assumptions_note(study)] if n]
    if fd.empty_reason and not fd.cpu and study.runs:
        fd.cpu = all(p.spec.device == "cpu" for p in study.runs)  # an empty panel of a CPU study says so too
    return fd


def render(name: str, study, tables=None, out_dir: Path | str | None = None,
           formats: Iterable[str] = FORMATS) -> list[Path]:
    """Write figure `name` of `study` (tables: LoadedTables, default read from study.tables_dir)
    to out_dir (default study.figures_dir); returns the paths written."""
    import matplotlib

    from scalestudy.analysis.aggregate import load_tables

    formats = tuple(formats)
    tables = tables if tables is not None else load_tables(study.tables_dir)
    out = Path(out_dir) if out_dir is not None else Path(study.figures_dir)
    out.mkdir(parents=True, exist_ok=True)
    fd = figure_data(name, tables, study)
    paths = []
    if "csv" in formats:
        paths.append(common.write_rows(out / f"{name}.csv", fd.rows))
    drawn = [f for f in formats if f != "csv"]
    if drawn:
        with matplotlib.rc_context(common.style()):
            if fd.empty_reason:
                fig, axes = common.new_figure(1, header_lines=3 if fd.cpu else 2, footer_lines=len(fd.notes))
                common.message_panel(axes[0], fd.empty_reason)
            else:
                fig = module(name).draw(fd, study)
            common.header(fig, fd, study)
            common.footer(fig, fd.notes)
            paths.extend(common.save(fig, out / name, drawn))
    return paths


def render_all(study, tables=None, out_dir: Path | str | None = None, formats: Iterable[str] = FORMATS,
               names: Iterable[str] | None = None) -> list[Path]:
    from scalestudy.analysis.aggregate import load_tables

    tables = tables if tables is not None else load_tables(study.tables_dir)
    paths = []
    for name in names or FIGURES:
        paths.extend(render(name, study, tables, out_dir, formats))
    return paths
