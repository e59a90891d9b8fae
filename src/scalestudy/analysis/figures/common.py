"""What every figure shares: its data rows (= its CSV), styling, headers, empty panels, saving.

A figure is two steps: `data(tables, study) -> FigureData` computes the rows to plot from the
study's tables (unit conversions included), and `draw(fig, data)` plots those rows and nothing
else, so that `<name>.csv` holds exactly the numbers plotted, each row with the run ids behind it.
The words (title, footnotes, quantity names) come from the module's `DESCRIPTION`.

Series are named by strategy family (`family`: FSDP, HSDP, TP=k, PP=k, TP=k×PP=m) plus whatever
else differs between the configurations of one figure (`series_names`: model, backend, compile,
...); the GPU count and the degrees derived from it are the x axis, never part of a name.

CSV columns (FIGURE_COLUMNS): panel, series, x_quantity, x, y_quantity, y, ci95_low, ci95_high
(Student-t 95% CI over seeds, empty with one seed; truncated at the quantity's bound with a note
where it reached beyond), n_seeds (seeds with a value), status (the configuration's status; a failed
one has an empty y and is drawn as an 'x' with its status; `invalid` where the value cannot be: it
is not drawn, its reason is in note), note, label (the study's name for the strategy), config_ids and run_ids (';'-joined), code_version
(the package version and analysis-source hash that wrote the row, scalestudy.analysis.code_version).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from scalestudy.analysis.csv_format import split_list, write_csv  # noqa: F401 (split_list re-exported)
from scalestudy.analysis.figures.description import Description, Quantity

FIGURE_COLUMNS = ["panel", "series", "x_quantity", "x", "y_quantity", "y", "ci95_low", "ci95_high", "n_seeds",
                  "status", "note", "label", "config_ids", "run_ids", "code_version"]
FORMATS = ("pdf", "png", "csv")
CPU_WARNING = "CPU smoke data — not comparable to the paper"
FAILED_NOTE = ("x at the foot of a panel: a configuration that failed or has no value (which, and why: the note "
               "'Without a value' and the CSV's status and note).")
FAILED_LABEL = "x: failed / no value (see the notes)"
INVALID = "invalid"
NOTE_FONTSIZE = 7.0  # points: the smallest text of a figure, readable when printed at the PDF's size
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
    description: Description | None = None
    predicted: bool = False
    subtitle: str = ""


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


def is_predicted(tables, study) -> bool:
    """Whether the study's numbers are predictions of the performance model (a `prediction`
    section, or configurations of kind `predicted` in its summary)."""
    if getattr(study, "prediction", None):
        return True
    summary = getattr(tables, "summary", None)
    return summary is not None and "kind" in getattr(summary, "columns", []) and bool(
        (summary["kind"] == "predicted").any())


def begin(desc: Description, tables, study, experiments, *, panels: Iterable[str] | None = None,
          empty_panels: Iterable[str] | None = None) -> tuple[FigureData, list[dict]]:
    """A figure's data (titled by its description) and the configurations of its experiments;
    without any, the data say why (drawn as an explicit empty panel). Panels default to the
    description's quantities."""
    predicted = is_predicted(tables, study)
    fd = FigureData(desc.name, desc.heading(predicted), description=desc, predicted=predicted,
                    panels=list(panels if panels is not None else [q.label for q in desc.quantities]))
    cfgs = experiment_configs(tables, experiments)
    if not cfgs:
        if empty_panels is not None:
            fd.panels = list(empty_panels)
        fd.empty_reason = empty_reason(study, experiments)
    return fd, cfgs


# ---- series: strategy family and what else differs ----------------------------------------
# Spec fields that follow from the number of GPUs (or the seed): the x axis, never a series name.
SCALE_FIELDS = ("world_size", "nodes", "procs_per_node", "dp_replicate", "dp_shard", "global_batch", "pp_microbatches", "seed")
# The fields a series name shows when they differ, in this order, and how.
SHOWN_FIELDS = ("model", "backend", "compile", "activation_checkpointing", "sequence_parallel", "pp_schedule",
                "pp_stages_per_rank", "precision", "micro_batch", "seq_len", "hardware")


def _truthy(v) -> bool:
    return v is True or str(v).lower() in ("true", "1", "yes")


def as_int(v, default: int = 1) -> int:
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return default


def specs_by_config(tables) -> dict[str, dict]:
    """The RunSpec fields of each configuration (from the runs table's spec.* columns)."""
    runs = getattr(tables, "runs", None)
    out: dict[str, dict] = {}
    if runs is None or not len(runs):
        return out
    cols = [c for c in runs.columns if c.startswith("spec.")]
    for rec in records(runs[["config_id", *cols]]):
        out.setdefault(rec["config_id"], {c[len("spec."):]: rec[c] for c in cols})
    return out


