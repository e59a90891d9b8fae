"""A prediction study: every planned run of a study with a `prediction` section predicted and
written as a predicted raw log (rawlog_out.py) under the study's raw directory, so that
`scalestudy aggregate / figure / claims / provenance / audit` treat them like measured runs,
marked predicted at every step.

    prediction:
      cluster: h100-paper                      # workflow/clusters/<name>.yaml
      calibration: [data/h200-reference/raw]   # measured runs to calibrate from
      variants: {a100-paper: [hardware_generations]}   # the same specs on a further cluster
      rank_shares: paper-rank                  # measured rank shares: see below
      options: {tp_loss: vocab_parallel, tp_comm_overlap: false}   # perfmodel/options.py

With `rank_shares`, every run is predicted from the model alone; a run of which the rank-share
study measured a share (status ok or oom) is planned once more, as variant MEASURED_INPUTS
("<run id>--measured-inputs", spec.studies), and predicted with that share's compute and memory
(perfmodel.rank_shares). The two never mix in one series: figures draw the variants as a series
of their own and claims give both.

A run that the cluster cannot hold (more GPUs than it has, another number a node) is written
with status invalid_config and the reason.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from scalestudy.perfmodel.cluster import load_cluster
from scalestudy.perfmodel.collectives import CollectiveModel
from scalestudy.perfmodel.options import ModelOptions
from scalestudy.perfmodel.predict import calibrate, predict
from scalestudy.perfmodel.rawlog_out import KIND, finish_run_dir, predicted_provenance, write_predicted_collectives, \
    write_predicted_run
from scalestudy.spec.rank_share import MEASURED_INPUTS


def predict_study(study, out_dir: Path | str | None = None, root: Path | str | None = None,
                  progress=None) -> list[Path]:
    if not study.prediction:
        raise ValueError(f"study {study.name!r} has no prediction section: it is measured, not predicted")
    root = Path(root) if root is not None else Path(study.root)
    out = Path(out_dir) if out_dir is not None else Path(study.raw_dir)
    cfg = study.prediction
    cal = calibrate(list(cfg["calibration"]), root)
    options = ModelOptions.from_dict(cfg.get("options"))
    shares = {}
    if cfg.get("rank_shares"):  # measured rank shares replace the model's compute and memory where they match
        from scalestudy.perfmodel.rank_shares import load_shares

        shares = load_shares(cfg["rank_shares"], root)
    clusters, models = {}, {}

    def cluster(name):
        if name not in clusters:
            clusters[name] = load_cluster(name, root)
            models[name] = CollectiveModel.for_cluster(clusters[name], root)
        return clusters[name], models[name]

    command = f"scalestudy model study --study {study.name}"
    written = []
    out.mkdir(parents=True, exist_ok=True)
    for i, p in enumerate(study.runs):
        measured_inputs = p.variant == MEASURED_INPUTS
        cl, cm = cluster(cfg["cluster"] if measured_inputs else (p.variant or cfg["cluster"]))
        run_dir = out / p.run_id
        if run_dir.exists():
            shutil.rmtree(run_dir)
        try:
            # a run as planned: the model alone; its measured-inputs variant: with the measured share
            pred = predict(p.spec, cl, cal, cm, options=options, shares=shares if measured_inputs else None)
            if measured_inputs and not any(str(v).startswith("measured") for v in pred.sources["inputs_from"].values()):
                raise ValueError(f"no measured rank share of study {cfg['rank_shares']} applies to it on "
                                 f"{cl.gpu}: {pred.sources['inputs_from']['compute']}")
        except ValueError as e:
            run = {"kind": KIND, "run_id": p.run_id, "config_id": p.config_id, "spec": p.spec.to_dict(),
                   "provenance": predicted_provenance(cl, cal, p.spec.world_size, root, command), "launch": None}
            line = json.dumps({"key": "error", "value": {"type": "InvalidConfig", "message": str(e)},
                               "metadata": {"rank": 0, "run_id": p.run_id}}, sort_keys=True)
            written.append(finish_run_dir(run_dir, run, [line], "invalid_config", f"predicted: {e}"))
            continue
        written.append(write_predicted_run(run_dir, p.run_id, p.config_id, p.spec, pred, cl, cal, root, command))
        if progress and (i + 1) % 20 == 0:
            progress(f"{i + 1} of {len(study.runs)} runs predicted")
    if study.collectives:
        cl, cm = cluster(cfg["cluster"])
        for cs in study.collectives:
            run_dir = out / cs.run_id
            if run_dir.exists():
                shutil.rmtree(run_dir)
            written.append(write_predicted_collectives(run_dir, cs, cl, cm, cal, root, command))
    return written
