"""The model's inputs table (perfmodel/inputs_table.py, `scalestudy model inputs`) holds what the model
reads: the catalog's achievable rates (a measured one the best of the sweep it names), the carry
factors, the power and communication-power fits, the burst check and the GEMM shape factors, each
raw log named with its content sha256; and the docs quote the current values only in blocks
generated from it, none of them stale."""

import csv
import io
import re
from pathlib import Path

import pytest

from scalestudy.cli import main
from scalestudy.measure.instruments import content_sha256, sweep_best
from scalestudy.perfmodel import achievable, burst_check, gemm_rates, inputs_table, power
from scalestudy.spec import catalog

REPO = Path(__file__).resolve().parents[2]
H200, H100, A100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
KINDS = ("measured: ", "published: ", "assumed: ", "derived: ")


@pytest.fixture(scope="module")
def rows():
    return inputs_table.rows(REPO)


def _row(rows, part, starts):
    found = [r for r in rows if r.part == part and r.quantity.startswith(starts)]
    assert len(found) == 1, (part, starts, [r.quantity for r in rows if r.part == part])
    return found[0]


@pytest.mark.parametrize("gpu", [H200, H100])
def test_a_measured_rate_is_the_catalogs_and_the_best_of_the_sweep_it_names(rows, gpu):
    g = catalog.gpu(gpu)
    r = _row(rows, "matmul", f"{g.product}: achievable bf16 matmul")
    assert r.value == achievable.achievable_rate(gpu, "bf16").tflops
    assert r.value == pytest.approx(sweep_best(REPO / g.matmul_achievable_data)[0], abs=5e-3)
    assert r.raw_logs == (g.matmul_achievable_data,)
    assert r.sha256 == (content_sha256(REPO / g.matmul_achievable_data),)
    assert r.source.startswith("measured: ") and "stale" not in r.source


def test_every_achievable_rate_of_the_catalog_is_a_row_with_its_source(rows):
    want = {(g.product, d) for g in catalog.gpus().values() for d in g.matmul_achievable_flops_per_s}
    got = {
        (r.quantity.split(": achievable ")[0], r.quantity.split(": achievable ")[1].split()[0])
        for r in rows
        if r.part == "matmul"
    }
    assert got == want
    a100 = _row(rows, "matmul", f"{catalog.gpu(A100).product}: achievable bf16")
    assert a100.value == 271.2 and a100.source.startswith("published: MAMF") and a100.raw_logs == ()
    fp8 = _row(rows, "matmul", f"{catalog.gpu(H100).product}: achievable fp8")
    assert fp8.value == achievable.achievable_rate(H100, "fp8").tflops and "744d01e" in fp8.source


@pytest.mark.parametrize("gpu", [A100, H100])
def test_the_carry_factors_are_the_models(rows, gpu):
    r = _row(rows, "carry", f"{catalog.gpu(gpu).product}: achievable-rate carry")
    assert r.value == achievable.tensor_carry(gpu, H200).factor
    assert inputs_table.calibration_gpu(root=REPO) == H200
    fp8 = _row(rows, "carry", f"{catalog.gpu(H100).product}: FP8 layer products")
    assert fp8.value == achievable.precision_carry(H100, H200, "fp8").factor


def test_the_power_rows_are_what_the_model_loads(rows):
    pm, h200 = power.load(H200, REPO), catalog.gpu(H200)
    want = {
        "idle board (P_idle)": pm.idle_w,
        "a short idle gap (P_warm)": pm.warm_w,
        "the gap's time constant (tau)": 1e3 * pm.tau_s,
        "matrix products at full clock (P_compute)": pm.compute_w,
        "device copies (P_copy)": pm.copy_w,
        "the power limiter's window (tau_limiter)": 1e3 * pm.limiter_tau_s,
        f"fit error over {pm.n_phases} phases, RMS": 100 * pm.rel_rms,
        "fit error, worst phase": 100 * pm.rel_max,
        "clock of back-to-back matrix products": pm.clock_factor(),
        "matrix-product clock ratio on cluster h100-grand-teton": pm.clock_ratio(500, 700),
    }
    for quantity, value in want.items():
        r = _row(rows, "power", quantity)
        assert r.value == pytest.approx(value, rel=1e-12), quantity
        assert r.raw_logs == (h200.power_duty_data,)
    c = pm.comm
    for quantity, value in {
        "idle board of the measurement": c.idle_w,
        "c0:": c.const_w,
        "c_k:": c.per_block_w,
        "c_r:": c.per_gbps_w,
        f"fit error over {c.n_phases} phases": 100 * c.rel_rms,
        "16 channels reducing at 50 GB/s": c.extra_w(16, 50.0),
    }.items():
        r = _row(rows, "comm-power", quantity)
        assert r.value == pytest.approx(value, rel=1e-12), quantity
        assert r.raw_logs == (h200.comm_power_data,)


def test_the_burst_rows_are_the_checks_worst_errors(rows):
    rs = burst_check.rows(REPO / catalog.gpu(H100).power_burst_data, power.load(H200, REPO))
    for what, key in (("rate", "rate"), ("board power", "power")):
        r = _row(rows, "burst", f"worst |error| of the modelled {what}")
        assert r.value == pytest.approx(100 * max(abs(x[f"{key}_model"] / x[key] - 1) for x in rs))
    assert "burst_5ms" in _row(rows, "burst", "worst |error| of the modelled board power").quantity


