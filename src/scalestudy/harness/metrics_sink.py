"""Optional live logging of rank 0's per-step metrics to TensorBoard or Weights & Biases; off by
default. The raw log stays the record; a sink only mirrors the progress numbers for watching a run.

Asked for by `scalestudy train --metrics-sink tensorboard|wandb`, or for every run of a workflow by
the study's `metrics_sink` setting (`{kind: tensorboard, dir: ...}` or `{kind: wandb, project: ...,
mode: offline}`), which `scalestudy launch` hands its workers in SINK_ENV. A sink is not part of
the RunSpec: where a run's numbers are mirrored changes neither what it measures nor its run id.

Neither library is a dependency (the extras `scalestudy[tensorboard]` and `scalestudy[wandb]`):
asking for one that is not installed is refused, in one sentence naming the package, before the
run starts, and by the workflow before any job runs."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Mapping
from pathlib import Path

SINKS = ("none", "tensorboard", "wandb")
WANDB_MODES = ("offline", "online")
SINK_ENV = "SCALESTUDY_METRICS_SINK"  # a sink config as JSON, set by `scalestudy launch` from the study
_NEEDS = {
    "tensorboard": ("tensorboard", 'pip install "scalestudy[tensorboard]" (or tensorboard)'),
    "wandb": ("wandb", 'pip install "scalestudy[wandb]" (or wandb)'),
}
_KEYS = {"kind", "dir", "project", "mode", "group"}


class SinkUnavailable(Exception):
    """The sink's library is not installed, or the sink is not one of SINKS."""


def sink_config(sink: str | Mapping | None) -> dict:
    """A sink setting as a dict {kind, dir, project, mode, group} (absent keys: defaults): a kind
    alone ("tensorboard"), a mapping (a study's `metrics_sink`), or None (none)."""
    if sink is None:
        return {"kind": "none"}
    if isinstance(sink, str):
        return {"kind": sink}
    cfg = {k: v for k, v in dict(sink).items() if v is not None}
    unknown = sorted(set(cfg) - _KEYS)
    if unknown:
        raise SinkUnavailable(f"metrics_sink: unknown setting {', '.join(unknown)} (known: {', '.join(sorted(_KEYS))})")
    cfg.setdefault("kind", "none")
    return cfg


def check(kind: str | Mapping | None, where: str = "--metrics-sink") -> None:
    """Raise SinkUnavailable, in one sentence with the fix, if the sink cannot be used here;
    `where` names the setting that asked for it."""
    cfg = sink_config(kind)
    kind = cfg["kind"]
    if kind not in SINKS:
        raise SinkUnavailable(f"{where} {kind!r} is not one of {', '.join(SINKS)}")
    if cfg.get("mode") is not None and cfg["mode"] not in WANDB_MODES:
        raise SinkUnavailable(f"{where} mode {cfg['mode']!r} is not one of {', '.join(WANDB_MODES)}")
    if kind in _NEEDS:
        module, fix = _NEEDS[kind]
        if importlib.util.find_spec(module) is None:
            raise SinkUnavailable(f"{where} {kind} needs the {module} package, which is not installed: {fix}")


def from_env(environ: Mapping[str, str] = os.environ) -> dict | None:
    """The sink `scalestudy launch` asked for (SINK_ENV), or None."""
    text = environ.get(SINK_ENV)
    return sink_config(json.loads(text)) if text else None


def to_env(sink: Mapping) -> str:
    return json.dumps(sink_config(sink), sort_keys=True)


def resolve(kind: str | Mapping | None, environ: Mapping[str, str] = os.environ) -> dict:
    """The sink of a run: the one asked for on the command line, else the launcher's (the study's)."""
    cfg = sink_config(kind)
    if cfg["kind"] == "none":
        return from_env(environ) or cfg
    return cfg


class MetricsSink:
    """Writes {name: value} per step; close() flushes. TensorBoard: event files in DIR/RUN_ID
    (without a dir: RUN_DIR/tensorboard). W&B: a run named RUN_ID in `project` (default
    $WANDB_PROJECT, else scalestudy), grouped by `group`, offline unless mode online (or
    $WANDB_MODE) asks otherwise; its files in `dir` (default the run directory)."""

    def __init__(self, kind: str | Mapping, run_dir: Path, run_id: str, config: dict, *, writer_factory=None):
        cfg = sink_config(kind)
        if writer_factory is None:
            check(cfg)
        self.kind = cfg["kind"]
        self.cfg = cfg
        if self.kind == "tensorboard":
            log_dir = Path(cfg["dir"]) / run_id if cfg.get("dir") else Path(run_dir) / "tensorboard"
            self.location = str(log_dir)
            if writer_factory is None:
                from torch.utils.tensorboard import SummaryWriter as writer_factory  # local: tensorboard is optional
            self._writer = writer_factory(log_dir=str(log_dir))
        elif self.kind == "wandb":
            init = writer_factory
            if init is None:
                import wandb  # local: wandb is optional

                init = wandb.init
            self.location = str(cfg.get("dir") or run_dir)
            Path(self.location).mkdir(parents=True, exist_ok=True)
            self._run = init(
                project=cfg.get("project") or os.environ.get("WANDB_PROJECT", "scalestudy"),
                name=run_id,
                group=cfg.get("group"),
                config=config,
                dir=self.location,
                mode=cfg.get("mode") or os.environ.get("WANDB_MODE", "offline"),
            )
        else:
            raise SinkUnavailable(f"--metrics-sink {self.kind!r} is not one of {', '.join(SINKS[1:])}")

    def log(self, step: int, metrics: dict[str, float]) -> None:
        if self.kind == "tensorboard":
            for name, value in metrics.items():
                self._writer.add_scalar(name, value, step)
        else:
            self._run.log(metrics, step=step)

    def close(self) -> None:
        if self.kind == "tensorboard":
            self._writer.close()
        else:
            self._run.finish()

    def record(self) -> dict:
        """What run.json's `launch` records of the sink (never part of the run id)."""
        return {**self.cfg, "location": self.location}


def open_sink(kind: str | Mapping | None, run_dir: Path, run_id: str, config: dict) -> MetricsSink | None:
    cfg = sink_config(kind)
    return None if cfg["kind"] == "none" else MetricsSink(cfg, run_dir, run_id, config)
