"""Style is checked by tools, in the test suite: ruff's linter and formatter (pyproject.toml [tool.ruff]),
mypy on spec, measure and analysis ([tool.mypy]), snakefmt on the workflow ([tool.snakefmt])."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUFF = [sys.executable, "-m", "ruff"]


def test_ruff_finds_no_problem():
    out = subprocess.run(
        [*RUFF, "check", "--no-cache", "src", "tests", "benchmarks"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


def test_ruff_format_leaves_every_file_as_it_is():
    out = subprocess.run(
        [*RUFF, "format", "--check", "--no-cache", "src", "tests", "benchmarks"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


def test_mypy_finds_no_type_error_in_spec_measure_and_analysis():
    # the packages and settings: pyproject.toml [tool.mypy]
    out = subprocess.run(
        [sys.executable, "-m", "mypy"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


def test_snakefmt_leaves_the_workflow_as_it_is():
    # its settings: pyproject.toml [tool.snakefmt]
    out = subprocess.run(
        [sys.executable, "-m", "snakefmt", "--check", "Snakefile", "workflow/rules"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


def test_every_public_function_and_class_of_spec_and_measure_has_a_docstring():
    import ast

    missing = []
    for package in ("spec", "measure"):
        for path in sorted((REPO / "src" / "scalestudy" / package).rglob("*.py")):
            for node in ast.parse(path.read_text()).body:
                if (
                    isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                    and not node.name.startswith("_")
                    and ast.get_docstring(node) is None
                ):
                    missing.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}")
    assert not missing, "no docstring: " + ", ".join(missing)
