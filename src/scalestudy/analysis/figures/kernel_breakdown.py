"""Kernel-level breakdown (the paper's Figs 3-5 and 13): computation, communication and exposed
communication per iteration as grouped bars at each GPU count, one panel per strategy family,
from the runs' profiler traces, and the exposed share of the step time. Configurations:
experiment `kernel_breakdown`.

Per iteration: each traced rank's totals over its traced steps divided by its steps, then the
mean over the traced ranks (run_table); GPU traces time kernels, CPU (gloo) traces time
operators, and the two are not comparable."""

from __future__ import annotations

from scalestudy.measure.csv_format import split_list
from scalestudy.analysis.figures import drawing, prepare
from scalestudy.analysis.figures.description import Description, Quantity

NAME = "kernel_breakdown"
EXPERIMENTS = ("kernel_breakdown",)
GPUS = Quantity("GPUs", "world size")
PARTS = (
    Quantity("computation per iteration", "ms", "compute_s", 1e3),
    Quantity("communication per iteration", "ms", "comm_s", 1e3),
    Quantity("exposed communication per iteration", "ms", "exposed_comm_s", 1e3),
)
SHARE = Quantity("exposed communication share of step", "%", "exposed_comm_share", 100.0, 0.0, 100.0)
DESCRIPTION = Description(
    name=NAME,
    title="Computation, communication and exposed communication per iteration",
    paper="the paper's Figs 3-5 and 13",
    shows=(
        "Computation, communication and exposed communication (communication not overlapped by computation) "
        "per iteration as grouped bars at each GPU count, and the exposed share of the step time against the "
        "number of GPUs"
    ),
    series=(
        "one bar panel per strategy family (with what else differs: model, backend, compile); in the share "
        "panel one line per strategy family"
    ),
    x=GPUS,
    quantities=(*PARTS, SHARE),
    category="Communication",
    notes=(drawing.FAILED_NOTE,),
)
PART_NAMES = {q.label: q.name.replace(" per iteration", "") for q in PARTS}


def panel_of(group: str, single: bool) -> str:
    return "per iteration (ms)" if single else f"{group}: per iteration (ms)"


def data(tables, study) -> prepare.FigureData:
    fd, cfgs = prepare.begin(DESCRIPTION, tables, study, EXPERIMENTS, panels=[], empty_panels=["per iteration (ms)"])
    if not cfgs:
        return fd
    names = prepare.series_names(cfgs, prepare.specs_by_config(tables), "world_size")
    groups = sorted(set(names.values()))
    single = len(groups) == 1
    fd.panels = [panel_of(g, single) for g in groups] + [SHARE.label]
    for c in cfgs:
        g = names[c["config_id"]]
        note = None
        if c.get("status") in ("ok", "partial") and c.get("exposed_comm_s_mean") is None:
            note = "no trace data"
        for q in PARTS:
            fd.rows.append(
                prepare.config_row(
                    c,
                    panel=panel_of(g, single),
                    series=PART_NAMES[q.label],
                    x_quantity=GPUS.label,
                    x=c["world_size"],
                    y_quantity=q.label,
                    **prepare.stat(c, q.metric, q.scale, q),  # type: ignore[arg-type]  # the figure's quantities name a metric
                    **({"note": note} if note else {}),
                )
            )
        fd.rows.append(
            prepare.config_row(
                c,
                panel=SHARE.label,
                series=g,
                x_quantity=GPUS.label,
                x=c["world_size"],
                y_quantity=SHARE.label,
                **prepare.stat(c, SHARE.metric, SHARE.scale, SHARE),  # type: ignore[arg-type]  # the figure's quantities name a metric
                **({"note": note} if note else {}),
            )
        )
    fd.cpu = prepare.is_cpu(cfgs)
    comm, exposed = (PART_NAMES[q.label] for q in PARTS[1:])
    if _all_exposed(fd.rows, comm, exposed):  # two identical bars would say nothing: one bar, and the note says why
        fd.rows = [r for r in fd.rows if r["series"] != exposed]
        fd.notes.append(
            f"Every {comm} here is {exposed} (none overlaps computation, as with CPU gloo), so one bar shows both."
        )
    drawing.leave_out_flat_panels(fd)
    kinds = sorted({k for c in cfgs for k in split_list(c.get("exposed_comm_kind"))})
    fd.notes[:0] = [
        "Measured from profiler traces"
        + (f" ({', '.join(kinds)})" if kinds else "")
        + ": exposed = communication not overlapped by computation; per iteration, mean over traced ranks."
    ]
    if fd.predicted:
        fd.notes[:1] = [
            f"Predicted by the model ({', '.join(kinds) or 'scalestudy.perfmodel'}): exposed = communication "
            "not overlapped by computation, per iteration."
        ]
    return fd


