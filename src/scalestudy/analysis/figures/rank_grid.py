"""Rank shares on the tensor x pipeline grid (study paper-rank): heatmaps over tensor (rows) x
pipeline (columns) degrees of one rank's compute time per step (the configuration's pipeline
stages put together) and its peak memory, one row of panels per (model, GPUs, global batch).
Cells that ran out of memory under the study's cap are hatched `oom`; planned cells say so.
One rank's share, communication not executed: never a throughput. Data: rank_configs.csv."""

from __future__ import annotations

from pathlib import Path

from scalestudy.analysis.figures import common
from scalestudy.analysis.figures.description import Description, Quantity
from scalestudy.rank_share import LABEL, PIPELINE_RULE

NAME = "rank_grid"
EXPERIMENTS = ("tp_pp_grid",)
STEP = Quantity("one rank's compute time per step", "s", "rank_step_time_s")
MEMORY = Quantity("one rank's peak memory (largest stage)", "GiB", "peak_allocated_bytes", 1 / 2**30)
PP = Quantity("PP degree", "", low=1.0)
DESCRIPTION = Description(
    name=NAME, title=f"Tensor x pipeline grid, {LABEL}",
    paper="the configurations of the paper's Figs 6-8",
    shows=("Heatmaps over tensor (rows) x pipeline (columns) parallel degrees of one rank's compute time per step "
           "(its pipeline stages put together) and its peak allocated memory, each rank run alone on one GPU under "
           "the study's memory cap with communication faked"),
    series="one row of panels per model, GPU count and global batch; a cell is one configuration",
    x=PP, quantities=(STEP, MEMORY), category="Rank shares",
    notes=(f"{LABEL.capitalize()}: no communication time, not a throughput of the configuration.",
           f"Pipelined cells: {PIPELINE_RULE}.",
           "Hatched: oom (a stage did not fit the cap) or another failure; 'planned': not measured."),
)
METRICS = [(STEP, "{:.3g}"), (MEMORY, "{:.3g}")]


def configs(study, experiments) -> list[dict]:
    from scalestudy.analysis.csv_format import read_table
    from scalestudy.analysis.rank_shares import CONFIGS_FILE

    path = Path(study.tables_dir) / CONFIGS_FILE
    if not path.exists():
        return []
    rows = common.records(read_table(path))
    return [r for r in rows if set(common.split_list(r.get("experiments"))) & set(experiments)]


def data(tables, study) -> common.FigureData:
    fd = common.FigureData(NAME, DESCRIPTION.heading(False), description=DESCRIPTION, panels=[])
    cfgs = configs(study, EXPERIMENTS)
    if not cfgs:
        fd.panels = [STEP.label]
        fd.empty_reason = f"no rank shares of experiment 'tp_pp_grid' in study {study.name!r} (rank_configs.csv)"
        return fd
    for key in sorted({(c["model"], c["world_size"], c["global_batch"]) for c in cfgs}):
        members = [c for c in cfgs if (c["model"], c["world_size"], c["global_batch"]) == key]
        for q, _ in METRICS:
            panel = f"{key[0]}, {key[1]} GPUs, global batch {key[2]}:\n{q.label}"
            fd.panels.append(panel)
            for c in sorted(members, key=lambda c: (c["tp"], c["pp"])):
                v = c.get(q.metric)
                if q is STEP and c["status"] != "ok":
                    v = None
                fd.rows.append({"panel": panel, "series": f"TP={c['tp']}", "x_quantity": PP.label, "x": c["pp"],
                                "y_quantity": q.label, "y": v * q.scale if v is not None else None,
                                "n_seeds": 1 if v is not None else 0, "status": c["status"],
                                "note": f"{c['stages_measured']} of {c['stages_planned']} stages measured",
                                "label": LABEL, "config_ids": c["group_id"], "run_ids": c.get("run_ids")})
    return fd


def draw(fd: common.FigureData, study):
    import numpy as np
    import seaborn as sns
    from matplotlib.patches import Rectangle

    fig, axes = common.figure_for(fd, ncols=len(METRICS))
    fmts = {q.label: fmt for q, fmt in METRICS}
    for ax, panel in zip(axes, fd.panels):
        rows = [r for r in fd.rows if r["panel"] == panel]
        tps = sorted({int(r["series"][3:]) for r in rows})
        pps = sorted({int(r["x"]) for r in rows})
        grid = np.full((len(tps), len(pps)), np.nan)
        for r in rows:
            if r.get("y") is not None:
                grid[tps.index(int(r["series"][3:])), pps.index(int(r["x"]))] = r["y"]
        label = panel.rsplit("\n", 1)[-1]
        finite = grid[np.isfinite(grid)]
        vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        if vmin == vmax:
            vmin, vmax = vmin - 0.5 * abs(vmin or 1), vmax + 0.5 * abs(vmax or 1)
        ax.set_facecolor("#f0f0f0")
        sns.heatmap(grid, ax=ax, mask=~np.isfinite(grid), annot=False, cmap="viridis", vmin=vmin, vmax=vmax,
                    cbar=True, cbar_kws={"label": label}, linewidths=0.5, linecolor="white",
                    xticklabels=[str(p) for p in pps], yticklabels=[str(t) for t in tps])
        for r in rows:
            i, j = tps.index(int(r["series"][3:])), pps.index(int(r["x"]))
            status = r.get("status")
            if r.get("y") is not None:
                dark = (r["y"] - vmin) / (vmax - vmin) < 0.6
                text = fmts.get(label, "{:.3g}").format(r["y"]) + ("\noom" if status == "oom" else "")
                ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=7,
                        color="white" if dark else "black")
            if status not in ("ok", "partial", "planned"):
                ax.add_patch(Rectangle((j, i), 1, 1, fill=False, hatch="///", edgecolor="#b00020", linewidth=0))
                if r.get("y") is None:
                    ax.text(j + 0.5, i + 0.5, status, ha="center", va="center", fontsize=7, color="#b00020",
                            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1})
            elif r.get("y") is None:
                ax.text(j + 0.5, i + 0.5, status if status == "planned" else "no value", ha="center", va="center",
                        fontsize=6, color="#555555")
        ax.set_title(panel, fontsize=7)
        ax.set_xlabel("PP degree")
        ax.set_ylabel("TP degree")
    return fig
