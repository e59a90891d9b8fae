"""The analysis commands of `scalestudy`: aggregate, figure, claims, provenance, audit.

    scalestudy aggregate --study NAME [--root DIR] [--allow-missing]
    scalestudy figure NAME|all --study STUDY [--root DIR] [--formats pdf,png,csv]
    scalestudy claims --study NAME [--root DIR]
    scalestudy provenance FILE [--json] [--raw-dir DIR]
    scalestudy audit --study NAME [--root DIR]
    scalestudy rank-shares --study NAME [--root DIR]

Studies come from scalestudy.spec.studies.load_study(name, root). A raw-log problem exits 2 with a
message naming the file; `audit` and `provenance` exit 1 when they find a problem (a PROBLEM or
MISMATCH). No torch import.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _show(path) -> str:
    p = Path(path)
    try:
        return os.path.relpath(p)
    except ValueError:
        return str(p)


def _study(args):
    from scalestudy.spec.studies import load_study

    return load_study(args.study, Path(args.root))


def _fail(message: str) -> int:
    print(f"scalestudy: {message}", file=sys.stderr)
    return 2


def _guard(fn):
    """Run a command; raw-log and missing-file errors exit 2 naming the file."""

    def run(args: argparse.Namespace) -> int:
        from scalestudy.measure.csv_format import UnreadableCsvError
        from scalestudy.analysis.provenance import ProvenanceError
        from scalestudy.measure.rawlog import RawLogError
        from scalestudy.spec.run import SpecError

        try:
            return fn(args)
        except RawLogError as e:
            errors = getattr(e, "errors", None) or [e]
            for err in errors:
                print(f"scalestudy: {err}", file=sys.stderr)
            return 2
        except (FileNotFoundError, ProvenanceError, SpecError, UnreadableCsvError) as e:
            return _fail(str(e))
        except (IsADirectoryError, PermissionError) as e:
            return _fail(f"{e.filename}: cannot read ({e.strerror})")
        except OSError as e:  # a full disk while writing (rawlog.disk_error names the file), an I/O error
            return _fail(f"{e.filename}: {e.strerror}" if e.filename else (e.strerror or str(e)))

    run.__name__ = fn.__name__
    run.__doc__ = fn.__doc__
    return run


@_guard
def cmd_aggregate(args: argparse.Namespace) -> int:
    from scalestudy.analysis.aggregate import UNPLANNED_FILE, aggregate
    from scalestudy.measure.csv_format import read_csv_rows

    study = _study(args)
    # a partial study (committed raw logs of some planned runs) tabulates the rest as missing
    paths = aggregate(study, allow_missing=args.allow_missing or study.partial)
    for p in paths:
        print(_show(p))
    for u in read_csv_rows(Path(study.tables_dir) / UNPLANNED_FILE):
        print(f"scalestudy: warning: {_show(Path(study.raw_dir) / u['raw_dir'])}: {u['reason']}", file=sys.stderr)
    return 0


@_guard
def cmd_figure(args: argparse.Namespace) -> int:
    from scalestudy.analysis.aggregate import SUMMARY_FILE, load_tables
    from scalestudy.analysis.figures import FIGURES, LEDGER_FIGURES, render, render_ledger_figure

    study = _study(args)
    if args.name in LEDGER_FIGURES:
        try:
            paths = render_ledger_figure(args.name, study)
        except FileNotFoundError as e:
            return _fail(str(e))
        for p in paths:
            print(_show(p))
        return 0
    if not (Path(study.tables_dir) / SUMMARY_FILE).exists():
        return _fail(
            f"{_show(Path(study.tables_dir) / SUMMARY_FILE)}: missing; run "
            f"`scalestudy aggregate --study {study.name}` first"
        )
    tables = load_tables(study.tables_dir)
    formats = [f for f in args.formats.split(",") if f]
    unknown = sorted(set(formats) - {"pdf", "png", "csv"})
    if unknown:
        return _fail(f"unknown figure format(s) {', '.join(unknown)}; use pdf, png, csv")
    names = list(FIGURES) if args.name == "all" else [args.name]
    for name in names:
        for p in render(name, study, tables, formats=formats):
            print(_show(p))
    return 0


@_guard
def cmd_claims(args: argparse.Namespace) -> int:
    from scalestudy.analysis.claims import claims

    study = _study(args)
    paths = claims(study)
    for p in paths:
        print(_show(p))
    if args.print:
        print(paths[1].read_text(), end="")
    return 0


@_guard
def cmd_provenance(args: argparse.Namespace) -> int:
    from scalestudy.analysis.provenance import format_text, provenance

    prov = provenance(args.file, raw_dir=args.raw_dir)
    if args.json:
        print(json.dumps(prov, indent=1, sort_keys=True))
    else:
        print(format_text(prov), end="")
    if prov["problems"]:
        print(
            f"scalestudy provenance: {len(prov['problems'])} problem(s): a raw-log file is missing, changed or "
            f"unsealed (PROBLEM / MISMATCH above)",
            file=sys.stderr,
        )
        return 1
    return 0


@_guard
def cmd_audit(args: argparse.Namespace) -> int:
    from scalestudy.analysis.audit import audit

    study = _study(args)
    manifest: dict[str, str] = {}
    problems = audit(study, figures=not args.no_figures, manifest=manifest, strict=args.strict)
    for p in problems:
        print(f"audit: {p}")
    if args.manifest:
        from scalestudy.measure.rawlog import atomic_write_text

        atomic_write_text(args.manifest, "".join(f"{d}  {_show(f)}\n" for f, d in sorted(manifest.items())))
        print(
            f"scalestudy audit: the sha256 of {len(manifest)} outputs that follow from the raw logs: "
            f"{_show(args.manifest)}",
            file=sys.stderr,
        )
    if problems:
        print(f"scalestudy audit: {len(problems)} problem(s) in study {study.name}", file=sys.stderr)
        return 1
    from scalestudy.measure.rawlog import find_runs

    found = [d.name for d in find_runs(study.raw_dir)] if Path(study.raw_dir).is_dir() else []
    retired = sum(name in (study.retired_runs or {}) for name in found)  # checked, never read
    print(
        f"scalestudy audit: study {study.name}: {len(manifest)} tables, claims and figures (data and images) "
        f"follow from the raw logs of {len(found) - retired} runs"
        + (f" ({retired} retired run(s) beside them: checksums checked, never read)" if retired else "")
        + (", none made with a check weakened" if args.strict else "")
    )
    return 0


@_guard
def cmd_rank_shares(args: argparse.Namespace) -> int:
    from scalestudy.analysis import rank_shares
    from scalestudy.spec.rank_share import LABEL

    study = _study(args)
    for p in rank_shares.write_tables(study):
        print(_show(p))
    shares, configs = rank_shares.tables(study, verify_checksums=False)
    print(
        f"{LABEL.upper()} - study {study.name}: {sum(r['status'] != 'planned' for r in shares)} of "
        f"{len(shares)} planned rank shares measured"
    )
    print(
        f"  {'model':<12}{'GPUs':>6}{'TP':>4}{'PP':>4}{'mb':>4}{'M':>4}  {'status':<9}{'stages':>7}"
        f"{'rank step s':>13}{'peak GiB':>10}"
    )
    for c in configs:
        if c["status"] == "planned":
            continue
        step = f"{c['rank_step_time_s']:.3f}" if c["rank_step_time_s"] else "-"
        peak = f"{c['peak_allocated_bytes'] / 2**30:.1f}" if c["peak_allocated_bytes"] else "-"
        print(
            f"  {c['model']:<12}{c['world_size']:>6}{c['tp']:>4}{c['pp']:>4}{c['micro_batch']:>4}"
            f"{c['pp_microbatches']:>4}  {c['status']:<9}{c['stages_measured']:>3}/{c['stages_planned']:<3}"
            f"{step:>13}{peak:>10}"
        )
    agree = rank_shares.agreement(shares)
    if agree:
        print(
            f"agreement on one GPU (same shapes): real {agree['real_step_s']:.4f} s/step "
            f"{agree['real_power_w'] or float('nan'):.0f} W, fake {agree['fake_step_s']:.4f} s/step "
            f"{agree['fake_power_w'] or float('nan'):.0f} W"
        )
    return 0


def _study_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--study", required=True, help="the study's name (workflow/studies/NAME.yaml) or a YAML path")
    p.add_argument("--root", default=".", help="the project root holding workflow/, data/ and figures/ (default .)")


def register(subparsers) -> None:
    """Add the analysis commands to the `scalestudy` parser's subparsers."""
    from scalestudy.analysis.figures import FIGURES, LEDGER_FIGURES

    p = subparsers.add_parser("aggregate", help="tables of a study from its raw logs (data/STUDY/tables/*.csv)")
    _study_options(p)
    p.add_argument(
        "--allow-missing",
        action="store_true",
        help="tabulate missing or unreadable planned runs as rows with that status instead of failing",
    )
    p.set_defaults(func=cmd_aggregate)

    p = subparsers.add_parser("figure", help="draw a figure of a study from its tables (figures/STUDY/NAME.*)")
    p.add_argument(
        "name",
        choices=[*FIGURES, *LEDGER_FIGURES, "all"],
        metavar="NAME",
        help=f"one of {', '.join(FIGURES)} (from the study's tables; all: every one of them), or "
        f"{', '.join(LEDGER_FIGURES)} (redrawn from figures/STUDY/"
        f"{next(iter(LEDGER_FIGURES.values())).LEDGER_FILE}, the performance model's external "
        "ledger)",
    )
    _study_options(p)
    p.add_argument("--formats", default="pdf,png,csv", help="comma-separated subset of pdf,png,csv")
    p.set_defaults(func=cmd_figure)

    p = subparsers.add_parser("claims", help="the paper's claims against a study (figures/STUDY/claims.{csv,md})")
    _study_options(p)
    p.add_argument("--print", action="store_true", help="also print claims.md")
    p.set_defaults(func=cmd_claims)

    p = subparsers.add_parser(
        "provenance", help="the runs, raw-log files and environment behind every row of a figure, table or claims file"
    )
    p.add_argument("file", help="a figure's pdf/png/csv, a table csv, or claims.csv/claims.md")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--raw-dir", help="the study's raw-log directory (default: found from the file's place)")
    p.set_defaults(func=cmd_provenance)

    p = subparsers.add_parser(
        "rank-shares",
        help="tables of a study's rank shares (comm: fake): per-rank compute "
        "time, memory and status, and each configuration's stages "
        "put together (data/STUDY/tables/rank_*.csv)",
    )
    _study_options(p)
    p.set_defaults(func=cmd_rank_shares)

    p = subparsers.add_parser(
        "audit",
        help="check that tables, claims and figures (data, PDF, PNG) follow from the "
        "raw logs, and every raw-log checksum; exit 1 on a problem",
    )
    _study_options(p)
    p.add_argument("--no-figures", action="store_true", help="skip the figures (CSV, PDF and PNG)")
    p.add_argument(
        "--strict",
        action="store_true",
        help="also refuse runs made with a check weakened (an override switch, the run guard off, an "
        "uncommitted checkout): what CI runs on the committed studies",
    )
    p.add_argument(
        "--manifest",
        metavar="FILE",
        help="write the sha256 of every table, claims file and figure (CSV, PDF, PNG) that follows from "
        "the raw logs to FILE ('SHA256  PATH' lines)",
    )
    p.set_defaults(func=cmd_audit)
