"""What every figure shares: its data rows (= its CSV), styling, headers, empty panels, saving.

A figure is two steps: `data(tables, study) -> FigureData` computes the rows to plot from the
study's tables (unit conversions included), and `draw(fig, data)` plots those rows and nothing
else, so that `<name>.csv` holds exactly the numbers plotted, each row with the run ids behind it.

CSV columns (FIGURE_COLUMNS): panel, series, x_quantity, x, y_quantity, y, ci95_low, ci95_high
(Student-t 95% CI over seeds, empty with one seed), n_seeds (seeds with a value), status (the
configuration's status; a failed one has an empty y and is drawn as an 'x' with its status),
note, label (the study's name for the strategy), config_ids and run_ids (';'-joined).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from scalestudy.analysis.csv_format import split_list, write_csv  # noqa: F401 (split_list re-exported)

FIGURE_COLUMNS = ["panel", "series", "x_quantity", "x", "y_quantity", "y", "ci95_low", "ci95_high", "n_seeds",
                  "status", "note", "label", "config_ids", "run_ids"]
FORMATS = ("pdf", "png", "csv")
CPU_WARNING = "CPU smoke data — not comparable to the paper"
ERRORBAR_NOTE = "Error bars: Student-t 95% confidence interval over seeds (none where n=1)."
PREDICTED_NOTE = ("PREDICTED by scalestudy.perfmodel, not measured: every point marked 'predicted' in the CSV; its "
                  "error bar is the model's band (the corners of its uncertainty box), not a CI over seeds.")
FAILED_NOTE = "x: a configuration that failed (its status written next to it) or has no value."
PDF_METADATA = {"CreationDate": None, "ModDate": None, "Producer": "scalestudy", "Creator": "scalestudy"}
PNG_METADATA = {"Software": "scalestudy"}
LAYOUT_NAMES = {"fsdp": "FSDP", "hsdp": "HSDP", "ddp": "DDP", "tp": "TP", "pp": "PP"}


@dataclass
class FigureData:
    name: str
    title: str
    rows: list[dict] = field(default_factory=list)
    panels: list[str] = field(default_factory=list)  # drawing order
    empty_reason: str | None = None  # the explicit panel of a figure without data
    cpu: bool = False
    notes: list[str] = field(default_factory=list)


# ---- data helpers -------------------------------------------------------------------
def _none(v):
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def records(df) -> list[dict]:
    """DataFrame rows as dicts, NaN as None, numpy scalars as Python numbers."""
    out = []
    for rec in df.to_dict("records"):
        row = {}
        for k, v in rec.items():
            if hasattr(v, "item"):
                v = v.item()
            row[k] = _none(v)
        out.append(row)
    return out


def experiment_configs(tables, experiment: str | Iterable[str]) -> list[dict]:
    names = {experiment} if isinstance(experiment, str) else set(experiment)
    return [r for r in records(tables.summary) if names & set(split_list(r.get("experiments")))]


def empty_reason(study, experiments: Iterable[str]) -> str:
    return (f"no runs of experiment {' / '.join(repr(e) for e in experiments)} in study {study.name!r}")


def begin(name: str, title: str, tables, study, experiments, *, panels: Iterable[str] = (),
          empty_panels: Iterable[str] | None = None) -> tuple[FigureData, list[dict]]:
    """A figure's data and the configurations of its experiments; without any, the data say why
    (drawn as an explicit empty panel)."""
    fd = FigureData(name, title, panels=list(panels))
    cfgs = experiment_configs(tables, experiments)
    if not cfgs:
        if empty_panels is not None:
            fd.panels = list(empty_panels)
        fd.empty_reason = empty_reason(study, experiments)
    return fd, cfgs


def is_cpu(cfgs: list[dict]) -> bool:
    return any(c.get("device") == "cpu" for c in cfgs)


def layout_name(layout: str | None) -> str:
    return "+".join(LAYOUT_NAMES.get(p, p.upper()) for p in (layout or "?").split("+"))


def stat(cfg: dict, metric: str, scale: float = 1.0) -> dict:
    """y, ci95_low, ci95_high and n_seeds of `metric` in a summary row, times scale."""
    def sc(v):
        return None if v is None else v * scale

    n = cfg.get(f"{metric}_n")
    return {"y": sc(cfg.get(f"{metric}_mean")), "ci95_low": sc(cfg.get(f"{metric}_ci95_low")),
            "ci95_high": sc(cfg.get(f"{metric}_ci95_high")), "n_seeds": int(n) if n is not None else 0}


def config_row(cfg: dict, **kw) -> dict:
    row = {"status": cfg.get("status"), "label": cfg.get("label"), "config_ids": [cfg["config_id"]],
           "run_ids": split_list(cfg.get("run_ids"))}
    if cfg.get("status") not in ("ok", "partial") and cfg.get("error"):
        row["note"] = str(cfg["error"])[:200]
    elif cfg.get("status") == "partial":
        row["note"] = f"{cfg.get('n_ok')} of {cfg.get('n_seeds')} seeds ok; failed: {str(cfg.get('error'))[:150]}"
    row.update(kw)
    return row


def distinct_series(cfgs: list[dict], x_col: str, levels: list[Callable[[dict], str]]) -> dict[str, str]:
    """A series name per config: the first naming level under which no two configs share (name, x)."""
    for level in levels:
        names = {c["config_id"]: level(c) for c in cfgs}
        keys = [(names[c["config_id"]], c.get(x_col)) for c in cfgs]
        if len(set(keys)) == len(keys):
            return names
    return {c["config_id"]: f"{levels[-1](c)} [{c['config_id']}]" for c in cfgs}


def mfu_note(cfgs: list[dict]) -> str | None:
    sources = sorted({s for c in cfgs for s in split_list(c.get("mfu_peak_source"))})
    formulas = sorted({str(c["flops_formula"]) for c in cfgs if c.get("flops_formula")})
    if not sources and not formulas:
        return None
    return (f"MFU = tokens/s per device x FLOPs per token / peak; FLOPs per token: {', '.join(formulas) or '?'}; "
            f"peak from: {', '.join(sources) or '?'} (the runs' device_peak records).")


def metric_rows(cfgs: list[dict], panels: list[tuple[str, str, float]], series: dict[str, str], x_col: str,
                x_quantity: str) -> list[dict]:
    """One row per (panel, config): panels are (panel title, summary metric, scale)."""
    rows = []
    for panel, metric, scale in panels:
        for c in cfgs:
            rows.append(config_row(c, panel=panel, series=series[c["config_id"]], x_quantity=x_quantity,
                                   x=c.get(x_col), y_quantity=panel, **stat(c, metric, scale)))
    return rows


def sort_rows(rows: list[dict], panels: list[str]) -> list[dict]:
    order = {p: i for i, p in enumerate(panels)}

    def key(r):
        x = r.get("x")
        return (order.get(r.get("panel"), len(order)), str(r.get("series")), 0 if isinstance(x, (int, float)) else 1,
                x if isinstance(x, (int, float)) else 0, str(x), ";".join(r.get("config_ids") or []))
    return sorted(rows, key=key)


def write_rows(path: Path, rows: list[dict]) -> Path:
    return write_csv(path, FIGURE_COLUMNS, rows)


def mark_predicted(fd: FigureData, tables) -> None:
    """Mark the rows of predicted configurations (summary kind `predicted`, scalestudy.perfmodel):
    note `predicted` on each (after any status note), and the figure's note saying so."""
    summary = getattr(tables, "summary", None)
    if summary is None or "kind" not in getattr(summary, "columns", []):
        return
    pred = {r["config_id"] for r in records(summary) if r.get("kind") == "predicted"}
    hit = False
    for row in fd.rows:
        if pred & set(row.get("config_ids") or []):
            row["note"] = "predicted" + (f"; {row['note']}" if row.get("note") else "")
            hit = True
    if hit:
        fd.notes = [PREDICTED_NOTE] + [n for n in fd.notes if n != ERRORBAR_NOTE]


