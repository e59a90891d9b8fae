"""The version of the code that makes tables, figures and claims: the package version and a hash
of the analysis sources (src/scalestudy/analysis and every scalestudy module they import,
followed transitively). The workflow passes it as a parameter of the aggregate, figure and claims
rules, so a change to that code reruns exactly those; every figure records it (PDF and PNG
metadata, the CSV's code_version column) and claims.md names it, and `scalestudy audit` reports
outputs made by other code."""

from __future__ import annotations

import ast
import hashlib
from functools import lru_cache
from pathlib import Path

import scalestudy

PACKAGE_DIR = Path(scalestudy.__file__).resolve().parent
ROOTS = ("analysis",)
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


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def analysis_sources() -> list[Path]:
    """The analysis sources and the scalestudy modules they import, transitively."""
    todo = sorted(p for r in ROOTS for p in (PACKAGE_DIR / r).rglob("*.py"))
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


@lru_cache(maxsize=None)
def source_hash() -> str:
    h = hashlib.sha256()
    for p in analysis_sources():
        h.update(p.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:HASH_CHARS]


def code_version() -> str:
    """e.g. 'scalestudy 0.1.0+analysis.3f2c1a9b0d4e'."""
    return f"scalestudy {scalestudy.__version__}+analysis.{source_hash()}"
