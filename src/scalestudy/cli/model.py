"""`scalestudy model`: the calibrated performance model (scalestudy.perfmodel). No torch import.

    scalestudy model predict --cluster h100-paper [--calibration DIR] [--set KEY=VALUE ...] [<model options>] [--json] <RunSpec options>
    scalestudy model predict --study paper-model --run-id RUN_ID [--json]
    scalestudy model validate [--calibration DIR] [--json] [--external [--out CSV]]
    scalestudy model clusters [--json]
    scalestudy model study --study NAME [--root DIR] [--out DIR]
    scalestudy model beside --study NAME [--root DIR] [--out CSV]
    scalestudy model inputs [--format md|csv] [--only PART,...] [--out FILE] [--update-docs | --check-docs]

`predict` prints a step's time, tokens/s (global and per device), MFU, computation,
communication, exposed communication and GPU power, each with the model's band, the collectives
the layout issues, and which inputs are calibrated from measurements, published or assumed.
`--set` overrides a cluster value for a what-if question (e.g. --set inter_node_GBps=100); every
model option (perfmodel/options.py) is a flag (--tp-loss, --tp-comm-overlap, ...; default: the
option's default). With `--study STUDY --run-id RUN_ID` it prints exactly the prediction that
the study's raw logs, figures and claims hold: its cluster, options, calibration and measured
inputs (a "--measured-inputs" run id takes the measured rank share); no other option is taken.
`study` predicts every run of a study with a `prediction` section and writes them as predicted
raw logs under data/NAME/raw (or --out), for `scalestudy aggregate/figure/claims` (the workflow's
`predict` rule). `validate` prints the held-out error on measured runs and C1-C4 of STUDY.md predicted against
the paper's numbers, with the HSDP question; `validate --external` instead predicts the external
ledger (workflow/validation/external.yaml: published torchtitan and Megatron-LM runs, nothing fitted
to them) and prints each row's error and each group's against its target; --out writes the CSV.
`beside` predicts each configuration of a study of measurements with a `model_beside` section
(perfmodel/beside.py) or names why the model cannot express it, for the figures to draw beside
the measured points (data/NAME/tables/model_beside.csv; nothing fitted to the measurements).
`inputs` prints the model's measured, published and assumed inputs (achievable matmul rates, carry
factors, the power fits, the burst check, the GEMM shape factors), each with its source, raw log and
the log's sha256 (perfmodel/inputs_table.py); `--update-docs` rewrites the docs' generated blocks of
it, `--check-docs` names the stale ones.
Calibration data default: data/h200-reference/raw.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path

DEFAULT_CALIBRATION = "data/h200-reference/raw"


def _overrides(items: list[str] | None) -> dict[str, float]:
    out = {}
    for it in items or []:
        if "=" not in it:
            raise ValueError(f"--set takes KEY=VALUE, got {it!r}")
        k, v = it.split("=", 1)
        out[k.strip()] = float(v)
    return out


def _fmt(v, scale=1.0, fmt="{:.4g}"):
    return "n/a" if v is None else fmt.format(v * scale)


def _model_options(args: argparse.Namespace):
    from scalestudy.perfmodel.options import ModelOptions, choices

    return ModelOptions.from_dict({k: getattr(args, k) for k in choices() if getattr(args, k) is not None})


def _study_prediction(args: argparse.Namespace):
    """The prediction a study's raw logs hold for one of its runs (refusing anything that would
    change it)."""
    from scalestudy.perfmodel.options import choices
    from scalestudy.perfmodel.study import StudyPredictor
    from scalestudy.spec.run import RunSpec
    from scalestudy.spec.studies import load_study

    given = [
        f"--{k.replace('_', '-')}"
        for k in [*choices(), *(f.name for f in fields(RunSpec))]
        if getattr(args, k, None) is not None
    ]
    given += ["--cluster"] * bool(args.cluster) + ["--set"] * bool(args.set) + ["--spec"] * bool(args.spec)
    given += ["--calibration"] * (args.calibration != [DEFAULT_CALIBRATION])
    if given:
        raise ValueError(
            f"--study prints the study's own prediction: its cluster, options, calibration and spec "
            f"come from the study; drop {', '.join(given)} (or predict with --cluster instead)"
        )
    if not args.run_id:
        raise ValueError("--study needs --run-id RUN_ID (`scalestudy plan --study STUDY` lists them)")
    study = load_study(args.study, args.root)
    try:
        planned = study.run(args.run_id)
    except KeyError as e:
        raise ValueError(str(e).strip('"')) from None
    model = StudyPredictor(study, args.root)
    return planned.spec, model.cluster_of(planned)[0], model.cal, model.run(planned)


def cmd_predict(args: argparse.Namespace) -> int:
    from scalestudy.cli.train import spec_from_args
    from scalestudy.perfmodel.cluster import load_cluster, with_gpu, with_overrides
    from scalestudy.perfmodel.collectives import CollectiveModel
    from scalestudy.perfmodel.predict import calibrate, predict

    root = Path(args.root)
    if args.study:
        spec, cluster, cal, p = _study_prediction(args)
    else:
        if args.run_id:
            raise ValueError("--run-id names a run of a study: give --study too")
        if not args.cluster:
            raise ValueError("give --cluster NAME (with the run's options), or --study STUDY --run-id RUN_ID")
        spec = spec_from_args(args)
        cluster = load_cluster(args.cluster, root)
        if args.gpu:
            cluster = with_gpu(cluster, args.gpu)
        cluster = with_overrides(cluster, _overrides(args.set))
        cal = calibrate(args.calibration, root)
        p = predict(spec, cluster, cal, CollectiveModel.for_cluster(cluster, root), options=_model_options(args))
    if args.json:
        out = p.as_dict()
        out["calibration"] = cal.provenance()
        print(json.dumps(out, indent=1, sort_keys=True, default=str))
        return 0
    v, b = p.values, p.band
    print(
        f"PREDICTED (scalestudy.perfmodel, not measured): {args.run_id or p.run_id}"
        + (f" of study {args.study}, as its raw log holds it" if args.study else "")
    )
    print(
        f"cluster {cluster.name} ({cluster.gpu}, {cluster.gpus_per_node} a node); layout {p.label}; "
        f"{spec.world_size} GPUs; global batch {spec.global_batch} x {spec.seq_len}"
    )
    rows = [
        ("step time (s)", "step_time_s", 1, "{:.4f}"),
        ("tokens/s (global)", "tokens_per_s", 1, "{:.4g}"),
        ("tokens/s per device", "tokens_per_s_per_device", 1, "{:.1f}"),
        ("MFU (%)", "mfu", 100, "{:.2f}"),
        ("computation (s)", "compute_s", 1, "{:.4f}"),
        ("communication (s)", "comm_s", 1, "{:.4f}"),
        ("exposed communication (s)", "exposed_comm_s", 1, "{:.4f}"),
        ("GPU power per GPU (W)", "power_w_per_gpu", 1, "{:.0f}"),
        ("tokens per joule", "tokens_per_joule", 1, "{:.4g}"),
    ]
    for name, key, sc, f in rows:
        lo, hi = b.get(key, [None, None])
        print(f"  {name:28s} {_fmt(v.get(key), sc, f):>10s}   band [{_fmt(lo, sc, f)}, {_fmt(hi, sc, f)}]")
    if v.get("straggler_s"):
        print(
            f"  {'waiting for the slowest rank (s)':28s} {v['straggler_s']:>10.4f}   (in computation: "
            f"x {v['straggler_factor']:.4f})"
        )
    if v.get("overlap_slowdown_s"):
        print(
            f"  {'computation slowed by overlap (s)':28s} {v['overlap_slowdown_s']:>10.4f}   (overlap_slowdown "
            f"{v['overlap_slowdown']:g}: counted in computation)"
        )
    if v.get("burst_speedup", 1.0) != 1.0:
        print(
            f"  {'bursts at full clock':28s} {'x ' + format(v['burst_speedup'], '.4f'):>10s}   (computation in "
            f"bursts shorter than the power limiter's window, option burst_speedup)"
        )
    if v.get("compute_burst_s"):
        print(
            f"  {'computation bursts (s)':28s} {v['compute_burst_s']:>10.4f}   (computation between exposed waits: "
            f"the power limiter's window)"
        )
    if v.get("bubble_s"):
        print(f"  {'pipeline bubble (s)':28s} {v['bubble_s']:>10.4f}   (counted in exposed communication)")
    print(
        f"  memory estimate {v['memory_estimate_gib']:.1f} GiB of {cluster.v('memory_gib'):g}"
        f"{'' if v['fits_memory'] else '  (DOES NOT FIT)'}"
    )
    print("collectives a step (one GPU):")
    for c in p.collectives:
        g = c["group"]
        print(
            f"  {c['name']:22s} {c['unit']:9s} {c['size_bytes'] / 2**20:10.1f} MiB x {c['calls']:5d} over "
            f"{g['n']} ranks on {g['nodes']} node(s): {1e3 * c['time_each_s']:.3f} ms each, "
            f"{c['time_per_step_s']:.4f} s a step ({c['stream']} stream)"
        )
    s = p.sources
    measured = s["calibrated_from_measurements"]
    print("calibrated from measurements: " + "; ".join(f"{k}: {x}" for k, x in measured.items() if x))
    print("collectives: " + "; ".join(f"{k}: {x}" for k, x in s["collectives"].items()))
    print("inputs: " + "; ".join(f"{k} from {x}" for k, x in s["inputs_from"].items()))
    print(f"straggler: {s['straggler']}")
    if s.get("overlap_slowdown"):
        print(f"overlap slowdown: {s['overlap_slowdown']}")
    print("assumed cluster values: " + ", ".join(s["cluster_values_by_source"].get("assumed", [])))
    if s["cluster_values_by_source"].get("what-if"):
        print("what-if values: " + ", ".join(f"{k}={cluster.v(k):g}" for k in s["cluster_values_by_source"]["what-if"]))
    for n in p.notes:
        print(f"note: {n}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from scalestudy.perfmodel.validate import format_report, report

    if args.external:
        from scalestudy.perfmodel.external import format_ledger, group_summary, predict_ledger, write_csv
        from scalestudy.perfmodel.predict import calibrate

        data, rows = predict_ledger(calibrate(args.calibration, Path(args.root)), Path(args.root))
        if args.out or args.figure:
            out = Path(args.out or Path(args.figure).with_name(Path(args.figure).name + "_ledger.csv"))
            out.parent.mkdir(parents=True, exist_ok=True)
            write_csv(rows, out, Path(args.root))
            if args.figure:
                from scalestudy.analysis.figures.model_validation import render

                render(out, args.figure)
        if args.json:
            print(
                json.dumps(
                    {"rows": [r.as_dict() for r in rows], "groups": group_summary(data, rows)},
                    indent=1,
                    sort_keys=True,
                    default=str,
                )
            )
        else:
            sys.stdout.write(format_ledger(data, rows))
        return 0
    if args.out or args.figure:
        raise SystemExit("scalestudy model validate: --out and --figure go with --external (the ledger)")
    rep = report(args.calibration, Path(args.root), args.cluster)
    if args.json:
        print(json.dumps(rep, indent=1, sort_keys=True, default=str))
    else:
        sys.stdout.write(format_report(rep))
    return 0


def cmd_clusters(args: argparse.Namespace) -> int:
    from scalestudy.perfmodel.cluster import cluster_names, load_cluster

    root = Path(args.root)
    out = [load_cluster(n, root) for n in cluster_names(root)]
    if args.json:
        print(json.dumps([c.as_dict() for c in out], indent=1, sort_keys=True))
        return 0
    for c in out:
        print(
            f"{c.name}: {c.gpu}, {c.gpus_per_node} a node, up to {c.max_gpus} GPUs; "
            f"peak {c.peak_flops / 1e12:g} TFLOP/s, HBM {c.hbm / 1e12:g} TB/s, "
            f"NVLink {c.v('intra_node_GBps'):g} GB/s, "
            f"NIC {c.v('inter_node_GBps'):g} GB/s a GPU; assumed: {', '.join(c.assumed())}"
        )
    return 0


def cmd_study(args: argparse.Namespace) -> int:
    from scalestudy.perfmodel.study import predict_study
    from scalestudy.spec.studies import load_study

    root = Path(args.root)
    study = load_study(args.study, root)
    paths = predict_study(study, args.out, root, progress=lambda m: print(f"scalestudy model: {m}", file=sys.stderr))
    print(f"{len(paths)} predicted runs of study {study.name} written to {args.out or study.raw_dir}")
    return 0


def cmd_beside(args: argparse.Namespace) -> int:
    from scalestudy.measure.table_files import MODEL_BESIDE_FILE as BESIDE_FILE
    from scalestudy.perfmodel.beside import write_beside
    from scalestudy.spec.studies import load_study

    root = Path(args.root)
    study = load_study(args.study, root)
    if not study.model_beside:
        raise ValueError(f"study {study.name!r} has no model_beside section ({study.source})")
    out = write_beside(study, args.out or study.tables_dir / BESIDE_FILE, root)
    print(f"the model beside study {study.name}: {out}")
    return 0


def cmd_sensitivity(args: argparse.Namespace) -> int:
    from scalestudy.perfmodel.options import ModelOptions
    from scalestudy.perfmodel.predict import calibrate
    from scalestudy.perfmodel.sensitivity import write_tables
    from scalestudy.spec.studies import load_study

    root = Path(args.root)
    study = load_study(args.study, root)
    if not study.prediction:
        raise ValueError(f"study {study.name!r} has no prediction section ({study.source})")
    cal = calibrate(list(study.prediction["calibration"]), root)
    paths = write_tables(
        cal, args.out_dir or study.tables_dir, root, ModelOptions.from_dict(study.prediction.get("options")), study
    )
    print("claim sensitivity: " + ", ".join(str(p) for p in paths))
    return 0


def cmd_gemm_factors(args: argparse.Namespace) -> int:
    from scalestudy.perfmodel.gemm_rates import factor_table, read_gemm_rates

    rates = read_gemm_rates(args.raw_dirs, args.root)
    if rates is None:
        raise ValueError(f"no finished gemm run under {', '.join(args.raw_dirs)}")
    print(f"{rates.describe()}; S against {args.calibration_layout} in bf16 (layer products, TFLOP/s)")
    print(f"{'layout':<24} {'bf16':>7} {'S':>6} {'fp8':>7} {'S':>6}")
    for r in factor_table(rates, [args.calibration_layout]):
        cells = []
        for dtype in ("bf16", "fp8"):
            rate, s = r[f"{dtype}_tflops"], r[f"{dtype}_S"]
            cells += [
                f"{rate:>7.0f}" if rate is not None else f"{'-':>7}",
                f"{s:>6.3f}" if s is not None else f"{'-':>6}",
            ]
        print(f"{r['layout']:<24} " + " ".join(cells))
    return 0


def cmd_inputs(args: argparse.Namespace) -> int:
    from scalestudy.perfmodel import inputs_table

    root = Path(args.root)
    if args.update_docs or args.check_docs:
        if args.out or args.only or args.format != "md":
            raise ValueError("--update-docs and --check-docs take each block's own --format and --only")
    only = [p for p in args.only.split(",") if p] if args.only else None
    inputs_table.select([], only)  # an unknown part is refused before anything is read
    rows = inputs_table.rows(root, args.calibration)
    if args.update_docs or args.check_docs:
        stale = inputs_table.update_docs(root, rows, write=args.update_docs)
        verb = "rewritten" if args.update_docs else "stale (scalestudy model inputs --update-docs)"
        for path in stale:
            print(f"{path}: generated blocks {verb}")
        if not stale:
            print("the docs' generated blocks of the model's inputs are current")
        return 1 if stale and args.check_docs else 0
    text = inputs_table.render(rows, args.format, only)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        print(f"the model's inputs ({len(inputs_table.select(rows, only))} rows): {out}")
    else:
        sys.stdout.write(text)
    return 0


def _guard(fn):
    def run(args):
        from scalestudy.measure.rawlog import RawLogError
        from scalestudy.perfmodel.cluster import ClusterError
        from scalestudy.spec.run import SpecError

        try:
            return fn(args)
        except (ClusterError, RawLogError, SpecError, ValueError, FileNotFoundError) as e:
            print(f"scalestudy model: {e}", file=sys.stderr)
            return 2

    return run


def add_model_options(q: argparse.ArgumentParser) -> None:
    """One flag per model option (perfmodel/options.py), default: the option's own default."""
    from scalestudy.perfmodel.options import MEANING, ModelOptions, choices

    default = ModelOptions()
    g = q.add_argument_group("model options (perfmodel/options.py; a study states its own)")
    for name, allowed in choices().items():
        flag = f"--{name.replace('_', '-')}"
        d = getattr(default, name)
        if allowed is None:
            g.add_argument(
                flag,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=f"{MEANING[name]} (default {'yes' if d else 'no'})",
            )
        elif allowed is float:
            g.add_argument(flag, type=float, default=None, help=f"{MEANING[name]} (default {d:g})")
        else:
            g.add_argument(
                flag,
                choices=allowed,
                default=None,
                help=f"{MEANING[name]} (default {d if d is not None else 'as the run specification says'})",
            )