def config_spec(cfg: dict, specs: dict[str, dict]) -> dict:
    """A configuration's spec fields, the summary's own columns where the runs table lacks them;
    `model` as the summary names it (a slice of a model is not the model) and `hardware` as the
    devices the runs recorded."""
    spec = dict(specs.get(cfg["config_id"], {}))
    for k in ("tp", "pp", "dp_replicate", "dp_shard", "layout", "global_batch", "nodes", "precision", "seq_len",
              "sequence_parallel"):
        if spec.get(k) is None and cfg.get(k) is not None:
            spec[k] = cfg[k]
    spec["model"] = cfg.get("model") or spec.get("model")
    spec["world_size"] = cfg.get("world_size")
    spec["hardware"] = " + ".join(split_list(cfg.get("device_names"))) or cfg.get("device")
    return spec


def family(spec: dict) -> str:
    """The strategy family as the paper's legends name it: FSDP, HSDP, DDP, TP=k, PP=k or
    TP=k×PP=m (FSDP over the rest implied); never a degree that follows from the GPU count."""
    tp, pp = as_int(spec.get("tp")), as_int(spec.get("pp"))
    if tp > 1 and pp > 1:
        return f"TP={tp}×PP={pp}"
    if tp > 1:
        return f"TP={tp}"
    if pp > 1:
        return f"PP={pp}"
    rep, shard = as_int(spec.get("dp_replicate")), as_int(spec.get("dp_shard"))
    if rep > 1 and shard > 1:
        return "HSDP"
    if rep > 1:
        return "DDP"
    if "hsdp" in str(spec.get("layout") or ""):
        return "HSDP"
    return "FSDP"


def describe_field(name: str, value) -> str:
    if name in ("model", "hardware", "backend", "precision"):
        return str(value)
    if name == "compile":
        return "compiled" if _truthy(value) else "eager"
    if name == "sequence_parallel":
        return "SP" if _truthy(value) else "no SP"
    if name == "activation_checkpointing":
        return f"{value} AC" if value not in (None, "none") else "no AC"
    if name == "pp_schedule":
        return str(value)
    return f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}"


def shown_field(name: str, spec: dict) -> str:
    """describe_field, or "" where the field means nothing for this configuration (sequence
    parallelism without tensor parallelism, a pipeline schedule without pipelining)."""
    if name == "sequence_parallel" and as_int(spec.get("tp")) <= 1:
        return ""
    if name in ("pp_schedule", "pp_stages_per_rank") and as_int(spec.get("pp")) <= 1:
        return ""
    return describe_field(name, spec.get(name))


def _varying(specs: list[dict], names: Iterable[str]) -> list[str]:
    return [n for n in names if len({str(s.get(n)) for s in specs}) > 1]


def series_names(cfgs: list[dict], specs: dict[str, dict], x_col: str,
                 lead: Callable[[dict], str] = family, lead_fields: Iterable[str] = ()) -> dict[str, str]:
    """A series name per configuration: `lead` (the strategy family), then every shown field
    that differs between configurations of one figure (model, backend, compile, ...). Should two
    configurations still share a name at one x, the fields in which they differ are added, so a
    series never joins two configurations the legend does not tell apart."""
    full = {c["config_id"]: config_spec(c, specs) for c in cfgs}
    return distinguish(cfgs, full, shown_names(full, lead, lead_fields), x_col)


def shown_names(full: dict[str, dict], lead: Callable[[dict], str] = family,
                lead_fields: Iterable[str] = ()) -> dict[str, str]:
    """`lead` of each configuration's spec, then every shown field (not in lead_fields) that
    differs between the configurations, e.g. "FSDP, compiled"."""
    shown = [n for n in _varying(list(full.values()), SHOWN_FIELDS) if n not in lead_fields]
    return {cid: ", ".join([lead(s), *(p for p in (shown_field(n, s) for n in shown) if p)])
            for cid, s in full.items()}


def distinguish(cfgs: list[dict], full: dict[str, dict], names: dict[str, str], x_col: str) -> dict[str, str]:
    """Names where no two configurations share (name, x): those that do get the fields in which
    they differ added (the run's remaining spec fields first, then the scale-derived ones)."""
    names = dict(names)
    by_key: dict[tuple, list[str]] = {}
    for c in cfgs:
        by_key.setdefault((names[c["config_id"]], str(c.get(x_col))), []).append(c["config_id"])
    others = [k for k in sorted({k for s in full.values() for k in s}) if k not in SHOWN_FIELDS
              and k not in SCALE_FIELDS and k not in ("run_id", "config_id", "layout")]
    for ids in by_key.values():
        if len(ids) < 2:
            continue
        differ = _varying([full[i] for i in ids], [*SHOWN_FIELDS, *others, *SCALE_FIELDS]) or ["config_id"]
        for i in ids:
            extra = ", ".join(describe_field(n, full[i].get(n, i)) for n in differ)
            names[i] = f"{names[i]} ({extra})"
    return names


