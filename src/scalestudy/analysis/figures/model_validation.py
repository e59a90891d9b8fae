"""model_validation: the performance model against published runs it was never fitted to.

Not a figure of a study's experiments: it is registered in figures.LEDGER_FIGURES (listed with the
study's figures, caption and rebuild command from the same description) and draws the external
ledger's CSV, which `scalestudy model validate --external --out CSV` writes
(scalestudy.perfmodel.external; the workflow's rule model_validation, for a predicted study).
Left: predicted against published tokens/s per GPU (log-log, the model's band as an error bar,
y = x and +-10% lines); right: each row's error, grouped by source. Rows the model cannot express
(float8, torch.compile, context parallelism) are counted in a note, never dropped silently.
Reads the CSV only: no import of the model, the harness or torch.
"""

from __future__ import annotations

import csv
from pathlib import Path

from scalestudy.analysis.figures import drawing, prepare, save
from scalestudy.analysis.figures.description import Description, Quantity
from scalestudy.measure.code_version import ledger_figure_version

NAME = "model_validation"
LEDGER_FILE = "model_validation_ledger.csv"  # beside the figure: figures/STUDY/model_validation_ledger.csv
PUBLISHED = Quantity("published tokens/s per GPU", "tokens/s", low=0.0)
PREDICTED = Quantity("predicted tokens/s per GPU", "tokens/s", low=0.0)
ERROR = Quantity("prediction error", "%", low=None)
DESCRIPTION = Description(
    name=NAME,
    title="Performance model against published training runs (external validation ledger)",
    paper="not in the paper: workflow/validation/external.yaml",
    shows="predicted against published tokens/s per GPU, and the relative error of each row",
    series="a source of published numbers (torchtitan H100, torchtitan A100, Narayanan et al. 2021 Table 1)",
    x=PUBLISHED,
    quantities=(PREDICTED, ERROR),
    category="Performance model",
    notes=(
        "Validation, not calibration: no parameter of the model is fitted to these rows; the model is "
        "calibrated on one H200 (data/h200-reference) and the H200 duty-cycle power measurement only.",
        "Error bars: the model's band (the corners of its uncertainty box). Narayanan et al. report "
        "teraFLOP/s per GPU; converted to tokens/s by their own FLOP formula.",
    ),
)
PANELS = ("predicted vs published", "error by row")


def read_ledger_csv(path: Path | str) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def ledger_model_version(ledger_csv: Path | str) -> str | None:
    """The model version that predicted the ledger (its model_version column), None if it names none
    or more than one."""
    versions = {r.get("model_version") or None for r in read_ledger_csv(ledger_csv)}
    return versions.pop() if len(versions) == 1 else None


def _f(v):
    return float(v) if v not in (None, "") else None


def data(ledger_csv: Path | str) -> prepare.FigureData:
    desc = DESCRIPTION
    fd = prepare.FigureData(NAME, desc.heading(True), panels=list(PANELS), description=desc, predicted=True)
    rows = read_ledger_csv(ledger_csv)
    skipped: dict[str, int] = {}
    for r in rows:
        if r["not_expressible"]:
            skipped[r["group"]] = skipped.get(r["group"], 0) + 1
            continue
        pub, pred = _f(r["published_tokens_per_s_per_device"]), _f(r["predicted_tokens_per_s_per_device"])
        lo, hi = _f(r["band_low"]), _f(r["band_high"])
        base = {
            "series": r["group"],
            "x_quantity": PUBLISHED.label,
            "x": pub,
            "n_seeds": 1,
            "status": "ok",
            "note": r["source"],
            "label": r["id"],
            "config_ids": r["configuration"],
            "run_ids": r["id"],
        }
        fd.rows.append(
            {**base, "panel": PANELS[0], "y_quantity": PREDICTED.label, "y": pred, "ci95_low": lo, "ci95_high": hi}
        )
        err = _f(r["error_pct"])
        fd.rows.append(
            {
                **base,
                "panel": PANELS[1],
                "y_quantity": ERROR.label,
                "y": err,
                "ci95_low": None if lo is None else 100 * (lo / pub - 1),
                "ci95_high": None if hi is None else 100 * (hi / pub - 1),
            }
        )
    if skipped:
        fd.notes.append(
            "Not expressible, listed in the ledger and its CSV but not drawn: "
            + ", ".join(f"{n} rows of {g}" for g, n in sorted(skipped.items()))
            + " (float8, torch.compile, context parallelism or async TP)."
        )
    fd.notes += desc.footnotes(True)
    if not fd.rows:
        fd.empty_reason = "no expressible row in the ledger"
    return fd


