"""Rank shares' memory against layout for each model size (study paper-rank): one rank's peak
allocated memory (its largest pipeline stage) against the number of GPUs, one line per layout,
one panel per model (in the order of the models' sizes), with the study's memory cap drawn;
configurations that ran out of memory are marked `oom`. A strategy family has one colour and a
micro batch one marker in every study (drawing.family_colors, drawing.micro_batch_style). One
rank's share, communication not executed. Data: rank_configs.csv."""

from __future__ import annotations

from scalestudy.analysis.figures import drawing, prepare
from scalestudy.analysis.figures.description import Description, Quantity
from scalestudy.analysis.figures.rank_grid import configs, weakened_note
from scalestudy.spec.rank_share import LABEL

NAME = "rank_memory"
EXPERIMENTS = ("model_sizes", "weak_scaling")
CAP_NOTE = "Memory cap: "
MEMORY = Quantity("one rank's peak memory (largest stage)", "GiB", "peak_allocated_bytes", 1 / 2**30)
GPUS = Quantity("GPUs", "", low=1.0)
DESCRIPTION = Description(
    name=NAME,
    title=f"Memory of one rank against layout, {LABEL}",
    paper="the configurations of the paper's model-size sweep",
    shows=(
        "One rank's peak allocated memory against the number of GPUs (the FSDP shard shrinks as GPUs are added), "
        "each rank run alone on one GPU under the study's memory cap with communication faked"
    ),
    series="one panel per model; a line per layout (strategy and micro batch)",
    x=GPUS,
    quantities=(MEMORY,),
    category="Rank shares",
    notes=(
        f"{LABEL.capitalize()}: the memory of the rank's own shard, activations and optimizer state.",
        "x: oom (the rank did not fit) or another failure; planned configurations are not drawn.",
    ),
)


def data(tables, study) -> prepare.FigureData:
    fd = prepare.FigureData(NAME, DESCRIPTION.heading(False), description=DESCRIPTION, panels=[])
    cfgs = [c for c in configs(study, EXPERIMENTS) if c["status"] != "planned"]
    if not cfgs:
        fd.panels = [MEMORY.label]
        fd.empty_reason = f"no measured rank shares of experiments model_sizes/weak_scaling in study {study.name!r}"
        return fd
    caps = sorted({c["device_memory_cap_gib"] for c in cfgs if c.get("device_memory_cap_gib")})
    for model in sorted({c["model"] for c in cfgs}, key=drawing.model_size):  # by size: 7b before 70b
        panel = model  # the y axis names the quantity; the panel title fits its panel
        fd.panels.append(panel)
        for c in sorted((c for c in cfgs if c["model"] == model), key=lambda c: c["world_size"]):
            series = prepare.family(c) + f", micro batch {c['micro_batch']}"
            v = c.get(MEMORY.metric) if c["status"] == "ok" else None
            fd.rows.append(
                {
                    "panel": panel,
                    "series": series,
                    "x_quantity": GPUS.label,
                    "x": c["world_size"],
                    "y_quantity": MEMORY.label,
                    "y": v * MEMORY.scale if v is not None else None,
                    "n_seeds": 1 if v is not None else 0,
                    "status": c["status"],
                    "note": None,
                    "label": LABEL,
                    "config_ids": c["group_id"],
                    "run_ids": c.get("run_ids"),
                    "family": prepare.family(c),
                    "micro_batch": c["micro_batch"],
                }
            )
    if caps:
        fd.notes.append(f"{CAP_NOTE}{', '.join(f'{x:g}' for x in caps)} GiB (dashed line).")
        fd.references = [(MEMORY.label, cap, f"memory cap {cap:g} GiB") for cap in caps]
    else:
        fd.notes.append("No memory cap: each rank had the whole GPU.")
    note = weakened_note(cfgs)
    if note:
        fd.notes.append(note)
    return fd


def draw(fd: prepare.FigureData, study):
    """Hue the strategy family and style the micro batch, both fixed across studies
    (drawing.family_colors, drawing.micro_batch_style): a configuration has one colour and marker
    in paper-rank's figure and in h100-rank's."""
    refs = fd.references
    fig, axes = drawing.figure_for(fd, legend_rows=drawing.legend_rows_for(fd, extra=len(refs)))
    of = {r["series"]: (r["family"], r["micro_batch"]) for r in fd.rows}
    hues = drawing.family_colors({f for f, _ in of.values()})
    drawing.draw_lines(
        fig,
        axes,
        fd,
        log_x=True,
        colors={s: hues[f] for s, (f, _) in of.items()},
        styles={s: drawing.micro_batch_style(mb) for s, (_, mb) in of.items()},
    )
    for ax, panel in zip(axes, fd.panels):  # from zero, the highest point clear of the frame
        top = max((r["y"] for r in fd.rows if r["panel"] == panel and r.get("y") is not None), default=0.0)
        ax.set_ylim(0, max(ax.get_ylim()[1], 1.06 * top))
    return fig