def register(subparsers) -> None:
    from scalestudy.cli.train import add_spec_options

    p = subparsers.add_parser("model", help="the calibrated performance model: predict, validate, clusters")
    sub = p.add_subparsers(dest="model_command", required=True, help="what to do with the model")

    def common(q):
        q.add_argument("--root", default=".", help="the project root (workflow/clusters, data)")
        q.add_argument(
            "--calibration",
            nargs="+",
            default=[DEFAULT_CALIBRATION],
            help=f"raw-log directories of measured runs to calibrate from (default {DEFAULT_CALIBRATION})",
        )
        q.add_argument("--json", action="store_true", help="print JSON")

    q = sub.add_parser(
        "predict", help="predict one RunSpec on a cluster, or one run of a prediction study (labelled PREDICTED)"
    )
    q.add_argument(
        "--cluster", help="a name under workflow/clusters (h100-paper, a100-paper, h200-node) or a YAML path"
    )
    q.add_argument(
        "--study",
        help="a prediction study (e.g. paper-model): with --run-id, print the prediction its "
        "raw logs, figures and claims hold",
    )
    q.add_argument(
        "--run-id",
        help="with --study: one of its planned runs (a '--measured-inputs' variant takes the measured rank share)",
    )
    q.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a cluster value (what-if), e.g. inter_node_GBps=100; repeatable",
    )
    q.add_argument(
        "--gpu",
        help="a GPU of the catalog (name or alias) in the cluster's nodes: its peak, HBM, memory, "
        "board limit and NVLink from its catalog entry, the cluster's network unchanged",
    )
    add_model_options(q)
    common(q)
    add_spec_options(q)
    q.set_defaults(func=_guard(cmd_predict))

    q = sub.add_parser("validate", help="held-out error on measured runs; C1-C4 and HSDP predicted vs the paper")
    common(q)
    q.add_argument(
        "--external",
        action="store_true",
        help="predict the external ledger (workflow/validation/external.yaml) instead of C1-C4",
    )
    q.add_argument("--out", metavar="CSV", help="with --external: write the ledger with predictions to this CSV file")
    q.add_argument(
        "--figure",
        metavar="PATH",
        help="with --external: draw the model_validation figure to "
        "PATH.pdf, PATH.png and PATH.csv (the ledger CSV beside it "
        "unless --out names one)",
    )
    q.add_argument(
        "--cluster",
        default="h100-paper",
        help="the H100 cluster C1-C4 are predicted on (default h100-paper, NCCL's tuning-model latencies; "
        "h100-paper-fig2: the network hop of the tree fitted to the paper's Fig 2)",
    )
    q.set_defaults(func=_guard(cmd_validate))

    q = sub.add_parser("study", help="predict every run of a prediction study; write predicted raw logs")
    q.add_argument("--study", required=True, help="a study with a `prediction` section, e.g. paper-model")
    q.add_argument("--root", default=".", help="the project root (default .)")
    q.add_argument("--out", default=None, help="where the run directories go (default data/STUDY/raw)")
    q.set_defaults(func=_guard(cmd_study))

    q = sub.add_parser(
        "beside",
        help="the model's prediction beside each configuration of a study of measurements, or why it cannot express it",
    )
    q.add_argument("--study", required=True, help="a study with a `model_beside` section, e.g. mlperf")
    q.add_argument("--root", default=".", help="the project root (default .)")
    q.add_argument("--out", default=None, help="the CSV to write (default data/STUDY/tables/model_beside.csv)")
    q.set_defaults(func=_guard(cmd_beside))

    q = sub.add_parser(
        "sensitivity",
        help="each claim with each uncertain input at its low and high value, C3 term by "
        "term and what each claim rests on (a prediction study's tables)",
    )
    q.add_argument("--root", default=".", help="the project root (workflow/clusters, data)")
    q.add_argument("--study", required=True, help="a prediction study, e.g. paper-model")
    q.add_argument("--out-dir", default=None, help="where the tables go (default data/STUDY/tables)")
    q.set_defaults(func=_guard(cmd_sensitivity))

    q = sub.add_parser(
        "gemm-factors",
        help="the measured matrix-product rates of `scalestudy gemm` runs by layout, "
        "and their shape factors against a calibration layout",
    )
    q.add_argument("raw_dirs", nargs="+", help="directories of gemm runs (one GPU kind), e.g. data/h100-gemm/raw")
    q.add_argument(
        "--calibration-layout",
        default="llama2-7b/8192/1",
        help="the layout S is taken against [unit: MODEL/TOKENS/TP (tokens of one micro batch on one "
        "rank); allowed: a layout the runs timed; default: llama2-7b/8192/1, the calibration run's]",
    )
    q.add_argument("--root", default=".", help="the project root (default .)")
    q.set_defaults(func=_guard(cmd_gemm_factors))

    q = sub.add_parser(
        "inputs",
        help="the model's measured, published and assumed inputs as one table: value, unit, source, "
        "raw log and its sha256; or rewrite the docs' generated blocks of it",
    )
    q.add_argument("--root", default=".", help="the project root (default .)")
    q.add_argument(
        "--calibration",
        nargs="+",
        default=[DEFAULT_CALIBRATION],
        help=f"raw-log directories of the calibration runs, whose GPU the carry factors are taken over "
        f"(default {DEFAULT_CALIBRATION})",
    )
    q.add_argument("--format", choices=("md", "csv"), default="md", help="markdown table (default) or CSV")
    q.add_argument(
        "--only",
        metavar="PART,...",
        help="only these parts: matmul, carry, power, comm-power, burst, gemm (default all)",
    )
    q.add_argument("--out", metavar="FILE", help="write the table to FILE instead of printing it")
    q.add_argument(
        "--update-docs",
        action="store_true",
        help="rewrite every block between '<!-- BEGIN scalestudy model inputs ... -->' and "
        "'<!-- END scalestudy model inputs -->' in README.md and docs/*.md",
    )
    q.add_argument("--check-docs", action="store_true", help="exit 1 naming the docs whose generated blocks are stale")
    q.set_defaults(func=_guard(cmd_inputs))

    q = sub.add_parser("clusters", help="list the cluster descriptions")
    q.add_argument("--root", default=".", help="the project root (default .)")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=_guard(cmd_clusters))
