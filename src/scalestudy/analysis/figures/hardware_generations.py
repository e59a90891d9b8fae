"""Hardware generations (the paper's Sec. 4.4): MFU and tokens/s per device per device kind
(the GPU names the runs recorded), one bar per configuration. Configurations: experiment
`hardware_generations`. The paper reports 59.67% MFU on A100 against 40.77% on H100."""

from __future__ import annotations

from scalestudy.analysis.figures import common
from scalestudy.analysis.figures.description import Description, Quantity

NAME = "hardware_generations"
EXPERIMENTS = ("hardware_generations",)
DEVICE = Quantity("device", "", low=None)
DESCRIPTION = Description(
    name=NAME, title="Hardware generations: MFU and throughput per device kind",
    paper="the paper's Sec. 4.4",
    shows="MFU and tokens per second per device for each device kind the runs recorded",
    series="one bar colour per configuration (model, GPU count and strategy family, and what else differs)",
    x=DEVICE,
    quantities=(Quantity("MFU", "%", "mfu", 100.0, 0.0, 100.0),
                Quantity("tokens/s per device", "tokens/s", "tokens_per_s_per_device")),
    category="Hardware",
    notes=(common.FAILED_NOTE,),
    paper_result="MFU 59.67% on A100 against 40.77% on H100 (Sec. 4.4).",
)


def device_kind(c: dict) -> str:
    names = common.split_list(c.get("device_names"))
    return " + ".join(names) if names else str(c.get("device"))


def _lead(s: dict) -> str:
    return f"{s.get('model')}, {s.get('world_size')} GPUs, {common.family(s)}"


def data(tables, study) -> common.FigureData:
    fd, cfgs = common.begin(DESCRIPTION, tables, study, EXPERIMENTS)
    if not cfgs:
        return fd
    for c in cfgs:
        c["device_kind"] = device_kind(c)
    series = common.series_names(cfgs, common.specs_by_config(tables), "device_kind", lead=_lead,
                                 lead_fields=("model", "hardware"))
    for q in DESCRIPTION.quantities:
        for c in cfgs:
            fd.rows.append(common.config_row(c, panel=q.label, series=series[c["config_id"]], x_quantity=DEVICE.label,
                                             x=c["device_kind"], y_quantity=q.label,
                                             **common.stat(c, q.metric, q.scale, q)))
    fd.cpu = common.is_cpu(cfgs)
    fd.notes = [common.mfu_note(cfgs)]
    return fd


def draw(fd: common.FigureData, study):
    import textwrap

    series = sorted({r["series"] for r in fd.rows})
    fig, axes = common.figure_for(fd, legend_rows=-(-len(series) // 2) + 1)
    colors = dict(zip(series, common.palette(len(series))))
    width = 0.8 / max(len(series), 1)
    for ax, panel in zip(axes, fd.panels):
        rows = [r for r in fd.rows if r["panel"] == panel]
        kinds = sorted({r["x"] for r in rows})
        for k, s in enumerate(series):
            for r in rows:
                if r["series"] != s:
                    continue
                x = kinds.index(r["x"]) - 0.4 + width * (k + 0.5)
                if r.get("y") is None:
                    common.mark_failed(ax, x, common.short_status(r)[:28], colors[s])
                    continue
                lo, hi = common.interval(r)
                ax.bar([x], [r["y"]], width=width * 0.95, color=colors[s], label=s,
                       yerr=[[lo], [hi]] if r.get("ci95_low") is not None else None, capsize=3)
        ax.set_xticks(range(len(kinds)))
        ax.set_xticklabels(["\n".join(textwrap.wrap(k, 22)) for k in kinds], fontsize=7)
        ax.set_xlim(-0.6, len(kinds) - 0.4)
        ax.set_title(panel)
        ax.set_ylabel(panel)
        ax.set_xlabel(DEVICE.label)
        if not any(r.get("y") is not None for r in rows):
            ax.set_ylim(0, 1)
        else:
            common.bound_axis(ax, panel, DESCRIPTION)
    common.figure_legend(fig, axes, ncol=2)
    return fig
