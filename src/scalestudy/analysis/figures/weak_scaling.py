"""Weak scaling (the paper's Sec. 4.1): tokens/s per device and MFU against the number of GPUs,
one line per strategy (FSDP, HSDP, ...), error bars from seeds. Configurations: the study's runs
in experiment `weak_scaling`."""

from __future__ import annotations

from scalestudy.analysis.figures import common

NAME = "weak_scaling"
EXPERIMENTS = ("weak_scaling",)
TITLE = "Weak scaling: per-device throughput and MFU against GPUs"
X_QUANTITY = "GPUs (world size)"
PANELS = [("tokens/s per device", "tokens_per_s_per_device", 1.0), ("MFU (%)", "mfu", 100.0)]


def series_levels():
    return [lambda c: common.layout_name(c["layout"]),
            lambda c: f"{c['model']} {common.layout_name(c['layout'])}",
            lambda c: f"{c['model']} {common.layout_name(c['layout'])} gb{c['global_batch']}",
            lambda c: str(c.get("label"))]


def data(tables, study) -> common.FigureData:
    fd, cfgs = common.begin(NAME, TITLE, tables, study, EXPERIMENTS, panels=[p for p, _, _ in PANELS])
    if not cfgs:
        return fd
    series = common.distinct_series(cfgs, "world_size", series_levels())
    fd.rows = common.metric_rows(cfgs, PANELS, series, "world_size", X_QUANTITY)
    fd.cpu = common.is_cpu(cfgs)
    fd.notes = [common.ERRORBAR_NOTE, common.FAILED_NOTE, common.mfu_note(cfgs)]
    return fd


draw = common.draw_line_figure
