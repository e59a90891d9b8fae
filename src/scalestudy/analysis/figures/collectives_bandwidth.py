"""Collectives (the paper's Fig. 2): bus bandwidth against message size, one panel per
collective, one line per node count (per world size when every run used one node), error bars
from seeds. Sizes and bus bandwidths as nccl-tests counts them (scalestudy.measure.bandwidth). Data:
the study's collectives benchmark runs (study.collectives)."""

from __future__ import annotations

from scalestudy.measure.csv_format import split_list
from scalestudy.analysis.figures import drawing, prepare
from scalestudy.analysis.figures.description import Description, Quantity

NAME = "collectives_bandwidth"
EXPERIMENTS = ("collectives",)
SIZE = Quantity("message size", "bytes, binary units, nccl-tests convention", low=0.0)
BUSBW = Quantity("bus bandwidth", "GB/s", "busbw_GBps")
DESCRIPTION = Description(
    name=NAME,
    title="Collectives: bus bandwidth against message size",
    paper="the paper's Fig. 2",
    shows=(
        "Bus bandwidth against message size (log-2 axis, 1 KiB to 16 GiB) for AllReduce beside AllGather and "
        "ReduceScatter, one panel per collective"
    ),
    series=(
        "one line per node count (per world size when every run used one node), coloured from dark to light "
        "in the order of the count"
    ),
    x=SIZE,
    quantities=(BUSBW,),
    category="Communication",
    notes=("busbw = algbw x 2(n-1)/n (all_reduce) or (n-1)/n (all_gather, reduce_scatter), as nccl-tests.",),
)
OP_ORDER = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
OP_NAMES = {
    "all_reduce": "AllReduce",
    "all_gather": "AllGather",
    "reduce_scatter": "ReduceScatter",
    "all_to_all": "AllToAll",
}
FAILED_PANEL = "all collectives"
BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def binary_size(n: float) -> str:
    """1024 -> '1 KiB', 16 << 30 -> '16 GiB', 1536 -> '1.5 KiB'."""
    k = 0
    while n >= 1024 and k < len(BINARY_UNITS) - 1:
        n /= 1024
        k += 1
    return f"{n:.3g} {BINARY_UNITS[k]}"


def series_count(series: str) -> int:
    """The number a series is named by (4 nodes -> 4), for ordering the legend and palette."""
    head = series.split(" ", 1)[0]
    return int(head) if head.isdigit() else 1 << 30


def _config_id(run_id: str) -> str:
    return run_id.rsplit("-seed", 1)[0]


def data(tables, study) -> prepare.FigureData:
    fd = prepare.FigureData(
        NAME, DESCRIPTION.title, description=DESCRIPTION, predicted=prepare.is_predicted(tables, study)
    )
    summary = prepare.records(tables.collectives_summary)
    failed = [r for r in prepare.records(tables.collectives) if r.get("op") is None]
    if not summary and not failed:
        fd.panels = ["bus bandwidth"]
        fd.empty_reason = f"no collectives benchmark runs in study {study.name!r}"
        return fd
    everything = summary + failed
    by_nodes = len({r["nodes"] for r in everything}) > 1

    def series(r):
        n = int(r["nodes"])
        if by_nodes:
            return f"{n} node{'s' if n > 1 else ''}"
        return f"{int(r['world_size'])} ranks"

    ops = sorted({r["op"] for r in summary}, key=lambda o: (OP_ORDER.index(o) if o in OP_ORDER else 99, o))
    fd.panels = [panel_name(op) for op in ops]
    for r in summary:
        run_ids = split_list(r.get("run_ids"))
        st = prepare.check_range(
            {
                "y": r.get("busbw_GBps_mean"),
                "ci95_low": r.get("busbw_GBps_ci95_low"),
                "ci95_high": r.get("busbw_GBps_ci95_high"),
            },
            BUSBW,
        )
        row = {
            "panel": panel_name(r["op"]),
            "series": series(r),
            "x_quantity": SIZE.label,
            "x": int(r["size_bytes"]),
            "y_quantity": BUSBW.label,
            "y": st["y"],
            "ci95_low": st["ci95_low"],
            "ci95_high": st["ci95_high"],
            "n_seeds": int(r.get("busbw_GBps_n") or 0),
            "status": "ok" if r.get("all_correct") is not False else "wrong results",
            "note": "; ".join(
                n
                for n in (
                    "predicted by the model" if "PREDICTED" in str(r.get("note") or "") else None,
                    st.get("truncated"),
                )
                if n
            )
            or None,
            "label": f"{r['nodes']} x {r['procs_per_node']} ({r['dtype']})",
            "config_ids": sorted({_config_id(x) for x in run_ids}),
            "run_ids": run_ids,
        }
        if st.get("invalid"):
            row.update(status=prepare.INVALID, note=st["invalid"], y=None, ci95_low=None, ci95_high=None)
        fd.rows.append(row)
    for r in failed:
        fd.rows.append(
            {
                "panel": FAILED_PANEL,
                "series": series(r),
                "x_quantity": SIZE.label,
                "x": None,
                "y_quantity": BUSBW.label,
                "y": None,
                "status": r.get("status"),
                "note": str(r.get("error") or "")[:200],
                "label": None,
                "config_ids": [r["config_id"]],
                "run_ids": [r["run_id"]],
            }
        )
    if not summary:
        fd.panels = ["bus bandwidth"]
        fd.empty_reason = (
            "every collectives run failed: " + "; ".join(f"{r['run_id']} ({r['status']})" for r in failed)[:300]
        )
    fd.cpu = any(r.get("device") == "cpu" for r in everything)
    fd.predicted = fd.predicted or any("PREDICTED" in str(r.get("note") or "") for r in summary)
    for r in failed:
        fd.notes.append(f"failed: {r['run_id']} ({r['status']})")
    return fd


def panel_name(op: str) -> str:
    return f"{OP_NAMES.get(op, op)}: {BUSBW.label}"


def draw(fd: prepare.FigureData, study):
    series = sorted({r["series"] for r in fd.rows}, key=lambda s: (series_count(s), s))
    colors = dict(zip(series, drawing.sequential(len(series))))
    fig, axes = drawing.figure_for(fd, legend_rows=drawing.legend_rows_for(fd))
    failed = [r for r in fd.rows if r["panel"] == FAILED_PANEL]
    drawing.draw_lines(
        fig, axes, fd, colors=colors, order=lambda s: (series_count(s), s), legend=False, x_format=binary_size
    )
    from matplotlib.ticker import FuncFormatter, LogLocator  # heavy: imported only when drawing

    for ax in axes:  # a tick every 4x or more (at most 9), in binary units
        ax.xaxis.set_major_locator(LogLocator(base=4, numticks=9))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: binary_size(v)))
        ax.tick_params(axis="x", labelrotation=45)
        ax.set_ylabel(BUSBW.label)
    if failed:
        for r in failed:
            axes[0].plot(
                [],
                [],
                marker="x",
                linestyle="none",
                color="#b00020",
                markersize=7,
                mew=2,
                label=f"{r['series']}: {r['status']} (no data)",
            )
    drawing.figure_legend(fig, axes, ncol=6, order=lambda s: (series_count(s), s))
    return fig
