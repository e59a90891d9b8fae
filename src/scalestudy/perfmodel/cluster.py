"""Cluster descriptions: one YAML file a cluster under workflow/clusters/ (h100-paper, a100-paper,
h200-node). Pure data.

Every number is `{value: ..., source: ..., note: ...}` (or a bare number, source `config`), so
that a prediction can say which of its inputs are datasheet facts, the paper's, measured,
read off a published figure, or assumed. Sources used: datasheet, paper, measured, published
panel, assumed. Keys (all required unless marked optional):

  name, description, gpu (a scalestudy.spec.catalog.gpus table name), gpus_per_node, max_nodes,
  peak_flops_per_s (dense bf16), hbm_bytes_per_s, memory_gib, tdp_w,
  intra_node_GBps (NVLink per GPU, one direction), inter_node_GBps (NIC per GPU, one direction),
  collectives:   fit ('published_panel' or 'raw'), raw_dirs (with fit raw: raw-log directories of
                 collectives benchmarks), bus_efficiency_intra, ll128_bw_factor, channels (NCCL's
                 channels of a ring at full bandwidth; small messages use fewer),
                 ring_latency_us {nvlink_simple, net_simple, nvlink_ll128, net_ll128, base}
  overlap:       interference (fractional slow-down of computation while a collective overlaps it)
  power:         hbm_bytes_per_bus_byte (HBM traffic of a collective, for the power of exposed
                 communication; the powers themselves come from the measured duty-cycle fit,
                 perfmodel/power.py, carried to this GPU as fractions of tdp_w)
  uncertainty:   relative half-widths of the box of assumed parameters (ring_latency,
                 intra_bandwidth, inter_bandwidth, interference, comm_power)

`load_cluster(name)` finds workflow/clusters/<name>.yaml under the project root (or the checkout
the package is installed from); `with_overrides(cluster, {"inter_node_GBps": 100})` asks what-if
questions (a faster interconnect, a newer GPU).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalestudy.spec.checkout import checkout_path

CLUSTERS_DIR = Path("workflow") / "clusters"
SOURCES = ("datasheet", "paper", "measured", "published panel", "published", "assumed", "fit", "config", "what-if")
REQUIRED = ("name", "description", "gpu", "gpus_per_node", "max_nodes", "peak_flops_per_s", "hbm_bytes_per_s",
            "memory_gib", "tdp_w", "intra_node_GBps", "inter_node_GBps", "collectives", "overlap", "power",
            "uncertainty")
OPTIONAL = ("design_power_w",)


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
    source_file: str | None = None
    overrides: dict = field(default_factory=dict)

    def v(self, key: str) -> float:
        try:
            return self.values[key].value
        except KeyError:
            raise ClusterError(f"cluster {self.name!r} has no value {key!r}") from None

    @property
    def gpus_per_node(self) -> int:
        return int(self.v("gpus_per_node"))

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
        return {"name": self.name, "description": self.description, "gpu": self.gpu,
                "collectives_fit": self.collectives_fit, "raw_dirs": list(self.raw_dirs),
                "source_file": self.source_file, "overrides": dict(self.overrides), "values": self.sources()}


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
    data = copy.deepcopy(data)
    coll = dict(data["collectives"])
    fit = coll.pop("fit", "published_panel")
    if fit not in ("published_panel", "raw"):
        raise ClusterError(f"{source_file}: collectives.fit must be published_panel or raw, got {fit!r}")
    raw_dirs = tuple(str(p) for p in coll.pop("raw_dirs", []) or [])
    if fit == "raw" and not raw_dirs:
        raise ClusterError(f"{source_file}: collectives.fit raw needs collectives.raw_dirs")
    numbers = {k: data[k] for k in REQUIRED if k not in ("name", "description", "gpu", "collectives", "overlap",
                                                           "power", "uncertainty")}
    numbers.update({k: data[k] for k in OPTIONAL if k in data})
    numbers.update({"collectives": coll, "overlap": data["overlap"], "power": data["power"],
                    "uncertainty": data["uncertainty"]})
    flat = _flatten(numbers)
    values = {k: value(v, f"{source_file or data['name']}: {k}") for k, v in flat.items()}
    return Cluster(name=str(data["name"]), description=str(data["description"]).strip(), gpu=str(data["gpu"]),
                   values=values, collectives_fit=fit, raw_dirs=raw_dirs, source_file=source_file)


def clusters_dir(root: Path | str = ".") -> Path:
    return checkout_path(CLUSTERS_DIR, root)


def cluster_names(root: Path | str = ".") -> list[str]:
    return sorted(p.stem for p in clusters_dir(root).glob("*.yaml"))


def load_cluster(name: str, root: Path | str = ".") -> Cluster:
    """workflow/clusters/<name>.yaml (or a path to a YAML file)."""
    import yaml

    p = Path(name)
    if p.suffix not in (".yaml", ".yml"):
        p = clusters_dir(root) / f"{name}.yaml"
    elif not p.exists():
        p = Path(root) / p
    if not p.exists():
        raise ClusterError(f"no cluster file {p} (known: {', '.join(cluster_names(root))})")
    data = yaml.safe_load(p.read_text())
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
    return Cluster(cluster.name + ("+what-if" if overrides else ""), cluster.description, cluster.gpu, values,
                   cluster.collectives_fit, cluster.raw_dirs, cluster.source_file,
                   {**cluster.overrides, **{k: float(v) for k, v in overrides.items()}})
