"""A figure's data: its rows (= its CSV), prepared from the study's tables.

A figure is two steps: `data(tables, study) -> FigureData` computes the rows to plot from the
study's tables (unit conversions included), and `draw(fig, data)` plots those rows and nothing
else, so that `<name>.csv` holds exactly the numbers plotted, each row with the run ids behind it.
The words (title, footnotes, quantity names) come from the module's `DESCRIPTION`. This module
is the first step; figures.drawing helps with the second, figures.save writes the outputs.

Series are named by strategy family (`family`: FSDP, HSDP, TP=k, PP=k, TP=k×PP=m) plus whatever
else differs between the configurations of one figure (`series_names`: model, backend, compile,
...); the GPU count and the degrees derived from it are the x axis, never part of a name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterable

from scalestudy.analysis.figures.description import Description, Quantity
from scalestudy.analysis import run_table
from scalestudy.analysis.run_table import CAVEAT_PREFIX
from scalestudy.measure.table_files import WEAKENED_NOTE, weakened_kind
from scalestudy.measure.csv_format import split_list
from scalestudy.spec.rank_share import measured_series

INVALID = "invalid"
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
    csv_rows: list[dict] = field(default_factory=list)  # written to the CSV, not drawn (e.g. "not expressible")
    references: list[tuple[str, float, str]] = field(default_factory=list)  # (quantity, value, what): a limit line
    # series -> its colour group (Description.hue_by's value of its configurations: a GPU kind), from series_groups
    groups: dict[str, str] = field(default_factory=dict)


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
    return f"no runs of experiment {' / '.join(repr(e) for e in experiments)} in study {study.name!r}"


def is_predicted(tables, study) -> bool:
    """Whether the study's numbers are predictions of the performance model (a `prediction`
    section, or configurations of kind `predicted` in its summary)."""
    if getattr(study, "prediction", None):
        return True
    summary = getattr(tables, "summary", None)
    return (
        summary is not None
        and "kind" in getattr(summary, "columns", [])
        and bool((summary["kind"] == "predicted").any())
    )


def begin(
    desc: Description,
    tables,
    study,
    experiments,
    *,
    panels: Iterable[str] | None = None,
    empty_panels: Iterable[str] | None = None,
) -> tuple[FigureData, list[dict]]:
    """A figure's data (titled by its description) and the configurations of its experiments;
    without any, the data say why (drawn as an explicit empty panel). Panels default to the
    description's quantities."""
    predicted = is_predicted(tables, study)
    fd = FigureData(
        desc.name,
        desc.heading(predicted),
        description=desc,
        predicted=predicted,
        panels=list(panels if panels is not None else [q.label for q in desc.quantities]),
    )
    cfgs = experiment_configs(tables, experiments)
    if not cfgs:
        if empty_panels is not None:
            fd.panels = list(empty_panels)
        fd.empty_reason = empty_reason(study, experiments)
    return fd, cfgs


# ---- series: strategy family and what else differs ----------------------------------------
# Spec fields that follow from the number of GPUs (or the seed): the x axis, never a series name.
SCALE_FIELDS = (
    "world_size",
    "nodes",
    "procs_per_node",
    "dp_replicate",
    "dp_shard",
    "global_batch",
    "pp_microbatches",
    "seed",
)
# The fields a series name shows when they differ, in this order, and how. `system` (the machine of
# an imported run) keeps runs of two machines out of one series.
SHOWN_FIELDS = (
    "model",
    "system",
    "backend",
    "compile",
    "activation_checkpointing",
    "sequence_parallel",
    "pp_schedule",
    "pp_stages_per_rank",
    "precision",
    "micro_batch",
    "seq_len",
    "hardware",
)


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
        out.setdefault(rec["config_id"], {c[len("spec.") :]: rec[c] for c in cols})
    return out


def config_spec(cfg: dict, specs: dict[str, dict]) -> dict:
    """A configuration's spec fields, the summary's own columns where the runs table lacks them;
    `model` as the summary names it (a slice of a model is not the model) and `hardware` as the
    devices the runs recorded."""
    spec = dict(specs.get(cfg["config_id"], {}))
    for k in (
        "tp",
        "pp",
        "dp_replicate",
        "dp_shard",
        "layout",
        "global_batch",
        "nodes",
        "precision",
        "seq_len",
        "sequence_parallel",
    ):
        if spec.get(k) is None and cfg.get(k) is not None:
            spec[k] = cfg[k]
    spec["model"] = cfg.get("model") or spec.get("model")
    spec["world_size"] = cfg.get("world_size")
    spec["hardware"] = " + ".join(split_list(cfg.get("device_names"))) or cfg.get("device")
    return spec


