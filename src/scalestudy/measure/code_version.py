"""The version of the code that makes tables, figures and claims: the package version and a hash
of the analysis sources (src/scalestudy/analysis and every scalestudy module they import,
followed transitively). The workflow passes it as a parameter of the aggregate, figure and claims
rules, so a change to that code reruns exactly those; every figure records it (PDF and PNG
metadata, the CSV's code_version column) and claims.md names it, and `scalestudy audit` reports
outputs made by other code.

The model_validation figure draws predictions of the performance model, which is not analysis
code: its ledger CSV records `model_version()` (the hash of the scalestudy.perfmodel sources, the
modules they import, the catalogs, the external ledger and the cluster files) and the figure records
code_version() + "+" + that, so audit reports it when the model changed too. Hashed as files,
never imported here: the model is not part of code_version()."""

from __future__ import annotations

import ast
import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Iterator

import scalestudy
from scalestudy.spec import catalog
from scalestudy.spec.checkout import checkout_path

PACKAGE_DIR = Path(scalestudy.__file__).resolve().parent
ROOTS = ("analysis",)
MODEL_ROOTS = ("perfmodel",)
MODEL_DATA = ("spec/catalog",)  # package data the model reads: the GPU and model catalogs
# the files of the checkout the model's predictions read besides calibration runs and the measurements
# the GPU catalog names (model_inputs): the external ledger (scalestudy.perfmodel.external) and the clusters
MODEL_FILES = ("workflow/validation/external.yaml", "workflow/clusters")


def model_inputs() -> tuple[str, ...]:
    """MODEL_FILES and the raw logs the GPU catalog names for the model: each GPU's achievable-matmul
    sweep (`matmul_achievable_data`) and its power duty-cycle and communication-power runs
    (`power_duty_data`, `comm_power_data`); a changed byte in any re-runs the predictions."""
    named = {
        path
        for g in catalog.gpus().values()
        for path in (g.matmul_achievable_data, g.power_duty_data, g.comm_power_data)
        if path
    }
    return MODEL_FILES + tuple(sorted(named))


HASH_CHARS = 12


def _module_file(name: str) -> Path | None:
    parts = name.split(".")
    if parts[0] != "scalestudy":
        return None
    base = PACKAGE_DIR.joinpath(*parts[1:])
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")  # where statements nest


def _statements(nodes: list) -> Iterator[ast.AST]:
    """Every statement, nested ones too (an import is a statement: expressions need no visit)."""
    for node in nodes:
        yield node
        for field in _BLOCKS:
            sub = getattr(node, field, None)
            if isinstance(sub, list):
                yield from _statements(sub)


@lru_cache(maxsize=None)  # the analysis and the model roots share most modules: each parsed once a process
def _imports(path: Path) -> frozenset[str]:
    out: set[str] = set()
    for node in _statements(ast.parse(path.read_text(encoding="utf-8"), str(path)).body):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return frozenset(out)


def analysis_sources(roots: tuple[str, ...] = ROOTS) -> list[Path]:
    """The sources under `roots` (the analysis) and the scalestudy modules they import, transitively."""
    todo = sorted(p for r in roots for p in (PACKAGE_DIR / r).rglob("*.py"))
    seen: set[Path] = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        for name in _imports(p):
            f = _module_file(name)
            if f is not None and f not in seen:
                todo.append(f)
    return sorted(seen)


def _hash_files(h, files: list[Path], base: Path) -> None:
    for p in files:
        h.update(p.relative_to(base).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")


@lru_cache(maxsize=None)
def source_hash(roots: tuple[str, ...] = ROOTS) -> str:
    """A short sha256 of the analysis sources (analysis_sources) and the modules they import."""
    h = hashlib.sha256()
    _hash_files(h, analysis_sources(roots), PACKAGE_DIR)
    return h.hexdigest()[:HASH_CHARS]


def code_version() -> str:
    """e.g. 'scalestudy 0.1.0+analysis.3f2c1a9b0d4e'."""
    return f"scalestudy {scalestudy.__version__}+analysis.{source_hash()}"


def model_version(root: Path | str = ".") -> str:
    """e.g. 'model.9c1d0e2f3a4b': the performance model's sources, the catalogs and the checkout
    files the external ledger is predicted from (model_inputs(), found as scalestudy.spec.checkout finds them)."""
    h = hashlib.sha256(source_hash(MODEL_ROOTS).encode())
    _hash_files(
        h,
        sorted(f for d in MODEL_DATA for f in (PACKAGE_DIR / d).rglob("*") if f.is_file() and f.suffix != ".pyc"),
        PACKAGE_DIR,
    )
    for rel in model_inputs():
        p = checkout_path(rel, root)
        base = p.parents[len(Path(rel).parts) - 1]
        _hash_files(h, sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p], base)
    return f"model.{h.hexdigest()[:HASH_CHARS]}"


def ledger_figure_version(model: str | None) -> str:
    """What a ledger figure (model_validation) records: this analysis code and the model version its
    ledger CSV names ('model.unrecorded' for a ledger that names none)."""
    return f"{code_version()}+{model or 'model.unrecorded'}"
