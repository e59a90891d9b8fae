"""The study's figures: a registry of figure modules, one per figure.

Shared by the figure modules, lowest first (each imports only modules above it):
- `save`: writing a figure's PDF, PNG and CSV (FIGURE_COLUMNS) with the code version in their metadata;
- `description`: a figure in words (`Description`, `Quantity`): title, caption, notes, quantities;
- `prepare`: a figure's data from the tables: `FigureData`, series names, the rows (with CIs) and their notes;
- `colors`: perceptual colour distance (CIEDE2000) and the palettes built with it (categorical, shades of a hue);
- `drawing`: style, colours, the figure's frame (header, footer, legend), line panels, failed marks, axes;
- `heatmap`: heatmap panels over TP x PP (tp_pp_grid, rank_grid).

How to add a figure
-------------------
1. Write `src/scalestudy/analysis/figures/<name>.py` with
   - `NAME = "<name>"` and `EXPERIMENTS = ("<experiment>", ...)` (the experiments of the study
     whose configurations it draws: PlannedRun.experiments name the figure);
   - `DESCRIPTION = Description(...)` (figures.description): title, the paper's figure, what it
     shows against what, what a series is, the x quantity and the plotted `Quantity`s (name,
     unit, summary metric, scale, possible range), footnotes. The report's caption, the drawn
     title and notes and the CSV's x_quantity / y_quantity all come from it; a predicted study
     is said to be predicted in each by `Description.basis`; `hue_by` (a spec field, e.g.
     "hardware") colours the series by its values, a hue a value (`FigureData.groups`);
   - `data(tables, study) -> FigureData`: start with `prepare.begin(DESCRIPTION, ...)`, name the
     series with `prepare.series_names` (strategy family plus what else differs, never the GPU
     count) and make rows with `prepare.metric_rows` / `prepare.config_row(..., **prepare.stat(cfg,
     metric, scale, quantity))` so that impossible values are marked invalid and intervals stay
     within range; add notes that depend on the data to `fd.notes`;
   - `draw(fd, study) -> Figure`: plot fd.rows only. Make the figure with `drawing.figure_for`
     (header, legend rows and wrapped notes are laid out for you); line panels are
     `drawing.draw_line_figure`; put legends below the panels with `drawing.figure_legend`.
2. Register the module in FIGURES below, add the name to scalestudy.spec.studies.FIGURES (the figure
   rule, its report caption and rebuild command follow) and a category in
   workflow/rules/figures.smk.
3. tests/analysis/test_figure_layout.py draws every registered figure from the paper-scale and the smoke
   fixtures and checks the layout from the renderer; add rows for the new figure's experiment to
   tests/analysis/figure_fixtures.py if it needs data of its own.

`render(name, study, ...)` writes `<out>/<name>.pdf`, `.png` and `.csv`. A figure whose
experiment has no runs in the study writes an explicit empty panel saying so and a CSV with its
header only, so every study draws every figure. Output is deterministic (no dates in the PDF,
fixed PNG metadata, a fixed SVG hash salt); the PDF and PNG record the package version and the
analysis code's hash (scalestudy.measure.code_version).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from scalestudy.analysis.aggregate import load_tables
from scalestudy.analysis.figures import (
    claim_sensitivity,
    collectives_bandwidth,
    drawing,
    hardware_generations,
    kernel_breakdown,
    model_sizes,
    model_validation,
    power,
    prepare,
    rank_grid,
    rank_memory,
    save,
    step_time_microbatches,
    strong_scaling,
    tp_pp_grid,
    weak_scaling,
)
from scalestudy.analysis.figures.description import Description, Quantity  # noqa: F401 (for figure modules)
from scalestudy.spec.evidence import PREDICTED, study_evidence

FIGURES = {
    m.NAME: m
    for m in (
        collectives_bandwidth,
        weak_scaling,
        kernel_breakdown,
        strong_scaling,
        tp_pp_grid,
        model_sizes,
        hardware_generations,
        power,
        rank_grid,
        rank_memory,
        step_time_microbatches,
        claim_sensitivity,
    )
}
# Figures of something other than a study's experiments: model_validation draws the performance
# model's external ledger (figures/STUDY/model_validation_ledger.csv, written by `scalestudy model
# validate --external`) for a predicted study, by its own workflow rule (rule model_validation).
LEDGER_FIGURES = {model_validation.NAME: model_validation}
FORMATS = save.FORMATS
RULES = {model_validation.NAME: "model_validation"}  # a figure's workflow rule where it is not figure_NAME


class UnknownFigureError(KeyError):
    pass


def module(name: str):
    try:
        return FIGURES.get(name) or LEDGER_FIGURES[name]
    except KeyError:
        raise UnknownFigureError(f"unknown figure {name!r}; known: {', '.join([*FIGURES, *LEDGER_FIGURES])}") from None


def listing() -> list[tuple[str, str, str]]:
    """Every figure as (name, category, what it draws): the study's experiments, then the ledger's."""
    return [(n, m.DESCRIPTION.category, "the study's tables") for n, m in FIGURES.items()] + [
        (n, m.DESCRIPTION.category, f"the external validation ledger ({m.LEDGER_FILE})")
        for n, m in LEDGER_FIGURES.items()
    ]


def description(name: str) -> Description:
    return module(name).DESCRIPTION


def rebuild_command(name: str, study_name: str) -> str:
    rule = RULES.get(name, f"figure_{name}")
    return f"snakemake --cores 2 --config study={study_name} --forcerun {rule} -- figures/{study_name}/{name}.pdf"


def caption(name: str, study, runs: str = "") -> str:
    """The report's caption of figure `name` of `study` (reStructuredText)."""
    return description(name).caption(
        predicted=study_evidence(study),
        study=study.name,
        hardware=study.hardware,
        runs=runs,
        command=rebuild_command(name, study.name),
    )


