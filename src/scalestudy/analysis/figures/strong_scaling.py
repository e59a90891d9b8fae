"""Strong scaling (the paper's Fig. 5): a fixed global batch over more and more GPUs; at each GPU
count the best strategy (highest mean global tokens/s over its ok seeds) is drawn as the line,
its point's marker shape naming its strategy family (legend); the other strategies tried are grey dots,
and a GPU count where every strategy failed is an 'x' with the statuses. One panel per global
batch. The best line is the model alone, drawn in black (no strategy's colour); a prediction with a
measured rank share is a coloured line of its own, drawn beside the black line's points, and a
footnote gives both values of each configuration that is both. Configurations: experiment
`strong_scaling`."""

from __future__ import annotations

from scalestudy.analysis.figures import drawing, heatmap, prepare
from scalestudy.analysis.figures.description import Description, Quantity
from scalestudy.spec.rank_share import measured_base

NAME = "strong_scaling"
EXPERIMENTS = ("strong_scaling",)
GPUS = Quantity("GPUs", "world size, log 2")
TOKENS = Quantity("global tokens/s", "tokens/s", "tokens_per_s")
DESCRIPTION = Description(
    name=NAME,
    title="Strong scaling at a fixed global batch: the best strategy at each GPU count",
    paper="the paper's Fig. 5",
    shows=(
        "Global tokens per second against the number of GPUs (log-2 axis) at a fixed global batch, one panel "
        "per global batch"
    ),
    series=(
        "the black line joins the best strategy at each GPU count (highest mean global tokens/s), the marker's "
        "shape naming its strategy family; grey dots are the other strategies tried; predictions that take a "
        "measured rank share are coloured series of their own, drawn beside the black line's points, never the "
        "best line's"
    ),
    x=GPUS,
    quantities=(TOKENS,),
    category="Scaling",
    notes=(drawing.FAILED_NOTE,),
)
BEST, OTHER, FAILED = "best strategy", "other strategies", "failed"


def data(tables, study) -> prepare.FigureData:
    fd, cfgs = prepare.begin(DESCRIPTION, tables, study, EXPERIMENTS, panels=[], empty_panels=[TOKENS.label])
    if not cfgs:
        return fd
    specs = prepare.specs_by_config(tables)
    for gb in sorted({c["global_batch"] for c in cfgs}):
        panel = f"global batch {gb} sequences"
        fd.panels.append(panel)
        at_gb = [c for c in cfgs if c["global_batch"] == gb and not measured_base(c["config_id"])]
        measured = [c for c in cfgs if c["global_batch"] == gb and measured_base(c["config_id"])]
        kind = prepare.measured_suffixes(measured, lambda c: prepare.family(prepare.config_spec(c, specs)))
        micro: dict = {}  # family -> its micro batches: named in the series where a family has several
        for c in measured:
            micro.setdefault(prepare.family(prepare.config_spec(c, specs)) + kind[c["config_id"]], set()).add(
                prepare.config_spec(c, specs).get("micro_batch")
            )
        for c in measured:  # predicted with a measured input: a series of its own, never the best line's
            fam = prepare.family(prepare.config_spec(c, specs))
            suffix = kind[c["config_id"]]
            mb = (
                f", micro batch {prepare.config_spec(c, specs).get('micro_batch')}"
                if len(micro[fam + suffix]) > 1
                else ""
            )
            fd.rows.append(
                prepare.config_row(
                    c,
                    panel=panel,
                    series=fam + mb + suffix,
                    x_quantity=GPUS.label,
                    x=c["world_size"],
                    y_quantity=TOKENS.label,
                    **prepare.stat(c, TOKENS.metric, 1.0, TOKENS),  # type: ignore[arg-type]  # the figure's quantities name a metric
                )
            )
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
                row = prepare.config_row(
                    c,
                    panel=panel,
                    series=series,
                    x_quantity=GPUS.label,
                    x=world,
                    y_quantity=TOKENS.label,
                    **prepare.stat(c, TOKENS.metric, 1.0, TOKENS),  # type: ignore[arg-type]  # the figure's quantities name a metric
                )
                if note:
                    row["note"] = note
                    row["annotation"] = prepare.family(prepare.config_spec(c, specs))
                fd.rows.append(row)
    fd.cpu = prepare.is_cpu(cfgs)
    _two_values(fd, cfgs, specs)
    fd.notes.append(drawing.dodge_note(fd.rows))  # type: ignore[arg-type]  # None notes are dropped when the figure is drawn
    return fd


