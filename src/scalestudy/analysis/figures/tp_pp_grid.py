"""Parallelization sweeps (the paper's Figs 6-8): heatmaps over tensor (rows) x pipeline
(columns) degrees of global tokens/s (WPS), MFU and the exposed-communication share of the step
time, one row of panels per (model, GPUs, global batch). Failed cells are hatched with their
status; cells that were not run stay blank. Configurations: experiment `tp_pp_grid`."""

from __future__ import annotations

import re

from scalestudy.analysis.figures import common
from scalestudy.analysis.figures.description import Description, Quantity

NAME = "tp_pp_grid"
EXPERIMENTS = ("tp_pp_grid",)
WPS = Quantity("WPS (global tokens/s)", "tokens/s", "tokens_per_s")
MFU = Quantity("MFU", "%", "mfu", 100.0, 0.0, 100.0)
SHARE = Quantity("exposed comm. share of step", "%", "exposed_comm_share", 100.0, 0.0, 100.0)
PP = Quantity("PP degree", "", low=1.0)
DESCRIPTION = Description(
    name=NAME, title="Tensor x pipeline parallel degrees (FSDP over the rest)",
    paper="the paper's Figs 6-8",
    shows=("Heatmaps over tensor (rows) x pipeline (columns) parallel degrees of the global throughput in tokens "
           "per second (WPS, all GPUs together), MFU and the exposed-communication share of the step time"),
    series="one row of panels per model, GPU count and global batch; a cell is one configuration",
    x=PP, quantities=(WPS, MFU, SHARE), category="Parallelism",
    notes=("Cell: mean over seeds (the CSV holds the 95% CI), compact units (12.3k = 12 300, 2.6M = 2 600 000). "
           "Hatched: failed (status in the cell) or invalid; blank: not run.",),
)
METRICS = [(WPS, "{}"), (MFU, "{:.3g}"), (SHARE, "{:.3g}")]


def compact(v: float) -> str:
    """12345 -> 12.3k, 2.591e6 -> 2.59M: at most four characters of digits."""
    a = abs(v)
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            x = v / div
            return f"{x:.3g}{suffix}" if abs(x) < 100 else f"{x:.0f}{suffix}"
    return f"{v:.3g}"


def _group_title(c: dict) -> str:
    return f"{c['model']}, {c['world_size']} GPUs, global batch {c['global_batch']}"


def data(tables, study) -> common.FigureData:
    fd, cfgs = common.begin(DESCRIPTION, tables, study, EXPERIMENTS, panels=[], empty_panels=[WPS.label])
    if not cfgs:
        return fd
    groups = sorted({(c["model"], c["world_size"], c["global_batch"]) for c in cfgs})
    for key in groups:
        members = [c for c in cfgs if (c["model"], c["world_size"], c["global_batch"]) == key]
        title = _group_title(members[0])
        cells: dict[tuple[int, int], list[dict]] = {}
        for c in members:
            cells.setdefault((c["tp"], c["pp"]), []).append(c)
        for q, _ in METRICS:
            panel = f"{title}:\n{q.label}"
            fd.panels.append(panel)
            for (tp, pp), cs in sorted(cells.items()):
                for c in cs:
                    extra = {"series": f"TP={tp}" if len(cs) == 1 else f"TP={tp} [{c['config_id']}]"}
                    row = common.config_row(c, panel=panel, x_quantity=PP.label, x=pp, y_quantity=q.label,
                                            **extra, **common.stat(c, q.metric, q.scale, q))
                    if row["y"] is None and row.get("status") in ("ok", "partial"):
                        row["note"] = "no trace data" if q is SHARE else "no value"
                    fd.rows.append(row)
    fd.cpu = common.is_cpu(cfgs)
    fd.notes = [common.mfu_note(cfgs)]
    return fd


_TP = re.compile(r"^TP=(\d+)")


def draw(fd: common.FigureData, study):
    import numpy as np
    import seaborn as sns
    from matplotlib.patches import Rectangle

    fig, axes = common.figure_for(fd, ncols=len(METRICS))
    fmts = {q.label: fmt for q, fmt in METRICS}
    for ax, panel in zip(axes, fd.panels):
        rows = [r for r in fd.rows if r["panel"] == panel]
        tps = sorted({int(_TP.match(r["series"]).group(1)) for r in rows})
        pps = sorted({int(r["x"]) for r in rows})
        grid = np.full((len(tps), len(pps)), np.nan)
        for r in rows:
            if r.get("y") is not None:
                grid[tps.index(int(_TP.match(r["series"]).group(1))), pps.index(int(r["x"]))] = r["y"]
        metric_label = panel.rsplit("\n", 1)[-1]
        finite = grid[np.isfinite(grid)]
        vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        if vmin == vmax:
            vmin, vmax = vmin - 0.5 * abs(vmin or 1), vmax + 0.5 * abs(vmax or 1)
        ax.set_facecolor("#f0f0f0")
        sns.heatmap(grid, ax=ax, mask=~np.isfinite(grid), annot=False, cmap="viridis", vmin=vmin, vmax=vmax,
                    cbar=True, cbar_kws={"label": metric_label}, linewidths=0.5, linecolor="white",
                    xticklabels=[str(p) for p in pps], yticklabels=[str(t) for t in tps])
        fmt = fmts.get(metric_label, "{:.3g}")
        for r in rows:
            i, j = tps.index(int(_TP.match(r["series"]).group(1))), pps.index(int(r["x"]))
            if r.get("y") is not None:
                v = r["y"]
                dark = (v - vmin) / (vmax - vmin) < 0.6 if vmax > vmin else True
                ax.text(j + 0.5, i + 0.5, compact(v) if fmt == "{}" else fmt.format(v), ha="center", va="center",
                        fontsize=common.NOTE_FONTSIZE,
                        color="white" if dark else "black")
            else:
                failed = r.get("status") not in ("ok", "partial", None)
                ax.add_patch(Rectangle((j, i), 1, 1, fill=False, hatch="///" if failed else "..",
                                       edgecolor="#b00020" if failed else "#888888", linewidth=0))
                ax.text(j + 0.5, i + 0.5, _cell_status(r), ha="center", va="center", fontsize=common.NOTE_FONTSIZE,
                        color="#b00020" if failed else "#555555",
                        bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1})
        ax.set_title(panel, fontsize=7.5)
        ax.set_xlabel("PP degree")
        ax.set_ylabel("TP degree")
    return fig


def _cell_status(r: dict) -> str:
    s = common.short_status(r)
    short = {"no trace data": "no trace", "no value": "n/a", common.INVALID: "invalid", "invalid_config": "invalid\nconfig",
             "comm_error": "comm\nerror"}
    return short.get(s, s[:9])