def is_cpu(cfgs: list[dict]) -> bool:
    return any(c.get("device") == "cpu" for c in cfgs)


def layout_name(layout: str | None) -> str:
    return "+".join(LAYOUT_NAMES.get(p, p.upper()) for p in (layout or "?").split("+"))


def stat(cfg: dict, metric: str, scale: float = 1.0, quantity: Quantity | None = None) -> dict:
    """y, ci95_low, ci95_high and n_seeds of `metric` in a summary row, times scale. With a
    quantity: a value outside its possible range is marked invalid (not drawn, the reason in
    note), and an interval reaching beyond the range is truncated there and says so."""
    def sc(v):
        return None if v is None else v * scale

    n = cfg.get(f"{metric}_n")
    out = {"y": sc(cfg.get(f"{metric}_mean")), "ci95_low": sc(cfg.get(f"{metric}_ci95_low")),
           "ci95_high": sc(cfg.get(f"{metric}_ci95_high")), "n_seeds": int(n) if n is not None else 0}
    if quantity is not None:
        check_range(out, quantity)
    return out


def check_range(row: dict, q: Quantity) -> dict:
    y = row.get("y")
    if y is None:
        return row
    if not q.possible(y):
        bound = f">= {q.low:g}" if q.low is not None and y < q.low else f"<= {q.high:g}"
        row["invalid"] = f"invalid: {q.name} {y:.4g} {q.unit} is impossible (must be {bound})"
        return row
    notes = []
    if q.low is not None and row.get("ci95_low") is not None and row["ci95_low"] < q.low:
        notes.append(f"95% CI truncated at {q.low:g} (was {row['ci95_low']:.3g})")
        row["ci95_low"] = q.low
    if q.high is not None and row.get("ci95_high") is not None and row["ci95_high"] > q.high:
        notes.append(f"95% CI truncated at {q.high:g} (was {row['ci95_high']:.3g})")
        row["ci95_high"] = q.high
    if notes:
        row["truncated"] = "; ".join(notes)
    return row


def config_row(cfg: dict, **kw) -> dict:
    row = {"status": cfg.get("status"), "label": cfg.get("label"), "config_ids": [cfg["config_id"]],
           "run_ids": split_list(cfg.get("run_ids"))}
    if cfg.get("status") not in ("ok", "partial") and cfg.get("error"):
        row["note"] = str(cfg["error"])[:200]
    elif cfg.get("status") == "partial":
        row["note"] = f"{cfg.get('n_ok')} of {cfg.get('n_seeds')} seeds ok; failed: {str(cfg.get('error'))[:150]}"
    invalid, truncated = kw.pop("invalid", None), kw.pop("truncated", None)
    row.update(kw)
    if invalid:
        row.update(status=INVALID, note=invalid + (f"; measured {row['y']:.4g}" if row.get("y") is not None else ""),
                   y=None, ci95_low=None, ci95_high=None)
    elif truncated:
        row["note"] = f"{row['note']}; {truncated}" if row.get("note") else truncated
    return row


def mfu_note(cfgs: list[dict]) -> str | None:
    sources = sorted({s for c in cfgs for s in split_list(c.get("mfu_peak_source"))})
    formulas = sorted({str(c["flops_formula"]) for c in cfgs if c.get("flops_formula")})
    if not sources and not formulas:
        return None
    return (f"MFU = tokens/s per device x FLOPs per token / peak; FLOPs per token: {', '.join(formulas) or '?'}; "
            f"peak from: {', '.join(sources) or '?'} (the runs' device_peak records).")


def metric_rows(cfgs: list[dict], quantities: Iterable[Quantity], series: dict[str, str], x_col: str,
                x: Quantity) -> list[dict]:
    """One row per (quantity, config); each quantity is a panel of its own."""
    rows = []
    for q in quantities:
        for c in cfgs:
            rows.append(config_row(c, panel=q.label, series=series[c["config_id"]], x_quantity=x.label,
                                   x=c.get(x_col), y_quantity=q.label, **stat(c, q.metric, q.scale, q)))
    return rows


def sort_rows(rows: list[dict], panels: list[str]) -> list[dict]:
    order = {p: i for i, p in enumerate(panels)}

    def key(r):
        x = r.get("x")
        return (order.get(r.get("panel"), len(order)), str(r.get("series")), 0 if isinstance(x, (int, float)) else 1,
                x if isinstance(x, (int, float)) else 0, str(x), ";".join(r.get("config_ids") or []))
    return sorted(rows, key=key)


