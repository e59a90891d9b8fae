"""What drives the per-GPU decline of pipelined weak scaling at a benchmark's global batch: a step's
time against the micro-batches each pipeline runs in it (the global batch over the data-parallel
degree and the micro batch), a line per family, with a straight-line fit over every run whose
intercept is the per-step fixed cost (pipeline fill and drain, the data-parallel exchange, the
optimizer) that does not shrink as the micro-batches per step fall. Configurations: the study's
runs in experiment `step_time_microbatches`."""

from __future__ import annotations

from scalestudy.measure.csv_format import split_list
from scalestudy.analysis.figures import drawing, prepare
from scalestudy.analysis.figures.description import Description, Quantity
from scalestudy.analysis.linear_fit import LineFit, fit_line
from scalestudy.analysis.stats import summarize

NAME = "step_time_microbatches"
EXPERIMENTS = ("step_time_microbatches",)
MICROBATCHES = Quantity("micro-batches per step", "per pipeline")
STEP = Quantity("step time", "s", "step_time_mean_s")
FIT_SERIES = prepare.FIT_SERIES
DESCRIPTION = Description(
    name=NAME,
    title="Step time against micro-batches per step, with the per-step fixed cost",
    paper="not in the paper: what the per-GPU decline of Sec. 4.1 comes from in pipelined runs",
    shows=(
        "The mean time of a measured optimizer step against the micro-batches each pipeline runs in it "
        "(global batch / (data-parallel degree x micro batch)), and a least-squares line over every run: its "
        "intercept is the per-step fixed cost, its slope the time of one micro-batch"
    ),
    series="one line per model and layout family; its fit drawn dashed",
    x=MICROBATCHES,
    quantities=(STEP,),
    category="Scaling",
    paper_result="",
    every_point=True,
)


def microbatches(spec: dict) -> int:
    """Micro-batches a pipeline runs per optimizer step (all pipeline passes of the step)."""
    mb, dp = (
        prepare.as_int(spec.get("micro_batch")),
        prepare.as_int(spec.get("dp_replicate")) * prepare.as_int(spec.get("dp_shard")),
    )
    return prepare.as_int(spec.get("global_batch")) // max(mb * dp, 1)


def fits(tables) -> dict[str, tuple[LineFit, list[dict]]]:
    """Per series: the line fitted to every ok run's mean step time, and the configurations behind it."""
    cfgs = prepare.experiment_configs(tables, EXPERIMENTS)
    if not cfgs:
        return {}
    specs = prepare.specs_by_config(tables)
    series = _series(cfgs, specs)
    runs = prepare.records(tables.runs)
    out: dict[str, tuple[LineFit, list[dict]]] = {}
    for name in sorted(set(series.values())):
        mine = [c for c in cfgs if series[c["config_id"]] == name]
        ids = {c["config_id"] for c in mine}
        pts = [
            (microbatches(specs[r["config_id"]]), r["step_time_mean_s"])
            for r in runs
            if r["config_id"] in ids and r.get("status") == "ok" and r.get("step_time_mean_s") is not None
        ]
        if len({x for x, _ in pts}) >= 2:
            out[name] = (fit_line([x for x, _ in pts], [y for _, y in pts]), mine)
    return out


def fit_text(name: str, f: LineFit) -> str:
    def ci(pair, fmt):
        return f" [{fmt.format(pair[0])}, {fmt.format(pair[1])}]" if pair else " (no CI)"

    return (
        f"{name}: fixed cost {f.intercept:.3f} s{ci(f.intercept_ci95, '{:.3f}')} + "
        f"{1000 * f.slope:.1f} ms{ci(f.slope_ci95 and tuple(1000 * v for v in f.slope_ci95), '{:.1f}')} "
        f"per micro-batch (95% CI; {f.n} runs" + (f", R² {f.r2:.5f})" if f.r2 is not None else ")")
    )


def _series(cfgs: list[dict], specs: dict[str, dict]) -> dict[str, str]:
    """The family and what else differs between families; configurations of one family at one x
    (the same micro-batches per step on more GPUs) stay one series: the fit runs through them all."""
    full = {}
    for c in cfgs:
        full[c["config_id"]] = prepare.config_spec(c, specs)
        c["_microbatches"] = microbatches(full[c["config_id"]])
    return prepare.shown_names(full)


