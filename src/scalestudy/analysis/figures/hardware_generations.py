"""Hardware generations (the paper's Sec. 4.4): MFU and tokens/s per device against GPUs, one
line per device kind (the GPU names the runs recorded), with the strategy family and whatever
else differs. Configurations: experiment `hardware_generations`. The paper reports 59.67% MFU on
A100 against 40.77% on H100."""

from __future__ import annotations

from scalestudy.analysis.figures import drawing, prepare
from scalestudy.analysis.figures.description import Description, Quantity

NAME = "hardware_generations"
EXPERIMENTS = ("hardware_generations",)
GPUS = Quantity("GPUs", "world size, log 2")
DESCRIPTION = Description(
    name=NAME,
    title="Hardware generations: MFU and throughput per device against GPUs",
    paper="the paper's Sec. 4.4",
    shows="MFU and tokens per second per device against the number of GPUs (log-2 axis)",
    series=(
        "one line per device kind the runs recorded, with the strategy family, model or backend added where "
        "they differ between lines; each device kind a hue of its own, its lines shades of it with a marker each"
    ),
    x=GPUS,
    quantities=(
        Quantity("MFU", "%", "mfu", 100.0, 0.0, 100.0),
        Quantity("tokens/s per device", "tokens/s", "tokens_per_s_per_device"),
    ),
    category="Hardware",
    notes=(drawing.FAILED_NOTE,),
    paper_result="MFU 59.67% on A100 against 40.77% on H100 (Sec. 4.4).",
    paper_values=(("MFU (%)", 59.67, "A100"), ("MFU (%)", 40.77, "H100")),
    hue_by="hardware",
    every_point=True,
)


def data(tables, study) -> prepare.FigureData:
    fd, cfgs = prepare.begin(DESCRIPTION, tables, study, EXPERIMENTS)
    if not cfgs:
        return fd
    specs = prepare.specs_by_config(tables)
    families = {prepare.family(prepare.config_spec(c, specs)) for c in cfgs}
    if prepare.is_cpu(cfgs):  # a host arch (x86_64) is no hardware generation: name CPU lines by what differs

        def lead(s):
            return prepare.family(s)
    elif len(families) > 1:

        def lead(s):
            return f"{s.get('hardware')}, {prepare.family(s)}"
    else:

        def lead(s):
            return str(s.get("hardware"))

    series = prepare.series_names(cfgs, specs, "world_size", lead=lead, lead_fields=("hardware",))
    fd.rows = prepare.metric_rows(cfgs, DESCRIPTION.quantities, series, "world_size", GPUS)
    fd.cpu = prepare.is_cpu(cfgs)
    fd.notes = [prepare.mfu_note(cfgs)]  # type: ignore[list-item]  # None notes are dropped when the figure is drawn
    prepare.model_beside(fd, tables, cfgs, series, DESCRIPTION.quantities, "world_size", GPUS)
    fd.notes.append(drawing.dodge_note(fd.rows, every_point=DESCRIPTION.every_point))  # type: ignore[arg-type]  # None notes are dropped when the figure is drawn
    return fd


def draw(fd: prepare.FigureData, study=None):
    """The panels one above the other, each the figure's width: the points of one GPU count (seven
    B200 systems at 8 GPUs of the mlperf study) are drawn side by side (Description.every_point)
    and need the room."""
    return drawing.draw_line_figure(fd, study, ncols=1, panel_w=8.4)