def write_rows(path: Path, rows: list[dict], version: str | None = None) -> Path:
    """The figure's CSV; every row's code_version is `version` (default: this analysis code's)."""
    from scalestudy.analysis.code_version import code_version

    version = version or code_version()
    return write_csv(path, FIGURE_COLUMNS, [{**r, "code_version": version} for r in rows])


def mark_predicted(fd: FigureData, tables) -> None:
    """Mark the rows of predicted configurations (summary kind `predicted`, scalestudy.perfmodel):
    note `predicted by the model` on each (before any status note)."""
    summary = getattr(tables, "summary", None)
    if summary is None or "kind" not in getattr(summary, "columns", []):
        return
    pred = {r["config_id"] for r in records(summary) if r.get("kind") == "predicted"}
    for row in fd.rows:
        if pred & set(row.get("config_ids") or []) and not str(row.get("note") or "").startswith("predicted"):
            row["note"] = "predicted by the model" + (f"; {row['note']}" if row.get("note") else "")


CAVEAT_ROW_NOTE = "caveat: takes a measured input with a known artefact (see claims.md)"


def mark_caveats(fd: FigureData, tables) -> str | None:
    """Note CAVEAT_ROW_NOTE on the rows of configurations whose summary notes hold a caveat (a
    prediction that takes a measured input with a known artefact); returns the figure's short
    footnote saying how many, or None."""
    from scalestudy.analysis.run_table import CAVEAT_PREFIX

    summary = getattr(tables, "summary", None)
    if summary is None or "notes" not in getattr(summary, "columns", []):
        return None
    cav = {r["config_id"] for r in records(summary)
           if any(n.startswith(CAVEAT_PREFIX) for n in split_list(r.get("notes")))}
    drawn = set()
    for row in fd.rows:
        hit = cav & set(row.get("config_ids") or [])
        if hit and CAVEAT_ROW_NOTE not in str(row.get("note") or ""):
            row["note"] = f"{row['note']}; {CAVEAT_ROW_NOTE}" if row.get("note") else CAVEAT_ROW_NOTE
        drawn |= hit
    if not drawn:
        return None
    n = len(drawn)
    return (f"caveat: {n} configuration{'s' if n > 1 else ''} drawn take{'' if n > 1 else 's'} a measured input with a "
            "known artefact (the CSV's note marks which; claims.md says why).")


# ---- drawing helpers ----------------------------------------------------------------
# A figure is three stacked subfigures: the header (title, study and hardware, CPU warning), the
# panels with their legend below them (constrained layout), and the footer (notes). Header and
# footer text is wrapped to the figure's width and their heights follow from their lines.
TITLE_FONTSIZE, SUBTITLE_FONTSIZE, WARNING_FONTSIZE = 11.0, 8.0, 9.0
LINE_SPACING = 1.3
MARGIN_IN = 0.07  # between the canvas's edges and anything drawn (about 5 pt)
CHAR_WIDTH_EM = 0.6  # a generous mean character width of DejaVu Sans, in ems


def style() -> dict:
    import seaborn as sns

    rc: dict = {}
    rc.update(sns.axes_style("whitegrid"))
    rc.update(sns.plotting_context("paper", font_scale=1.1))
    rc.update({"svg.hashsalt": "scalestudy", "pdf.fonttype": 42, "ps.fonttype": 42, "font.family": "DejaVu Sans",
               "axes.titlesize": 8.5, "axes.titleweight": "bold", "axes.labelsize": 8, "xtick.labelsize": 7.5,
               "ytick.labelsize": 7.5, "legend.fontsize": 7.5, "legend.title_fontsize": 7.5, "savefig.dpi": 120,
               "path.simplify": True})
    return rc


def palette(n: int) -> list:
    """Categorical colours (strategies, backends): colour-blind safe."""
    import seaborn as sns

    return list(sns.color_palette("colorblind", max(n, 1)))


def sequential(n: int) -> list:
    """Ordered colours (node counts, sizes): viridis from dark to light, in the values' order."""
    import seaborn as sns

    return list(sns.color_palette("viridis", max(n, 1)))


def wrap(text: str, width_in: float, fontsize: float) -> list[str]:
    import textwrap

    chars = max(20, int(width_in * 72 / (fontsize * CHAR_WIDTH_EM)))
    return textwrap.wrap(text, chars, break_on_hyphens=False) or [""]


def _height(lines: int, fontsize: float) -> float:
    return lines * fontsize * LINE_SPACING / 72


