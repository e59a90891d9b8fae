"""Power (the paper's Fig. 10): total GPU power and tokens per joule (= tokens/s per watt)
against GPUs, FSDP against the best tensor/pipeline configuration at each GPU count (best by
tokens per joule; the others tried are grey dots) and HSDP where the study ran it; a further
line per backend, model, ... where those differ. GPU board power only (NVML where measured): CPU, memory and
network are not included. On CPU runs there is no GPU power: the figure says so in an explicit
panel. A configuration whose spec says `power_sampling: false` has no power by design: not drawn,
named in a note (or the explicit panel, where none is left). Configurations: experiment `power`."""

from __future__ import annotations

from scalestudy.measure.csv_format import split_list
from scalestudy.spec import catalog
from scalestudy.spec.rank_share import measured_base
from scalestudy.analysis.figures import drawing, prepare
from scalestudy.analysis.figures.description import Description, Quantity
from scalestudy.analysis.run_table import NOT_SAMPLED

NAME = "power"
EXPERIMENTS = ("power",)
SCOPE = "GPU board power only"
GPUS = Quantity("GPUs", "world size, log 2")
DESCRIPTION = Description(
    name=NAME,
    title=f"Power and energy efficiency against GPUs — {SCOPE}",
    paper="the paper's Fig. 10",
    shows="Power per GPU and tokens per joule (tokens/s per watt) against the number of GPUs (log-2 axis)",
    series=(
        "one line per strategy family (FSDP, HSDP) and one joining the best tensor/pipeline configuration at "
        "each GPU count (by tokens per joule among every TP/PP configuration tried; its legend names the winning "
        "layouts, with sequence parallelism and micro batch where they differ, and the GPU counts where each "
        "won; the others tried are grey points), each also named by what else differs (backend, model, "
        "compile); where values reach the GPUs' power limit it is drawn as a dashed red line"
    ),
    x=GPUS,
    quantities=(
        Quantity("power per GPU", "W", "power_w_per_gpu"),
        Quantity("tokens per joule", "tokens/J", "tokens_per_joule"),
    ),
    category="Power",
    notes=(
        f"Power scope: {SCOPE} (a measured run reads it through NVML; a prediction gives the board's); CPU, "
        "memory and network power are not included.",
        drawing.FAILED_NOTE,
    ),
)
NO_CPU_POWER = "no GPU power data (CPU run)"
BEST, OTHER = "best TP/PP", "other TP/PP"
TPP = "TP/PP"
POWER = DESCRIPTION.quantities[0]
# what a TP/PP configuration chooses besides its degrees: part of its layout (written at its point),
# not of a line's name, so that one line joins the best of every TP/PP configuration
LAYOUT_FIELDS = ("sequence_parallel", "micro_batch", "pp_schedule", "pp_stages_per_rank", "activation_checkpointing")
AT_LIMIT = 0.005  # relative: a value this close to the power limit sits at it
SHOWN_LIMIT = 0.9  # the limit is drawn where a panel's values reach this share of it


def _sampled(spec: dict) -> bool:
    """Whether the configuration's spec sampled power (tables without a power_sampling column: yes)."""
    v = spec.get("power_sampling")
    return v is None or str(v).lower() not in ("false", "0")


def _lead(s: dict) -> str:
    return TPP if prepare.as_int(s.get("tp")) > 1 or prepare.as_int(s.get("pp")) > 1 else prepare.family(s)


def _layout(spec: dict, fields: list[str]) -> str:
    said = [p for p in (prepare.shown_field(n, spec) for n in fields) if p]
    return " ".join([f"TP{prepare.as_int(spec.get('tp'))}/PP{prepare.as_int(spec.get('pp'))}", *said])


