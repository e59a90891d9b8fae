"""Measure the rank shares of study paper-rank on one GPU, as many as a device call allows.

    python benchmarks/rank_shares_device.py plan PLAN.json        # here: the study's runs, ordered
    python3 benchmarks/rank_shares_device.py run PLAN.json OUT --budget-s 450 --per-run-s 60   # on the GPU

`plan` orders the planned runs not yet measured (a committed run directory under
data/paper-rank/raw; --include-measured plans them too; --without-busy also plans the committed
tensor-parallel shares that have no GPU busy time, harness/device_busy.py, before the unmeasured
runs): the agreement check first, then FSDP
weak scaling, the tensor x pipeline grid by growing degrees, model sizes and strong scaling, each
group by its estimated cost, the 70B layouts last. `run` starts `scalestudy train` for each in turn (one process a rank
share), each under the harness's time limit (--per-run-s, or the plan entry's own `per_run_s`) (status `timeout`) and a kill after a grace period
(then the raw log is finalised as `timeout` here), and stops starting runs once the budget is
spent; the rest stay planned. Raw logs go to OUT/raw.tar.gz (run directories named by run id),
what it printed to OUT/console.txt. Needs only the package and torch where it runs.

    python benchmarks/rank_shares_device.py import OUT/raw.tar.gz ... data/paper-rank/raw   # here

`import` unpacks the runs into the study's raw directory (--replace: a run measured again takes the
place of the committed one, whose raw log stays in the git history). A run whose tracebacks name files by the
device's absolute paths (logged by a harness older than `measure/portable.py`) gets them made
portable there, and its status.json's checksums and seal recomputed; it says which.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ORDER = ("agreement", "weak_scaling", "tp_pp_grid", "model_sizes", "strong_scaling")
SLOW_STAGE_S = 180  # a Llama-2 70B stage's time limit (measured: killed at 80 s after two 20-32 s warm-up steps)


def _has_busy_time(run_dir: Path) -> bool:
    from scalestudy.measure import rawlog

    log = rawlog.read_run(run_dir)
    return any(r["key"] == "device_busy" and r["value"].get("available") for r in log.records)


def plan(out: Path, include_measured: bool = False, without_busy: bool = False) -> None:
    """The study's planned runs in order, less those whose raw log is committed (a finished run
    directory under data/paper-rank/raw) unless include_measured; with without_busy, the committed
    TP >= 2 shares without a GPU busy time come first (measured again, they replace the committed run)."""
    from scalestudy.measure.metrics import flops_per_token
    from scalestudy.spec.studies import load_study

    study = load_study("paper-rank")
    rows = []
    measured = 0
    for r in study.runs:
        done = study.raw_dir / r.run_id
        again = (without_busy and r.spec.tp >= 2 and r.spec.comm == "fake" and (done / "status.json").exists()
                 and _status(done).get("status") == "ok" and not _has_busy_time(done))
        if not include_measured and not again and (done / "status.json").exists():
            measured += 1
            continue
        s = r.spec
        group = min(ORDER.index(e) for e in r.experiments if e in ORDER)
        per_rank = flops_per_token(s.model_config(), s.seq_len)["flops_per_token"] * s.tokens_per_step / s.world_size
        degree = max(s.tp, s.pp) if "tp_pp_grid" in r.experiments else 0
        rows.append({"key": [not again, s.model == "llama2-70b", group, degree, s.tp * s.pp, per_rank,
                             s.world_size, s.comm == "fake", r.run_id],
                     "run_id": r.run_id, "experiments": list(r.experiments), "spec": s.to_dict()})
    for x in rows:  # a 70B stage: two warm-up, three measured and one traced step of 20-32 s, and its start
        if x["spec"]["model"] == "llama2-70b":
            x["per_run_s"] = SLOW_STAGE_S
    rows.sort(key=lambda x: x["key"])
    out.write_text(json.dumps([{k: v for k, v in x.items() if k != "key"} for x in rows], indent=1) + "\n")
    print(f"{len(rows)} runs planned in {out}" + (f" ({measured} measured runs left out)" if measured else ""))


def _status(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def _summary(run_dir: Path) -> str:
    steps, peak, busy = [], 0, ""
    try:
        for line in (run_dir / "metrics.jsonl").read_text().splitlines():
            rec = json.loads(line)
            v = rec["value"]
            if rec["key"] == "iteration" and v["phase"] == "measured":
                steps.append(v["step_time_s"])
                peak = max(peak, v["memory"].get("peak_allocated_bytes", 0))
            elif rec["key"] == "device_busy":
                busy = (f"; GPU busy {v['busy_s_per_step']:.4f} s a step (traced steps' wall "
                        f"{', '.join(f'{w:.4f}' for w in v['host_wall_s'])} s)" if v.get("available")
                        else f"; GPU busy not measured: {v.get('reason')}")
    except (OSError, ValueError, KeyError):
        return ""
    if not steps:
        return ""
    return f"step {sum(steps) / len(steps):.4f} s over {len(steps)}, peak allocated {peak / 2**30:.1f} GiB{busy}"


def run(plan_file: Path, out: Path, budget_s: float, per_run_s: float, grace_s: float) -> None:
    from scalestudy.measure import rawlog

    runs = json.loads(plan_file.read_text())
    raw = out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    console = open(out / "console.txt", "a")

    def say(msg: str) -> None:
        print(msg, flush=True)
        console.write(msg + "\n")
        console.flush()

    started = time.monotonic()
    say(f"{len(runs)} runs planned; budget {budget_s:.0f} s, {per_run_s:.0f} s a run (+{grace_s:.0f} s grace)")
    done = 0
    for i, r in enumerate(runs):
        left = budget_s - (time.monotonic() - started)
        if left < 25 or r.get("per_run_s", per_run_s) > left - 5:
            say(f"budget spent after {done} runs: {len(runs) - i} runs stay planned")
            break
        run_dir = raw / r["run_id"]
        spec_rel = f"specs/{r['run_id']}.json"
        (out / "specs").mkdir(exist_ok=True)
        (out / spec_rel).write_text(json.dumps(r["spec"]))
        limit = r.get("per_run_s", per_run_s)
        t0 = time.monotonic()
        # run from OUT with relative paths and argv[0] "scalestudy": run.json records the command
        # line, and no path of this machine may end up in the committed raw logs
        cmd = [sys.executable, "-c", "import sys; from scalestudy.cli import main; sys.argv[0] = 'scalestudy'; "
               "sys.exit(main())", "train", "--spec", spec_rel, "--run-dir", f"raw/{r['run_id']}",
               "--time-limit-s", f"{limit:.0f}", "--quiet"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit + grace_s, cwd=out)
            tail = (proc.stdout + proc.stderr)[-600:]
        except subprocess.TimeoutExpired:
            tail = f"killed after {limit + grace_s:.0f} s"
            if run_dir.exists():
                rawlog.try_finalize(run_dir, 1, force=True, missing_status="timeout",
                                    missing_reason=f"killed by the device script after {limit + grace_s:.0f} s")
        st = _status(run_dir)
        done += 1
        say(f"[{i + 1}/{len(runs)}] {r['run_id']} ({','.join(r['experiments'])}, rank {r['spec']['emulate_rank']}): "
            f"{st.get('status', 'no status')} in {time.monotonic() - t0:.0f} s; {_summary(run_dir)}"
            + ("" if st.get("status") == "ok" else f"\n    {st.get('error') or tail.strip()[-300:]}"))
    for d in raw.iterdir():
        if d.is_dir() and (d / "status.json").exists():
            rawlog.compress_run(d)
    with tarfile.open(out / "raw.tar.gz", "w:gz") as tar:
        tar.add(raw, arcname="raw")
    say(f"wrote {out / 'raw.tar.gz'} after {time.monotonic() - started:.0f} s")


def import_runs(tars: list[Path], dest: Path, replace: bool = False) -> None:
    import tempfile

    import import_device_runs  # benchmarks/, beside this script

    from scalestudy.measure import portable, rawlog

    for tar_path in tars:
        with tempfile.TemporaryDirectory() as tmp, tarfile.open(tar_path) as tar:
            tar.extractall(tmp, filter="data")
            for run_dir in sorted((Path(tmp) / "raw").iterdir()):
                if (dest / run_dir.name).exists() and not replace:
                    raise SystemExit(f"{dest / run_dir.name} exists already: not overwritten (--replace to remeasure)")
                rawlog.read_run(run_dir)  # its seal and checksums hold as measured
                text = rawlog.read_member_bytes(run_dir, rawlog.METRICS_FILE).decode()
                lines = []
                for line in text.splitlines():
                    rec = json.loads(line)
                    tb = rec["metadata"].get("traceback")
                    if tb is not None:
                        rec["metadata"]["traceback"] = portable.portable_text(tb)
                    lines.append(json.dumps(rec, sort_keys=True))
                new = "\n".join(lines) + "\n"
                if new != text:  # checksums, seal and gzip redone as for any run made fit to commit
                    rawlog.member_path(run_dir, rawlog.METRICS_FILE).unlink()
                    (run_dir / rawlog.METRICS_FILE).write_text(new)
                    import_device_runs.import_run(run_dir, prefixes=[])
                    print(f"{run_dir.name}: traceback paths made portable, checksums and seal recomputed")
                rawlog.read_run(run_dir)
                if (dest / run_dir.name).exists():  # the remeasured run takes its place; git keeps the old one
                    shutil.rmtree(dest / run_dir.name)
                    print(f"replaced {run_dir.name} (the earlier measurement stays in the history)")
                shutil.copytree(run_dir, dest / run_dir.name)
                print(f"imported {run_dir.name}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("plan")
    a.add_argument("plan_file", type=Path)
    a.add_argument("--include-measured", action="store_true", help="plan the runs already committed too")
    a.add_argument("--without-busy", action="store_true",
                   help="plan the committed TP >= 2 shares without a GPU busy time first (then import --replace)")
    b = sub.add_parser("run")
    b.add_argument("plan_file", type=Path)
    b.add_argument("out", type=Path)
    b.add_argument("--budget-s", type=float, default=450)
    b.add_argument("--per-run-s", type=float, default=60)
    b.add_argument("--grace-s", type=float, default=30)
    c = sub.add_parser("import")
    c.add_argument("tars", type=Path, nargs="+")
    c.add_argument("dest", type=Path)
    c.add_argument("--replace", action="store_true", help="a run measured again replaces the committed one")
    args = p.parse_args()
    if args.cmd == "plan":
        plan(args.plan_file, args.include_measured, args.without_busy)
    elif args.cmd == "import":
        import_runs(args.tars, args.dest, args.replace)
    else:
        os.environ.setdefault("PYTHONUNBUFFERED", "1")
        run(args.plan_file, args.out, args.budget_s, args.per_run_s, args.grace_s)


if __name__ == "__main__":
    main()