def figure_for(fd: FigureData, *, ncols: int | None = None, panel_w: float = 4.2, panel_h: float = 3.2,
               legend_rows: int = 0):
    """A figure sized for fd's panels, its header, its notes (wrapped) and `legend_rows` rows of
    a legend below the panels; returns (figure, panel axes)."""
    return new_figure(len(fd.panels), ncols=ncols, panel_w=panel_w, panel_h=panel_h, title=fd.title,
                      subtitle=getattr(fd, "subtitle", ""), cpu=fd.cpu, notes=fd.notes, legend_rows=legend_rows)


def draw_line_figure(fd: FigureData, study=None, **kw):
    fig, axes = figure_for(fd, legend_rows=legend_rows_for(fd))
    draw_lines(fig, axes, fd, **kw)
    return fig


def new_figure(n_panels: int, *, ncols: int | None = None, panel_w: float = 4.2, panel_h: float = 3.2,
               title: str = "", subtitle: str = "", cpu: bool = False, notes: Iterable[str] = (),
               legend_rows: int = 0):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ncols = ncols or min(max(n_panels, 1), 3)
    nrows = max(1, math.ceil(max(n_panels, 1) / ncols))
    width = figure_width(n_panels, ncols, panel_w)
    text_w = width - 2 * MARGIN_IN - 0.15
    head = [(line, TITLE_FONTSIZE, "bold", "black") for line in wrap(title, text_w, TITLE_FONTSIZE)]
    head += [(line, SUBTITLE_FONTSIZE, "normal", "black") for line in wrap(subtitle, text_w, SUBTITLE_FONTSIZE)
             if subtitle]
    if cpu:
        head.append((CPU_WARNING, WARNING_FONTSIZE, "bold", "#b00020"))
    foot = [line for n in notes if n for line in wrap(n, text_w, NOTE_FONTSIZE)]
    head_in = MARGIN_IN + sum(_height(1, fs) for _, fs, _, _ in head) + 0.12
    foot_in = _height(len(foot), NOTE_FONTSIZE) + 0.05 + MARGIN_IN if foot else MARGIN_IN
    body_in = panel_h * nrows + legend_rows * LEGEND_FONTSIZE * 1.9 / 72 + (0.1 if legend_rows else 0)
    fig = Figure(figsize=(width, head_in + body_in + foot_in), layout="constrained")
    FigureCanvasAgg(fig)
    fig.get_layout_engine().set(h_pad=MARGIN_IN, w_pad=MARGIN_IN, hspace=0.0, wspace=0.0)
    top, body, bottom = fig.subfigures(3, 1, height_ratios=[head_in, body_in, foot_in])
    for sub in (top, body, bottom):
        sub.patch.set_visible(False)  # the figure's own background; theirs drew at float-noise offsets
    fig.scalestudy = {"head": top, "body": body, "foot": bottom, "head_lines": head, "foot_lines": foot}
    axes = [body.add_subplot(nrows, ncols, i + 1) for i in range(max(n_panels, 1))]
    return fig, axes


def body(fig):
    return fig.scalestudy["body"] if hasattr(fig, "scalestudy") else fig


def header(fig, fd: FigureData, study) -> None:
    """The figure's title, study and hardware (and the CPU warning), as laid out by new_figure."""
    frame = fig.scalestudy
    top = frame["head"]
    h = top.get_window_extent().height / top.dpi if hasattr(top, "dpi") else fig.get_figheight()
    w = top.get_window_extent().width / top.dpi if hasattr(top, "dpi") else fig.get_figwidth()
    y = 1.0 - MARGIN_IN / max(h, 1e-6)
    for line, fs, weight, color in frame["head_lines"]:
        top.text(MARGIN_IN / max(w, 1e-6), y, line, ha="left", va="top", fontsize=fs, fontweight=weight, color=color)
        y -= _height(1, fs) / max(h, 1e-6)


def footer(fig, notes: list[str] | None = None) -> None:
    frame = fig.scalestudy
    bottom = frame["foot"]
    h = bottom.get_window_extent().height / bottom.dpi if hasattr(bottom, "dpi") else 1.0
    w = bottom.get_window_extent().width / bottom.dpi if hasattr(bottom, "dpi") else fig.get_figwidth()
    y = 1.0 - 0.04 / max(h, 1e-6)
    for line in frame["foot_lines"]:
        bottom.text(MARGIN_IN / max(w, 1e-6), y, line, ha="left", va="top", fontsize=NOTE_FONTSIZE, color="#444444")
        y -= _height(1, NOTE_FONTSIZE) / max(h, 1e-6)


