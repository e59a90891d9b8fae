"""Print the performance model's targets (issue 13) against what it predicts; asserts nothing.

    python benchmarks/perfmodel_targets.py [--root .]

External ledger (workflow/validation/external.yaml; nothing fitted to it): torchtitan A100 FSDP rows
within +-5%, torchtitan H100 bf16 eager rows within +-10% and the 8 -> 128 GPU ratio within 3 pp,
Narayanan et al. 2021 Table 1 with median |error| <= 10% and none beyond +-20%. Against the paper:
C1 (aim: within +-10 pp), C2, C3 (aim: the paper's sign), C4, and the HSDP question at 256 and 2048.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scalestudy.perfmodel.external import group_summary, predict_ledger
from scalestudy.perfmodel.predict import calibrate
from scalestudy.perfmodel.validate import DEFAULT_CALIBRATION, paper_claims


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=".")
    root = Path(ap.parse_args().root)
    cal = calibrate([DEFAULT_CALIBRATION], root)
    data, rows = predict_ledger(cal, root)
    print("target                                   result")
    for group, s in group_summary(data, rows).items():
        if s["median_abs_error"] is None:
            print(f"{group:40s} no expressible row")
            continue
        line = (
            f"{group:40s} {s['n_predicted']} rows: |error| median {100 * s['median_abs_error']:.1f}%, "
            f"max {100 * s['max_abs_error']:.1f}% ({s['n_not_expressible']} not expressible); "
            f"target {s['target']}: {'met' if s['within_target'] else 'NOT met'}"
        )
        print(line)
        if "ratio" in s:
            q = s["ratio"]
            print(
                f"{'':40s} 8 -> 128 GPUs: published {q['published_pct']:+.1f}%, predicted {q['predicted_pct']:+.1f}% "
                f"({q['error_pp']:+.1f} pp; target 3 pp)"
            )
    for r in paper_claims(cal, root):
        paper = "not reported" if r.paper is None else f"{r.paper:+.2f}{r.unit}"
        aim = {"C1": "within +-10 pp", "C3": "the paper's sign"}.get(r.id, "reported")
        print(
            f"{r.id:40s} predicted {r.predicted:+.2f}{r.unit} [{r.low:+.2f}, {r.high:+.2f}], paper {paper} (aim: {aim})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
