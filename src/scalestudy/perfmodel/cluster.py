"""Cluster descriptions: one YAML file a cluster under workflow/clusters/ (h100-paper, a100-paper,
h200-node). Pure data.

Every number is `{value: ..., source: ..., note: ...}` (or a bare number, source `config`), so
that a prediction can say which of its inputs are datasheet facts, the paper's, measured,
read off a published figure, or assumed. Sources used: datasheet, paper, measured, published
panel, assumed. Keys (all required unless marked optional):

  name, description, gpu (a scalestudy.spec.catalog.gpus table name), gpus_per_node, max_nodes,
  nvlink_domain_gpus (optional: GPUs a NVLink domain spans where it is more than a node's, e.g. 72
                 on a GB200 NVL72 rack of nodes of 4; groups are counted in domains, not nodes),
  peak_flops_per_s (dense bf16), hbm_bytes_per_s, memory_gib, tdp_w,
  intra_node_GBps (NVLink per GPU, one direction), inter_node_GBps (NIC per GPU, one direction),
  collectives:   latency ('nccl_tuning', the default: NCCL's own tuning-model latencies; or
                 'published_panel': the network-hop latency of the tree fitted to the paper's Fig 2),
                 fit ('published_panel' or 'raw'), raw_dirs (with fit raw: raw-log directories of
                 collectives benchmarks), bus_efficiency_intra, ll128_bw_factor, channels (NCCL's
                 channels of a ring at full bandwidth; small messages use fewer),
                 ring_latency_us {nvlink_simple, net_simple, nvlink_ll128, net_ll128, base}
  (no overlap section: the slow-down of computation under an overlapping collective is the model
                 option overlap_slowdown, perfmodel/options.py, with its source; a file that still has
                 the old `overlap: interference` is refused, naming it)
  power:         hbm_bytes_per_bus_byte (HBM traffic of a collective, for the power of exposed
                 communication; the powers themselves come from the measured duty-cycle fit,
                 perfmodel/power.py, carried to this GPU as fractions of tdp_w)
  uncertainty:   relative half-widths of the box of assumed parameters (ring_latency,
                 intra_bandwidth, inter_bandwidth, interference, comm_power)
  attention_kernel (optional): {value: flash2 | cudnn, source: ...}, the fused attention kernel the
                 cluster's training stack runs (spec/catalog/attention.yaml); without it attention
                 carries to the GPU as its matrix products do (perfmodel/achievable.py)

A new GPU needs only its catalog entry (scalestudy.spec.catalog): a cluster file may name
`base: <another cluster>` and take every value it does not give from there, and the GPU-kind
values (GPU_VALUES: peak, HBM bandwidth, memory, board limit, NVLink) it does not give come from
the catalog entry of its `gpu` (source `datasheet: catalog ...`) whenever that differs from the
base's GPU. `with_gpu(cluster, name)` does the same for one command (`model predict --gpu`).

`load_cluster(name)` finds workflow/clusters/<name>.yaml under the project root (or the checkout
the package is installed from); `with_overrides(cluster, {"inter_node_GBps": 100})` asks what-if
questions (a faster interconnect, a newer GPU).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scalestudy.perfmodel.achievable import attention_kernels
from scalestudy.spec import catalog, strict_yaml
from scalestudy.spec.catalog.gpus import UnknownDeviceError
from scalestudy.spec.checkout import checkout_path

CLUSTERS_DIR = Path("workflow") / "clusters"
SOURCES = ("datasheet", "paper", "measured", "published panel", "published", "assumed", "fit", "config", "what-if")
REQUIRED = (
    "name",
    "description",
    "gpu",
    "gpus_per_node",
    "max_nodes",
    "peak_flops_per_s",
    "hbm_bytes_per_s",
    "memory_gib",
    "tdp_w",
    "intra_node_GBps",
    "inter_node_GBps",
    "collectives",
    "power",
    "uncertainty",
)
OPTIONAL = ("design_power_w", "nvlink_domain_gpus")
# collectives.latency: where the per-step latencies of collectives come from (perfmodel/collectives.py):
# NCCL's own tuning model (the default), or the network-hop latency of the tree fit to the paper's Fig 2
LATENCY_MODELS = ("nccl_tuning", "published_panel")
# the cluster value -> the catalog GPU entry's field it defaults to, and the unit factor
GPU_VALUES = {
    "peak_flops_per_s": ("peak_flops_per_s", 1.0),
    "hbm_bytes_per_s": ("memory_bytes_per_s", 1.0),
    "memory_gib": ("memory_bytes", 1.0 / 2**30),
    "tdp_w": ("power_cap_w", 1.0),
    "intra_node_GBps": ("intra_node_link_bytes_per_s", 1e-9),
}


class ClusterError(ValueError):
    pass


@dataclass(frozen=True)
class Value:
    """One number of a cluster description and where it comes from."""

    value: float
    source: str
    note: str = ""

    def as_dict(self) -> dict:
        return {"value": self.value, "source": self.source, "note": self.note}


def value(raw: Any, where: str) -> Value:
    if isinstance(raw, dict):
        if "value" not in raw:
            raise ClusterError(f"{where}: a mapping needs 'value'")
        src = str(raw.get("source", "config"))
        if src.split(":")[0].strip() not in SOURCES:
            raise ClusterError(f"{where}: source {src!r} does not start with one of {', '.join(SOURCES)}")
        return Value(float(raw["value"]), src, str(raw.get("note", "")))
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return Value(float(raw), "config")
    raise ClusterError(f"{where}: expected a number or {{value, source}}, got {raw!r}")


@dataclass(frozen=True)
class Cluster:
    name: str
    description: str
    gpu: str
    values: dict[str, Value]  # flat: "peak_flops_per_s", "collectives.bus_efficiency_intra", ...
    collectives_fit: str = "published_panel"
    raw_dirs: tuple[str, ...] = ()
    latency_model: str = "nccl_tuning"  # collectives.latency: LATENCY_MODELS
    source_file: str | None = None
    overrides: dict = field(default_factory=dict)
    attention_kernel: str | None = None
    attention_kernel_source: str = ""

    def v(self, key: str) -> float:
        try:
            return self.values[key].value
        except KeyError:
            raise ClusterError(f"cluster {self.name!r} has no value {key!r}") from None

    @property
    def gpus_per_node(self) -> int:
        return int(self.v("gpus_per_node"))

    @property
    def nvlink_domain(self) -> int:
        """GPUs that reach each other over NVLink: the node's, or a rack's (GB200 NVL72: 72 GPUs in
        nodes of 4); groups within it run at NVLink rates, groups beyond it cross the network."""
        return int(self.v("nvlink_domain_gpus")) if "nvlink_domain_gpus" in self.values else self.gpus_per_node

    @property
    def max_gpus(self) -> int:
        return int(self.v("max_nodes")) * self.gpus_per_node

    @property
    def peak_flops(self) -> float:
        return self.v("peak_flops_per_s")

    @property
    def hbm(self) -> float:
        return self.v("hbm_bytes_per_s")

    def sources(self) -> dict[str, dict]:
        return {k: v.as_dict() for k, v in sorted(self.values.items())}

    def assumed(self) -> list[str]:
        return sorted(k for k, v in self.values.items() if v.source.startswith(("assumed", "what-if")))

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "gpu": self.gpu,
            "attention_kernel": {"value": self.attention_kernel, "source": self.attention_kernel_source},
            "collectives_fit": self.collectives_fit,
            "latency_model": self.latency_model,
            "raw_dirs": list(self.raw_dirs),
            "source_file": self.source_file,
            "overrides": dict(self.overrides),
            "values": self.sources(),
        }


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and "value" not in v:
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def cluster_from_dict(data: dict, source_file: str | None = None) -> Cluster:
    if not isinstance(data, dict):
        raise ClusterError(f"{source_file or 'cluster'}: not a mapping")
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise ClusterError(f"{source_file or data.get('name', 'cluster')}: missing {', '.join(missing)}")
    if "overlap" in data:
        raise ClusterError(
            f"{source_file or data.get('name', 'cluster')}: `overlap` (interference) is no longer read: "
            "the slow-down of computation while a collective overlaps it is the model option "
            "overlap_slowdown (scalestudy model predict --overlap-slowdown); remove the section"
        )
    data = copy.deepcopy(data)
    kernel, kernel_source = _attention_kernel(data.get("attention_kernel"), source_file or data.get("name", "cluster"))
    coll = dict(data["collectives"])
    fit = coll.pop("fit", "published_panel")
    if fit not in ("published_panel", "raw"):
        raise ClusterError(f"{source_file}: collectives.fit must be published_panel or raw, got {fit!r}")
    raw_dirs = tuple(str(p) for p in coll.pop("raw_dirs", []) or [])
    latency = coll.pop("latency", LATENCY_MODELS[0])
    if latency not in LATENCY_MODELS:
        raise ClusterError(
            f"{source_file}: collectives.latency must be one of {', '.join(LATENCY_MODELS)}, got {latency!r}"
        )
    if fit == "raw" and not raw_dirs:
        raise ClusterError(f"{source_file}: collectives.fit raw needs collectives.raw_dirs")
    numbers = {
        k: data[k] for k in REQUIRED if k not in ("name", "description", "gpu", "collectives", "power", "uncertainty")
    }
    numbers.update({k: data[k] for k in OPTIONAL if k in data})
    numbers.update({"collectives": coll, "power": data["power"], "uncertainty": data["uncertainty"]})
    flat = _flatten(numbers)
    values = {k: value(v, f"{source_file or data['name']}: {k}") for k, v in flat.items()}
    return Cluster(
        name=str(data["name"]),
        description=str(data["description"]).strip(),
        gpu=str(data["gpu"]),
        values=values,
        collectives_fit=fit,
        raw_dirs=raw_dirs,
        latency_model=latency,
        source_file=source_file,
        attention_kernel=kernel,
        attention_kernel_source=kernel_source,
    )


def _attention_kernel(raw: Any, where: str) -> tuple[str | None, str]:
    if raw is None:
        return None, ""
    if not isinstance(raw, dict) or "value" not in raw or "source" not in raw:
        raise ClusterError(f"{where}: attention_kernel must be {{value: <kernel>, source: ...}}, got {raw!r}")
    known = attention_kernels()
    if raw["value"] not in known:
        raise ClusterError(
            f"{where}: attention_kernel {raw['value']!r} is not one of {', '.join(sorted(known))} "
            "(spec/catalog/attention.yaml)"
        )
    src = str(raw["source"])
    if src.split(":")[0].strip() not in SOURCES:
        raise ClusterError(f"{where}: attention_kernel source {src!r} does not start with one of {', '.join(SOURCES)}")
    return str(raw["value"]), src


def catalog_gpu_values(gpu: str) -> dict[str, dict]:
    """The GPU-kind values of a cluster from the catalog entry of `gpu` (bf16 dense peak)."""
    try:
        g = catalog.gpu(gpu)
    except UnknownDeviceError as e:
        raise ClusterError(
            f"GPU {gpu!r} is not in the catalog ({e}); add its entry (docs/catalog.md) or give "
            f"{', '.join(GPU_VALUES)} in the cluster file"
        ) from None
    out = {}
    for key, (attr, unit) in GPU_VALUES.items():
        x = getattr(g, attr)
        if attr == "peak_flops_per_s":
            x = x.get("bf16")
            if x is None:
                continue
        out[key] = {"value": float(x) * unit, "source": f"datasheet: catalog {g.name} ({g.datasheet})"}
    return out


def _with_base(data: dict, path: Path, root: Path | str, seen: tuple[str, ...] = ()) -> dict:
    """A cluster file's contents with its `base` cluster's values under it and, where its GPU is
    not the base's, the GPU-kind values from the catalog under its own."""
    data = dict(data)
    base_name = data.pop("base", None)
    merged: dict = {}
    if base_name is not None:
        if base_name in seen:
            raise ClusterError(f"{path}: base clusters form a loop ({' -> '.join((*seen, base_name))})")
        bp = clusters_dir(root) / f"{base_name}.yaml"
        if not bp.exists():
            raise ClusterError(
                f"{path}: base cluster {base_name!r} not found (known: {', '.join(cluster_names(root))})"
            )
        merged = _with_base(strict_yaml.load_file(bp) or {}, bp, root, (*seen, str(base_name)))
    gpu = data.get("gpu", merged.get("gpu"))
    if gpu is not None and gpu != merged.get("gpu"):
        merged = {k: v for k, v in merged.items() if k not in GPU_VALUES}
        missing = [k for k in GPU_VALUES if k not in data]
        if missing:
            merged.update({k: v for k, v in catalog_gpu_values(str(gpu)).items() if k in missing})
    for k, v in data.items():
        merged[k] = (
            {**merged[k], **v} if isinstance(v, dict) and isinstance(merged.get(k), dict) and "value" not in v else v
        )
    return merged