def draw(fd: prepare.FigureData):
    """Left: sns.scatterplot of predicted against published (hue the source), the model's band as
    vertical bars in the point's colour; right: sns.barplot of each row's error (hue the source)."""
    import pandas as pd  # heavy: imported only when drawing
    import seaborn as sns  # heavy: imported only when drawing

    series = sorted({r["series"] for r in fd.rows})
    colors = dict(zip(series, drawing.palette(len(series))))
    fig, axes = drawing.figure_for(fd, ncols=2, panel_w=4.6, panel_h=3.6, legend_rows=1)
    drawing.header(fig, fd, None)
    scatter, bars = axes[0], axes[1]
    if fd.empty_reason:
        drawing.message_panel(scatter, fd.empty_reason)
        drawing.message_panel(bars, fd.empty_reason)
        drawing.footer(fig)
        return fig
    pts = pd.DataFrame([r for r in fd.rows if r["panel"] == PANELS[0]])
    scatter.vlines(
        pts["x"],
        pts["ci95_low"].fillna(pts["y"]),
        pts["ci95_high"].fillna(pts["y"]),
        colors=[colors[s] for s in pts["series"]],
        lw=0.8,
    )
    sns.scatterplot(pts, x="x", y="y", hue="series", hue_order=series, palette=colors, s=20, ax=scatter)
    scatter.get_legend().remove()  # one legend for the figure
    lo = min(pts["x"].min(), pts["y"].min()) * 0.7
    hi = max(pts["x"].max(), pts["y"].max()) * 1.4
    scatter.plot([lo, hi], [lo, hi], color="black", lw=0.8)
    for k in (0.9, 1.1):
        scatter.plot([lo, hi], [lo * k, hi * k], color="#999999", lw=0.6, ls="--")
    scatter.set(
        xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel=PUBLISHED.label, ylabel=PREDICTED.label
    )
    scatter.set_title("predicted vs published (dashed: +-10%)", fontsize=9)
    errs = pd.DataFrame([r for r in fd.rows if r["panel"] == PANELS[1]]).sort_values(["series", "x"])
    errs["row"] = [str(k) for k in range(len(errs))]  # a bar a row: row ids repeat across sources
    sns.barplot(
        errs,
        x="y",
        y="row",
        hue="series",
        hue_order=series,
        palette=colors,
        order=list(errs["row"]),
        dodge=False,
        legend=False,
        orient="h",
        ax=bars,
    )
    bars.set_yticks(range(len(errs)), errs["label"], fontsize=7)
    bars.axvline(0, color="black", lw=0.8)
    for v in (-10, 10):
        bars.axvline(v, color="#999999", lw=0.6, ls="--")
    bars.set(xlabel=ERROR.label, ylabel="")
    bars.set_title("error of each row", fontsize=9)
    drawing.figure_legend(fig, [scatter], ncol=3)
    drawing.footer(fig)
    return fig


def render(ledger_csv: Path | str, out_base: Path | str) -> list[Path]:
    """Write out_base.pdf, .png and .csv (the figure's rows) from the ledger CSV; they record this
    analysis code and the model version the ledger names (code_version.ledger_figure_version)."""
    out_base = Path(out_base)
    out_base.parent.mkdir(parents=True, exist_ok=True)
    import matplotlib  # heavy: imported only when drawing

    fd = data(ledger_csv)
    version = ledger_figure_version(ledger_model_version(ledger_csv))
    with matplotlib.rc_context(drawing.style()):
        fig = draw(fd)
        paths = save.save(fig, out_base, ("pdf", "png"), version)
    paths.append(save.write_rows(out_base.with_name(out_base.name + ".csv"), fd.rows, version))
    return paths
