"""How long planning a study takes (issue 53): `scalestudy study --study STUDY` and
`snakemake -n --config study=STUDY`, each as a subprocess from the checkout's root, timed by the wall
clock; prints the figures beside the issue's targets and asserts nothing.

    python benchmarks/planning_speed.py [--study paper] [--repeats 5] [--cold-repeats 2] [--no-snakemake]
    git archive HEAD~3 | tar -x -C /tmp/before && python benchmarks/planning_speed.py --root /tmp/before
                                         # another checkout's code and data (its src/ first on PYTHONPATH)

cold: a fresh, empty cache directory each time (SCALESTUDY_CACHE_DIR, launch/calibration_cache.py):
the calibration is read from the raw logs and every configuration predicted. warm: the same cache
directory, primed by one untimed call first: what a second plan of an unchanged study costs.
off: SCALESTUDY_CACHE_DIR=off, nothing kept on disk (each configuration still predicted once).
The checkout's own cache (.snakemake/scalestudy-cache) is neither read nor touched. The target is
judged on the wall clock's median; on a shared host the load average before each command set is
printed with it (rerun when it is high), and the median CPU time (user + system) of the calls, which
other processes' load changes less.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# the targets on 2 cores, seconds
TARGETS = {"scalestudy study": 2.0, "snakemake -n": 3.0}


def _tool(name: str) -> list[str]:
    """This interpreter's console script, or `python -m` where the environment has none."""
    exe = shutil.which(name, path=os.path.dirname(sys.executable))
    return [exe] if exe else [sys.executable, "-m", name]


def commands(study: str) -> dict[str, list[str]]:
    return {
        "scalestudy study": [*_tool("scalestudy"), "study", "--study", study],
        "snakemake -n": [*_tool("snakemake"), "-n", "--config", f"study={study}"],
    }


def timed(cmd: list[str], cache: str, root: Path = REPO) -> tuple[float, float]:
    """(wall seconds, CPU seconds user + system) of one call."""
    env = {**os.environ, "SCALESTUDY_CACHE_DIR": cache, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    if root != REPO:
        env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return dt, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def measure(cmd: list[str], repeats: int, cold_repeats: int, root: Path = REPO) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {"cold": [], "warm": [], "off": []}
    with tempfile.TemporaryDirectory(prefix="scalestudy-planning-") as tmp:
        for i in range(cold_repeats):
            out["cold"].append(timed(cmd, str(Path(tmp) / f"cold-{i}"), root))
        warm = str(Path(tmp) / "warm")
        timed(cmd, warm, root)  # primes it
        for _ in range(repeats):
            out["warm"].append(timed(cmd, warm, root))
        for _ in range(cold_repeats):
            out["off"].append(timed(cmd, "off", root))
    return out


def _row(what: str, how: str, runs: list[tuple], target: float | None) -> str:
    if not runs:
        return f"  {what:<18} {how:<5} (not run)"
    xs, cpu = [w for w, _ in runs], statistics.median(c for _, c in runs)
    med = statistics.median(xs)
    mark = "" if target is None else (f"  target <= {target:.0f} s: " + ("met" if med <= target else "NOT met"))
    return (
        f"  {what:<18} {how:<5} wall median {med:5.2f} s  min {min(xs):5.2f}  max {max(xs):5.2f}  "
        f"(n={len(xs)}; CPU {cpu:5.2f} s){mark}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", default="paper")
    ap.add_argument("--repeats", type=int, default=5, help="warm calls timed per command")
    ap.add_argument("--cold-repeats", type=int, default=2, help="cold (and cache-off) calls timed per command")
    ap.add_argument("--no-snakemake", action="store_true", help="time `scalestudy study` alone")
    ap.add_argument(
        "--root",
        type=Path,
        default=REPO,
        help="the checkout to time (default this one); another's src/ goes first on PYTHONPATH",
    )
    args = ap.parse_args(argv)
    root = args.root.resolve()
    cmds = commands(args.study)
    if args.no_snakemake:
        cmds.pop("snakemake -n")
    print(f"planning study {args.study} on {os.cpu_count()} CPUs, from {root}")
    for what, cmd in cmds.items():
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        res = measure(cmd, args.repeats, args.cold_repeats, root)
        print(f"{' '.join(Path(cmd[0]).name if i == 0 else c for i, c in enumerate(cmd))}  (load average {load:.2f})")
        for how in ("cold", "warm", "off"):
            print(_row(what, how, res[how], TARGETS[what]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
