"""Classify a failed run, and inject faults for tests.

A classified failure (out of memory, time limit, lost peer, impossible config) is data: the
run's raw log records it and the command exits 0. Anything else is `crashed`: recorded too,
then re-raised so that it fails loudly.

A run also has to prove that it trained (check_step, after every iteration): a loss that is not
finite or leaves LOSS_BAND makes it `diverged`, a step time that is not a positive finite number
makes it `invalid`, each with the step where it happened; neither has a throughput.

Test-only switch: SCALESTUDY_INJECT_FAULT="KIND[:rank=R][:step=S]" raises a fault of KIND at the
start of iteration S (default 0) on rank R (default every rank). KIND is one of oom, timeout,
comm_error, crash (an unclassified error) or exit (the process dies at once, writing nothing);
`nan` makes the loss of iteration S NaN, `zero_time` its step time 0 (what check_step must catch).
"""

from __future__ import annotations

import math
import os
import signal

import torch

from scalestudy.measure import rawlog
from scalestudy.spec.run import SpecError

INJECT_ENV = "SCALESTUDY_INJECT_FAULT"


class RunTimeout(Exception):
    """The run reached its time limit or was told to stop (SIGTERM, as SLURM does at its limit)."""


class InvalidConfig(Exception):
    """The spec cannot run here (e.g. the launcher's world size differs from the spec's)."""


class _AtStep(Exception):
    """A failure of one iteration: `step` goes into status.json (run_start.RunContext.fail)."""

    def __init__(self, message: str, step: int):
        super().__init__(message)
        self.step = step


class Diverged(_AtStep):
    """The run did not train: its loss is not finite or left the sane band (check_step)."""


class InvalidMeasurement(_AtStep):
    """A measured value that cannot be: a step time that is not a positive finite number."""


# The sane band of the training loss (cross-entropy, nats a token): [0, LOSS_BAND_FACTOR x ln(vocab)].
# A freshly initialised model predicts about uniformly, loss ln(vocab) (the tiny smoke Llama, vocab
# 512: 6.68 at step 0 against ln 512 = 6.24), and training only lowers it (on the harness's synthetic
# tokens it stays near ln(vocab)). Twice the uniform loss is a model that diverged, not a slow one:
# measured on the smoke spec (tiny, 4 layers, seq 128, AdamW, 7 steps; benchmarks/lr_bound.py) the
# loss stayed within 6.50 to 7.23 for lr <= 0.1 and left the band at step 3 for lr 0.5 (12.78) and at
# step 1 for lr 1 (14.15) and 10 (2104). Below 0 a cross-entropy cannot be.
LOSS_BAND_FACTOR = 2.0


def loss_band(vocab_size: int) -> tuple[float, float]:
    return 0.0, LOSS_BAND_FACTOR * math.log(max(2, int(vocab_size)))


def check_step(step: int, loss: float | None, step_time_s: float, vocab_size: int | None) -> None:
    """Raise InvalidMeasurement for a step time that is not a positive finite number, Diverged for
    a loss (None: not checked, e.g. under fake communication) that is not finite or lies outside
    loss_band(vocab_size) (measure.rawlog.step_problem decides)."""
    problem = rawlog.step_problem(step, loss, step_time_s, loss_band(vocab_size) if vocab_size else None)
    if problem is None:
        return
    kind, why = problem
    if kind == "invalid":
        raise InvalidMeasurement(
            f"{why}: the clock or the synchronisation failed; nothing of this run is a measurement", step
        )
    band = (
        f" ({LOSS_BAND_FACTOR:g} x ln(vocab {vocab_size}), the loss of a uniform prediction, at most)"
        if math.isfinite(loss)
        else ""
    )
    raise Diverged(f"{why}{band}: the run did not train", step)


_COMM_MARKERS = (
    "connection closed by peer",
    "connection reset by peer",
    "broken pipe",
    "gloo",
    "nccl",
    "timed out",
    "timeout",
    "processgroup",
    "socket",
    "rendezvous",
    "c10d",
)


def classify(exc: BaseException) -> str:
    """The status for an exception: one of rawlog.STATUSES other than ok."""
    if isinstance(exc, (SpecError, InvalidConfig)):
        return "invalid_config"
    if isinstance(exc, RunTimeout):
        return "timeout"
    if isinstance(exc, Diverged):
        return "diverged"
    if isinstance(exc, InvalidMeasurement):
        return "invalid"
    if isinstance(exc, torch.OutOfMemoryError):
        return "oom"
    msg = str(exc).lower()
    if isinstance(exc, RuntimeError) and ("out of memory" in msg or "can't allocate memory" in msg):
        return "oom"
    if isinstance(exc, (torch.distributed.DistError,)):
        return "comm_error"
    if isinstance(exc, (RuntimeError, ConnectionError, OSError)) and any(m in msg for m in _COMM_MARKERS):
        return "comm_error"
    return "crashed"


def install_sigterm_handler() -> None:
    def _handler(signum, frame):
        raise RunTimeout(f"received signal {signal.Signals(signum).name}")

    signal.signal(signal.SIGTERM, _handler)


def ignore_sigterm() -> None:
    """While a rank writes its status: a late SIGTERM (torchrun stopping the survivors of a
    crash) must not interrupt the record of what happened."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


class FaultInjector:
    def __init__(self, rank: int, spec_text: str | None = None):
        spec_text = os.environ.get(INJECT_ENV, "") if spec_text is None else spec_text
        self.kind = None
        self.rank = None
        self.step = 0
        if not spec_text:
            return
        kind, *opts = spec_text.split(":")
        if kind not in ("oom", "timeout", "comm_error", "crash", "exit", "nan", "zero_time"):
            raise ValueError(f"{INJECT_ENV}: unknown fault kind {kind!r}")
        self.kind = kind
        for o in opts:
            k, _, v = o.partition("=")
            if k == "rank":
                self.rank = int(v)
            elif k == "step":
                self.step = int(v)
            else:
                raise ValueError(f"{INJECT_ENV}: unknown option {o!r}")
        self.my_rank = rank

    def _here(self, step: int) -> bool:
        return self.kind is not None and step == self.step and (self.rank is None or self.rank == self.my_rank)

    def loss(self, step: int, loss: float) -> float:
        """The loss of iteration `step`, NaN where a `nan` fault is injected."""
        return float("nan") if self.kind == "nan" and self._here(step) else loss

    def step_time(self, step: int, step_time_s: float) -> float:
        """The step time of iteration `step`, 0 where a `zero_time` fault is injected."""
        return 0.0 if self.kind == "zero_time" and self._here(step) else step_time_s

    def maybe_fire(self, step: int) -> None:
        if not self._here(step) or self.kind in ("nan", "zero_time"):
            return
        if self.kind == "oom":
            raise torch.OutOfMemoryError("injected fault: CUDA out of memory. Tried to allocate 1 TiB")
        if self.kind == "timeout":
            raise RunTimeout("injected fault: time limit")
        if self.kind == "comm_error":
            raise torch.distributed.DistNetworkError("injected fault: Connection closed by peer")
        if self.kind == "crash":
            raise ZeroDivisionError("injected fault: an unclassified error")
        if self.kind == "exit":
            os._exit(17)
