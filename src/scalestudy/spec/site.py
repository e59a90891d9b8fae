"""The site file: one cluster's settings (slurm/site.yaml next to the Snakemake profile
slurm/config.yaml; SCALESTUDY_SLURM_SITE names another): partition, account, GPUs per node, time
limits, constraint, retries, and the site's catalog files and peak. Pure data: what the SLURM
launcher (scalestudy.launch.slurm) and the studies read."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path

import yaml

from scalestudy.spec import strict_yaml

SITE_ENV = "SCALESTUDY_SLURM_SITE"
SITE_FILE = Path("slurm") / "site.yaml"
DEFAULT_RDZV_PORT = 29500


class SiteError(ValueError):
    """A site file that cannot work, or a run that the site cannot hold."""


@dataclass(frozen=True)
class Site:
    """The cluster's settings (slurm/site.yaml). None: not passed to sbatch (SLURM's default)."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    gpus_per_node: int | None = None  # the GPUs of one node; a run asking more is refused
    cpus_per_gpu: int | None = None  # CPUs a process (GPU) of a run; default: 1 a process
    mem_mb_per_node: int | None = None  # default: the launcher's estimate; 0: all of the node (--mem=0)
    max_runtime_min: int | None = None  # the partition's MaxTime: longer runs are refused at planning
    min_runtime_min: int = 10  # floor of a job's time limit (start-up, queueing of steps)
    exclusive: bool = True  # whole nodes (--exclusive): no other job on a run's nodes (a measured run owns its machine)
    retries: int = 2  # a run stopped by its time limit or a preemption is run again this often
    rdzv_port: int = DEFAULT_RDZV_PORT
    srun_extra: str = ""  # added to the srun line of every run (e.g. --mpi=none, --cpu-bind=none)
    slurm_extra: str = ""  # added to every sbatch line (options the executor plugin does not set itself)
    gpu_hours_budget: int | None = None  # refuse a study asking more GPU-hours (unless the study sets its own)
    catalog: str | None = None  # catalog files (comma-separated) of this site's GPU kinds and models
    peak_tflops: float | None = None  # the peak for MFU of this site's GPU (a study's own wins)
    # the host and device locks of measured runs (scalestudy.launch.run_guard.lock_dir): an absolute
    # path on each host; None: /tmp/scalestudy-locks-UID, whatever TMPDIR says; SCALESTUDY_LOCK_DIR overrides
    lock_dir: str | None = None

    @property
    def source(self) -> str:
        return getattr(self, "_source", "defaults")


def site_path(root: os.PathLike | str = ".") -> Path:
    """The site file: SCALESTUDY_SLURM_SITE if set, else slurm/site.yaml under `root`."""
    env = os.environ.get(SITE_ENV)
    return Path(env) if env else Path(root) / SITE_FILE


def load_site(path: os.PathLike | str | None = None, root: os.PathLike | str = ".") -> Site:
    """The site settings from `path` (default: $SCALESTUDY_SLURM_SITE or slurm/site.yaml under
    root). A missing file gives the defaults; an unknown key or a wrong type is refused."""
    p = Path(path) if path is not None else site_path(root)
    if not p.exists():
        return Site()
    try:
        data = strict_yaml.load_file(p) or {}
    except yaml.YAMLError as e:  # a duplicate key, or not YAML
        raise SiteError(f"{p}: {' '.join(str(e).split())}") from None
    if not isinstance(data, dict):
        raise SiteError(f"{p}: expected a mapping of settings")
    known = {f.name: f for f in fields(Site)}
    kwargs = {}
    for key, value in data.items():
        if key not in known:
            raise SiteError(f"{p}: unknown setting {key!r} (known: {', '.join(known)})")
        if value is None or value == "":
            kwargs[key] = None if known[key].default is None else known[key].default
            continue
        want = known[key].type
        if "float" in str(want):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise SiteError(f"{p}: {key} must be a number > 0, not {value!r}")
            value = float(value)
        elif "bool" in str(want):
            if not isinstance(value, bool):
                raise SiteError(f"{p}: {key} must be true or false, not {value!r}")
        elif "int" in str(want):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise SiteError(f"{p}: {key} must be a whole number >= 0, not {value!r}")
        else:
            value = str(value)
            if key == "lock_dir" and not Path(os.path.expanduser(value)).is_absolute():
                raise SiteError(
                    f"{p}: lock_dir must be an absolute path (one place a host, whatever the "
                    f"working directory), not {value!r}"
                )
        kwargs[key] = value
    site = Site(**kwargs)  # type: ignore[arg-type]  # the values are checked by Site.problems
    object.__setattr__(site, "_source", str(p))
    return site
