"""Optional live logging of rank 0's per-step metrics to TensorBoard or Weights & Biases
(`scalestudy train --metrics-sink tensorboard|wandb`; off by default). The raw log stays the
record; a sink only mirrors the progress numbers for watching a run. Neither library is a
dependency: asking for one that is not installed is refused before the run starts."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

SINKS = ("none", "tensorboard", "wandb")
_NEEDS = {"tensorboard": ("tensorboard", "pip install tensorboard"), "wandb": ("wandb", "pip install wandb")}


class SinkUnavailable(Exception):
    """The sink's library is not installed."""


def check(kind: str) -> None:
    """Raise SinkUnavailable, in one sentence with the fix, if `kind` cannot be used here."""
    if kind not in SINKS:
        raise SinkUnavailable(f"--metrics-sink {kind!r} is not one of {', '.join(SINKS)}")
    if kind in _NEEDS:
        module, fix = _NEEDS[kind]
        if importlib.util.find_spec(module) is None:
            raise SinkUnavailable(f"--metrics-sink {kind} needs the {module} package, which is not installed: {fix}")


class MetricsSink:
    """Writes {name: value} per step; close() flushes."""

    def __init__(self, kind: str, run_dir: Path, run_id: str, config: dict):
        check(kind)
        self.kind = kind
        if kind == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=str(Path(run_dir) / "tensorboard"))
        else:
            import wandb

            self._run = wandb.init(project=os.environ.get("WANDB_PROJECT", "scalestudy"), name=run_id, config=config,
                                   dir=str(run_dir))

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


def open_sink(kind: str, run_dir: Path, run_id: str, config: dict) -> MetricsSink | None:
    return None if kind == "none" else MetricsSink(kind, run_dir, run_id, config)