def data(tables, study) -> prepare.FigureData:
    """A point a (family, micro-batches per step): the configurations of a family with the same
    micro-batches per step (its scales that differ only in data-parallel degree) pooled, their
    mean step times in the point's note; the fit runs through every run."""
    fd, cfgs = prepare.begin(DESCRIPTION, tables, study, EXPERIMENTS)
    if not cfgs:
        return fd
    specs = prepare.specs_by_config(tables)
    series = _series(cfgs, specs)
    runs = prepare.records(tables.runs)
    groups: dict[tuple[str, int], list[dict]] = {}
    for c in cfgs:
        groups.setdefault((series[c["config_id"]], c["_microbatches"]), []).append(c)
    for (name, x), mine in sorted(groups.items()):
        mine.sort(key=lambda c: prepare.as_int(c.get("world_size")))
        ids = {c["config_id"] for c in mine}
        times = [
            r["step_time_mean_s"]
            for r in runs
            if r["config_id"] in ids and r.get("status") == "ok" and r.get("step_time_mean_s") is not None
        ]
        s = summarize(times)
        parts = [
            f"{prepare.as_int(c.get('world_size'))} GPUs: {c['step_time_mean_s_mean']:.4g} s"
            for c in mine
            if c.get("step_time_mean_s_mean") is not None
        ]
        row = prepare.config_row(
            mine[0],
            panel=STEP.label,
            series=name,
            x_quantity=MICROBATCHES.label,
            x=x,
            y_quantity=STEP.label,
            y=s.mean,
            ci95_low=s.ci95_low,
            ci95_high=s.ci95_high,
            n_seeds=s.n,
        )
        row.update(
            config_ids=[c["config_id"] for c in mine],
            run_ids=[r for c in mine for r in split_list(c.get("run_ids"))],
            note=("pooled over " if len(mine) > 1 else "") + "; ".join(parts),
        )
        fd.rows.append(row)
    texts = []
    for name, (f, mine) in fits(tables).items():
        top = max(c["_microbatches"] for c in mine)
        for x in sorted({0, *[c["_microbatches"] for c in mine], top}):
            fd.rows.append(
                {
                    "panel": STEP.label,
                    "series": name + FIT_SERIES,
                    "x_quantity": MICROBATCHES.label,
                    "x": x,
                    "y_quantity": STEP.label,
                    "y": f.at(x),
                    "n_seeds": f.n,
                    "status": "fit",
                    "note": fit_text(name, f),
                    "config_ids": [c["config_id"] for c in mine],
                    "run_ids": [],
                }
            )
        texts.append(fit_text(name, f))
    fd.cpu = prepare.is_cpu(cfgs)
    dodged = drawing.dodge_note(fd.rows, x_unit="number of micro-batches per step", every_point=DESCRIPTION.every_point)
    fd.notes += [dodged] if dodged else []
    if any(len(g) > 1 for g in groups.values()):
        fd.notes.append(
            "A point pools a family's scales with the same micro-batches per step (they differ in "
            "data-parallel degree only): mean and 95% CI over all their runs; each scale's mean is in the "
            "CSV's note."
        )
    if texts:
        fd.notes.append(
            "Least-squares line over every run (step time = fixed cost + micro-batches x per micro-batch): "
            + "; ".join(texts)
            + "."
        )
    return fd


def draw(fd: prepare.FigureData, study=None):
    """Each point's mean step time with its interval (markers by sns.scatterplot, hue and style the
    series; the intervals as error bars in the series' colour), each family's fit as a dashed line
    in its colour. A point lying on another family's at its x (h100-azure's one point on h100-eos's
    at 8 micro-batches) is drawn a little right of it (drawing.dodged_x), a family lying on another
    with a marker of its own (drawing.figure_styles), as the line figures draw theirs."""
    import pandas as pd  # heavy: imported only when drawing
    import seaborn as sns  # heavy: imported only when drawing

    fig, axes = drawing.figure_for(fd, ncols=1, panel_w=7.0, panel_h=4.0, legend_rows=drawing.legend_rows_for(fd, 1))
    ax = axes[0]
    colors = drawing.series_colors(sorted({r["series"] for r in fd.rows}, key=drawing.natural))
    valued = [r for r in fd.rows if r.get("y") is not None]
    points = [r for r in valued if not r["series"].endswith(FIT_SERIES)]
    fitted = [r for r in valued if r["series"].endswith(FIT_SERIES)]
    if points:
        names = sorted({r["series"] for r in points}, key=drawing.natural)
        by_series = {s: [r for r in points if r["series"] == s] for s in names}
        styles = drawing.figure_styles(fd, names)
        x_of = drawing.dodged_x(by_series, log_x=False, every_point=DESCRIPTION.every_point)
        frame = pd.DataFrame([{**r, "x": x_of(r)} for r in points])
        sns.scatterplot(
            frame,
            x="x",
            y="y",
            hue="series",
            style="series",
            hue_order=names,
            style_order=names,
            palette=colors,
            markers={s: styles[s][0] for s in names},
            s=25,
            zorder=3,
            ax=ax,
        )
        for series, g in frame.groupby("series", sort=True):
            lo = (g["y"] - g["ci95_low"]).where(g["ci95_low"].notna(), 0.0).clip(lower=0)
            hi = (g["ci95_high"] - g["y"]).where(g["ci95_high"].notna(), 0.0).clip(lower=0)
            ax.errorbar(g["x"], g["y"], yerr=[lo, hi], fmt="none", ecolor=colors[series], capsize=2.5, elinewidth=0.9)
    if fitted:
        sns.lineplot(
            pd.DataFrame(fitted),
            x="x",
            y="y",
            hue="series",
            palette=colors,
            linestyle="--",
            linewidth=1.2,
            estimator=None,
            errorbar=None,
            ax=ax,
        )
    if ax.get_legend() is not None:
        ax.get_legend().remove()  # one legend for the figure
    ax.set(title=STEP.label, xlabel=MICROBATCHES.label, ylabel=STEP.label)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    drawing.figure_legend(fig, axes, ncol=2)
    return fig
