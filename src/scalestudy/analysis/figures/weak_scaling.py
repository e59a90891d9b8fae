"""Weak scaling (the paper's Sec. 4.1): tokens/s per device, MFU and global tokens/s against the
number of GPUs, one line per strategy family (FSDP, HSDP, TP=k, PP=k, ...), error bars from
seeds. Configurations: the study's runs in experiment `weak_scaling`."""

from __future__ import annotations

from scalestudy.analysis.figures import drawing, prepare
from scalestudy.analysis.figures.description import Description, Quantity

NAME = "weak_scaling"
EXPERIMENTS = ("weak_scaling",)
GPUS = Quantity("GPUs", "world size, log 2")
DESCRIPTION = Description(
    name=NAME,
    title="Weak scaling: throughput per device, MFU and global throughput against GPUs",
    paper="the paper's Sec. 4.1",
    shows=(
        "Tokens per second per device, model FLOPs utilisation (MFU) and global tokens per second against the "
        "number of GPUs (log-2 axis), at a fixed number of sequences per GPU"
    ),
    series=(
        "one line per strategy family (FSDP flat over every GPU, HSDP, TP=k or PP=k with FSDP over the rest), "
        "with whatever else differs between lines (model, backend, compile) in its name; the data-parallel "
        "degree follows from the GPU count and is the x axis"
    ),
    x=GPUS,
    quantities=(
        Quantity("tokens/s per device", "tokens/s", "tokens_per_s_per_device"),
        Quantity("MFU", "%", "mfu", 100.0, 0.0, 100.0),
        Quantity("global tokens/s", "tokens/s", "tokens_per_s", log=True),
    ),
    category="Scaling",
    notes=(drawing.FAILED_NOTE,),
    paper_result="per-device throughput of Llama-2 7B FSDP falls by 37.22% from 128 to 2048 GPUs (claim C1).",
    every_point=True,
)


def data(tables, study) -> prepare.FigureData:
    fd, cfgs = prepare.begin(DESCRIPTION, tables, study, EXPERIMENTS)
    if not cfgs:
        return fd
    series = prepare.series_names(cfgs, prepare.specs_by_config(tables), "world_size")
    fd.rows = prepare.metric_rows(cfgs, DESCRIPTION.quantities, series, "world_size", GPUS)
    fd.cpu = prepare.is_cpu(cfgs)
    fd.notes = [prepare.mfu_note(cfgs)]  # type: ignore[list-item]  # None notes are dropped when the figure is drawn
    prepare.model_beside(fd, tables, cfgs, series, DESCRIPTION.quantities, "world_size", GPUS)
    fd.notes.append(drawing.dodge_note(fd.rows, every_point=DESCRIPTION.every_point))  # type: ignore[arg-type]  # None notes are dropped when the figure is drawn
    return fd


draw = drawing.draw_line_figure