def family(spec: dict) -> str:
    """The strategy family as the paper's legends name it: FSDP, HSDP, DDP, TP=k, PP=k or
    TP=k×PP=m (FSDP over the rest implied); never a degree that follows from the GPU count."""
    tp, pp, cp = as_int(spec.get("tp")), as_int(spec.get("pp")), as_int(spec.get("cp"))
    if cp > 1:
        return "×".join(f"{n}={d}" for n, d in (("TP", tp), ("PP", pp), ("CP", cp)) if d > 1)
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
    if name in ("model", "hardware", "backend", "precision", "system"):
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


def series_names(
    cfgs: list[dict],
    specs: dict[str, dict],
    x_col: str,
    lead: Callable[[dict], str] = family,
    lead_fields: Iterable[str] = (),
) -> dict[str, str]:
    """A series name per configuration: `lead` (the strategy family), then every shown field
    that differs between configurations of one figure (model, backend, compile, ...). Should two
    configurations still share a name at one x, the fields in which they differ are added, so a
    series never joins two configurations the legend does not tell apart."""
    full = {c["config_id"]: config_spec(c, specs) for c in cfgs}
    base = shown_names(full, lead, lead_fields, {cid: "" for cid in full})
    suffix = measured_suffixes(cfgs, lambda c: base[c["config_id"]])
    return distinguish(cfgs, full, shown_names(full, lead, lead_fields, suffix), x_col)


def measured_suffixes(cfgs: list[dict], group: Callable[[dict], Hashable]) -> dict[str, str]:
    """rank_share.measured_series of each configuration, by config id. A measured oom verdict has
    no computation, so neither kind of share: it takes the kind of the other measured
    configurations of its `group` (its series, panel or row) where they have one kind."""
    suffix = {c["config_id"]: measured_series(c["config_id"], c.get("measured_inputs")) for c in cfgs}
    no_compute = [c for c in cfgs if suffix[c["config_id"]] and "compute" not in (c.get("measured_inputs") or "")]
    skip = {c["config_id"] for c in no_compute}
    for c in no_compute:
        kinds = {
            suffix[o["config_id"]]
            for o in cfgs
            if o["config_id"] not in skip and suffix[o["config_id"]] and group(o) == group(c)
        }
        if len(kinds) == 1:
            suffix[c["config_id"]] = kinds.pop()
    return suffix


def shown_names(
    full: dict[str, dict],
    lead: Callable[[dict], str] = family,
    lead_fields: Iterable[str] = (),
    suffix: dict[str, str] | None = None,
) -> dict[str, str]:
    """`lead` of each configuration's spec, then every shown field (not in lead_fields) that
    differs between the configurations, e.g. "FSDP, compiled"; then its measured-inputs suffix
    (`suffix` by config id, else rank_share.measured_series without the inputs)."""
    suffix = suffix or {}
    shown = [n for n in _varying(list(full.values()), SHOWN_FIELDS) if n not in lead_fields]
    if "system" in shown and "hardware" in shown:  # the machine (an imported run's system) names its GPUs
        shown.remove("hardware")
    return {
        cid: ", ".join([lead(s), *(p for p in (shown_field(n, s) for n in shown) if p)])
        + suffix.get(cid, measured_series(cid, None))
        for cid, s in full.items()
    }


def distinguish(cfgs: list[dict], full: dict[str, dict], names: dict[str, str], x_col: str) -> dict[str, str]:
    """Names where no two configurations share (name, x): those that do get the fields in which
    they differ added (the run's remaining spec fields first, then the scale-derived ones)."""
    names = dict(names)
    by_key: dict[tuple, list[str]] = {}
    for c in cfgs:
        by_key.setdefault((names[c["config_id"]], str(c.get(x_col))), []).append(c["config_id"])
    others = [
        k
        for k in sorted({k for s in full.values() for k in s})
        if k not in SHOWN_FIELDS and k not in SCALE_FIELDS and k not in ("run_id", "config_id", "layout")
    ]
    for ids in by_key.values():
        if len(ids) < 2:
            continue
        differ = _varying([full[i] for i in ids], [*SHOWN_FIELDS, *others, *SCALE_FIELDS]) or ["config_id"]
        for i in ids:
            extra = ", ".join(describe_field(n, full[i].get(n, i)) for n in differ)
            names[i] = f"{names[i]} ({extra})"
    return names


