#!/usr/bin/env bash
# Runs inside the new conda environment, in Snakemake's working directory (the repository root):
# installs this checkout of the package, without touching the pinned dependencies.
set -euo pipefail
if [ ! -f pyproject.toml ] || ! grep -q '^name = "scalestudy"' pyproject.toml; then
    echo "run snakemake from the scalestudy repository root" >&2
    exit 1
fi
python -m pip install --no-deps -e .