def test_the_gemm_rows_are_the_range_of_the_shape_factors(rows):
    rates = gemm_rates.read_gemm_rates([inputs_table.GEMM_DIR], REPO)
    table = gemm_rates.factor_table(rates, [inputs_table.GEMM_CALIBRATION_LAYOUT])
    for dtype in ("bf16", "fp8"):
        s = [t[f"{dtype}_S"] for t in table if t[f"{dtype}_S"] is not None]
        assert _row(rows, "gemm", f"shape factor S, {dtype} layer products, lowest").value == min(s)
        assert _row(rows, "gemm", f"shape factor S, {dtype} layer products, highest").value == max(s)


def test_every_row_names_its_kind_and_every_raw_log_exists_with_its_sha256(rows):
    assert [p for p in inputs_table.PARTS if any(r.part == p for r in rows)] == list(inputs_table.PARTS)
    known = set(inputs_table.raw_log_paths(REPO))
    for r in rows:
        assert r.source.startswith(KINDS), r
        assert len(r.raw_logs) == len(r.sha256), r
        for path, sha in zip(r.raw_logs, r.sha256):
            assert not Path(path).is_absolute() and (REPO / path).exists(), path
            assert path in known and sha == content_sha256(REPO / path), path
    assert all((REPO / f).is_file() for f in inputs_table.input_files(REPO))


def test_the_csv_holds_every_row_at_full_precision(rows):
    got = list(csv.DictReader(io.StringIO(inputs_table.render(rows, "csv"))))
    assert tuple(got[0]) == inputs_table.CSV_COLUMNS and len(got) == len(rows)
    for line, r in zip(got, rows):
        assert float(line["value"]) == r.value and line["sha256"].split() == list(r.sha256)
    md = inputs_table.render(rows, "md", ["power"])
    assert md.count("\n| power |") == len([r for r in rows if r.part == "power"]) and "| matmul |" not in md
    with pytest.raises(ValueError, match="unknown part"):
        inputs_table.render(rows, "md", ["powr"])


def _outside_blocks(text: str) -> str:
    text = re.sub(re.escape(inputs_table.BEGIN) + r".*?" + re.escape(inputs_table.END), "", text, flags=re.S)
    return re.sub(r"```.*?```", "", text, flags=re.S)  # format examples


def test_the_docs_generated_blocks_are_current_and_hold_the_current_values(rows):
    """Regenerated and compared (no snakemake): `scalestudy model inputs --update-docs` fixes a stale one."""
    assert inputs_table.update_docs(REPO, rows, write=False) == []
    docs = {str(p.relative_to(REPO)) for p in inputs_table.doc_files(REPO)}
    assert {"docs/performance-model.md", "docs/catalog.md"} <= docs
    # the measured values are quoted nowhere else in these docs (dated history quotes older values)
    measured = [r for r in rows if r.part == "matmul" and r.raw_logs]
    measured += [r for r in rows if r.part == "power" and r.unit == "W"]
    for name in ("docs/performance-model.md", "docs/catalog.md", "README.md"):
        text = _outside_blocks((REPO / name).read_text())
        for r in measured:
            assert r.shown() not in text, f"{name} quotes {r.quantity} ({r.shown()}) outside a generated block"


def test_a_stale_block_is_found_and_rewritten_as_its_begin_line_asks(rows, tmp_path):
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "docs" / "x.md"
    doc.write_text(f"intro\n{inputs_table.BEGIN} --format md --only burst -->\nold: 7.0%\n{inputs_table.END}\nend\n")
    assert inputs_table.update_docs(tmp_path, rows, write=False) == ["docs/x.md"]
    assert "old" in doc.read_text()
    assert inputs_table.update_docs(tmp_path, rows) == ["docs/x.md"]
    text = doc.read_text()
    assert text.startswith("intro\n") and text.endswith(f"{inputs_table.END}\nend\n") and "old" not in text
    assert inputs_table.render(rows, "md", ["burst"]) in text and "| power |" not in text
    assert inputs_table.update_docs(tmp_path, rows) == []
    doc.write_text(f"{inputs_table.BEGIN} --format csv -->\n{inputs_table.END}\n")
    with pytest.raises(ValueError, match="markdown"):
        inputs_table.update_docs(tmp_path, rows)


def test_the_command_writes_the_table_and_checks_the_docs(capsys, tmp_path):
    out = tmp_path / "t.csv"
    assert main(["model", "inputs", "--root", str(REPO), "--only", "burst", "--format", "csv", "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith(",".join(inputs_table.CSV_COLUMNS)) and text.count("\nburst,") == 2
    assert main(["model", "inputs", "--root", str(REPO), "--check-docs"]) == 0
    assert "are current" in capsys.readouterr().out
    assert main(["model", "inputs", "--root", str(REPO), "--only", "nothing"]) == 2
    assert "unknown part nothing" in capsys.readouterr().err