def series_groups(rows: list[dict], tables, spec_field: str) -> dict[str, str]:
    """Series -> the value of `spec_field` (config_spec: `hardware` is the devices the runs
    recorded) of the configurations behind its rows; a series whose configurations differ in it
    (or have none) is in no group."""
    summary = getattr(tables, "summary", None)
    cfgs = {c["config_id"]: c for c in records(summary)} if summary is not None and len(summary) else {}
    specs = specs_by_config(tables)
    values: dict[str, set[str]] = {}
    for r in rows:
        for cid in r.get("config_ids") or []:
            if cid in cfgs:
                value = config_spec(cfgs[cid], specs).get(spec_field)
                values.setdefault(r["series"], set()).add("" if value is None else str(value))
    return {s: v.pop() for s, v in values.items() if len(v) == 1 and "" not in v}


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
    out = {
        "y": sc(cfg.get(f"{metric}_mean")),
        "ci95_low": sc(cfg.get(f"{metric}_ci95_low")),
        "ci95_high": sc(cfg.get(f"{metric}_ci95_high")),
        "n_seeds": int(n) if n is not None else 0,
    }
    kept = len(split_list(cfg.get("run_ids")))
    if out["y"] is not None and 0 < out["n_seeds"] < kept:
        family = next((f for f, cols in _REASON_FAMILIES.items() if metric in cols), None)
        why = [x.split(": ", 1)[1] for x in split_list(cfg.get("notes")) if family and x.startswith(f"{family}: ")]
        out["fewer_seeds"] = f"{out['n_seeds']} of the {kept} seeds in run_ids give a value" + (
            f" (the others: {'; '.join(why)})" if why else ""
        )
    if quantity is not None:
        check_range(out, quantity)
    return out


# a metric's family: the reason column (run_table.REASON_COLUMNS) whose note says why a seed has no value
_REASON_FAMILIES = {
    "exposed_comm": run_table.EXPOSED_COLUMNS,
    "energy": run_table.ENERGY_COLUMNS,
    "mfu": run_table.MFU_COLUMNS,
    "throughput": run_table.THROUGHPUT_COLUMNS,
}


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
    row = {
        "status": cfg.get("status"),
        "label": cfg.get("label"),
        "measured_inputs": cfg.get("measured_inputs"),
        "config_ids": [cfg["config_id"]],
        "run_ids": split_list(cfg.get("run_ids")),
    }
    if cfg.get("status") not in ("ok", "partial") and cfg.get("error"):
        row["note"] = str(cfg["error"])[:200]
    elif cfg.get("status") == "partial":
        row["note"] = f"{cfg.get('n_ok')} of {cfg.get('n_seeds')} seeds ok; failed: {str(cfg.get('error'))[:150]}"
    left_out = split_list(cfg.get("left_out"))  # seeds the summary left out (aggregate.left_out_reason)
    if left_out:
        row["note"] = "; ".join([*([row["note"]] if row.get("note") else []), "left out: " + "; ".join(left_out)])  # type: ignore[list-item]  # the note is a string
    invalid, truncated = kw.pop("invalid", None), kw.pop("truncated", None)
    fewer = kw.pop("fewer_seeds", None)
    row.update(kw)
    if invalid:
        row.update(
            status=INVALID,
            note=invalid + (f"; measured {row['y']:.4g}" if row.get("y") is not None else ""),
            y=None,
            ci95_low=None,
            ci95_high=None,
        )
    elif truncated:
        row["note"] = f"{row['note']}; {truncated}" if row.get("note") else truncated
    if fewer and not invalid:
        row["note"] = f"{row['note']}; {fewer}" if row.get("note") else fewer
    return row


def mfu_note(cfgs: list[dict]) -> str | None:
    sources = sorted({s for c in cfgs for s in split_list(c.get("mfu_peak_source"))})
    formulas = sorted({str(c["flops_formula"]) for c in cfgs if c.get("flops_formula")})
    if not sources and not formulas:
        return None
    return (
        f"MFU = tokens/s per device x FLOPs per token / peak; FLOPs per token: {', '.join(formulas) or '?'}; "
        f"peak from: {', '.join(sources) or '?'} (the runs' device_peak records)."
    )