# ---- drawing helpers ----------------------------------------------------------------
def style() -> dict:
    import seaborn as sns

    rc: dict = {}
    rc.update(sns.axes_style("whitegrid"))
    rc.update(sns.plotting_context("paper", font_scale=1.1))
    rc.update({"svg.hashsalt": "scalestudy", "pdf.fonttype": 42, "ps.fonttype": 42, "font.family": "DejaVu Sans",
               "axes.titlesize": 9, "axes.titleweight": "bold", "legend.fontsize": 7, "savefig.dpi": 120,
               "path.simplify": True})
    return rc


def palette(n: int) -> list:
    import seaborn as sns

    return list(sns.color_palette("colorblind", max(n, 1)))


def figure_for(fd: FigureData, **kw):
    """A figure sized for fd's panels, header (one line more for the CPU warning) and notes."""
    return new_figure(len(fd.panels), header_lines=3 if fd.cpu else 2, footer_lines=len(fd.notes), **kw)


def draw_line_figure(fd: FigureData, study=None):
    fig, axes = figure_for(fd)
    draw_lines(fig, axes, fd)
    return fig


def new_figure(n_panels: int, *, ncols: int | None = None, panel_w: float = 4.2, panel_h: float = 3.2,
               header_lines: int = 2, footer_lines: int = 1):
    from matplotlib.figure import Figure

    ncols = ncols or min(max(n_panels, 1), 3)
    nrows = max(1, math.ceil(max(n_panels, 1) / ncols))
    head_in, foot_in = 0.22 * header_lines + 0.1, 0.16 * footer_lines + 0.1
    h = panel_h * nrows + head_in + foot_in
    fig = Figure(figsize=(max(panel_w * ncols, 7.5), h))
    # rect is (left, bottom, width, height) in figure fractions: room for the header and footer texts
    fig.set_layout_engine("constrained", rect=(0, foot_in / h, 1, 1 - (head_in + foot_in) / h))
    axes = [fig.add_subplot(nrows, ncols, i + 1) for i in range(max(n_panels, 1))]
    return fig, axes