def with_gpu(cluster: Cluster, gpu: str) -> Cluster:
    """The cluster with another GPU of the catalog in its nodes: its GPU-kind values from the
    catalog, the network and the rest unchanged."""
    values = dict(cluster.values)
    for k, v in catalog_gpu_values(gpu).items():
        values[k] = Value(
            v["value"], v["source"], f"--gpu; was {values[k].value:g} ({values[k].source})" if k in values else "--gpu"
        )
    values.pop("design_power_w", None)
    return dataclasses.replace(
        cluster, name=f"{cluster.name}+{gpu}", gpu=gpu, values=values, overrides={**cluster.overrides, "gpu": gpu}
    )


def clusters_dir(root: Path | str = ".") -> Path:
    return checkout_path(CLUSTERS_DIR, root)


def cluster_names(root: Path | str = ".") -> list[str]:
    return sorted(p.stem for p in clusters_dir(root).glob("*.yaml"))


def load_cluster(name: str, root: Path | str = ".") -> Cluster:
    """workflow/clusters/<name>.yaml (or a path to a YAML file)."""
    p = Path(name)
    if p.suffix not in (".yaml", ".yml"):
        p = clusters_dir(root) / f"{name}.yaml"
    elif not p.exists():
        p = Path(root) / p
    if not p.exists():
        raise ClusterError(f"no cluster file {p} (known: {', '.join(cluster_names(root))})")
    try:
        data = strict_yaml.load_file(p)
    except yaml.YAMLError as e:
        raise ClusterError(f"cluster file {p} is not YAML: {e}") from None
    if not isinstance(data, dict):
        raise ClusterError(f"cluster file {p}: not a mapping")
    data = _with_base(data, p, root)
    try:
        rel = p.resolve().relative_to(clusters_dir(root).resolve().parents[1]).as_posix()
    except ValueError:
        rel = p.name
    return cluster_from_dict(data, source_file=rel)


def with_overrides(cluster: Cluster, overrides: dict[str, float]) -> Cluster:
    """A what-if copy of a cluster: each key (a flat name such as `inter_node_GBps` or
    `collectives.ring_latency_us.net_simple`) gets the given value, source `what-if`."""
    values = dict(cluster.values)
    for k, v in overrides.items():
        if k not in values:
            raise ClusterError(f"cluster {cluster.name!r} has no value {k!r} (known: {', '.join(sorted(values))})")
        values[k] = Value(float(v), "what-if", f"overridden; was {values[k].value:g} ({values[k].source})")
    return dataclasses.replace(
        cluster,
        name=cluster.name + ("+what-if" if overrides else ""),
        values=values,
        overrides={**cluster.overrides, **{k: float(v) for k, v in overrides.items()}},
    )