def metric_rows(
    cfgs: list[dict], quantities: Iterable[Quantity], series: dict[str, str], x_col: str, x: Quantity
) -> list[dict]:
    """One row per (quantity, config); each quantity is a panel of its own."""
    rows = []
    for q in quantities:
        for c in cfgs:
            rows.append(
                config_row(
                    c,
                    panel=q.label,
                    series=series[c["config_id"]],
                    x_quantity=x.label,
                    x=c.get(x_col),
                    y_quantity=q.label,
                    **stat(c, q.metric, q.scale, q),  # type: ignore[arg-type]  # the figure's quantities name a metric
                )
            )
    return rows


def sort_rows(rows: list[dict], panels: list[str]) -> list[dict]:
    order = {p: i for i, p in enumerate(panels)}

    def key(r):
        x = r.get("x")
        return (
            order.get(r.get("panel"), len(order)),
            str(r.get("series")),
            0 if isinstance(x, (int, float)) else 1,
            x if isinstance(x, (int, float)) else 0,
            str(x),
            ";".join(r.get("config_ids") or []),
        )

    return sorted(rows, key=key)


def mark_predicted(fd: FigureData, tables) -> None:
    """Mark the rows of predicted configurations (summary kind `predicted`, scalestudy.perfmodel):
    note `predicted by the model` on each (before any status note)."""
    summary = getattr(tables, "summary", None)
    note_left_out(fd, summary)  # every figure passes here (figures.figure_data): its note on seeds left out
    if summary is None or "kind" not in getattr(summary, "columns", []):
        return
    pred = {r["config_id"] for r in records(summary) if r.get("kind") == "predicted"}
    for row in fd.rows:
        if pred & set(row.get("config_ids") or []) and not str(row.get("note") or "").startswith("predicted"):
            row["note"] = "predicted by the model" + (f"; {row['note']}" if row.get("note") else "")


def note_left_out(fd: FigureData, summary) -> None:
    """The figure's note on the seeds its configurations left out of their statistics (summary
    `left_out`: contaminated or outlier seeds; each row's note names them and why)."""
    if summary is None or "left_out" not in getattr(summary, "columns", []):
        return
    drawn = {c for r in fd.rows for c in r.get("config_ids") or []}
    items = {x for r in records(summary) if r["config_id"] in drawn for x in split_list(r.get("left_out"))}
    if items:
        n = len(items)
        fd.notes.append(
            f"left out: {n} seed{'s' if n > 1 else ''} (contaminated, or slower than the fastest clean "
            "seed by more than the study's outlier_slowdown); the CSV's note names each and why."
        )


CAVEAT_ROW_NOTE = "caveat: takes a measured input with a known artefact (see claims.md)"


def mark_caveats(fd: FigureData, tables) -> str | None:
    """Note CAVEAT_ROW_NOTE on the rows of configurations whose summary notes hold a caveat (a
    prediction that takes a measured input with a known artefact); returns the figure's short
    footnote saying how many, or None."""
    summary = getattr(tables, "summary", None)
    if summary is None or "notes" not in getattr(summary, "columns", []):
        return None
    cav = {
        r["config_id"] for r in records(summary) if any(n.startswith(CAVEAT_PREFIX) for n in split_list(r.get("notes")))
    }
    drawn = set()
    for row in fd.rows:
        hit = cav & set(row.get("config_ids") or [])
        if hit and CAVEAT_ROW_NOTE not in str(row.get("note") or ""):
            row["note"] = f"{row['note']}; {CAVEAT_ROW_NOTE}" if row.get("note") else CAVEAT_ROW_NOTE
        drawn |= hit
    if not drawn:
        return None
    n = len(drawn)
    return (
        f"caveat: {n} configuration{'s' if n > 1 else ''} drawn take{'' if n > 1 else 's'} a measured input with a "
        "known artefact (the CSV's note marks which; claims.md says why)."
    )


