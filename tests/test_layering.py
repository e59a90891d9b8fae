"""The package's layout keeps its architecture: the import-linter contracts of pyproject.toml
(wings by stage, each importing only the wings below it; nothing loose at the package root; the
analysis and the model never import the harness; torch only in the harness; no import cycle)
hold, and the same check fails on a deliberately added upward import or cycle."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "scalestudy"
LINT = [
    sys.executable,
    "-c",
    "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())",
    str(REPO / "pyproject.toml"),
    "--no-cache",
]


def lint(src: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        LINT,
        cwd=src,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin", "COLUMNS": "200"},
    )


def test_the_package_keeps_its_contracts():
    out = lint(PACKAGE.parent)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "4 kept, 0 broken" in out.stdout


def test_at_most_two_modules_at_the_package_root():
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(loose) <= 2, loose


@pytest.fixture
def package_copy(tmp_path):
    shutil.copytree(PACKAGE, tmp_path / "scalestudy", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


@pytest.mark.parametrize(
    "where, line, broken",
    [
        # a wing importing one above it
        (
            "spec/run.py",
            "from scalestudy.measure import rawlog",
            "scalestudy.spec is not allowed to import scalestudy.measure",
        ),
        # the analysis importing the harness
        (
            "analysis/stats.py",
            "import scalestudy.harness.llama",
            "scalestudy.analysis is not allowed to import scalestudy.harness",
        ),
        # torch outside the harness
        ("measure/energy.py", "import torch", "scalestudy.measure is not allowed to import torch"),
        # a cycle inside one wing
        ("spec/run.py", "from scalestudy.spec import studies", "No cycles are allowed in scalestudy.spec"),
    ],
)
def test_the_check_fails_on_a_forbidden_import(package_copy, where, line, broken):
    f = package_copy / "scalestudy" / where
    f.write_text(f.read_text() + f"\n{line}  # added by the test\n")
    out = lint(package_copy)
    assert out.returncode != 0 and broken in out.stdout, out.stdout[-3000:] + out.stderr[-2000:]


def module_cycles(src: Path) -> list[list[str]]:
    """The direct imports that lie on an import cycle between single modules (a package counts as
    its __init__), every import statement counted, at a module's top or in a function: an import
    a -> b is on a cycle when grimp finds a chain back from b to a. acyclic_siblings above sees
    cycles between siblings; this also sees a module importing the package that imports it (the
    catalog's old cycle)."""
    code = (
        "import json, grimp\n"
        "g = grimp.build_graph('scalestudy', cache_dir=None)\n"
        "print(json.dumps(sorted({tuple(sorted((a, b))) for a in g.modules"
        " for b in g.find_modules_directly_imported_by(a) if g.find_shortest_chain(b, a)})))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
        check=True,
    )
    return json.loads(out.stdout)


def test_no_cycle_between_modules():
    assert module_cycles(PACKAGE.parent) == []


def test_a_module_importing_its_own_package_is_a_cycle(package_copy):
    f = package_copy / "scalestudy" / "spec" / "catalog" / "models.py"
    f.write_text(f.read_text() + "\nfrom scalestudy.spec import catalog  # added by the test\n")
    assert module_cycles(package_copy) == [["scalestudy.spec.catalog", "scalestudy.spec.catalog.models"]]


def test_the_check_fails_on_a_new_module_at_the_root(package_copy):
    (package_copy / "scalestudy" / "helpers.py").write_text('"""A module no wing holds."""\n')
    out = lint(package_copy)
    assert out.returncode != 0 and "scalestudy.helpers" in out.stdout, out.stdout[-3000:]
