"""Measured rank shares as inputs of a prediction (a prediction study's `rank_shares: STUDY`).

Where the rank-share study (comm: fake, analysis/rank_shares.py) measured a configuration of
the same shapes as the predicted one, the prediction takes from the measurement:
  compute  the model's computation times are scaled so that the rank's computation per step
           equals the measured one (the slowest pipeline stage's time on its microbatches): the
           GPU's busy time per step where every stage has it (harness/device_busy.py), else the
           wall step with communication faked. The wall step of a tensor-parallel share is its
           host's dispatch loop (measured: 0.50 s against 0.06 s of GPU work for a TP=8 7B rank,
           and 0.93-1.49x between two device machines for one spec): a property of the harness
           on that machine's CPU, not of the GPU, so where the GPU's time is measured it is the one
           taken, and the host loop is not carried to the predicted cluster;
           carried from the GPU the share ran on to the cluster's by the model's own kernel-time
           ratio for that spec (the calibrated efficiencies at each GPU's peak, HBM bandwidth and
           power-limit clock): an H200 share stands for an H100 with the H100's slower HBM. The
           model's communication and overlap stay as they are.
  memory   the measured status decides the cell: `oom` when a stage ran out of memory under the
           cap, fits when every stage ran; the peak memory measured is reported.
Elsewhere the model's own inputs stand (calibrated compute, memory estimate). Every prediction
says which inputs came from where (`inputs_from`). Pure Python.

A rank-share study declares the GPU kind its one-GPU measurements stand in for
(`stands_in_for: {gpu: <catalog name or alias>, measured_on: <the GPU the shares ran on>}`;
paper-rank: the H100 SXM 80 GB, measured on an H200 capped at its memory); shares are keyed by that GPU kind, so a prediction on a cluster of another GPU
(the A100 of the hardware comparison) finds none and keeps the model's own inputs.

A share whose runs the study lists in `known_artefacts` (run id -> why) is still used, but carries
the reason (`MeasuredShare.caveat`): the prediction that takes it says so in a note starting
CAVEAT_PREFIX and in its `inputs_from`, and the analysis carries that note to the claims.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from scalestudy.measure.csv_format import read_csv_rows, split_list
from scalestudy.measure.table_files import CAVEAT_PREFIX
from scalestudy.spec import catalog
from scalestudy.spec.rank_share import CONFIGS_TABLE as CONFIGS_FILE
from scalestudy.spec.rank_share import GPU_BUSY, share_group, work_key
from scalestudy.spec.run import RunSpec
from scalestudy.spec.studies import load_study


def gpu_kind(name: str) -> str:
    """The catalog's name for a GPU kind (aliases resolved); an unknown name stays as given."""
    return catalog.gpu_name(name) or name


def share_key(spec: RunSpec, gpu: str) -> tuple:
    """The key of a measured share: the GPU kind it stands for and the fields that set the rank's work."""
    return (gpu_kind(gpu), *work_key(spec))


def stands_in_for(study) -> str:
    """The GPU kind a rank-share study's measurements stand in for (its `stands_in_for: {gpu: ...}`)."""
    gpu = (study.stands_in_for or {}).get("gpu")
    if not gpu:
        raise ValueError(
            f"rank-share study {study.name!r} does not say which GPU kind its shares stand in for "
            f"(add stands_in_for: {{gpu: <catalog name>}} to {study.source})"
        )
    return gpu_kind(gpu)


def measured_on(study) -> str:
    """The GPU kind a rank-share study's shares ran on (`stands_in_for: {measured_on: ...}`); without
    it, the kind they stand in for."""
    gpu = (study.stands_in_for or {}).get("measured_on")
    return gpu_kind(gpu) if gpu else stands_in_for(study)


BUSY = GPU_BUSY
WALL = "wall step with communication faked"


@dataclass(frozen=True)
class MeasuredShare:
    study: str
    status: str  # ok | oom | partial | another failure
    compute_s: float | None  # the slowest stage's compute time per step (GPU busy where measured, else wall)
    peak_bytes: int | None
    cap_gib: float | None
    run_ids: tuple[str, ...]
    measured_on: str = ""  # the GPU kind the share ran on ("": the kind it stands in for)
    caveat: str = ""  # the study's known artefact of one of its runs ("": none)
    source: str = WALL  # what compute_s is: BUSY or WALL

    def describe(self) -> str:
        return f"rank shares of study {self.study} (runs {', '.join(self.run_ids)})"

    def caveat_note(self) -> str | None:
        """The note of a prediction that takes this share, where its runs carry a known artefact."""
        return (
            f"{CAVEAT_PREFIX}a measured input ({self.describe()}) has a known artefact: {self.caveat}"
            if self.caveat
            else None
        )