def data(tables, study) -> prepare.FigureData:
    fd, cfgs = prepare.begin(DESCRIPTION, tables, study, EXPERIMENTS)
    if not cfgs:
        return fd
    fd.cpu = prepare.is_cpu(cfgs)
    specs = prepare.specs_by_config(tables)
    full = {c["config_id"]: prepare.config_spec(c, specs) for c in cfgs}
    unsampled = [c for c in cfgs if not _sampled(full[c["config_id"]])]
    if unsampled:  # no power by design (the spec's power_sampling false): not drawn, never an 'x' of a failure
        cfgs = [c for c in cfgs if _sampled(full[c["config_id"]])]
        said = "; ".join(sorted({f"{c.get('label')} at {c.get('world_size')} GPUs" for c in unsampled}))
        if not cfgs:
            fd.empty_reason = f"no GPU power data: {NOT_SAMPLED}"
            return fd
        fd.notes.append(f"Not drawn ({NOT_SAMPLED}): {said}.")
        full = {c["config_id"]: full[c["config_id"]] for c in cfgs}
    base = prepare.shown_names(full, _lead, LAYOUT_FIELDS, suffix={cid: "" for cid in full})
    names = prepare.shown_names(
        full, _lead, LAYOUT_FIELDS, suffix=prepare.measured_suffixes(cfgs, lambda c: base[c["config_id"]])
    )
    tpp = [c for c in cfgs if names[c["config_id"]].startswith(TPP)]
    fields = [n for n in LAYOUT_FIELDS if len({str(full[c["config_id"]].get(n)) for c in tpp}) > 1]
    layout = {c["config_id"]: _layout(full[c["config_id"]], fields) for c in tpp}
    groups: dict[tuple, list[dict]] = {}  # the model-alone TP/PP configurations of a line at a GPU count
    for c in tpp:
        if measured_base(c["config_id"]) is None:
            groups.setdefault((names[c["config_id"]], c["world_size"]), []).append(c)
    best_ids = set()
    for cands in groups.values():
        ok = [c for c in cands if c.get("tokens_per_joule_mean") is not None]
        if ok:
            best_ids.add(max(ok, key=lambda c: (c["tokens_per_joule_mean"], c["config_id"]))["config_id"])
    for c in tpp:  # a prediction with a measured rank share is the best line's only where its model-alone twin is
        cid = c["config_id"]
        won = (measured_base(cid) or cid) in best_ids
        names[cid] = names[cid].replace(TPP, BEST if won else OTHER, 1)
    plain = [c for c in cfgs if not names[c["config_id"]].startswith(OTHER)]
    names.update(prepare.distinguish(plain, full, {c["config_id"]: names[c["config_id"]] for c in plain}, "world_size"))
    fd.rows = prepare.metric_rows(cfgs, DESCRIPTION.quantities, names, "world_size", GPUS)
    for r in fd.rows:
        cid = (r.get("config_ids") or [""])[0]
        if cid in layout:
            r["layout"] = layout[cid]
        if r["series"].startswith(BEST):
            r["note"] = (
                f"best layout {r['layout']}: best of the TP/PP configurations at {r['x']} GPUs by tokens "
                "per joule"
                + (" of the model alone; this point takes its measured rank share" if measured_base(cid) else "")
            )
    _name_layouts(fd.rows)
    if all(c.get("device") == "cpu" for c in cfgs):
        fd.empty_reason = NO_CPU_POWER
        for r in fd.rows:
            r["note"] = NO_CPU_POWER
    elif not any(r.get("y") is not None for r in fd.rows):
        reasons = sorted({n for c in cfgs for n in split_list(c.get("notes")) if n.startswith("energy:")})
        fd.empty_reason = "no GPU power data" + (": " + "; ".join(reasons)[:300] if reasons else "")
    else:
        _power_limit(fd, cfgs)
        fd.notes.append(drawing.dodge_note(fd.rows))  # type: ignore[arg-type]  # None notes are dropped when the figure is drawn
    return fd


def _power_limit(fd: prepare.FigureData, cfgs: list[dict]) -> None:
    """The power limit of the runs' GPUs (the catalog's power_cap_w, the board's maximum) as the
    power panel's reference line, where its values reach it, and a note naming the series that
    sit at it: their power per GPU is the limit, not a difference between them."""
    devices = sorted({d for c in cfgs for d in split_list(c.get("device_names"))})
    limits: dict = {}
    for d in devices:
        name = catalog.gpu_name(d)
        if name and catalog.gpu(name).power_cap_w > 0:
            limits.setdefault(catalog.gpu(name).power_cap_w, []).append(catalog.gpu(name).product)
    power = [r for r in fd.rows if r["panel"] == POWER.label and r.get("y") is not None]
    top = max((max(r["y"], r.get("ci95_high") or r["y"]) for r in power), default=0.0)
    fd.references = []
    for cap, products in sorted(limits.items()):
        if top < SHOWN_LIMIT * cap:
            continue
        what = f"power limit {cap:g} W ({', '.join(products)})"
        fd.references.append((POWER.label, cap, what))
        at = sorted({r["series"] for r in power if abs(r["y"] - cap) <= AT_LIMIT * cap}, key=drawing.natural)
        fd.notes.append(
            f"Power limit: {cap:g} W per GPU, the board's maximum ({', '.join(products)}, the GPU "
            "catalog's power_cap_w; dashed red line)."
            + (
                f" At the limit: {'; '.join(at)}. Their power per GPU is the limit, not a difference "
                "between them; tokens per joule tells them apart."
                if at
                else ""
            )
        )


def _name_layouts(rows: list[dict]) -> None:
    """Each best series is named by its winning layouts and the GPU counts where each won, e.g.
    'best TP/PP TP4/PP1 (8-1024), TP1/PP2 (2048)'; the CSV's note names it per point too."""
    runs: dict[str, list] = {}
    for r in sorted((r for r in rows if r.get("layout") and r["series"].startswith(BEST)), key=lambda r: r["x"]):
        if r["panel"] == rows[0]["panel"]:
            seq = runs.setdefault(r["series"], [])
            if seq and seq[-1][0] == r["layout"]:
                seq[-1][2] = r["x"]
            else:
                seq.append([r["layout"], r["x"], r["x"]])
    for name, seq in runs.items():
        said = (
            seq[0][0]
            if len(seq) == 1
            else ", ".join(f"{l} ({a:g}" + (f"-{b:g})" if b != a else ")") for l, a, b in seq)
        )
        new = name.replace(BEST, f"{BEST} {said}", 1)
        for r in rows:
            if r["series"] == name:
                r["series"] = new


def draw(fd: prepare.FigureData, study):
    muted = {r["series"] for r in fd.rows if r["series"].startswith(OTHER)}
    refs = fd.references
    fig, axes = drawing.figure_for(fd, legend_rows=drawing.legend_rows_for(fd, extra=len(refs)))
    drawing.draw_lines(fig, axes, fd, muted_series=muted)
    return fig
