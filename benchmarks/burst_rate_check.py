"""The power model's limiter against bursts of products measured on another board (data/burst-rate):
each phase's rate and mean power as perfmodel/power.py gives them (fitted on the H200's duty cycles,
data/power-duty; nothing refitted here) beside the measurement. Analysis side only.

    python benchmarks/burst_rate_check.py [data/burst-rate/h100-burst-rate.jsonl.gz]

Rate: the back-to-back rate (the mean of the first and last phase, at the limit) x burst_speed of
the phase's full-clock share (its bursts' window share, no more than its average power under the cap allows).
Power: power_w with the phase's compute share, its 10 ms idle gaps and its bursts.
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys

from scalestudy.perfmodel import power

DEFAULT = "data/burst-rate/h100-burst-rate.jsonl.gz"


def rows(path: str = DEFAULT, root: str = ".") -> list[dict]:
    model = power.load(root)
    recs = [json.loads(line) for line in gzip.open(path, "rt")]
    head = next(r for r in recs if r.get("kind") == "header")
    phases = [r for r in recs if r.get("kind") == "phase"]
    at_limit = statistics.mean(p["tflops"] for p in phases if p["burst_products"] is None)
    gap_s = head["gap_ms"] / 1000.0
    out = []
    for p in phases:
        burst = p["burst_ms_measured"] / 1000.0 if p["burst_products"] else power.UNBOUNDED_S
        period = dict(gap_s=gap_s if p["burst_products"] else 0.0, cap_w=head["power_limit_w"], burst_s=burst)
        rate = at_limit * model.burst_speed(model.burst_full_clock_share(p["compute_share"], **period),
                                            head["power_limit_w"])
        watts = model.power_w(p["compute_share"], **period)
        out.append({"phase": p["phase"], "burst_ms": p["burst_ms_measured"], "share": p["compute_share"],
                    "rate": p["tflops"], "rate_model": rate, "power": p["mean_power_w"], "power_model": watts})
    return out


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else DEFAULT
    rs = rows(path)
    print(f"{path}: measured against perfmodel/power.py (fitted on the H200's duty cycles)\n")
    print("| phase | burst (ms) | compute share | rate (TFLOP/s) | model | error | power (W) | model | error |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rs:
        burst = f"{r['burst_ms']:.1f}" if r["burst_ms"] else "-"
        print(f"| {r['phase']} | {burst} | {r['share']:.2f} | {r['rate']:.1f} | {r['rate_model']:.1f} "
              f"| {100 * (r['rate_model'] / r['rate'] - 1):+.1f}% | {r['power']:.0f} | {r['power_model']:.0f} "
              f"| {100 * (r['power_model'] / r['power'] - 1):+.1f}% |")
    worst_rate = max(abs(r["rate_model"] / r["rate"] - 1) for r in rs)
    worst_power = max(abs(r["power_model"] / r["power"] - 1) for r in rs)
    print(f"\nworst |error|: rate {100 * worst_rate:.1f}%, power {100 * worst_power:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