def assumptions_note(study, limit: int = 400) -> str | None:
    """The study's [assumed] settings, as STUDY.md asks every figure to name them."""
    items = [str(a).rstrip(".") for a in (getattr(study, "assumptions", ()) or ())]
    if not items:
        return None
    text = f"Assumptions of study {study.name}: " + "; ".join(items) + "."
    return text if len(text) <= limit else text[:limit - 30].rsplit(" ", 1)[0] + " ... (see the study file)"


def message_panel(ax, text: str, color: str = "#666666") -> None:
    import textwrap

    ax.set_axis_off()
    ax.text(0.5, 0.5, "\n".join(textwrap.wrap(text, 60)), ha="center", va="center", fontsize=9, color=color,
            transform=ax.transAxes, bbox={"boxstyle": "round", "facecolor": "#f4f4f4", "edgecolor": "#999999"})


def log2_axis(ax, xs: list[float], formatter: Callable[[float], str] | None = None, max_ticks: int = 12) -> None:
    """A log-2 x axis ticked at the data's x values (every other one, ... when there are more
    than max_ticks)."""
    xs = sorted({x for x in xs if isinstance(x, (int, float)) and x > 0})
    if not xs:
        return
    ax.set_xscale("log", base=2)
    step = max(1, math.ceil(len(xs) / max_ticks))
    ticks = xs[::step]
    ax.set_xticks(ticks)
    ax.set_xticklabels([formatter(x) if formatter else f"{x:g}" for x in ticks], rotation=45 if len(ticks) > 6 else 0,
                       ha="right" if len(ticks) > 6 else "center")
    ax.minorticks_off()
    lo, hi = xs[0], xs[-1]
    ax.set_xlim(lo / 2 ** 0.4, hi * 2 ** 0.4) if len(xs) > 1 else ax.set_xlim(lo / 2, lo * 2)


def mark_failed(ax, x, color) -> None:
    """An 'x' at the foot of the axes at data x. Its status is in the figure's notes
    (failed_note), not written in the panel, where it would cover the data."""
    tr = ax.get_xaxis_transform()
    ax.plot([x], [0.04], marker="x", color=color, markersize=7, mew=2, transform=tr, linestyle="none", clip_on=False)


def failed_note(rows: list[dict], limit: int = 12) -> str | None:
    """'Without a value: FSDP: oom at 512 GPUs; ...': each configuration drawn as an 'x', by series
    and status, with its x values. A configuration in several panels is named once, by the series
    of its last panel (kernel_breakdown's share panel names the family, its bar panels the part),
    and by that panel too where the configurations' last panels differ (one panel a model)."""
    by_config: dict[str, dict] = {}
    for r in rows:
        if r.get("y") is None and r.get("x") is not None:
            by_config[";".join(r.get("config_ids") or []) or f"{r['series']}@{r['x']}"] = r
    if not by_config:
        return None
    by_panel = len({r["panel"] for r in by_config.values()}) > 1  # one panel a model, a batch: name it
    groups: dict[tuple[str, str], list] = {}
    for r in by_config.values():
        name = f"{r['panel']}, {r['series']}" if by_panel else str(r["series"])
        groups.setdefault((name, short_status(r)), []).append(r["x"])
    unit = str(next(iter(by_config.values())).get("x_quantity") or "").split(" (")[0]
    items = []
    for (series, status), xs in sorted(groups.items(), key=lambda kv: (natural(kv[0][0]), kv[0][1])):
        xs = sorted(set(xs), key=lambda x: (not isinstance(x, (int, float)), x if isinstance(x, (int, float)) else 0,
                                            str(x)))
        shown = ", ".join(f"{x:g}" if isinstance(x, (int, float)) else str(x) for x in xs)
        items.append(f"{series}: {status} at {shown}{' ' + unit if unit else ''}")
    more = len(items) - limit
    text = "; ".join(items[:limit]) + (f"; and {more} more (see the CSV)" if more > 0 else "")
    return f"Without a value: {text}."


def short_status(row: dict) -> str:
    s = row.get("status") or "?"
    if s == "ok":
        note = row.get("note") or "no value"
        return note.replace("predicted by the model; ", "")
    return s


def natural(s: str) -> tuple:
    """A sort key that orders the numbers in names by value: llama2-7b before llama2-13b, 2 nodes
    before 16 nodes."""
    import re

    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", str(s)) if p)


LEGEND_FONTSIZE = 7.5


