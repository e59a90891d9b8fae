"""Model shapes and GPU kinds as data: the package's models.yaml and gpus.yaml, plus user files.

    from scalestudy.spec import catalog
    catalog.model("llama3.1-70b")        # a ModelConfig
    catalog.gpu("h100-sxm")              # a GPUSpec (device name or an exact alias)
    catalog.peak_flops("NVIDIA H200", "bf16")  # the peak MFU divides by (PeakInfo)
    catalog.models(), catalog.gpus()     # name -> entry, built-in and user entries together
    catalog.add_catalog_file("mine.yaml")

A user file has the same layout as the package's files (`models:` and/or `gpus:`), is checked
against catalog.schema.json, and may only add names: redefining a known model, GPU or alias is an
error naming both files (give your variant its own name). Files listed in the environment variable
SCALESTUDY_CATALOG (separated by os.pathsep) are added on first use. Pure data: no torch import.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from scalestudy.spec import strict_yaml
from scalestudy.spec.catalog.gpus import DTYPES, GB, GIB, GPUSpec, PeakInfo, UnknownDeviceError
from scalestudy.spec.catalog.models import ModelConfig

HERE = Path(__file__).resolve().parent
BUILTIN_FILES = (HERE / "models.yaml", HERE / "gpus.yaml")
SCHEMA_FILE = HERE / "catalog.schema.json"
ENV_VAR = "SCALESTUDY_CATALOG"


class CatalogError(ValueError):
    """A catalog file is malformed, or a name is unknown or defined twice."""


@dataclass
class _Catalog:
    models: dict[str, ModelConfig] = field(default_factory=dict)
    gpus: dict[str, GPUSpec] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    origin: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, name) -> file
    files: list[str] = field(default_factory=list)


_state: _Catalog | None = None


@lru_cache(maxsize=1)
def _validator():
    import jsonschema  # heavy: only when validating (spec loads at CLI and Snakemake start)

    return jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))


def validate(data: Any, where: str) -> None:
    """Raise CatalogError naming every bad field of one catalog file's contents."""
    errors = sorted(_validator().iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"  {'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in errors]
        raise CatalogError(f"{where} is not a valid catalog file:\n" + "\n".join(lines))
    for name, m in (data.get("models") or {}).items():
        kv = m.get("n_kv_heads", m["n_heads"])
        if m["dim"] % m["n_heads"] or m["n_heads"] % kv:
            raise CatalogError(
                f"{where}: model {name!r}: n_heads must divide dim and n_kv_heads must divide n_heads "
                f"(dim {m['dim']}, n_heads {m['n_heads']}, n_kv_heads {kv})"
            )
    for name, g in (data.get("gpus") or {}).items():
        for dtype in g.get("matmul_achievable_tflops") or {}:
            if not _achievable_source(g, dtype):
                where_src = (
                    "matmul_achievable_source"
                    if dtype in SHARED_SOURCE_DTYPES
                    else f"matmul_achievable_sources.{dtype}"
                )
                raise CatalogError(
                    f"{where}: GPU {name!r}: matmul_achievable_tflops.{dtype} needs {where_src} "
                    "(where it was measured or published)"
                )
        for dtype, rate in (g.get("matmul_achievable_tflops") or {}).items():
            peak = g["peak_tflops"].get(dtype)
            if peak is None or rate > peak:
                raise CatalogError(
                    f"{where}: GPU {name!r}: matmul_achievable_tflops.{dtype} ({rate:g}) must not exceed "
                    f"peak_tflops.{dtype} ({'absent' if peak is None else f'{peak:g}'})"
                )


SHARED_SOURCE_DTYPES = ("bf16", "fp16")  # matmul_achievable_source; every other dtype names its own


def _achievable_source(g: dict, dtype: str) -> str:
    if dtype in SHARED_SOURCE_DTYPES:
        return g.get("matmul_achievable_source", "")
    return (g.get("matmul_achievable_sources") or {}).get(dtype, "")


def _model(name: str, m: dict) -> ModelConfig:
    return ModelConfig(
        name=name,
        n_layers=m["n_layers"],
        dim=m["dim"],
        n_heads=m["n_heads"],
        n_kv_heads=m.get("n_kv_heads", m["n_heads"]),
        ffn_dim=m["ffn_dim"],
        vocab_size=m["vocab_size"],
        norm_eps=float(m.get("norm_eps", 1e-5)),
        rope_theta=float(m.get("rope_theta", 10000.0)),
        mlp=m.get("mlp", "swiglu"),
        tied_embeddings=bool(m.get("tied_embeddings", False)),
        source=m["source"],
    )


def _gpu(name: str, g: dict) -> GPUSpec:
    return GPUSpec(
        name=name,
        product=g["product"],
        peak_flops_per_s={k: float(v) * 1e12 for k, v in g["peak_tflops"].items()},
        memory_bytes=int(g["memory_gib"] * GIB),
        memory_type=g.get("memory_type", ""),
        memory_bytes_per_s=float(g["hbm_gb_per_s"]) * GB,
        intra_node_link=g.get("intra_node_link", ""),
        intra_node_link_bytes_per_s=float(g["intra_node_link_gb_per_s"]) * GB,
        power_cap_w=float(g["power_cap_w"]),
        datasheet=g["datasheet"],
        notes=g.get("notes", ""),
        aliases=tuple(g.get("aliases", ())),
        matmul_achievable_flops_per_s={
            k: float(v) * 1e12 for k, v in (g.get("matmul_achievable_tflops") or {}).items()
        },
        matmul_achievable_source=g.get("matmul_achievable_source", ""),
        matmul_achievable_sources={k: _achievable_source(g, k) for k in g.get("matmul_achievable_tflops") or {}},
        matmul_achievable_data=g.get("matmul_achievable_data", ""),
        power_duty_data=g.get("power_duty_data", ""),
        comm_power_data=g.get("comm_power_data", ""),
        power_burst_data=g.get("power_burst_data", ""),
    )


def _add(cat: _Catalog, path: Path) -> None:
    where = str(path)
    try:
        data = strict_yaml.load_file(path)  # a YAML error, or a key given twice, names the file and line
    except FileNotFoundError:
        raise CatalogError(f"catalog file {where} does not exist") from None
    except yaml.YAMLError as e:
        raise CatalogError(f"catalog file {where} is not YAML: {e}") from None
    data = data or {}
    validate(data, where)

    def claim(kind: str, name: str) -> None:
        key = (kind, name)
        if key in cat.origin:
            raise CatalogError(
                f"{where}: {kind} {name!r} is already defined in {cat.origin[key]}; "
                f"catalog files may only add names (give yours another name)"
            )
        cat.origin[key] = where

    for name, m in (data.get("models") or {}).items():
        claim("model", name)
        cat.models[name] = _model(name, m)
    for name, g in (data.get("gpus") or {}).items():
        claim("gpu", name)
        spec = _gpu(name, g)
        cat.gpus[name] = spec
        for alias in spec.aliases:
            if alias in cat.gpus or alias in cat.aliases:
                raise CatalogError(
                    f"{where}: alias {alias!r} of GPU {name!r} already names a GPU "
                    f"({cat.origin.get(('gpu', alias)) or cat.origin.get(('alias', alias))})"
                )
            claim("alias", alias)
            cat.aliases[alias] = name
    cat.files.append(where)


def _catalog() -> _Catalog:
    global _state
    if _state is None:
        cat = _Catalog()
        for f in BUILTIN_FILES:
            _add(cat, f)
        for f in filter(None, os.environ.get(ENV_VAR, "").split(os.pathsep)):  # type: ignore[assignment]  # f is reused for the str
            _add(cat, Path(f))
        _state = cat
    return _state


def add_catalog_file(path: str | os.PathLike) -> None:
    """Add a user catalog file's models and GPUs (validated; names must be new)."""
    _add(_catalog(), Path(path))


def reset() -> None:
    """Forget added files; the next use reloads the package's files and SCALESTUDY_CATALOG."""
    global _state
    _state = None


def files() -> list[str]:
    """The catalog files loaded, in load order."""
    return list(_catalog().files)


def models() -> dict[str, ModelConfig]:
    """Every catalog model by name."""
    return dict(_catalog().models)


def gpus() -> dict[str, GPUSpec]:
    """Every catalog GPU kind by name."""
    return dict(_catalog().gpus)


def aliases() -> dict[str, str]:
    """The GPUs' other names (gpus.yaml `aliases`), each mapped to its GPU's catalog name."""
    return dict(_catalog().aliases)


def model(name: str) -> ModelConfig:
    """The catalog model `name`; a KeyError naming the known ones otherwise."""
    cat = _catalog()
    try:
        return cat.models[name]
    except KeyError:
        raise KeyError(
            f"unknown model {name!r}; known: {', '.join(sorted(cat.models))} (add yours with a catalog file: {ENV_VAR})"
        ) from None


def gpu_name(name: str) -> str | None:
    """The catalog's device name for a device name or an exact alias; None if unknown."""
    cat = _catalog()
    name = cat.aliases.get(name, name)
    return name if name in cat.gpus else None


def gpu(name: str, dtype: str | None = None) -> GPUSpec:
    """The GPU kind named exactly (device name or alias); raises UnknownDeviceError (naming `dtype`,
    the one asked for, if given)."""
    resolved = gpu_name(name)
    if resolved is None:
        raise UnknownDeviceError(
            name,
            dtype,
            f"device {name!r} is not in the GPU catalog (known: "
            f"{', '.join(sorted(_catalog().gpus))}; add yours with a catalog file: {ENV_VAR})",
        )
    return _catalog().gpus[resolved]


def peak_flops(device_name: str, dtype: str, user_peak: float | None = None) -> PeakInfo:
    """The peak to divide by for MFU: the user's if given, else the table's."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    if user_peak is not None:
        if not user_peak > 0:
            raise ValueError(f"a user peak must be positive, got {user_peak!r}")
        return PeakInfo(device_name, dtype, float(user_peak), "user", {"note": "given by the user"})
    spec = gpu(device_name, dtype)
    if dtype not in spec.peak_flops_per_s:
        raise UnknownDeviceError(
            device_name,
            dtype,
            f"{spec.product} has no {dtype} peak in its datasheet (it has {', '.join(sorted(spec.peak_flops_per_s))})",
        )
    rate = "CUDA cores (no tensor-core path)" if dtype == "fp32" else "dense tensor cores, no sparsity"
    return PeakInfo(
        spec.name,
        dtype,
        spec.peak_flops_per_s[dtype],
        "table",
        {"product": spec.product, "datasheet": spec.datasheet, "rate": rate},
    )