def header(fig, fd: FigureData, study) -> None:
    h = fig.get_figheight()
    y = 1 - 0.08 / h
    fig.text(0.01, y, fd.title, ha="left", va="top", fontsize=11, fontweight="bold")
    y -= 0.24 / h
    fig.text(0.01, y, f"study {study.name} · hardware: {study.hardware}", ha="left", va="top", fontsize=8)
    if fd.cpu:
        y -= 0.2 / h
        fig.text(0.01, y, CPU_WARNING, ha="left", va="top", fontsize=9, color="#b00020", fontweight="bold")


def footer(fig, notes: list[str]) -> None:
    h = fig.get_figheight()
    for i, note in enumerate(reversed(notes)):
        fig.text(0.01, 0.05 / h + i * 0.16 / h, note, ha="left", va="bottom", fontsize=6, color="#444444")


def assumptions_note(study, limit: int = 230) -> str | None:
    """The study's [assumed] settings, as STUDY.md asks every figure to name them."""
    items = [str(a) for a in (getattr(study, "assumptions", ()) or ())]
    if not items:
        return None
    text = f"Assumptions of study {study.name}: " + "; ".join(items)
    return text if len(text) <= limit else text[:limit - 30].rstrip() + " ... (see the study file)"


def message_panel(ax, text: str, color: str = "#666666") -> None:
    ax.set_axis_off()
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=9, color=color, wrap=True,
            transform=ax.transAxes, bbox={"boxstyle": "round", "facecolor": "#f4f4f4", "edgecolor": "#999999"})


