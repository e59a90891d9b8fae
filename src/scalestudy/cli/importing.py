"""The `scalestudy import` commands: public logs of runs made elsewhere, as raw logs of this package
(`mlperf`), and finished runs of this package from another machine (`runs`).

    scalestudy import mlperf --source MIRROR --repository github.com/mlcommons/training_results_v3.1 \\
        --results 'NVIDIA/results/eos*_ngc23.09_nemo/gpt3/result_*.txt' --model gpt3-175b --system h100-eos \\
        --out data/mlperf/raw

MIRROR is a git repository (a bare mirror or a clone, read at --commit, default HEAD) or a plain
directory holding `<org>/results/...`, `<org>/systems/...` and `<org>/benchmarks/...` (your own
MLPerf-format logs). A result file byte-identical to one already under --out (another repository or
path) or to an earlier one of the same import is skipped, saying so. docs/mlperf.md says what is
imported and how.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scalestudy.measure.mllog import MLLogError
from scalestudy.measure.mlperf_import import ImportOptions, MLPerfImportError, import_results, open_tree, select_results
from scalestudy.spec import catalog
from scalestudy.spec.run import SpecError


def cmd_import_mlperf(args: argparse.Namespace) -> int:
    if args.model not in catalog.models():
        print(
            f"scalestudy: unknown model {args.model!r}; known: {', '.join(sorted(catalog.models()))}", file=sys.stderr
        )
        return 2
    try:
        tree = open_tree(args.source, args.repository, args.commit)
        paths = select_results(tree, args.results)
        if not paths:
            raise MLPerfImportError(f"{args.repository}@{tree.commit[:12]}: no file matches {args.results!r}")
        opts = ImportOptions(
            model=args.model,
            warmup_iters=args.warmup_iters,
            measured_iters=args.measured_iters,
            system=args.system or "",
        )
        done = import_results(tree, paths, opts, Path(args.out), args.config)
    except (MLPerfImportError, MLLogError, SpecError) as e:
        print(f"scalestudy: {e}", file=sys.stderr)
        return 2
    print(
        f"{len(done)} runs from {args.repository}@{tree.commit} -> {args.out}"
        + (f"; {len(done.skipped)} result file{'s' if len(done.skipped) > 1 else ''} skipped" if done.skipped else "")
    )
    for line in done.skipped:
        print(f"  {line}")
    for line in done.stale:
        print(f"  note: {line}")
    for imp in done:
        d = imp.run["disagreements"]
        print(
            f"  {imp.spec.run_id}  {imp.status}  {imp.n_steps} steps  <- {imp.result_path}"
            + (f"  [{len(d)} log/config disagreement{'s' if len(d) > 1 else ''}]" if d else "")
        )
    return 0


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "import",
        help="import public logs of runs made elsewhere as raw logs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(
        dest="what",
        required=True,
        metavar="WHAT",
        help="what the logs are: mlperf (public result files), runs (raw logs of this package)",
    )
    m = sub.add_parser(
        "mlperf",
        help="MLPerf Training result files (mllog) -> one raw log each",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    m.add_argument("--source", required=True, help="the submission repository: a git mirror or clone, or a directory")
    m.add_argument(
        "--repository",
        required=True,
        help="what the raw logs name as the source, e.g. github.com/mlcommons/training_results_v3.1",
    )
    m.add_argument("--commit", help="the commit to read (a git source; default HEAD)")
    m.add_argument(
        "--results",
        required=True,
        help="a glob of result files relative to the repository, e.g. 'NVIDIA/results/eos*/gpt3/result_*.txt'",
    )
    m.add_argument("--model", required=True, help="the model shape of the catalog the runs trained, e.g. gpt3-175b")
    m.add_argument(
        "--system",
        help="the machine the runs ran on, by the name of its cluster description "
        "(workflow/clusters/NAME.yaml), e.g. h100-eos; RunSpec system of every run "
        "[allowed: lowercase letters, digits and '-'; default: none]",
    )
    m.add_argument(
        "--config",
        help="the launch configuration (config_*.sh, relative to the repository) of every "
        "selected file; default: found by system and node count",
    )
    m.add_argument(
        "--warmup-iters",
        type=int,
        default=10,
        help="optimizer steps taken as warm-up, as RunSpec warmup_iters [unit: steps; allowed: >= 0; "
        "default: 10, the package's]",
    )
    m.add_argument(
        "--measured-iters",
        type=int,
        help="optimizer steps measured after warm-up [unit: steps; allowed: >= 1; default: the fewest "
        "any selected file has after warm-up]",
    )
    m.add_argument("--out", default="data/mlperf/raw", help="where the run directories go [default: data/mlperf/raw]")
    m.set_defaults(func=cmd_import_mlperf)
    r = sub.add_parser(
        "runs",
        help="finished runs of a study made on another machine, copied in as they were written",
        description=RUNS_DOC,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("--study", required=True, help="the study the runs belong to (they land in data/STUDY/raw)")
    r.add_argument("dirs", nargs="+", metavar="DIR", help="a run directory, or a folder of run directories")
    r.set_defaults(func=cmd_import_runs)
    g = subparsers.add_parser(
        "migrate", help="one-time migrations of committed raw logs (each says in the run what it changed)"
    )
    gs = g.add_subparsers(dest="migration", required=True, metavar="MIGRATION", help="portable-paths")
    m2 = gs.add_parser(
        "portable-paths",
        help="absolute paths of the machine a run ran on, made portable in its "
        "run.json (measure/migrate.py); the run is sealed again and says so",
    )
    which = m2.add_mutually_exclusive_group(required=True)
    which.add_argument("--study", help="the study whose raw logs (data/STUDY/raw) are migrated")
    which.add_argument("--raw-dir", help="a folder of run directories that belongs to no study")
    m2.set_defaults(func=cmd_migrate_paths)
    return p


def cmd_migrate_paths(args: argparse.Namespace) -> int:
    from scalestudy.measure.migrate import migrate
    from scalestudy.measure.rawlog import RawLogError
    from scalestudy.spec.studies import load_study

    raw, name = (
        (Path(args.raw_dir), args.raw_dir) if args.raw_dir else (load_study(args.study).raw_dir, f"study {args.study}")
    )
    try:
        done = migrate(raw)
    except RawLogError as e:
        print(f"scalestudy migrate: refused: {e} (a run whose seal does not hold is not migrated)", file=sys.stderr)
        return 2
    keys = sorted({k for changed in done.values() for k in changed})
    print(f"{len(done)} runs of {name} migrated (portable paths); keys changed: {', '.join(keys) or 'none'}")
    return 0


RUNS_DOC = """Bring finished runs of a study, made on another machine (a GPU host, a cluster), into
data/STUDY/raw byte for byte: every run is checked first (its seal and checksums, no absolute path of
the machine it ran on, a run the study plans and not of another study, a whole copy) and nothing is
copied when one is refused; a run already there with the same bytes is left as it is.

    scalestudy import runs --study h200-reference OUT/raw
"""


def cmd_import_runs(args: argparse.Namespace) -> int:
    from scalestudy.measure.run_import import RunImportError, import_runs
    from scalestudy.spec.studies import load_study

    study = load_study(args.study)
    try:
        done = import_runs(args.dirs, study)
    except RunImportError as e:
        print(f"scalestudy import runs: refused: {e}", file=sys.stderr)
        return 2
    for imp in done:
        print(f"  {imp.run_id}  {'copied to ' + str(imp.dest) if imp.copied else 'already there (same bytes)'}")
    print(
        f"{sum(i.copied for i in done)} runs imported into study {study.name}, {sum(not i.copied for i in done)} "
        "already there"
    )
    return 0
