"""Parallelization sweeps (the paper's Figs 6-8): heatmaps over tensor (rows) x pipeline
(columns) degrees of global tokens/s (WPS), MFU and the exposed-communication share of the step
time, one row of panels per (model, GPUs, global batch). Failed cells are hatched with their
status; cells that were not run stay blank. Configurations: experiment `tp_pp_grid`."""

from __future__ import annotations

import re

from scalestudy.analysis.figures import common

NAME = "tp_pp_grid"
EXPERIMENTS = ("tp_pp_grid",)
TITLE = "Tensor x pipeline parallel degrees (FSDP over the rest)"
METRICS = [("WPS (global tokens/s)", "tokens_per_s", 1.0, "{:.4g}"), ("MFU (%)", "mfu", 100.0, "{:.3g}"),
           ("exposed comm. share of step (%)", "exposed_comm_share", 100.0, "{:.3g}")]


def _group_title(c: dict) -> str:
    return f"{c['model']}, {c['world_size']} GPUs, global batch {c['global_batch']}"


def data(tables, study) -> common.FigureData:
    fd, cfgs = common.begin(NAME, TITLE, tables, study, EXPERIMENTS, empty_panels=["WPS"])
    if not cfgs:
        return fd
    groups = sorted({(c["model"], c["world_size"], c["global_batch"]) for c in cfgs})
    for key in groups:
        members = [c for c in cfgs if (c["model"], c["world_size"], c["global_batch"]) == key]
        title = _group_title(members[0])
        cells: dict[tuple[int, int], list[dict]] = {}
        for c in members:
            cells.setdefault((c["tp"], c["pp"]), []).append(c)
        for label, metric, scale, _ in METRICS:
            panel = f"{title}: {label}"
            fd.panels.append(panel)
            for (tp, pp), cs in sorted(cells.items()):
                for c in cs:
                    extra = {"series": f"TP={tp}" if len(cs) == 1 else f"TP={tp} [{c['config_id']}]"}
                    row = common.config_row(c, panel=panel, x_quantity="PP degree", x=pp, y_quantity=label,
                                            **extra, **common.stat(c, metric, scale))
                    if row["y"] is None and c.get("status") in ("ok", "partial"):
                        row["note"] = "no trace data" if metric == "exposed_comm_share" else "no value"
                    fd.rows.append(row)
    fd.cpu = common.is_cpu(cfgs)
    fd.notes = ["Cell: mean over seeds (the CSV holds the 95% CI). Hatched: failed (status in the cell); "
                "blank: not run.", common.mfu_note(cfgs)]
    return fd


_TP = re.compile(r"^TP=(\d+)")


def draw(fd: common.FigureData, study):
    import numpy as np
    import seaborn as sns
    from matplotlib.patches import Rectangle

    fig, axes = common.figure_for(fd, ncols=len(METRICS))
    fmts = {label: fmt for label, _, _, fmt in METRICS}
    for ax, panel in zip(axes, fd.panels):
        rows = [r for r in fd.rows if r["panel"] == panel]
        tps = sorted({int(_TP.match(r["series"]).group(1)) for r in rows})
        pps = sorted({int(r["x"]) for r in rows})
        grid = np.full((len(tps), len(pps)), np.nan)
        for r in rows:
            if r.get("y") is not None:
                grid[tps.index(int(_TP.match(r["series"]).group(1))), pps.index(int(r["x"]))] = r["y"]
        metric_label = panel.rsplit(": ", 1)[-1]
        finite = grid[np.isfinite(grid)]
        vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        if vmin == vmax:
            vmin, vmax = vmin - 0.5 * abs(vmin or 1), vmax + 0.5 * abs(vmax or 1)
        ax.set_facecolor("#f0f0f0")
        sns.heatmap(grid, ax=ax, mask=~np.isfinite(grid), annot=False, cmap="viridis", vmin=vmin, vmax=vmax,
                    cbar=True, cbar_kws={"label": metric_label}, linewidths=0.5, linecolor="white",
                    xticklabels=[str(p) for p in pps], yticklabels=[str(t) for t in tps])
        fmt = next((f for label, f in fmts.items() if label == metric_label), "{:.3g}")
        for r in rows:
            i, j = tps.index(int(_TP.match(r["series"]).group(1))), pps.index(int(r["x"]))
            if r.get("y") is not None:
                v = r["y"]
                dark = (v - vmin) / (vmax - vmin) < 0.6 if vmax > vmin else True
                ax.text(j + 0.5, i + 0.5, fmt.format(v), ha="center", va="center", fontsize=7,
                        color="white" if dark else "black")
            else:
                failed = r.get("status") not in ("ok", "partial")
                ax.add_patch(Rectangle((j, i), 1, 1, fill=False, hatch="///" if failed else "..",
                                       edgecolor="#b00020" if failed else "#888888", linewidth=0))
                ax.text(j + 0.5, i + 0.5, common.short_status(r)[:24], ha="center", va="center", fontsize=6,
                        color="#b00020" if failed else "#555555",
                        bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1})
        ax.set_title(panel, fontsize=7)
        ax.set_xlabel("PP degree")
        ax.set_ylabel("TP degree")
    return fig