def mark_weakened(fd: FigureData, tables) -> str | None:
    """Note on each row of a configuration with a seed made with a check weakened (its summary
    notes starting WEAKENED_NOTE) which check; returns the figure's footnote, or None."""
    summary = getattr(tables, "summary", None)
    if summary is None or "notes" not in getattr(summary, "columns", []):
        return None
    weakened = {
        r["config_id"]: [n for n in split_list(r.get("notes")) if n.startswith(WEAKENED_NOTE)] for r in records(summary)
    }
    drawn: set[str] = set()
    kinds: set[str] = set()
    for row in fd.rows:
        said = [n for c in row.get("config_ids") or [] for n in weakened.get(c, [])]
        if not said:
            continue
        drawn |= {c for c in row.get("config_ids") or [] if weakened.get(c)}
        kinds |= {weakened_kind(n) for n in said}
        text = "; ".join(dict.fromkeys(said))
        if text not in str(row.get("note") or ""):
            row["note"] = f"{row['note']}; {text}" if row.get("note") else text
    if not drawn:
        return None
    n = len(drawn)
    return (
        f"{WEAKENED_NOTE}: {n} configuration{'s' if n > 1 else ''} drawn ({'; '.join(sorted(kinds))}); the CSV's "
        "note says which seed; scalestudy audit --strict refuses them."
    )


# ---- the performance model beside measurements (a study's model_beside) ----------------------
MODEL_SERIES = " · model"
FIT_SERIES = " · linear fit"
NOT_EXPRESSIBLE = "not expressible"


def model_beside(
    fd: FigureData,
    tables,
    cfgs: list[dict],
    series: dict[str, str],
    quantities: Iterable[Quantity],
    x_col: str,
    x: Quantity,
) -> None:
    """The model's prediction beside each configuration (tables.model_beside, scalestudy model
    beside): drawn as the series "<series> · model" with the model's band where it can express the
    configuration; where it cannot, a CSV row with status `not expressible` and the reason, and a
    note on the figure naming the series and why."""
    beside = getattr(tables, "model_beside", None)
    if beside is None or not len(beside):
        return
    by_config = {r["config_id"]: r for r in records(beside)}
    per_series: dict[str, set[str]] = {}
    drawn = False
    for q in quantities:
        if q.metric not in ("tokens_per_s_per_device", "tokens_per_s"):
            continue
        for c in cfgs:
            b = by_config.get(c["config_id"])
            if b is None:
                continue
            base = {
                "panel": q.label,
                "series": series[c["config_id"]] + MODEL_SERIES,
                "x_quantity": x.label,
                "x": c.get(x_col),
                "y_quantity": q.label,
                "n_seeds": 0,
                "label": c.get("label"),
                "config_ids": [c["config_id"]],
                "run_ids": [],
            }
            if not _truthy(b.get("expressible")):
                why = str(b.get("reason") or NOT_EXPRESSIBLE)
                status = NOT_EXPRESSIBLE if why.startswith(NOT_EXPRESSIBLE) else "not predicted"
                fd.csv_rows.append({**base, "y": None, "status": status, "note": why})
                per_series.setdefault(series[c["config_id"]], set()).add(why.removeprefix(NOT_EXPRESSIBLE + ": "))
                continue
            world = as_int(c.get("world_size"))
            scale = 1.0 if q.metric == "tokens_per_s_per_device" else float(world)
            y = b.get("tokens_per_s_per_device")
            lo, hi = b.get("tokens_per_s_per_device_low"), b.get("tokens_per_s_per_device_high")
            measured = c.get(f"{q.metric}_mean")
            error = (
                y * scale / float(measured) - 1.0
                if y is not None and measured not in (None, "") and float(measured) > 0
                else None
            )
            fd.rows.append(
                {
                    **base,
                    "y": None if y is None else y * scale,
                    "ci95_low": None if lo is None else lo * scale,
                    "ci95_high": None if hi is None else hi * scale,
                    "status": "ok",
                    "model_error": error,
                    "note": f"predicted by the model on cluster {b.get('cluster')} (band, not a CI); "
                    "nothing fitted to the measurements"
                    + (f"; {100 * error:+.1f}% against the measured mean" if error is not None else ""),
                }
            )
            drawn = True
    if per_series:
        by_reason: dict[str, list[str]] = {}
        for name, whys in sorted(per_series.items()):
            by_reason.setdefault("; ".join(sorted(whys)), []).append(name)
        fd.notes.append(
            "Performance model beside the measurements: NOT EXPRESSIBLE (or not predicted) for "
            + "; ".join(f"{', '.join(names)} ({why})" for why, names in sorted(by_reason.items()))
            + " - no prediction drawn for it (the CSV has a 'not expressible' row for each point)."
        )
    if drawn:
        fd.notes.append(
            f"'{MODEL_SERIES.strip(' ·')}' series: the performance model's prediction (its band as the "
            "error bar), calibrated elsewhere and never fitted to these runs."
        )
