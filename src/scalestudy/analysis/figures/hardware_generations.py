"""Hardware generations (the paper's Sec. 4.4): MFU and tokens/s per device per device kind
(the GPU names the runs recorded), one bar per configuration. Configurations: experiment
`hardware_generations`. The paper reports 59.67% MFU on A100 against 40.77% on H100."""

from __future__ import annotations

from scalestudy.analysis.figures import common

NAME = "hardware_generations"
EXPERIMENTS = ("hardware_generations",)
TITLE = "Hardware generations: MFU and throughput per device kind"
PANELS = [("MFU (%)", "mfu", 100.0), ("tokens/s per device", "tokens_per_s_per_device", 1.0)]


def device_kind(c: dict) -> str:
    names = common.split_list(c.get("device_names"))
    return " + ".join(names) if names else str(c.get("device"))


def data(tables, study) -> common.FigureData:
    fd, cfgs = common.begin(NAME, TITLE, tables, study, EXPERIMENTS, panels=[p for p, _, _ in PANELS])
    if not cfgs:
        return fd
    for c in cfgs:
        c["device_kind"] = device_kind(c)
    series = common.distinct_series(cfgs, "device_kind", [
        lambda c: f"{c['model']}, {c['world_size']} GPUs, {common.layout_name(c['layout'])}",
        lambda c: f"{c['model']}, {c['world_size']} GPUs, {c.get('label')}",
    ])
    for panel, metric, scale in PANELS:
        for c in cfgs:
            fd.rows.append(common.config_row(c, panel=panel, series=series[c["config_id"]], x_quantity="device",
                                             x=c["device_kind"], y_quantity=panel, **common.stat(c, metric, scale)))
    fd.cpu = common.is_cpu(cfgs)
    fd.notes = [common.ERRORBAR_NOTE, common.FAILED_NOTE, common.mfu_note(cfgs),
                "Paper (Sec. 4.4): MFU 59.67% on A100 against 40.77% on H100."]
    return fd


def draw(fd: common.FigureData, study):
    fig, axes = common.figure_for(fd)
    for ax, panel in zip(axes, fd.panels):
        rows = [r for r in fd.rows if r["panel"] == panel]
        kinds = sorted({r["x"] for r in rows})
        series = sorted({r["series"] for r in rows})
        colors = dict(zip(series, common.palette(len(series))))
        width = 0.8 / max(len(series), 1)
        for k, s in enumerate(series):
            for r in rows:
                if r["series"] != s:
                    continue
                x = kinds.index(r["x"]) - 0.4 + width * (k + 0.5)
                if r.get("y") is None:
                    common.mark_failed(ax, x, common.short_status(r)[:40], colors[s])
                    continue
                err = None
                if r.get("ci95_low") is not None:
                    err = [[r["y"] - r["ci95_low"]], [r["ci95_high"] - r["y"]]]
                ax.bar([x], [r["y"]], width=width * 0.95, color=colors[s], label=s, yerr=err, capsize=3)
        ax.set_xticks(range(len(kinds)))
        ax.set_xticklabels(kinds, fontsize=7)
        ax.set_xlim(-0.6, len(kinds) - 0.4)
        ax.set_title(panel)
        ax.set_ylabel(panel)
        ax.set_xlabel("device")
        handles, labels = ax.get_legend_handles_labels()
        uniq = dict(zip(labels, handles))
        if uniq:
            ax.legend(uniq.values(), uniq.keys(), fontsize=6)
        if not any(r.get("y") is not None for r in rows):
            ax.set_ylim(0, 1)
    return fig
