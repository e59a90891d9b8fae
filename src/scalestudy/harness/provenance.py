"""What produced a run: code, environment, hosts, devices, scheduler."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import socket
import sys
from pathlib import Path

import torch

import scalestudy
from scalestudy.measure.portable import portable_value
from scalestudy.spec import checkout

ENV_PREFIXES = (
    "NCCL_",
    "TORCH_",
    "GLOO_",
    "CUDA_",
    "OMP_",
    "SLURM_",
    "PYTORCH_",
    "MASTER_",
    "NVIDIA_",
    "SCALESTUDY_HARNESS_",
)
LIBRARIES = ("torch", "numpy", "megatron-core", "nvidia-ml-py", "pandas", "seaborn", "snakemake")


def git_state(path: Path | None = None) -> dict:
    """Commit and dirty flag of the checkout holding the package (spec.checkout.git_state)."""
    return checkout.git_state(path or Path(scalestudy.__file__).resolve().parent)


def source_digest() -> str:
    """sha256 over the package's Python sources: names the code exactly, even without git."""
    root = Path(scalestudy.__file__).resolve().parent
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def library_versions() -> dict:
    out = {}
    for name in LIBRARIES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def local_facts(device: torch.device) -> dict:
    """Facts of this process's host and device, gathered from every rank."""
    facts = {"host": socket.gethostname(), "pid": os.getpid(), "device": str(device)}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        facts.update(
            device_name=props.name, device_memory_bytes=props.total_memory, device_uuid=str(getattr(props, "uuid", ""))
        )
    else:
        facts.update(device_name=platform.processor() or platform.machine(), cpu_count=os.cpu_count())
    return facts


def collect(rank_facts: list[dict]) -> dict:
    cuda = torch.version.cuda
    nccl = None
    if torch.cuda.is_available():
        try:
            v = torch.cuda.nccl.version()
            nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception as e:  # noqa: BLE001 - recorded, not fatal
            nccl = f"unavailable: {e}"
    return {
        "package": {
            "name": "scalestudy",
            "version": scalestudy.__version__,
            "git": git_state(),
            "source_sha256": source_digest(),
        },
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda": cuda,
        "nccl": nccl,
        "libraries": library_versions(),
        "command": [portable_value(a) for a in sys.argv],
        "environment": {k: portable_value(v) for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)},
        "slurm": {
            "job_id": os.environ.get("SLURM_JOB_ID"),
            "nodelist": os.environ.get("SLURM_JOB_NODELIST"),
            "nnodes": os.environ.get("SLURM_NNODES"),
        },
        "hosts": sorted({f["host"] for f in rank_facts}),
        "devices": {"count": len(rank_facts), "names": sorted({f["device_name"] for f in rank_facts})},
        "ranks": rank_facts,
    }