def legend_columns(labels: Iterable[str], width_in: float, most: int = 6) -> int:
    """As many legend columns as the longest label lets fit across the figure (at most `most`)."""
    labels = list(labels)
    if not labels:
        return 1
    entry_in = (max(len(x) for x in labels) * LEGEND_FONTSIZE * CHAR_WIDTH_EM + 40) / 72  # marker and gap
    return max(1, min(most, len(labels), int((width_in - 0.3) // entry_in)))


def figure_width(n_panels: int, ncols: int | None = None, panel_w: float = 4.2) -> float:
    ncols = ncols or min(max(n_panels, 1), 3)
    return max(panel_w * ncols, 7.5)


def legend_rows_for(fd: FigureData, ncols: int | None = None, extra: int = 0) -> int:
    """The rows fd's legend (one entry a series, one for the failed mark) takes below its panels."""
    labels = sorted({r["series"] for r in fd.rows})
    if any(r.get("y") is None for r in fd.rows):
        labels.append(FAILED_LABEL)
    labels += [""] * extra
    if not labels:
        return 0
    return math.ceil(len(labels) / legend_columns(labels, figure_width(len(fd.panels), ncols)))


def figure_legend(fig, axes, ncol: int = 6, title: str | None = None, order: Callable | None = None) -> None:
    """One legend for every panel, below them, in as many columns as fit (entries in `order`,
    natural order by default)."""
    entries: dict[str, object] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(lab, h)
    if not entries:
        return
    labels = sorted(entries, key=lambda k: (k.startswith("x: "), order(k) if order else natural(k)))
    ncol = min(ncol, legend_columns(labels, fig.get_figwidth()))
    body(fig).legend([entries[k] for k in labels], labels, loc="outside lower center", ncol=ncol,
                     frameon=False, title=title, fontsize=LEGEND_FONTSIZE)


def interval(r: dict) -> tuple[float, float]:
    lo = (r["y"] - r["ci95_low"]) if r.get("ci95_low") is not None else 0.0
    hi = (r["ci95_high"] - r["y"]) if r.get("ci95_high") is not None else 0.0
    return max(lo, 0.0), max(hi, 0.0)


def draw_lines(fig, axes, fd: FigureData, *, log_x: bool = True, x_format=None, muted_series: set[str] = frozenset(),
               colors: dict[str, object] | None = None, order: Callable[[str], object] | None = None, legend_ncol: int = 6, legend: bool = True) -> None:
    """Line panels: per panel, per series, the points with y (error bars where there is a CI),
    joined in x order, and an 'x' for each row without y; one legend below the panels."""
    order = order or (lambda s: (s in muted_series, natural(s)))
    all_series = sorted({r["series"] for r in fd.rows}, key=order)
    colors = colors or dict(zip(all_series, palette(len(all_series))))
    failed_seen = False
    for ax, panel in zip(axes, fd.panels):
        rows = [r for r in fd.rows if r["panel"] == panel]
        for s in [s for s in all_series if any(r["series"] == s for r in rows)]:
            pts = sorted((r for r in rows if r["series"] == s and r.get("y") is not None), key=lambda r: r["x"])
            muted = s in muted_series
            color = "#aaaaaa" if muted else colors[s]
            if pts:
                lo, hi = zip(*(interval(r) for r in pts))
                ax.errorbar([r["x"] for r in pts], [r["y"] for r in pts], yerr=[lo, hi], marker="." if muted else "o",
                            linestyle="none" if muted else "-", color=color, label=s, capsize=2.5,
                            markersize=4 if muted else 4.5, linewidth=1.3, elinewidth=0.9)
            elif not muted:
                ax.plot([], [], marker="x", linestyle="none", color=color, mew=2, label=f"{s} (no value)")
        failed_here: dict = {}
        for r in rows:
            if r.get("y") is None and r.get("x") is not None and r["series"] in colors:
                failed_here.setdefault(r["x"], []).append(r)
        for x, fails in sorted(failed_here.items(), key=lambda kv: str(kv[0])):
            mark_failed(ax, x, colors[fails[0]["series"]] if len(fails) == 1 else "#555555")
            failed_seen = True
        xs = [r["x"] for r in rows if r.get("x") is not None]
        if log_x:
            log2_axis(ax, xs, x_format)
        ax.set_title(panel)
        ax.set_xlabel(rows[0]["x_quantity"] if rows else "")
        ax.set_ylabel(rows[0]["y_quantity"] if rows else panel)
        if not any(r.get("y") is not None for r in rows):
            ax.set_ylim(0, 1)
        elif fd.description is not None:
            bound_axis(ax, rows[0]["y_quantity"] if rows else panel, fd.description,
                       [r["y"] for r in rows if r.get("y") is not None])
    if failed_seen:
        axes[0].plot([], [], marker="x", linestyle="none", color="#555555", mew=2, label=FAILED_LABEL)
    if legend:
        figure_legend(fig, axes, ncol=legend_ncol, order=order)


def compact(v: float) -> str:
    """12345 -> 12.3k, 2.591e6 -> 2.59M: at most four characters of digits."""
    a = abs(v)
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            x = v / div
            return f"{x:.3g}{suffix}" if abs(x) < 100 else f"{x:.0f}{suffix}"
    return f"{v:.3g}"


@dataclass(frozen=True)
class Cell:
    """One cell of a heatmap panel: its row and column values (TP and PP degrees), its value (None:
    not drawn), what is written under the value or alone (a status), and its hatch: FAILED_HATCH
    (red, a failure), BLANK_HATCH (grey, no value for another reason) or None."""
    row: int
    col: int
    value: float | None
    status: str = ""
    hatch: str | None = None


FAILED_HATCH, BLANK_HATCH = "failed", "blank"


def heatmap_panel(ax, cells: list[Cell], *, title: str, value_label: str, fmt: Callable[[float], str],
                  compact_colorbar: bool = False, row_label: str = "TP degree", col_label: str = "PP degree") -> None:
    """A heatmap of cells over row x column values (tp_pp_grid, rank_grid): viridis over the
    cells with a value, each written in it; hatched cells with their status on a white box;
    cells not in `cells` stay blank (grey)."""
    import numpy as np
    import seaborn as sns
    from matplotlib.patches import Rectangle

    rows = sorted({c.row for c in cells})
    cols = sorted({c.col for c in cells})
    grid = np.full((len(rows), len(cols)), np.nan)
    for c in cells:
        if c.value is not None:
            grid[rows.index(c.row), cols.index(c.col)] = c.value
    finite = grid[np.isfinite(grid)]
    vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if vmin == vmax:
        vmin, vmax = vmin - 0.5 * abs(vmin or 1), vmax + 0.5 * abs(vmax or 1)
    ax.set_facecolor("#f0f0f0")
    sns.heatmap(grid, ax=ax, mask=~np.isfinite(grid), annot=False, cmap="viridis", vmin=vmin, vmax=vmax, cbar=True,
                cbar_kws={"label": value_label}, linewidths=0.5, linecolor="white",
                xticklabels=[str(c) for c in cols], yticklabels=[str(r) for r in rows])
    if compact_colorbar and ax.collections and ax.collections[0].colorbar is not None:
        from matplotlib.ticker import FuncFormatter

        ax.collections[0].colorbar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: compact(v)))
    for c in cells:
        i, j = rows.index(c.row), cols.index(c.col)
        failed = c.hatch == FAILED_HATCH
        if c.hatch:
            ax.add_patch(Rectangle((j, i), 1, 1, fill=False, hatch="///" if failed else "..",
                                   edgecolor="#b00020" if failed else "#888888", linewidth=0))
        if c.value is not None:
            dark = (c.value - vmin) / (vmax - vmin) < 0.6
            ax.text(j + 0.5, i + 0.5, fmt(c.value) + (f"\n{c.status}" if c.status else ""), ha="center", va="center",
                    fontsize=NOTE_FONTSIZE, color="white" if dark else "black")
        elif c.status:
            ax.text(j + 0.5, i + 0.5, c.status, ha="center", va="center", fontsize=NOTE_FONTSIZE,
                    color="#b00020" if failed else "#555555",
                    bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1} if c.hatch else None)
    ax.set_title(title, fontsize=7.5)
    ax.set_xlabel(col_label)
    ax.set_ylabel(row_label)