def _all_exposed(rows: list[dict], comm: str, exposed: str, tol: float = 0.01) -> bool:
    """Whether each configuration's exposed communication equals its communication (and some is > 0)."""
    by: dict = {}
    for r in rows:
        if r["series"] in (comm, exposed) and r.get("y") is not None:
            by.setdefault((r["panel"], r["x"], tuple(r["config_ids"])), {})[r["series"]] = r["y"]
    pairs = [(v[comm], v[exposed]) for v in by.values() if len(v) == 2]
    return bool(pairs) and any(c > 0 for c, _ in pairs) and all(abs(c - e) <= tol * max(c, e) for c, e in pairs)


def draw(fd: prepare.FigureData, study):
    """A panel of grouped bars a strategy family (sns.barplot, hue the part, its interval as the error
    bar), one y scale for them all; the share panel's lines (drawing.draw_lines)."""
    import seaborn as sns  # heavy: imported only when drawing

    groups = [p for p in fd.panels if p != SHARE.label]
    parts = [p for p in PART_NAMES.values() if any(r["series"] == p for r in fd.rows)]
    fig, axes = drawing.figure_for(fd, legend_rows=drawing.legend_rows_for(fd))
    for ax in axes[1 : len(groups)]:
        ax.sharey(axes[0])  # the per-strategy panels show the same quantity (ms per iteration): one y scale
    for ax, panel in zip(axes, groups):
        rows = [r for r in fd.rows if r["panel"] == panel]
        worlds = sorted({r["x"] for r in rows})
        drawn = [r for r in rows if r.get("y") is not None]
        if drawn:
            sns.barplot(
                drawing.long_frame(drawn, lambda r: f"{r['x']:g}"),
                x="x",
                y="y",
                hue="series",
                order=[f"{w:g}" for w in worlds],
                hue_order=parts,
                palette=drawing.palette(len(parts)),
                estimator="median",
                errorbar=("pi", 100),
                capsize=0.2,
                err_kws={"linewidth": 0.8},
                ax=ax,
            )
            ax.get_legend().remove()  # one legend for the figure
        else:
            ax.set(
                xticks=range(len(worlds)),
                xticklabels=[f"{w:g}" for w in worlds],
                xlim=(-0.6, len(worlds) - 0.4),
                ylim=(0, 1),
            )
        failed = [k for k, w in enumerate(worlds) if not any(r["x"] == w for r in drawn)]
        drawing.mark_failed(ax, failed, ["#b00020"] * len(failed))
        ax.tick_params(axis="x", labelrotation=45 if len(worlds) > 6 else 0)
        ax.set(title=panel, xlabel=GPUS.label, ylabel="time per iteration (ms)")
        drawing.compact_ticks(ax)
    share_fd = prepare.FigureData(
        fd.name,
        fd.title,
        rows=[r for r in fd.rows if r["panel"] == SHARE.label],
        panels=[SHARE.label],
        description=fd.description,
    )
    share_ax = axes[len(groups) : len(groups) + 1] if SHARE.label in fd.panels else []
    shares = sorted({r["series"] for r in share_fd.rows})
    drawing.draw_lines(fig, share_ax, share_fd, colors=drawing.series_colors(shares, after=len(parts)), legend=False)
    drawing.figure_legend(fig, axes, order=lambda s: (parts.index(s) if s in parts else len(parts), drawing.natural(s)))
    return fig