def _two_values(fd: prepare.FigureData, cfgs: list[dict], specs: dict) -> None:
    """Where a prediction with a measured rank share is drawn beside the best line, a configuration
    can have two values: the best line's (the model alone) and its coloured point (with its
    measured share). The best row's note gives the other, and a footnote says why for each."""
    twins = {
        measured_base(c["config_id"]): c
        for c in cfgs
        if measured_base(c["config_id"]) and c.get("tokens_per_s_mean") is not None
    }
    if not any(measured_base(c["config_id"]) for c in cfgs):
        return
    pairs = []
    for r in fd.rows:
        twin = twins.get((r.get("config_ids") or [""])[0]) if r["series"] == BEST and r.get("y") is not None else None
        if twin is None:
            continue
        other = twin["tokens_per_s_mean"]
        said = f"with its measured rank share: {other:.6g} tokens/s"
        r["note"] = f"{r['note']}; {said}" if r.get("note") else said
        pairs.append(
            f"{r['x']:g} GPUs, {r['annotation']}: {heatmap.compact(r['y'])} alone, "
            f"{heatmap.compact(other)} with its share"
        )
    fd.notes.append(
        "Two bases: the black line and the grey dots are the model alone (its own compute estimate); a "
        "coloured line takes the measured rank share of its strategy as its compute input instead. A "
        "configuration that is both the best and measured has two values, drawn side by side"
        + (": " + "; ".join(pairs) if pairs else "")
        + "."
    )


FAMILY_MARKERS = "sD^vPp*h<>"
BEST_COLOR = "#222222"  # the model alone's best: no strategy's palette colour


def draw(fd: prepare.FigureData, study):
    """The best strategy's line (drawing.draw_lines), then its points again through seaborn's style
    mapping, one marker shape a strategy family (named in the legend, not written over the data)."""
    import pandas as pd  # heavy: imported only when drawing
    import seaborn as sns  # heavy: imported only when drawing

    best = pd.DataFrame(
        [
            {"panel": r["panel"], "x": r["x"], "y": r["y"], "family": f"best here: {r['annotation']}"}
            for r in fd.rows
            if r["series"] == BEST and r.get("y") is not None and r.get("annotation")
        ],
        columns=["panel", "x", "y", "family"],
    )
    families = sorted(set(best["family"]), key=drawing.natural)
    fig, axes = drawing.figure_for(fd, legend_rows=drawing.legend_rows_for(fd, extra=len(families)))

    def order(s):  # the best line first, the other strategies last
        return s != BEST, s == OTHER, s.startswith("x: "), drawing.natural(s)

    coloured = sorted({r["series"] for r in fd.rows} - {BEST, OTHER}, key=order)
    colors = {**drawing.series_colors(coloured), BEST: BEST_COLOR, OTHER: drawing.MUTED}
    drawing.draw_lines(fig, axes, fd, muted_series={OTHER}, colors=colors, order=order, legend=False)
    markers = {f: FAMILY_MARKERS[k % len(FAMILY_MARKERS)] for k, f in enumerate(families)}
    for ax, panel in zip(axes, fd.panels):
        if (best["panel"] == panel).any():
            sns.scatterplot(
                best[best["panel"] == panel],
                x="x",
                y="y",
                style="family",
                style_order=families,
                markers=markers,
                s=49,
                color="white",
                edgecolor="black",
                linewidth=1.1,
                zorder=4,
                ax=ax,
            )
            ax.get_legend().remove()  # one legend for the figure
    drawing.figure_legend(fig, axes, order=order)
    return fig
