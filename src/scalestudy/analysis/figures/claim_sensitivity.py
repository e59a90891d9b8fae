"""claim_sensitivity: how far each uncertain input of the performance model moves each claim.

Drawn from a prediction study's table data/STUDY/tables/claim_sensitivity.csv, which `scalestudy
model sensitivity` writes (scalestudy.perfmodel.sensitivity; the workflow's rule claim_sensitivity),
not from its experiments. One panel a claim, tornado style: an input a row (named with its low and high
settings), a bar from the claim's central value to its value with the input at its low and at its
high setting, the central value as a line and the paper's value dashed. Reads the table only.
"""

from __future__ import annotations

import math

from scalestudy.analysis.figures import drawing, prepare
from scalestudy.analysis.figures.description import Description, Quantity

NAME = "claim_sensitivity"
EXPERIMENTS = ()  # none: the prediction study's claim_sensitivity table
CLAIMS = ("C1", "C2", "C3", "C4", "HSDP-2048")
WHAT = {
    "C1": "C1: per-GPU throughput, 128 -> 2048 GPUs",
    "C2": "C2: per-GPU power, 128 -> 2048 GPUs",
    "C3": "C3: best TP over FSDP at 2048 GPUs",
    "C4": "C4: MFU, A100 minus H100 at 8 GPUs",
    "HSDP-2048": "HSDP over the best TP/PP at 2048 GPUs",
}
LEVELS = ("low", "high")
VALUE = Quantity("the claim's value", "% or pp", low=None)
DESCRIPTION = Description(
    name=NAME,
    title="Sensitivity of the claims to the model's uncertain inputs",
    paper="not in the paper: C1-C4 and HSDP-2048 of STUDY.md, predicted",
    shows="each claim's predicted value with one uncertain input at its low and at its high setting, the others "
    "as they are",
    series="the input's setting (low, high)",
    x=VALUE,
    quantities=(VALUE,),
    category="Performance model",
    notes=(
        "Ranges: the model's own band corners (cluster uncertainty, the compute box, the overlap slowdown's "
        "[0, 2 s]) or a named alternative (the latency of the tree fitted to the paper's Fig 2, the cuDNN "
        "attention kernel, a GPU-to-GPU spread of 8%, the power limiter's speed side off); each row's source is "
        "in the CSV's note.",
        "Solid line: the claim's central value (the model alone); dashed: the paper's value.",
    ),
)


def _f(v):
    if v in (None, ""):
        return None
    v = float(v)
    return None if math.isnan(v) else v


def data(tables, study) -> prepare.FigureData:
    fd = prepare.FigureData(
        NAME, DESCRIPTION.heading(True), panels=[WHAT[c] for c in CLAIMS], description=DESCRIPTION, predicted=True
    )
    table = getattr(tables, "claim_sensitivity", None)
    rows = prepare.records(table) if table is not None and len(table) else []
    for r in rows:
        if r["claim"] not in WHAT:
            continue
        paper = _f(r.get("paper"))
        fd.rows.append(
            {
                "panel": WHAT[r["claim"]],
                "series": r["level"],
                "x_quantity": "input",
                "x": r["input"],
                "y_quantity": f"{r['claim']} ({str(r['unit']).strip()})",
                "y": _f(r["value"]),
                "n_seeds": 1,
                "status": "ok",
                "label": r["setting"],
                "note": f"central {_f(r['central']):+.2f}; paper {'none' if paper is None else f'{paper:+.2f}'}; "
                f"{r['source']}",
                "config_ids": [],
                "run_ids": [],
                "_central": _f(r["central"]),
                "_paper": paper,
            }
        )
    if not fd.rows:
        fd.empty_reason = (
            "no claim_sensitivity table: `scalestudy model sensitivity --study STUDY` writes it for a prediction study"
        )
    return fd


def draw(fd: prepare.FigureData, study=None):
    """A horizontal bar a setting (matplotlib's barh, left at the central value), in the level's colour."""
    colors = dict(zip(LEVELS, drawing.palette(2)))
    fig, axes = drawing.figure_for(fd, ncols=2, panel_w=5.6, panel_h=2.9, legend_rows=1)
    for ax, panel in zip(axes, fd.panels):
        mine = [r for r in fd.rows if r["panel"] == panel]
        if not mine:
            drawing.message_panel(ax, fd.empty_reason or "no value")
            continue
        inputs = list(dict.fromkeys(r["x"] for r in mine))
        central = mine[0]["_central"]
        ticks = []
        for i, name in enumerate(inputs):
            setting = {}
            for k, level in enumerate(LEVELS):
                (r,) = [r for r in mine if r["x"] == name and r["series"] == level]
                setting[level] = r["label"]
                ax.barh(
                    i + (k - 0.5) * 0.38,
                    r["y"] - central,
                    left=central,
                    height=0.36,
                    color=colors[level],
                    label=level if i == 0 else None,
                )
            ticks.append(f"{name} ({setting['low']} / {setting['high']})")
        ax.axvline(central, color="black", lw=0.9)
        if mine[0]["_paper"] is not None:
            ax.axvline(mine[0]["_paper"], color="#b2182b", lw=0.9, ls="--")
        ax.set_yticks(range(len(inputs)), ticks, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(mine[0]["y_quantity"])
        ax.set_title(panel, fontsize=9)
        ax.margins(x=0.25)
    for ax in axes[len(fd.panels) :]:
        ax.set_visible(False)
    drawing.figure_legend(fig, [axes[0]], ncol=2, title="input at its")
    return fig
