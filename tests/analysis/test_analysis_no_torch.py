"""The analysis side imports and runs with torch and scalestudy.harness unavailable (a laptop)."""

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

CODE = r"""
import sys
sys.modules["torch"] = None  # any `import torch` now raises ImportError
sys.modules["scalestudy.harness"] = None
import importlib, pathlib
mods = ["scalestudy.analysis", "scalestudy.analysis.stats", "scalestudy.measure.csv_format",
        "scalestudy.analysis.run_table", "scalestudy.analysis.collectives_table", "scalestudy.analysis.aggregate",
        "scalestudy.analysis.figures", "scalestudy.analysis.claims", "scalestudy.analysis.provenance",
        "scalestudy.analysis.audit", "scalestudy.cli.analysis",
        "scalestudy.measure.metrics", "scalestudy.spec.catalog.gpus", "scalestudy.measure.exposed_comm", "scalestudy.measure.energy",
        "scalestudy.measure.bandwidth"]
for m in mods:
    importlib.import_module(m)
sys.path.insert(0, sys.argv[1])
from analysis_fixtures import build_rich_study
from scalestudy.analysis.aggregate import aggregate, load_tables
from scalestudy.analysis.claims import claims
from scalestudy.analysis.figures import render
study = build_rich_study(pathlib.Path(sys.argv[2]))
aggregate(study)
claims(study)
render("kernel_breakdown", study, load_tables(study.tables_dir), formats=("csv", "png"))
assert not [m for m in sys.modules if m.startswith("scalestudy.harness.") or m.startswith("torch.")]
print("no-torch ok")
"""


def test_analysis_runs_without_torch(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", CODE, str(TESTS), str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "no-torch ok" in proc.stdout
