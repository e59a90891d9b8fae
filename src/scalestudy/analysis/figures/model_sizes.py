"""Model sizes (the paper's further sweeps): tokens/s per device and MFU against GPUs, one line
per model (and strategy where several ran). Configurations: experiment `model_sizes`."""

from __future__ import annotations

from scalestudy.analysis.figures import common

NAME = "model_sizes"
EXPERIMENTS = ("model_sizes",)
TITLE = "Model sizes: per-device throughput and MFU against GPUs"
X_QUANTITY = "GPUs (world size)"
PANELS = [("tokens/s per device", "tokens_per_s_per_device", 1.0), ("MFU (%)", "mfu", 100.0)]


def data(tables, study) -> common.FigureData:
    fd, cfgs = common.begin(NAME, TITLE, tables, study, EXPERIMENTS, panels=[p for p, _, _ in PANELS])
    if not cfgs:
        return fd
    series = common.distinct_series(cfgs, "world_size", [
        lambda c: c["model"],
        lambda c: f"{c['model']} {common.layout_name(c['layout'])}",
        lambda c: f"{c['model']} {c.get('label')}",
    ])
    fd.rows = common.metric_rows(cfgs, PANELS, series, "world_size", X_QUANTITY)
    fd.cpu = common.is_cpu(cfgs)
    fd.notes = [common.ERRORBAR_NOTE, common.FAILED_NOTE, common.mfu_note(cfgs)]
    return fd


draw = common.draw_line_figure
