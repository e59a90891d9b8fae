"""The `scalestudy import` commands: public logs of runs made elsewhere, as raw logs of this package.

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
        print(f"scalestudy: unknown model {args.model!r}; known: {', '.join(sorted(catalog.models()))}",
              file=sys.stderr)
        return 2
    try:
        tree = open_tree(args.source, args.repository, args.commit)
        paths = select_results(tree, args.results)
        if not paths:
            raise MLPerfImportError(f"{args.repository}@{tree.commit[:12]}: no file matches {args.results!r}")
        opts = ImportOptions(model=args.model, warmup_iters=args.warmup_iters, measured_iters=args.measured_iters,
                             system=args.system or "")
        done = import_results(tree, paths, opts, Path(args.out), args.config)
    except (MLPerfImportError, MLLogError, SpecError) as e:
        print(f"scalestudy: {e}", file=sys.stderr)
        return 2
    print(f"{len(done)} runs from {args.repository}@{tree.commit} -> {args.out}"
          + (f"; {len(done.skipped)} result file{'s' if len(done.skipped) > 1 else ''} skipped" if done.skipped else ""))
    for line in done.skipped:
        print(f"  {line}")
    for line in done.stale:
        print(f"  note: {line}")
    for imp in done:
        d = imp.run["disagreements"]
        print(f"  {imp.spec.run_id}  {imp.status}  {imp.n_steps} steps  <- {imp.result_path}"
              + (f"  [{len(d)} log/config disagreement{'s' if len(d) > 1 else ''}]" if d else ""))
    return 0


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("import", help="import public logs of runs made elsewhere as raw logs",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True, metavar="WHAT", help="what the logs are: mlperf")
    m = sub.add_parser("mlperf", help="MLPerf Training result files (mllog) -> one raw log each",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    m.add_argument("--source", required=True, help="the submission repository: a git mirror or clone, or a directory")
    m.add_argument("--repository", required=True,
                   help="what the raw logs name as the source, e.g. github.com/mlcommons/training_results_v3.1")
    m.add_argument("--commit", help="the commit to read (a git source; default HEAD)")
    m.add_argument("--results", required=True,
                   help="a glob of result files relative to the repository, e.g. 'NVIDIA/results/eos*/gpt3/result_*.txt'")
    m.add_argument("--model", required=True, help="the model shape of the catalog the runs trained, e.g. gpt3-175b")
    m.add_argument("--system", help="the machine the runs ran on, by the name of its cluster description "
                                    "(workflow/clusters/NAME.yaml), e.g. h100-eos; RunSpec system of every run "
                                    "[allowed: lowercase letters, digits and '-'; default: none]")
    m.add_argument("--config", help="the launch configuration (config_*.sh, relative to the repository) of every "
                                    "selected file; default: found by system and node count")
    m.add_argument("--warmup-iters", type=int, default=10,
                   help="optimizer steps taken as warm-up, as RunSpec warmup_iters [unit: steps; allowed: >= 0; "
                        "default: 10, the package's]")
    m.add_argument("--measured-iters", type=int,
                   help="optimizer steps measured after warm-up [unit: steps; allowed: >= 1; default: the fewest "
                        "any selected file has after warm-up]")
    m.add_argument("--out", default="data/mlperf/raw", help="where the run directories go [default: data/mlperf/raw]")
    m.set_defaults(func=cmd_import_mlperf)
    return p
