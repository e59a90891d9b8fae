"""Strong scaling (the paper's Fig. 5): a fixed global batch over more and more GPUs; at each GPU
count the best strategy (highest mean global tokens/s over its ok seeds) is drawn as the line,
with its strategy written next to the point; the other strategies tried are grey dots, and a
GPU count where every strategy failed is an 'x' with the statuses. One panel per global batch.
Configurations: experiment `strong_scaling`."""

from __future__ import annotations

from scalestudy.analysis.figures import common

NAME = "strong_scaling"
EXPERIMENTS = ("strong_scaling",)
TITLE = "Strong scaling at a fixed global batch: best strategy per GPU count"
X_QUANTITY = "GPUs (world size)"
BEST, OTHER, FAILED = "best strategy", "other strategies", "failed"


def data(tables, study) -> common.FigureData:
    fd, cfgs = common.begin(NAME, TITLE, tables, study, EXPERIMENTS, empty_panels=["global tokens/s"])
    if not cfgs:
        return fd
    for gb in sorted({c["global_batch"] for c in cfgs}):
        panel = f"global batch {gb} sequences: global tokens/s"
        fd.panels.append(panel)
        at_gb = [c for c in cfgs if c["global_batch"] == gb]
        for world in sorted({c["world_size"] for c in at_gb}):
            here = [c for c in at_gb if c["world_size"] == world]
            ok = [c for c in here if c.get("tokens_per_s_mean") is not None]
            best = max(ok, key=lambda c: (c["tokens_per_s_mean"], c["config_id"])) if ok else None
            for c in here:
                if c is best:
                    series = BEST
                    note = f"best of {len(here)} strategies tried ({len(ok)} with a value)"
                elif c.get("tokens_per_s_mean") is not None:
                    series, note = OTHER, None
                else:
                    series, note = FAILED, None
                row = common.config_row(c, panel=panel, series=series, x_quantity=X_QUANTITY, x=world,
                                        y_quantity="global tokens/s", **common.stat(c, "tokens_per_s"))
                if note:
                    row["note"] = note
                fd.rows.append(row)
    fd.cpu = common.is_cpu(cfgs)
    fd.notes = [common.ERRORBAR_NOTE, common.FAILED_NOTE,
                "Each point's strategy is written next to it (TP, PP and FSDP degrees as the study names them)."]
    return fd


def draw(fd: common.FigureData, study):
    fig, axes = common.figure_for(fd)
    common.draw_lines(fig, axes, fd, annotate_labels={BEST}, muted_series={OTHER})
    return fig
