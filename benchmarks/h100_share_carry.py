"""How well the model carries a rank share measured on the H200 to the H100: paper-rank's H200
shares (capped at an H100's memory) times the model's carry (perfmodel/predict.py share_carry, the
one paper-model's predictions with measured inputs use) against the same shares measured on an
H100 (study h100-rank). Like with like: where the H200 share is its wall step (no GPU busy time),
the H100's wall step is compared, else the GPU busy times. Analysis side only: reads the two
studies' committed tables.

    python benchmarks/h100_share_carry.py            # prints a markdown table and the median error

The carry is computed on paper-model's cluster (h100-paper) with its attention kernel set to the one
the harness runs on both GPUs (cuDNN's sm90 flash attention under torch 2.11's SDPA; the cluster's
own FlashAttention-2 is the paper's assumed stack, not the one measured here), and, for reference,
with the cluster as committed. Nothing is fitted here: the carry is the model's as committed.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys

from scalestudy.measure.csv_format import read_csv_rows, split_list
from scalestudy.analysis.rank_shares import CONFIGS_FILE
from scalestudy.perfmodel.predict import share_carry
from scalestudy.perfmodel.rank_shares import WALL, load_shares, share_key, stands_in_for
from scalestudy.perfmodel.study import StudyPredictor
from scalestudy.spec.rank_share import share_group
from scalestudy.spec.studies import load_study

HARNESS_ATTENTION = "cudnn"


def rows(root: str = ".", paper_stack: bool = False) -> list[dict]:
    model = StudyPredictor(load_study("paper-model", root), root)
    cluster, _ = model.cluster()
    if not paper_stack:
        cluster = dataclasses.replace(
            cluster,
            attention_kernel=HARNESS_ATTENTION,
            attention_kernel_source="the harness's, as measured (torch 2.11 SDPA on sm90)",
        )
    h100_study = load_study("h100-rank", root)
    h200, h100 = load_shares("paper-rank", root), load_shares("h100-rank", root)
    gpu = stands_in_for(h100_study)
    specs = {share_key(p.spec, gpu): p.spec for p in h100_study.runs if p.spec.emulate_rank == 0}
    walls = {
        r["group_id"]: max(float(t) for t in split_list(r["stage_compute_times_s"]))
        for r in read_csv_rows(h100_study.root / "data" / h100_study.name / "tables" / CONFIGS_FILE)
        if r["status"] == "ok"
    }
    out = []
    for key, there in h100.items():
        here = h200.get(key)
        spec = specs.get(key)
        if spec is None or here is None or there.status != "ok" or here.status != "ok":
            continue
        carry = share_carry(spec, cluster, model.cal, here, model.options)
        h100_s, h100_source = (
            (walls[share_group(spec)], WALL) if here.source == WALL else (there.compute_s, there.source)
        )
        out.append(
            {
                "layout": f"{spec.model} {spec.world_size} GPUs TP{spec.tp} PP{spec.pp} mb{spec.micro_batch} "
                f"gb{spec.global_batch}",
                "h200_s": here.compute_s,
                "h200_source": here.source,
                "h100_s": h100_s,
                "h100_source": h100_source,
                "measured_ratio": h100_s / here.compute_s,
                "carry": carry,
                "error": here.compute_s * carry / h100_s - 1,
                "caveat": bool(here.caveat),
                "order": (spec.model, spec.tp, spec.pp, spec.world_size),
            }
        )
    return sorted(out, key=lambda r: r["order"])


def main() -> int:
    rs = rows()
    print(f"carry with the harness's attention kernel ({HARNESS_ATTENTION}) on both GPUs\n")
    print("| layout | H200 share (s) | H100 share (s) | measured H100/H200 | model's carry | carried vs H100 |")
    print("|---|---|---|---|---|---|")
    for r in rs:
        print(
            f"| {r['layout']} | {r['h200_s']:.4f} ({r['h200_source']}{', known artefact' if r['caveat'] else ''}) "
            f"| {r['h100_s']:.4f} ({r['h100_source']}) | {r['measured_ratio']:.3f} | {r['carry']:.3f} "
            f"| {100 * r['error']:+.1f}% |"
        )
    clean = [abs(r["error"]) for r in rs if not r["caveat"]]
    if clean:
        print(
            f"\n{len(rs)} shares on both GPUs; without known artefacts ({len(clean)}): median |error| "
            f"{100 * statistics.median(clean):.1f}%, max {100 * max(clean):.1f}%"
        )
    paper = [abs(r["error"]) for r in rows(paper_stack=True) if not r["caveat"]]
    if paper:
        print(
            f"with the cluster's own attention kernel (the paper's assumed stack): median |error| "
            f"{100 * statistics.median(paper):.1f}%, max {100 * max(paper):.1f}%"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
