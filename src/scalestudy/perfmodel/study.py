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
from scalestudy.perfmodel.rank_shares import load_shares
from scalestudy.perfmodel.rawlog_out import (
    KIND,
    finish_run_dir,
    predicted_provenance,
    write_predicted_collectives,
    write_predicted_run,
)
from scalestudy.spec.rank_share import MEASURED_INPUTS, measured_input_names


class StudyPredictor:
    """A prediction study's model: its calibration, options, measured rank shares and clusters,
    loaded once. `run(planned)` is the prediction of one planned run exactly as the study's raw
    logs (and so its tables, figures and claims) hold it; `scalestudy model predict --study`
    prints the same."""

    def __init__(self, study, root: Path | str | None = None):
        if not study.prediction:
            raise ValueError(f"study {study.name!r} has no prediction section: it is measured, not predicted")
        self.study = study
        self.root = Path(root) if root is not None else Path(study.root)
        self.cfg = study.prediction
        self.cal = calibrate(list(self.cfg["calibration"]), self.root)
        self.options = ModelOptions.from_dict(self.cfg.get("options"))
        self.shares = {}
        if self.cfg.get("rank_shares"):
            self.shares = load_shares(self.cfg["rank_shares"], self.root)
        self._clusters: dict = {}

    def cluster(self, name: str | None = None):
        name = name or self.cfg["cluster"]
        if name not in self._clusters:
            cl = load_cluster(name, self.root)
            self._clusters[name] = (cl, CollectiveModel.for_cluster(cl, self.root))
        return self._clusters[name]

    def cluster_of(self, planned):
        """A run's cluster: its variant's (a further cluster), else the study's."""
        return self.cluster(None if planned.variant in ("", MEASURED_INPUTS) else planned.variant)

    def run(self, planned, band: bool = True):
        """The run as planned: the model alone; its measured-inputs variant: with the measured
        share (ValueError where none applies, or the cluster cannot hold the run)."""
        measured_inputs = planned.variant == MEASURED_INPUTS
        cl, cm = self.cluster_of(planned)
        pred = predict(
            planned.spec,
            cl,
            self.cal,
            cm,
            band=band,
            options=self.options,
            shares=self.shares if measured_inputs else None,
        )
        if measured_inputs and not measured_input_names(pred.sources["inputs_from"]):
            raise ValueError(
                f"no measured rank share of study {self.cfg['rank_shares']} applies to it on "
                f"{cl.gpu}: {pred.sources['inputs_from']['compute']}"
            )
        return pred


def predict_study(
    study, out_dir: Path | str | None = None, root: Path | str | None = None, progress=None
) -> list[Path]:
    model = StudyPredictor(study, root)
    root, cal = model.root, model.cal
    out = Path(out_dir) if out_dir is not None else Path(study.raw_dir)
    command = f"scalestudy model study --study {study.name}"
    written = []
    out.mkdir(parents=True, exist_ok=True)
    for i, p in enumerate(study.runs):
        cl, _ = model.cluster_of(p)
        run_dir = out / p.run_id
        if run_dir.exists():
            shutil.rmtree(run_dir)
        try:
            pred = model.run(p)
        except ValueError as e:
            run = {
                "kind": KIND,
                "run_id": p.run_id,
                "config_id": p.config_id,
                "spec": p.spec.to_dict(),
                "provenance": predicted_provenance(cl, cal, p.spec.world_size, root, command),
                "launch": None,
            }
            line = json.dumps(
                {
                    "key": "error",
                    "value": {"type": "InvalidConfig", "message": str(e)},
                    "metadata": {"rank": 0, "run_id": p.run_id},
                },
                sort_keys=True,
            )
            written.append(finish_run_dir(run_dir, run, [line], "invalid_config", f"predicted: {e}"))
            continue
        written.append(write_predicted_run(run_dir, p.run_id, p.config_id, p.spec, pred, cl, cal, root, command))
        if progress and (i + 1) % 20 == 0:
            progress(f"{i + 1} of {len(study.runs)} runs predicted")
    if study.collectives:
        cl, cm = model.cluster()
        for cs in study.collectives:
            run_dir = out / cs.run_id
            if run_dir.exists():
                shutil.rmtree(run_dir)
            written.append(write_predicted_collectives(run_dir, cs, cl, cm, cal, root, command))
    return written
