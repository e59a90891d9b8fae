"""Style is checked by tools, in the test suite (ruff's linter and formatter; pyproject.toml [tool.ruff])."""

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
