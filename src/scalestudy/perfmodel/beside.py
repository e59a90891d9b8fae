"""The performance model beside a study of measurements (a study's `model_beside: {cluster,
calibration}`): each configuration the model can express is predicted on the cluster from the
calibration, never fitted to the study's runs; one it cannot express gets the reason instead.
`scalestudy model beside` writes the table data/STUDY/tables/model_beside.csv that the figures read.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from scalestudy.measure.code_version import model_version
from scalestudy.measure.csv_format import write_csv
from scalestudy.perfmodel.cluster import ClusterError, load_cluster
from scalestudy.perfmodel.collectives import CollectiveModel
from scalestudy.perfmodel.options import ModelOptions
from scalestudy.perfmodel.predict import cached_calibration, predict
from scalestudy.spec.run import RunSpec

# a predicted step's parts (seconds; they overlap: the step is not their sum): the computation, the
# pipeline's fill and drain, the optimizer and copies after the last pass, the waits on data-parallel
# collectives, and all exposed communication (bubble and DP waits included)
STEP_TERMS = ("compute_s", "bubble_s", "tail_s", "dp_wait_s", "exposed_comm_s")
BESIDE_COLUMNS = [
    "config_id",
    "world_size",
    "label",
    "expressible",
    "reason",
    "tokens_per_s_per_device",
    "tokens_per_s_per_device_low",
    "tokens_per_s_per_device_high",
    "tokens_per_s",
    "step_time_s",
    *STEP_TERMS,
    "cluster",
    "options",
    "calibration",
    "model_version",
]


# number formats the model has no rate for: named, never guessed
UNMODELLED_PRECISIONS = {
    "nvfp4": "NVFP4 matrix products (no measured or published achievable NVFP4 rate, and "
    "which of a step's products run in it is not modelled)"
}


def not_expressible(spec: RunSpec) -> str | None:
    """Why the model cannot predict `spec`, or None. It expresses bf16, fp32 and FP8 matrix
    products (FP8 where the GPU catalog has the GPU's achievable FP8 rate: otherwise the prediction
    is refused with that reason), data, tensor, context and pipeline parallelism, interleaved
    stages and embedding stages."""
    return UNMODELLED_PRECISIONS.get(spec.precision)


def beside_options(spec: RunSpec, conf: dict) -> tuple[dict, str | None]:
    """The model options of a configuration: the study's model_beside `options`, updated by the first
    `software` entry whose `match` the spec meets (every field equal), and that entry's source."""
    fields = asdict(spec)
    for entry in conf.get("software") or ():
        unknown = sorted(set(entry["match"]) - set(fields))
        if unknown:
            raise ValueError(f"model_beside.software: match names {', '.join(unknown)}, not run-spec fields")
        if all(fields[k] == v for k, v in entry["match"].items()):
            return {**(conf.get("options") or {}), **entry["options"]}, entry["source"]
    return dict(conf.get("options") or {}), None


def beside_cluster(spec: RunSpec, conf: dict) -> str:
    """The cluster a configuration is predicted on: the machine it ran on (RunSpec.system, a
    cluster file of that name) where it names one, else the study's model_beside cluster."""
    return getattr(spec, "system", "") or conf["cluster"]


def beside_rows(study, root: Path | str = ".") -> list[dict]:
    """One row a configuration of `study` (its first seed stands for it)."""
    conf = study.model_beside or {}
    calibration = list(conf.get("calibration") or [])
    version = model_version(root)
    seen, rows, models = set(), [], {}
    for planned in study.runs:
        spec = planned.spec
        if spec.config_id in seen:
            continue
        seen.add(spec.config_id)
        cluster_name = beside_cluster(spec, conf)
        chosen, source = beside_options(spec, conf)
        options = ModelOptions.from_dict(chosen)
        row = {
            "config_id": spec.config_id,
            "world_size": spec.world_size,
            "label": planned.label,
            "cluster": cluster_name,
            "calibration": calibration,
            "model_version": version,
            "options": {"set": chosen, "source": source} if chosen else None,
        }
        reason = not_expressible(spec)
        if reason:
            rows.append({**row, "expressible": False, "reason": f"not expressible: {reason}"})
            continue
        if cluster_name not in models:
            cl = load_cluster(cluster_name, root)
            models[cluster_name] = (cl, cached_calibration(calibration, root), CollectiveModel.for_cluster(cl, root))
        cl, cal, cm = models[cluster_name]
        try:
            p = predict(spec, cl, cal, cm, options=options)
        except (ClusterError, ValueError) as e:  # e.g. more GPUs than the cluster has
            rows.append({**row, "expressible": False, "reason": f"not predicted: {e}"})
            continue
        low, high = p.band["tokens_per_s_per_device"]
        rows.append(
            {
                **row,
                "expressible": True,
                "reason": "; ".join(p.notes) or None,
                "tokens_per_s_per_device": p.values["tokens_per_s_per_device"],
                "tokens_per_s_per_device_low": low,
                "tokens_per_s_per_device_high": high,
                "tokens_per_s": p.values.get("tokens_per_s"),
                "step_time_s": p.values.get("step_time_s"),
                **{t: p.values.get(t) for t in STEP_TERMS},
            }
        )
    return rows


def write_beside(study, out: Path | str, root: Path | str = ".") -> Path:
    return write_csv(Path(out), BESIDE_COLUMNS, beside_rows(study, root))
