"""Files of the repository (workflow/ configs and schemas) that the package reads."""

from __future__ import annotations

import subprocess
from pathlib import Path

# src/scalestudy/spec/checkout.py -> the checkout of an editable install
CHECKOUT = Path(__file__).resolve().parents[3]


def checkout_path(rel: str | Path, root: Path | str = ".") -> Path:
    """`rel` under root (the working directory of the workflow), else in the package's own checkout."""
    for base in (Path(root), CHECKOUT):
        if (base / rel).exists():
            return base / rel
    raise FileNotFoundError(f"{rel} not found under {root}")


# What decides a run besides its spec: the code, the workflow with its study and cluster files, and
# the packaging. A run records itself made from a dirty checkout when one of these differs from the
# commit; raw logs under data/ being remade, or docs, do not make it so (the inputs a prediction
# reads from data/ are under its own checksums).
CODE_PATHS = (
    "src",
    "workflow",
    "slurm",
    "profiles",
    "Snakefile",
    "pyproject.toml",
    "environment.yml",
    "requirements-lock.txt",
)


def git_state(path: Path | str) -> dict:
    """The commit of the checkout holding `path` and whether CODE_PATHS differ from it (`dirty`), or
    why there is none."""

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, timeout=10)

    try:
        commit = git("rev-parse", "HEAD")
        if commit.returncode != 0:
            return {"commit": None, "dirty": None, "reason": commit.stderr.strip() or "not a git checkout"}
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", *(f":/{p}" for p in CODE_PATHS))
        return {
            "commit": commit.stdout.strip(),
            "dirty": bool(dirty.stdout.strip()),
            "dirty_scope": list(CODE_PATHS),
            "reason": None,
        }
    except (OSError, subprocess.SubprocessError) as e:
        return {"commit": None, "dirty": None, "reason": f"git unavailable: {e}"}
