"""Power (the paper's Fig. 10): total GPU power and tokens per joule (= tokens/s per watt)
against GPUs, FSDP against the best tensor/pipeline configuration at each GPU count (best by
tokens per joule; the others tried are grey dots) and HSDP where the study ran it; a further
line per backend, model, ... where those differ. GPU board power only (NVML where measured): CPU, memory and
network are not included. On CPU runs there is no GPU power: the figure says so in an explicit
panel. Configurations: experiment `power`."""

from __future__ import annotations

from scalestudy.measure.csv_format import split_list
from scalestudy.analysis.figures import drawing, prepare
from scalestudy.analysis.figures.description import Description, Quantity

NAME = "power"
EXPERIMENTS = ("power",)
SCOPE = "GPU board power only"
GPUS = Quantity("GPUs", "world size, log 2")
DESCRIPTION = Description(
    name=NAME, title=f"Power and energy efficiency against GPUs — {SCOPE}",
    paper="the paper's Fig. 10",
    shows="Power per GPU and tokens per joule (tokens/s per watt) against the number of GPUs (log-2 axis)",
    series=("one line per strategy family (FSDP, HSDP) and one joining the best tensor/pipeline configuration at "
            "each GPU count (by tokens per joule; its TP/PP layout written at each point; the others tried are grey "
            "dots), each also named by what else "
            "differs (backend, model, compile)"),
    x=GPUS,
    quantities=(Quantity("power per GPU", "W", "power_w_per_gpu"),
                Quantity("tokens per joule", "tokens/J", "tokens_per_joule")),
    category="Power",
    notes=(f"Power scope: {SCOPE} (a measured run reads it through NVML; a prediction gives the board's); CPU, "
           "memory and network power are not included.", drawing.FAILED_NOTE),
)
NO_CPU_POWER = "no GPU power data (CPU run)"
BEST, OTHER = "best TP/PP", "other TP/PP"
TPP = "TP/PP"


def _lead(s: dict) -> str:
    return TPP if prepare.as_int(s.get("tp")) > 1 or prepare.as_int(s.get("pp")) > 1 else prepare.family(s)


def data(tables, study) -> prepare.FigureData:
    fd, cfgs = prepare.begin(DESCRIPTION, tables, study, EXPERIMENTS)
    if not cfgs:
        return fd
    fd.cpu = prepare.is_cpu(cfgs)
    specs = prepare.specs_by_config(tables)
    full = {c["config_id"]: prepare.config_spec(c, specs) for c in cfgs}
    base = prepare.shown_names(full, _lead, suffix={cid: "" for cid in full})
    names = prepare.shown_names(full, _lead, suffix=prepare.measured_suffixes(cfgs, lambda c: base[c["config_id"]]))
    groups: dict[tuple, list[dict]] = {}
    for c in cfgs:
        if names[c["config_id"]].startswith(TPP):
            groups.setdefault((names[c["config_id"]], c["world_size"]), []).append(c)
    layout = {}
    for (name, _), cands in groups.items():
        ok = [c for c in cands if c.get("tokens_per_joule_mean") is not None]
        best = max(ok, key=lambda c: (c["tokens_per_joule_mean"], c["config_id"])) if ok else None
        for c in cands:
            names[c["config_id"]] = name.replace(TPP, BEST if c is best else OTHER, 1)
            layout[c["config_id"]] = f"TP{prepare.as_int(full[c['config_id']].get('tp'))}/PP{prepare.as_int(full[c['config_id']].get('pp'))}"
    plain = [c for c in cfgs if not names[c["config_id"]].startswith(OTHER)]
    names.update(prepare.distinguish(plain, full, {c["config_id"]: names[c["config_id"]] for c in plain},
                                     "world_size"))
    fd.rows = prepare.metric_rows(cfgs, DESCRIPTION.quantities, names, "world_size", GPUS)
    for r in fd.rows:
        if r["series"].startswith(BEST):
            r["layout"] = layout.get((r.get("config_ids") or [""])[0], "")
            r["note"] = f"best layout {r['layout']}: best of the TP/PP configurations at {r['x']} GPUs by tokens per joule"
    _name_layouts(fd.rows)
    if all(c.get("device") == "cpu" for c in cfgs):
        fd.empty_reason = NO_CPU_POWER
        for r in fd.rows:
            r["note"] = NO_CPU_POWER
    elif not any(r.get("y") is not None for r in fd.rows):
        reasons = sorted({n for c in cfgs for n in split_list(c.get("notes")) if n.startswith("energy:")})
        fd.empty_reason = "no GPU power data" + (": " + "; ".join(reasons)[:300] if reasons else "")
    return fd


def _name_layouts(rows: list[dict]) -> None:
    """Each best series is named by its winning layouts and the GPU counts where each won, e.g.
    'best TP/PP: TP4/PP1 (8-1024), TP1/PP2 (2048)'; the CSV's note names it per point too."""
    runs: dict[str, list] = {}
    for r in sorted((r for r in rows if r.get("layout")), key=lambda r: r["x"]):
        if r["panel"] == rows[0]["panel"]:
            seq = runs.setdefault(r["series"], [])
            if seq and seq[-1][0] == r["layout"]:
                seq[-1][2] = r["x"]
            else:
                seq.append([r["layout"], r["x"], r["x"]])
    for name, seq in runs.items():
        said = seq[0][0] if len(seq) == 1 else ", ".join(f"{l} ({a:g}" + (f"-{b:g})" if b != a else ")") for l, a, b in seq)
        new = name.replace(BEST, f"{BEST} {said}", 1)
        for r in rows:
            if r["series"] == name:
                r["series"] = new


def draw(fd: prepare.FigureData, study):
    muted = {r["series"] for r in fd.rows if r["series"].startswith(OTHER)}
    fig, axes = drawing.figure_for(fd, legend_rows=drawing.legend_rows_for(fd))
    drawing.draw_lines(fig, axes, fd, muted_series=muted)
    return fig