def render_ledger_figure(name: str, study, out_dir: Path | str | None = None) -> list[Path]:
    """Redraw a ledger figure of `study` (model_validation) from the ledger CSV beside it in
    out_dir (default study.figures_dir); the CSV is written by `scalestudy model validate
    --external --out`."""
    mod = LEDGER_FIGURES[name]
    out = Path(out_dir) if out_dir is not None else Path(study.figures_dir)
    ledger = out / mod.LEDGER_FILE
    if not ledger.exists():
        raise FileNotFoundError(
            f"{ledger}: missing; `scalestudy model validate --external --out {ledger}` writes it "
            "(the workflow does for a predicted study)"
        )
    return mod.render(ledger, out / name)


def figure_data(name: str, tables, study) -> prepare.FigureData:
    if name in LEDGER_FIGURES:
        raise UnknownFigureError(
            f"figure {name!r} draws the external ledger, not a study's tables: use render_ledger_figure"
        )
    fd = module(name).data(tables, study)
    prepare.mark_predicted(fd, tables)
    caveat = prepare.mark_caveats(fd, tables)
    weakened = prepare.mark_weakened(fd, tables)
    fd.rows = prepare.sort_rows(fd.rows, fd.panels)
    desc = fd.description or description(name)
    fd.description = desc
    if desc.hue_by and not fd.groups:
        fd.groups = prepare.series_groups(fd.rows, tables, desc.hue_by)
    fd.predicted = fd.predicted or prepare.is_predicted(tables, study)
    kind = PREDICTED if fd.predicted else study_evidence(study)
    fd.title = desc.heading(kind)
    fd.subtitle = f"study {study.name} · hardware: {study.hardware}"
    failed = None if getattr(module(name), "FAILURES_IN_CELLS", False) else drawing.failed_note(fd.rows)
    notes = desc.footnotes(kind) + fd.notes + [failed, caveat, weakened, drawing.assumptions_note(study)]
    if failed is None:  # nothing drawn as an 'x': no note explaining it
        notes = [n for n in notes if n != drawing.FAILED_NOTE]
    if any(r.get("status") == prepare.INVALID for r in fd.rows):
        notes.append(
            "invalid: a value that cannot be (see the CSV's note for why) is not drawn; "
            "its point is an 'x' (a hatched cell in a grid)."
        )
    fd.notes = list(dict.fromkeys(n for n in notes if n))
    if fd.empty_reason and not fd.cpu and study.runs:
        fd.cpu = all(p.spec.device == "cpu" for p in study.runs)  # an empty panel of a CPU study says so too
    return fd


def render(
    name: str, study, tables=None, out_dir: Path | str | None = None, formats: Iterable[str] = FORMATS
) -> list[Path]:
    """Write figure `name` of `study` (tables: LoadedTables, default read from study.tables_dir)
    to out_dir (default study.figures_dir); returns the paths written."""
    import matplotlib  # heavy: imported only when drawing

    formats = tuple(formats)
    tables = tables if tables is not None else load_tables(study.tables_dir)
    out = Path(out_dir) if out_dir is not None else Path(study.figures_dir)
    out.mkdir(parents=True, exist_ok=True)
    fd = figure_data(name, tables, study)
    paths = []
    if "csv" in formats:
        paths.append(save.write_rows(out / f"{name}.csv", fd.rows + prepare.sort_rows(fd.csv_rows, fd.panels)))
    drawn = [f for f in formats if f != "csv"]
    if drawn:
        with matplotlib.rc_context(drawing.style()):
            fig = draw(name, fd, study)
            paths.extend(save.save(fig, out / name, drawn))
    return paths


def draw(name: str, fd: prepare.FigureData, study):
    """The figure of fd, header and footer included (not saved)."""
    if fd.empty_reason:
        fig, axes = drawing.new_figure(
            1, title=fd.title, subtitle=getattr(fd, "subtitle", ""), cpu=fd.cpu, notes=fd.notes
        )  # one panel: the message, no empty axes under it
        drawing.message_panel(axes[0], fd.empty_reason)
    else:
        fig = module(name).draw(fd, study)
    drawing.header(fig, fd, study)
    drawing.footer(fig, fd.notes)
    return fig


def render_all(
    study,
    tables=None,
    out_dir: Path | str | None = None,
    formats: Iterable[str] = FORMATS,
    names: Iterable[str] | None = None,
) -> list[Path]:
    tables = tables if tables is not None else load_tables(study.tables_dir)
    paths = []
    for name in names or FIGURES:
        paths.extend(render(name, study, tables, out_dir, formats))
    return paths
