"""What the instruments share: the GPU's board through NVML, a thread sampling it, the machine
record, and the run itself, begun, described and finished as `scalestudy gemm` does
(harness/run_start.py; measure/rawlog.py seals and gzips it)."""

from __future__ import annotations

import importlib
import json
import platform
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from scalestudy.harness import provenance
from scalestudy.harness.faults import InvalidConfig
from scalestudy.harness.power import nvml_handle
from scalestudy.harness.run_start import RunContext, begin_run
from scalestudy.measure import rawlog


class Board:
    """One GPU's board through NVML: `nvml` is pynvml, or a stand-in with the same functions."""

    def __init__(self, nvml: Any, handle: Any, found_by: str = "index"):
        self.nvml, self.handle, self.found_by = nvml, handle, found_by
        self.instant_field = getattr(nvml, "NVML_FI_DEV_POWER_INSTANT", None)

    def energy_mj(self) -> int:
        return self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)

    def power_w(self) -> float:
        return self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0

    def sm_clock_mhz(self) -> int:
        return self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM)

    def machine(self) -> dict:
        return {
            "driver": self.nvml.nvmlSystemGetDriverVersion(),
            "power_limit_w": self.nvml.nvmlDeviceGetEnforcedPowerLimit(self.handle) / 1000.0,
            "nvml_device": self.found_by,
        }

    def sample(self, phase: str) -> dict:
        """Board power, SM clock, temperature and, where the driver has it, the instantaneous power;
        an NVML error is recorded in their place."""
        nv, h = self.nvml, self.handle
        rec: dict[str, Any] = {"phase": phase, "t": time.time()}
        try:
            rec["power_w"] = self.power_w()
            rec["sm_mhz"] = self.sm_clock_mhz()
            rec["temp_c"] = nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)
            if self.instant_field is not None:
                v = nv.nvmlDeviceGetFieldValues(h, [self.instant_field])[0]
                if v.nvmlReturn == 0:
                    rec["instant_w"] = v.value.uiVal / 1000.0
        except nv.NVMLError as e:
            rec["error"] = str(e)
        return rec


def open_board(what: str, device_index: int = 0, nvml: Any = None) -> Board:
    """The board of torch's CUDA device `device_index`; InvalidConfig naming `what` where NVML does not answer."""
    try:
        nvml = nvml or importlib.import_module("pynvml")
        nvml.nvmlInit()
        handle, found_by = nvml_handle(nvml, device_index)
    except Exception as e:  # noqa: BLE001 - no driver, no library: the measurement cannot run
        raise InvalidConfig(
            f"{what} reads the GPU's board power through NVML, which does not answer here ({type(e).__name__}: {e})"
        ) from None
    return Board(nvml, handle, found_by)


def gpu_board(what: str, nvml: Any = None) -> Board:
    """The board of the one GPU a power measurement runs on; InvalidConfig (one sentence) where torch
    sees no CUDA device or NVML does not answer, before any run directory is made."""
    if not torch.cuda.is_available():
        raise InvalidConfig(f"{what} measures an NVIDIA GPU and torch sees no CUDA device here; run it on a GPU host")
    return open_board(what, 0, nvml)


def optional_board(device: torch.device) -> Board | None:
    """The board of a CUDA device where NVML answers, else None (the records then leave power out)."""
    if device.type != "cuda":
        return None
    try:
        return open_board("", device.index or 0)
    except InvalidConfig:
        return None


class Sampler(threading.Thread):
    """Samples the board every `interval_s` under the current `phase` label; `drain()` hands over
    the samples taken so far, so that the measuring thread alone writes the raw log."""

    def __init__(self, board: Board, interval_s: float):
        super().__init__(daemon=True, name="scalestudy-board-sampler")
        self.board, self.interval_s, self.phase = board, interval_s, "start"
        self._stop_flag = threading.Event()
        self._lock = threading.Lock()
        self._samples: list[dict] = []

    def run(self) -> None:
        while not self._stop_flag.is_set():
            t = time.time()
            rec = self.board.sample(self.phase)
            with self._lock:
                self._samples.append(rec)
            self._stop_flag.wait(max(0.0, self.interval_s - (time.time() - t)))

    def drain(self) -> list[dict]:
        with self._lock:
            out, self._samples = self._samples, []
        return out

    def stop(self) -> list[dict]:
        """Stop sampling; the samples not drained yet."""
        self._stop_flag.set()
        if self.is_alive():
            self.join()
        return self.drain()


def log_phase(log: rawlog.RankLog, rec: dict, sampler: Sampler, *, quiet: bool, digits: int = 4) -> None:
    """One `phase` record and the `sample` records taken since the last; the phase echoed as a JSON line."""
    log.log("phase", rec)
    for s in sampler.drain():
        log.log("sample", s)
    if not quiet:
        print(
            json.dumps(
                {k: (round(v, digits) if isinstance(v, float) else v) for k, v in rec.items() if k not in ("t0", "t1")}
            ),
            flush=True,
        )


def machine(device: torch.device, facts: list[dict], board: Board | None) -> dict:
    """The device, the library versions and, where NVML answers, the driver and the board's power limit."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else facts[0].get("device_name")
    return {
        "device_name": name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        **(board.machine() if board else {}),
    }


def write_run_json(run_dir: Path, spec, measurement: dict, facts: list[dict]) -> None:
    """run.json of an instrument's run: its kind, ids, spec, `measurement` (the machine and the method)
    and provenance, as gemm's."""
    rawlog.atomic_write_json(
        Path(run_dir) / rawlog.RUN_FILE,
        {
            "schema": rawlog.SCHEMA,
            "kind": spec.KIND,
            "run_id": spec.run_id,
            "config_id": spec.config_id,
            **rawlog.identity_from_env(),
            "overrides": rawlog.overrides_from_env(),
            "spec": spec.to_dict(),
            "measurement": measurement,
            "provenance": provenance.collect(facts),
            "start_time_unix": round(time.time(), 3),
        },
    )


def run_instrument(
    spec,
    run_dir,
    method: dict,
    measure: Callable[[RunContext, Board | None], None],
    *,
    board: Board | None = None,
    quiet: bool = False,
) -> str:
    """Begin the run of `spec`, write its run.json (kind, spec, the machine and `method`, provenance),
    `measure(run, board)`, and finish the raw log sealed with its metrics gzipped; returns its status
    (a failure is recorded as the harness classifies it, an unclassified one re-raised)."""
    run = begin_run(spec, run_dir)
    board = board or optional_board(run.device)
    write_run_json(run.run_dir, spec, {**machine(run.device, run.facts, board), **method}, run.facts)
    try:
        torch.manual_seed(spec.seed)
        measure(run, board)
    except BaseException as e:  # noqa: BLE001 - every failure is recorded, then classified or re-raised
        return run.fail(e, quiet=quiet)
    status = run.finish()
    rawlog.compress_run(run.run_dir)
    return status