def log2_axis(ax, xs: list[float], formatter: Callable[[float], str] | None = None) -> None:
    xs = sorted({x for x in xs if isinstance(x, (int, float)) and x > 0})
    if not xs:
        return
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([formatter(x) if formatter else f"{x:g}" for x in xs], rotation=45 if len(xs) > 6 else 0)
    ax.minorticks_off()
    if len(xs) == 1:
        ax.set_xlim(xs[0] / 2, xs[0] * 2)


def mark_failed(ax, x, text: str, color) -> None:
    """An 'x' at the bottom of the axes at data x, with its status."""
    tr = ax.get_xaxis_transform()
    ax.plot([x], [0.04], marker="x", color=color, markersize=8, mew=2, transform=tr, linestyle="none", clip_on=False)
    ax.text(x, 0.08, text, transform=tr, fontsize=6, color=color, ha="center", va="bottom", rotation=90)


def short_status(row: dict) -> str:
    s = row.get("status") or "?"
    if s == "ok":
        return row.get("note") or "no value"
    return s


def draw_lines(fig, axes, fd: FigureData, *, log_x: bool = True, x_format=None, annotate_labels: set[str] = frozenset(),
               muted_series: set[str] = frozenset()) -> None:
    """Line panels: per panel, per series, the points with y (error bars where there is a CI)
    and an 'x' for each row without y."""
    for ax, panel in zip(axes, fd.panels):
        rows = [r for r in fd.rows if r["panel"] == panel]
        series = sorted({r["series"] for r in rows}, key=lambda s: (s in muted_series, s))
        colors = dict(zip(series, palette(len(series))))
        for s in series:
            pts = sorted((r for r in rows if r["series"] == s and r.get("y") is not None), key=lambda r: r["x"])
            color = "#aaaaaa" if s in muted_series else colors[s]
            if pts:
                xs = [r["x"] for r in pts]
                ys = [r["y"] for r in pts]
                lo = [(r["y"] - r["ci95_low"]) if r.get("ci95_low") is not None else 0.0 for r in pts]
                hi = [(r["ci95_high"] - r["y"]) if r.get("ci95_high") is not None else 0.0 for r in pts]
                ax.errorbar(xs, ys, yerr=[lo, hi], marker="o" if s not in muted_series else ".",
                            linestyle="-" if s not in muted_series else "none", color=color, label=s, capsize=3,
                            markersize=5 if s not in muted_series else 4, linewidth=1.4)
                if s in annotate_labels:
                    for r in pts:
                        ax.annotate(str(r.get("label") or ""), (r["x"], r["y"]), textcoords="offset points",
                                    xytext=(4, 6), fontsize=6, color=color)
            for r in rows:
                if r["series"] == s and r.get("y") is None and r.get("x") is not None:
                    mark_failed(ax, r["x"], f"{s}: {short_status(r)}"[:60], color)
            if not pts and any(r["series"] == s for r in rows):
                ax.plot([], [], marker="x", linestyle="none", color=color, label=f"{s} (no value)")
        xs = [r["x"] for r in rows if r.get("x") is not None]
        if log_x:
            log2_axis(ax, xs, x_format)
        ax.set_title(panel)
        ax.set_xlabel(rows[0]["x_quantity"] if rows else "")
        ax.set_ylabel(rows[0]["y_quantity"] if rows else panel)
        if not any(r.get("y") is not None for r in rows):
            ax.set_ylim(0, 1)
        if series:
            ax.legend(loc="best", frameon=True)


def save(fig, out_base: Path, formats: Iterable[str]) -> list[Path]:
    paths = []
    for fmt in formats:
        if fmt == "csv":
            continue
        p = out_base.with_name(f"{out_base.name}.{fmt}")
        if fmt == "pdf":
            fig.savefig(p, format="pdf", metadata=PDF_METADATA)
        elif fmt == "png":
            fig.savefig(p, format="png", metadata=PNG_METADATA)
        else:
            raise ValueError(f"unknown figure format {fmt!r}")
        paths.append(p)
    return paths