def caveats(study, run_ids) -> str:
    """The study's known artefacts (`known_artefacts: {run id: reason}`) of these runs, one text."""
    known = getattr(study, "known_artefacts", None) or {}
    hit = [rid for rid in run_ids if rid in known]
    return known[hit[0]] if len(run_ids) == 1 and hit else " ".join(f"run {rid}: {known[rid]}" for rid in hit)


def _num(v: str) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def load_shares(study_name: str, root: Path | str = ".") -> dict[tuple, MeasuredShare]:
    """The measured configurations of a rank-share study, by share_key with the GPU kind the study
    stands in for (from its committed rank_configs.csv; none where the table is missing)."""
    study = load_study(study_name, root)
    path = Path(root) / "data" / study.name / "tables" / CONFIGS_FILE
    if not path.exists():
        return {}
    gpu, ran_on = stands_in_for(study), measured_on(study)
    specs = {share_group(p.spec): p.spec for p in study.runs if p.spec.comm == "fake"}
    out = {}
    for row in read_csv_rows(path):
        spec = specs.get(row["group_id"])
        if spec is None or row["status"] in ("planned", ""):
            continue
        busy = [_num(t) for t in split_list(row.get("stage_device_busy_s"))]
        times = [_num(t) for t in split_list(row.get("stage_compute_times_s"))]
        source = BUSY if busy and all(t is not None for t in busy) else WALL
        times = [t for t in (busy if source == BUSY else times) if t is not None]
        peak = _num(row.get("peak_allocated_bytes"))
        run_ids = tuple(split_list(row.get("run_ids")))
        out[share_key(spec, gpu)] = MeasuredShare(
            study.name,
            row["status"],
            max(times) if times else None,
            int(peak) if peak is not None else None,
            _num(row.get("device_memory_cap_gib")),
            run_ids,
            ran_on,
            caveats(study, run_ids),
            source,
        )
    return out


def compute_factor(share: MeasuredShare | None, modelled_compute_s: float) -> float:
    """What the model's computation times are multiplied by to meet the measured share."""
    if share is None or share.status != "ok" or not share.compute_s or modelled_compute_s <= 0:
        return 1.0
    return share.compute_s / modelled_compute_s


def apply_memory(vals: dict, notes: list[str], share: MeasuredShare | None) -> None:
    """The measured memory verdict in place of the estimate's, where there is one."""
    if share is None:
        return
    if share.peak_bytes is not None:
        vals["memory_measured_gib"] = share.peak_bytes / 2**30
    if share.status == "oom":
        vals["fits_memory"] = False
        notes.append(
            f"measured: a rank of this configuration ran out of memory under the {share.cap_gib:g} GiB cap "
            f"({share.describe()})"
        )
    elif share.status == "ok":
        vals["fits_memory"] = True


def inputs_from(
    share: MeasuredShare | None, factor: float, calibration: str, carry: float = 1.0, target_gpu: str = ""
) -> dict:
    if share is None:
        return {"compute": f"the model, calibrated on {calibration}", "memory": "the memory estimate (memory_estimate)"}
    ran_on = share.measured_on or target_gpu
    compute = (
        f"measured: {share.describe()}, slowest stage {share.compute_s:.4g} s a step ({share.source}) on "
        f"{ran_on}, x {carry:.3f} "
        f"on {target_gpu} (the model's kernel-time ratio of the two GPUs for this spec); the model's "
        f"computation times x {factor:.3f}"
        if share.status == "ok" and share.compute_s
        else f"the model, calibrated on {calibration} (the rank share's status is {share.status})"
    )
    memory = (
        f"measured: {share.describe()}, status {share.status}"
        if share.status in ("ok", "oom")
        else "the memory estimate (memory_estimate): the rank share is not complete"
    )
    if share.caveat:
        if compute.startswith("measured"):
            compute += f" ({share.caveat_note()})"
        if memory.startswith("measured"):
            memory += f" ({share.caveat_note()})"
    return {"compute": compute, "memory": memory}
