"""Classify a failed run, and inject faults for tests.

A classified failure (out of memory, time limit, lost peer, impossible config) is data: the
run's raw log records it and the command exits 0. Anything else is `crashed`: recorded too,
then re-raised so that it fails loudly.

Test-only switch: SCALESTUDY_INJECT_FAULT="KIND[:rank=R][:step=S]" raises a fault of KIND at the
start of iteration S (default 0) on rank R (default every rank). KIND is one of oom, timeout,
comm_error, crash (an unclassified error) or exit (the process dies at once, writing nothing).
"""

from __future__ import annotations

import os
import signal

import torch

INJECT_ENV = "SCALESTUDY_INJECT_FAULT"


class RunTimeout(Exception):
    """The run reached its time limit or was told to stop (SIGTERM, as SLURM does at its limit)."""


class InvalidConfig(Exception):
    """The spec cannot run here (e.g. the launcher's world size differs from the spec's)."""


_COMM_MARKERS = (
    "connection closed by peer", "connection reset by peer", "broken pipe", "gloo", "nccl",
    "timed out", "timeout", "processgroup", "socket", "rendezvous", "c10d",
)


def classify(exc: BaseException) -> str:
    """The status for an exception: one of rawlog.STATUSES other than ok."""
    from scalestudy.spec.run import SpecError

    if isinstance(exc, (SpecError, InvalidConfig)):
        return "invalid_config"
    if isinstance(exc, RunTimeout):
        return "timeout"
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
        if kind not in ("oom", "timeout", "comm_error", "crash", "exit"):
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

    def maybe_fire(self, step: int) -> None:
        if self.kind is None or step != self.step or (self.rank is not None and self.rank != self.my_rank):
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
