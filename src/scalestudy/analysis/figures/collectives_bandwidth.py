"""Collectives (the paper's Fig. 2): bus bandwidth against message size, one panel per
collective, one line per node count (per world size when every run used one node), error bars
from seeds. Sizes and bus bandwidths as nccl-tests counts them (scalestudy.bandwidth). Data:
the study's collectives benchmark runs (study.collectives)."""

from __future__ import annotations

from scalestudy.analysis.figures import common

NAME = "collectives_bandwidth"
EXPERIMENTS = ("collectives",)
TITLE = "Collectives: bus bandwidth against message size"
X_QUANTITY = "message size (bytes, nccl-tests convention)"
OP_ORDER = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
FAILED_PANEL = "all collectives"


def _config_id(run_id: str) -> str:
    return run_id.rsplit("-seed", 1)[0]


def data(tables, study) -> common.FigureData:
    fd = common.FigureData(NAME, TITLE)
    summary = common.records(tables.collectives_summary)
    failed = [r for r in common.records(tables.collectives) if r.get("op") is None]
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
    fd.panels = [f"{op}: bus bandwidth (GB/s)" for op in ops]
    for r in summary:
        run_ids = common.split_list(r.get("run_ids"))
        fd.rows.append({"panel": f"{r['op']}: bus bandwidth (GB/s)", "series": series(r), "x_quantity": X_QUANTITY,
                        "x": int(r["size_bytes"]), "y_quantity": "bus bandwidth (GB/s)", "y": r.get("busbw_GBps_mean"),
                        "ci95_low": r.get("busbw_GBps_ci95_low"), "ci95_high": r.get("busbw_GBps_ci95_high"),
                        "n_seeds": int(r.get("busbw_GBps_n") or 0),
                        "status": "ok" if r.get("all_correct") is not False else "wrong results",
                        "note": "predicted" if "PREDICTED" in str(r.get("note") or "") else None,
                        "label": f"{r['nodes']} x {r['procs_per_node']} ({r['dtype']})",
                        "config_ids": sorted({_config_id(x) for x in run_ids}), "run_ids": run_ids})
    for r in failed:
        fd.rows.append({"panel": FAILED_PANEL, "series": series(r), "x_quantity": X_QUANTITY, "x": None,
                        "y_quantity": "bus bandwidth (GB/s)", "y": None, "status": r.get("status"),
                        "note": str(r.get("error") or "")[:200], "label": None,
                        "config_ids": [r["config_id"]], "run_ids": [r["run_id"]]})
    if not summary:
        fd.panels = ["bus bandwidth"]
        fd.empty_reason = "every collectives run failed: " + "; ".join(
            f"{r['run_id']} ({r['status']})" for r in failed)[:300]
    fd.cpu = any(r.get("device") == "cpu" for r in everything)
    fd.notes = [common.ERRORBAR_NOTE,
                "busbw = algbw x 2(n-1)/n (all_reduce) or (n-1)/n (all_gather, reduce_scatter), as nccl-tests."]
    if any("PREDICTED" in str(r.get("note") or "") for r in summary):
        fd.notes = [common.PREDICTED_NOTE.replace("its error bar is the model's band (the corners of its uncertainty "
                                                  "box), not a CI over seeds", "no error bars")] + fd.notes[1:]
    for r in failed:
        fd.notes.append(f"failed: {r['run_id']} ({r['status']})")
    return fd


def draw(fd: common.FigureData, study):
    from scalestudy.bandwidth import format_size

    fig, axes = common.figure_for(fd)
    common.draw_lines(fig, axes, fd, x_format=lambda x: format_size(int(x)))
    failed = [r for r in fd.rows if r["panel"] == FAILED_PANEL]
    for ax in axes:
        ax.set_ylabel("bus bandwidth (GB/s)")
        if failed:
            for r in failed:
                ax.plot([], [], marker="x", linestyle="none", color="#b00020", markersize=7, mew=2,
                        label=f"{r['series']}: {r['status']} (no data)")
            ax.legend(loc="best", frameon=True)
    return fig
