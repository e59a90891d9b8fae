"""Files of the repository (workflow/ configs and schemas) that the package reads."""

from __future__ import annotations

from pathlib import Path

# src/scalestudy/spec/checkout.py -> the checkout of an editable install
CHECKOUT = Path(__file__).resolve().parents[3]


def checkout_path(rel: str, root: Path | str = ".") -> Path:
    """`rel` under root (the working directory of the workflow), else in the package's own checkout."""
    for base in (Path(root), CHECKOUT):
        if (base / rel).exists():
            return base / rel
    raise FileNotFoundError(f"{rel} not found under {root}")
