"""The `flops` and `exposed` subcommands: model FLOPs per token, and exposed communication
from profiler traces."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scalestudy.spec import catalog
from scalestudy.spec.run import help_line


def cmd_flops(args: argparse.Namespace) -> int:
    from scalestudy.measure.metrics import flops_per_token

    if args.seq_len < 1:
        print(f"scalestudy flops: --seq-len must be at least 1, got {args.seq_len}", file=sys.stderr)
        return 2
    if args.model not in catalog.models():
        print(
            f"scalestudy flops: unknown model {args.model!r}; the catalog has {', '.join(sorted(catalog.models()))}",
            file=sys.stderr,
        )
        return 2
    print(json.dumps({"model": args.model, **flops_per_token(args.model, args.seq_len)}, indent=1))
    return 0


def cmd_exposed(args: argparse.Namespace) -> int:
    from scalestudy.measure.exposed_comm import TraceError, analyse_trace, hta_overlap, summarise

    try:
        out = summarise([analyse_trace(p) for p in args.traces])
    except (TraceError, ValueError) as e:
        print(f"scalestudy exposed: {e}", file=sys.stderr)
        return 2
    if args.hta:
        dirs = sorted({str(Path(p).resolve().parent) for p in args.traces})
        if len(dirs) != 1:
            print("scalestudy exposed: --hta needs every trace in one directory", file=sys.stderr)
            return 2
        try:
            out["hta_overlap_fraction_per_rank"] = hta_overlap(dirs[0])
        except ImportError as e:
            print(f"scalestudy exposed: {e}", file=sys.stderr)
            return 2
    print(json.dumps(out, indent=1))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("flops", help="model FLOPs per token (6*N_non_embedding + 12*L*d*T) of a named model")
    p.add_argument("--model", required=True, help="a model of the catalog (scalestudy/spec/catalog/models.yaml)")
    p.add_argument(
        "--seq-len",
        type=int,
        default=4096,
        help=help_line("sequence length T", unit="tokens", allowed=">= 1", default="4096, the study's"),
    )
    p.set_defaults(func=cmd_flops)

    p = subparsers.add_parser(
        "exposed",
        help="compute, communication and exposed communication of profiler traces (one per rank), summed and per rank",
    )
    p.add_argument("traces", nargs="+", metavar="TRACE", help="torch.profiler Chrome traces (.json.gz or .json)")
    p.add_argument(
        "--hta",
        action="store_true",
        help="also report HolisticTraceAnalysis's overlap per rank (GPU traces; needs the hta extra)",
    )
    p.set_defaults(func=cmd_exposed)