def bound_axis(ax, quantity_label: str, desc: Description, ys: Iterable[float] = ()) -> None:
    """Keep a panel's y axis within its quantity's possible range (no axis below zero for a
    quantity that cannot be negative); a log axis for a quantity drawn so whose values span more
    than a factor of ten."""
    try:
        q = desc.quantity(quantity_label)
    except KeyError:
        return
    ys = [y for y in ys if y > 0]
    if q.log and ys and max(ys) > 10 * min(ys):
        ax.set_yscale("log")
        return
    lo, hi = ax.get_ylim()
    if q.low is not None and lo < q.low:
        ax.set_ylim(bottom=q.low)
    if q.high is not None and hi > q.high:
        ax.set_ylim(top=q.high)


def save(fig, out_base: Path, formats: Iterable[str], version: str | None = None) -> list[Path]:
    """The figure's PDF and PNG, recording `version` (default: this analysis code's) in their metadata."""
    from scalestudy.analysis.code_version import code_version

    version = version or code_version()
    paths = []
    for fmt in formats:
        if fmt == "csv":
            continue
        p = out_base.with_name(f"{out_base.name}.{fmt}")
        if fmt == "pdf":
            fig.savefig(p, format="pdf", metadata={**PDF_METADATA, "Creator": version})
        elif fmt == "png":
            fig.savefig(p, format="png", metadata={**PNG_METADATA, "Software": version})
        else:
            raise ValueError(f"unknown figure format {fmt!r}")
        paths.append(p)
    return paths
