"""Kernel-level breakdown (the paper's Figs 3-5 and 13): computation, communication and exposed
communication per iteration against GPUs, from the runs' profiler traces, and the exposed share
of the step time. Configurations: experiment `kernel_breakdown`.

Per iteration: each traced rank's totals over its traced steps divided by its steps, then the
mean over the traced ranks (run_table); GPU traces time kernels, CPU (gloo) traces time
operators, and the two are not comparable."""

from __future__ import annotations

from scalestudy.analysis.figures import common

NAME = "kernel_breakdown"
EXPERIMENTS = ("kernel_breakdown",)
TITLE = "Computation, communication and exposed communication per iteration"
X_QUANTITY = "GPUs (world size)"
QUANTITIES = [("computation", "compute_s"), ("communication", "comm_s"), ("exposed communication", "exposed_comm_s")]
SHARE_PANEL = "exposed communication share of step time (%)"


def data(tables, study) -> common.FigureData:
    fd, cfgs = common.begin(NAME, TITLE, tables, study, EXPERIMENTS, empty_panels=["per iteration (ms)"])
    if not cfgs:
        return fd
    names = common.distinct_series(cfgs, "world_size", [
        lambda c: common.layout_name(c["layout"]),
        lambda c: f"{c['model']} {common.layout_name(c['layout'])}",
        lambda c: str(c.get("label")),
    ])
    groups = sorted(set(names.values()))
    single = len(groups) == 1
    for g in groups:
        fd.panels.append("per iteration (ms)" if single else f"{g}: per iteration (ms)")
    fd.panels.append(SHARE_PANEL)
    for c in cfgs:
        g = names[c["config_id"]]
        panel = "per iteration (ms)" if single else f"{g}: per iteration (ms)"
        note = None
        if c.get("status") in ("ok", "partial") and c.get("exposed_comm_s_mean") is None:
            note = "no trace data"
        for label, metric in QUANTITIES:
            fd.rows.append(common.config_row(c, panel=panel, series=label, x_quantity=X_QUANTITY, x=c["world_size"],
                                             y_quantity=f"{label} per iteration (ms)",
                                             **common.stat(c, metric, 1e3), **({"note": note} if note else {})))
        fd.rows.append(common.config_row(c, panel=SHARE_PANEL, series=g, x_quantity=X_QUANTITY, x=c["world_size"],
                                         y_quantity="exposed share of step (%)",
                                         **common.stat(c, "exposed_comm_share", 100.0),
                                         **({"note": note} if note else {})))
    fd.cpu = common.is_cpu(cfgs)
    kinds = sorted({k for c in cfgs for k in common.split_list(c.get("exposed_comm_kind"))})
    fd.notes = [common.ERRORBAR_NOTE, common.FAILED_NOTE,
                "Measured from profiler traces" + (f" ({', '.join(kinds)})" if kinds else "")
                + ": exposed = communication not overlapped by computation; per iteration, mean over traced ranks."]
    return fd


draw = common.draw_line_figure
