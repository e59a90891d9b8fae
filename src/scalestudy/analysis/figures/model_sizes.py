"""Model sizes (the paper's further sweeps): tokens/s per device and MFU against GPUs, one line
per model (and strategy family, backend, ... where they differ). Configurations: experiment
`model_sizes`."""

from __future__ import annotations

from scalestudy.analysis.figures import drawing, prepare
from scalestudy.analysis.figures.description import Description, Quantity

NAME = "model_sizes"
EXPERIMENTS = ("model_sizes",)
GPUS = Quantity("GPUs", "world size, log 2")
DESCRIPTION = Description(
    name=NAME,
    title="Model sizes: throughput per device and MFU against GPUs",
    paper="the paper's model-size sweeps",
    shows="Tokens per second per device and MFU against the number of GPUs (log-2 axis)",
    series=(
        "one line per model, with the strategy family, backend or compile setting added where they differ between lines"
    ),
    x=GPUS,
    quantities=(
        Quantity("tokens/s per device", "tokens/s", "tokens_per_s_per_device", log=True),
        Quantity("MFU", "%", "mfu", 100.0, 0.0, 100.0),
    ),
    category="Scaling",
    notes=(drawing.FAILED_NOTE,),
)


def _model_first(spec: dict) -> str:
    return str(spec.get("model"))


def data(tables, study) -> prepare.FigureData:
    fd, cfgs = prepare.begin(DESCRIPTION, tables, study, EXPERIMENTS)
    if not cfgs:
        return fd
    specs = prepare.specs_by_config(tables)
    full = [prepare.config_spec(c, specs) for c in cfgs]
    families = {prepare.family(s) for s in full}
    lead = (lambda s: f"{s.get('model')}, {prepare.family(s)}") if len(families) > 1 else _model_first
    series = prepare.series_names(cfgs, specs, "world_size", lead=lead, lead_fields=("model",))
    fd.rows = prepare.metric_rows(cfgs, DESCRIPTION.quantities, series, "world_size", GPUS)
    fd.cpu = prepare.is_cpu(cfgs)
    fd.notes = [prepare.mfu_note(cfgs), drawing.dodge_note(fd.rows, coinciding=True)]  # type: ignore[list-item]  # None notes are dropped when the figure is drawn
    return fd


def draw(fd: prepare.FigureData, study):
    """The lines in the order of the models' sizes (llama-1b, llama2-7b, llama2-13b, llama2-70b),
    in the legend and the palette."""
    return drawing.draw_line_figure(fd, study, order=drawing.model_size)
