"""The performance model beside a study of measurements (a study's `model_beside: {cluster,
calibration}`): each configuration the model can express is predicted on the cluster from the
calibration, never fitted to the study's runs; one it cannot express gets the reason instead.
`scalestudy model beside` writes the table data/STUDY/tables/model_beside.csv that the figures read.
"""

from __future__ import annotations

from pathlib import Path

from scalestudy.spec.run import RunSpec


from scalestudy.analysis.aggregate import MODEL_BESIDE_FILE as BESIDE_FILE
BESIDE_COLUMNS = ["config_id", "world_size", "label", "expressible", "reason", "tokens_per_s_per_device",
                  "tokens_per_s_per_device_low", "tokens_per_s_per_device_high", "tokens_per_s", "step_time_s",
                  "cluster", "calibration", "model_version"]


def not_expressible(spec: RunSpec) -> str | None:
    """Why the model cannot predict `spec`, or None: it computes bf16 or fp32 matrix products on
    a layout of data, tensor and pipeline parallelism with the layers alone split into stages."""
    why = []
    if spec.precision == "fp8":
        why.append("FP8 matrix products (the model's compute is calibrated on bf16)")
    if spec.cp > 1:
        why.append(f"context parallelism (CP={spec.cp})")
    if spec.pp_embedding_stages:
        why.append("embedding and output as pipeline stages")
    return "; ".join(why) or None


def beside_rows(study, root: Path | str = ".") -> list[dict]:
    """One row a configuration of `study` (its first seed stands for it)."""
    from scalestudy.analysis.code_version import model_version
    from scalestudy.perfmodel.cluster import ClusterError, load_cluster
    from scalestudy.perfmodel.collectives import CollectiveModel
    from scalestudy.perfmodel.predict import calibrate, predict

    conf = study.model_beside or {}
    cluster_name, calibration = conf.get("cluster"), list(conf.get("calibration") or [])
    version = model_version(root)
    seen, rows, model = set(), [], None
    for planned in study.runs:
        spec = planned.spec
        if spec.config_id in seen:
            continue
        seen.add(spec.config_id)
        row = {"config_id": spec.config_id, "world_size": spec.world_size, "label": planned.label,
               "cluster": cluster_name, "calibration": calibration, "model_version": version}
        reason = not_expressible(spec)
        if reason:
            rows.append({**row, "expressible": False, "reason": f"not expressible: {reason}"})
            continue
        if model is None:
            cl = load_cluster(cluster_name, root)
            model = (cl, calibrate(calibration, root), CollectiveModel.for_cluster(cl, root))
        cl, cal, cm = model
        try:
            p = predict(spec, cl, cal, cm)
        except (ClusterError, ValueError) as e:  # e.g. more GPUs than the cluster has
            rows.append({**row, "expressible": False, "reason": f"not predicted: {e}"})
            continue
        low, high = p.band["tokens_per_s_per_device"]
        rows.append({**row, "expressible": True, "reason": "; ".join(p.notes) or None,
                     "tokens_per_s_per_device": p.values["tokens_per_s_per_device"],
                     "tokens_per_s_per_device_low": low, "tokens_per_s_per_device_high": high,
                     "tokens_per_s": p.values.get("tokens_per_s"), "step_time_s": p.values.get("step_time_s")})
    return rows


def write_beside(study, out: Path | str, root: Path | str = ".") -> Path:
    from scalestudy.analysis.csv_format import write_csv

    return write_csv(Path(out), BESIDE_COLUMNS, beside_rows(study, root))
