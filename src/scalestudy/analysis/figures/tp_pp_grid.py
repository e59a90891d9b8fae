"""Parallelization sweeps (the paper's Figs 6-8): heatmaps over tensor (rows) x pipeline
(columns) degrees of global tokens/s (WPS), MFU and the exposed-communication share of the step
time, one row of panels per (model, GPUs, global batch). Failed cells are hatched with their
status; cells that were not run stay blank. Configurations: experiment `tp_pp_grid`."""

from __future__ import annotations

import re

from scalestudy.analysis.figures import drawing, heatmap, prepare
from scalestudy.analysis.figures.description import Description, Quantity

NAME = "tp_pp_grid"
EXPERIMENTS = ("tp_pp_grid",)
WPS = Quantity("WPS, all GPUs", "tokens/s", "tokens_per_s")
MFU = Quantity("MFU", "%", "mfu", 100.0, 0.0, 100.0)
SHARE = Quantity("exposed comm. share of step", "%", "exposed_comm_share", 100.0, 0.0, 100.0, better="low")
PP = Quantity("PP degree", "", low=1.0)
DESCRIPTION = Description(
    name=NAME,
    title="Tensor x pipeline parallel degrees (FSDP over the rest)",
    paper="the paper's Figs 6-8",
    shows=(
        "Heatmaps over tensor (rows) x pipeline (columns) parallel degrees of the global throughput in tokens "
        "per second (WPS, all GPUs together), MFU and the exposed-communication share of the step time"
    ),
    series=(
        "one row of panels per model, GPU count and global batch; a cell is one configuration; predictions "
        "that take a measured rank share get a row of panels of their own"
    ),
    x=PP,
    quantities=(WPS, MFU, SHARE),
    category="Parallelism",
    notes=(
        "Cell: the configuration's value (the mean of its runs where it ran more than once; the CSV holds the interval), in "
        "compact units (12.3k = 12 300, 2.6M = 2 600 000). "
        "Hatched: failed (status in the cell) or invalid; blank: not run.",
    ),
)
METRICS = [(WPS, "{}"), (MFU, "{:.3g}"), (SHARE, "{:.3g}")]


compact = heatmap.compact


def _scale(c: dict) -> tuple:
    return c["model"], c["world_size"], c["global_batch"]


def _group_title(c: dict, suffix: str) -> str:
    return f"{c['model']}, {c['world_size']} GPUs, global batch {c['global_batch']}" + (
        f"\n{suffix.strip()}" if suffix else ""
    )


def data(tables, study) -> prepare.FigureData:
    fd, cfgs = prepare.begin(DESCRIPTION, tables, study, EXPERIMENTS, panels=[], empty_panels=[WPS.label])
    if not cfgs:
        return fd
    # a row of panels: model, GPUs, global batch, and whether predicted with measured inputs
    # (those cells get a row of their own, never mixed into the model's)
    kind = prepare.measured_suffixes(cfgs, _scale)
    group = {c["config_id"]: (*_scale(c), kind[c["config_id"]]) for c in cfgs}
    for key in sorted(set(group.values())):
        members = [c for c in cfgs if group[c["config_id"]] == key]
        title = _group_title(members[0], key[-1])
        cells: dict[tuple[int, int], list[dict]] = {}
        for c in members:
            cells.setdefault((c["tp"], c["pp"]), []).append(c)
        for q, _ in METRICS:
            panel = f"{title}:\n{q.label}"
            fd.panels.append(panel)
            for (tp, pp), cs in sorted(cells.items()):
                for c in cs:
                    extra = {"series": f"TP={tp}" if len(cs) == 1 else f"TP={tp} [{c['config_id']}]"}
                    row = prepare.config_row(
                        c,
                        panel=panel,
                        x_quantity=PP.label,
                        x=pp,
                        y_quantity=q.label,
                        **extra,
                        **prepare.stat(c, q.metric, q.scale, q),  # type: ignore[arg-type]  # the figure's quantities name a metric
                    )
                    if row["y"] is None and row.get("status") in ("ok", "partial"):
                        row["note"] = "no trace data" if q is SHARE else "no value"
                    fd.rows.append(row)
    fd.cpu = prepare.is_cpu(cfgs)
    fd.notes = [prepare.mfu_note(cfgs)]  # type: ignore[list-item]  # None notes are dropped when the figure is drawn
    return fd


_TP = re.compile(r"^TP=(\d+)")
FAILURES_IN_CELLS = True  # a failed cell is hatched with its status: no 'x', no list in the notes


def cells(rows: list[dict]) -> list[heatmap.Cell]:
    out = []
    for r in rows:
        tp, pp = int(_TP.match(r["series"]).group(1)), int(r["x"])  # type: ignore[union-attr]  # every series is named tp<N>
        if r.get("y") is not None:
            out.append(heatmap.Cell(tp, pp, r["y"]))
        else:
            failed = r.get("status") not in ("ok", "partial", None)
            out.append(
                heatmap.Cell(tp, pp, None, _cell_status(r), heatmap.FAILED_HATCH if failed else heatmap.BLANK_HATCH)
            )
    return out


def draw(fd: prepare.FigureData, study):
    fig, axes = drawing.figure_for(fd, ncols=len(METRICS))
    fmts = {q.label: fmt for q, fmt in METRICS}
    better = {q.label: q.better for q, _ in METRICS}
    for ax, panel in zip(axes, fd.panels):
        label = panel.rsplit("\n", 1)[-1]
        fmt = fmts.get(label, "{:.3g}")
        heatmap.heatmap_panel(
            ax,
            cells([r for r in fd.rows if r["panel"] == panel]),
            title=panel,
            value_label=label,
            fmt=heatmap.compact if fmt == "{}" else fmt.format,
            compact_colorbar=fmt == "{}",
            better=better.get(label, "high"),
        )
    return fig


def _cell_status(r: dict) -> str:
    s = drawing.short_status(r)
    short = {
        "no trace data": "no trace",
        "no value": "n/a",
        prepare.INVALID: "invalid",
        "invalid_config": "invalid\nconfig",
        "comm_error": "comm\nerror",
    }
    return short.get(s, s[:9])
