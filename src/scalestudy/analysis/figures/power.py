"""Power (the paper's Fig. 10): total GPU power and tokens per joule (= tokens/s per watt)
against GPUs, FSDP against the best tensor/pipeline configuration at each GPU count (best by
tokens per joule; the others tried are grey dots) and HSDP where the study ran it.
GPU board power only (NVML): CPU, memory and network are not included. On CPU runs there is no
GPU power: the figure says so in an explicit panel. Configurations: experiment `power`."""

from __future__ import annotations

from scalestudy.analysis.figures import common

NAME = "power"
EXPERIMENTS = ("power",)
SCOPE = "GPU board power only (NVML)"
TITLE = f"Power and energy efficiency against GPUs — {SCOPE}"
X_QUANTITY = "GPUs (world size)"
PANELS = [(f"total GPU power (W) — {SCOPE}", "power_w_total", 1.0),
          ("tokens per joule (= tokens/s per W)", "tokens_per_joule", 1.0)]
NO_CPU_POWER = "no GPU power data (CPU run)"
BEST, OTHER = "best TP/PP", "other TP/PP"


def _family(c: dict) -> str:
    if c["tp"] > 1 or c["pp"] > 1:
        return "tp/pp"
    return common.layout_name(c["layout"])


def data(tables, study) -> common.FigureData:
    fd, cfgs = common.begin(NAME, TITLE, tables, study, EXPERIMENTS, panels=[p for p, _, _ in PANELS])
    if not cfgs:
        return fd
    fd.cpu = common.is_cpu(cfgs)
    models = {c["model"] for c in cfgs}
    prefix = (lambda c: f"{c['model']} ") if len(models) > 1 else (lambda c: "")
    series: dict[str, str] = {}
    for c in cfgs:
        if _family(c) != "tp/pp":
            series[c["config_id"]] = prefix(c) + _family(c)
    for key in sorted({(c["model"], c["world_size"]) for c in cfgs}):
        cands = [c for c in cfgs if (c["model"], c["world_size"]) == key and _family(c) == "tp/pp"]
        ok = [c for c in cands if c.get("tokens_per_joule_mean") is not None]
        best = max(ok, key=lambda c: (c["tokens_per_joule_mean"], c["config_id"])) if ok else None
        for c in cands:
            series[c["config_id"]] = prefix(c) + (BEST if c is best else OTHER)
    fd.rows = common.metric_rows(cfgs, PANELS, series, "world_size", X_QUANTITY)
    for r in fd.rows:
        if r["panel"] == PANELS[0][0]:
            r["y_quantity"] = "total GPU power (W)"
        if r["series"].endswith(BEST):
            r["note"] = f"best of the TP/PP configurations at {r['x']} GPUs by tokens per joule"
    if all(c.get("device") == "cpu" for c in cfgs):
        fd.empty_reason = NO_CPU_POWER
        for r in fd.rows:
            r["note"] = NO_CPU_POWER
    elif not any(r.get("y") is not None for r in fd.rows):
        reasons = sorted({n for c in cfgs for n in common.split_list(c.get("notes")) if n.startswith("energy:")})
        fd.empty_reason = "no GPU power data" + (": " + "; ".join(reasons)[:300] if reasons else "")
    fd.notes = [f"Power scope: {SCOPE}; CPU, memory and network power are not included.",
                common.ERRORBAR_NOTE, common.FAILED_NOTE]
    return fd


def draw(fd: common.FigureData, study):
    fig, axes = common.figure_for(fd)
    muted = {r["series"] for r in fd.rows if r["series"].endswith(OTHER)}
    common.draw_lines(fig, axes, fd, muted_series=muted)
    return fig
