"""The board-power fit (perfmodel/power.py) on synthetic phases and on the committed H200 duty cycles."""

import math
from pathlib import Path

import pytest

from scalestudy.spec import catalog
from scalestudy.perfmodel import power
from scalestudy.perfmodel.power import LIMITER_GRID_S, TAU_GRID_S, DutyPhase, PowerModel, fit, fit_file

REPO = Path(__file__).resolve().parents[2]
DUTY_FILE = catalog.gpu("NVIDIA H200").power_duty_data  # the run the model's H200 power fit reads


def test_fit_recovers_known_powers():
    tau, tau_lim = min(TAU_GRID_S, key=lambda x: abs(x - 0.1)), min(LIMITER_GRID_S, key=lambda x: abs(x - 0.13))
    truth = PowerModel(
        idle_w=120,
        warm_w=250,
        tau_s=tau,
        compute_w=900,
        copy_w=560,
        cap_w=700,
        device="x",
        rel_rms=0,
        rel_max=0,
        n_phases=0,
        source="",
        limiter_tau_s=tau_lim,
    )
    phases = []
    for c, m, g, b in (
        (0, 0, 5.0, 0),
        (0.25, 0, 0.015, 0.005),
        (0.5, 0, 0.1, 0.1),
        (0.5, 0, 0.5, 0.5),
        (0, 0.5, 0.01, 0),
        (0, 0.75, 0.25, 0),
        (0, 1, 0, 0),
        (0.3, 0.3, 0.05, 0.05),
        (0.2, 0.2, 1.0, 0.5),
        (1, 0, 0, math.inf),
        (0.6, 0, 0.01, 0.015),
        (0, 0.5, 0.05, 0),
        (0, 0.5, 0.2, 0),
        (0, 0.25, 0.1, 0),
    ):
        phases.append(DutyPhase(f"{c}-{m}-{g}-{b}", truth.power_w(c, m, g, burst_s=b), c, m, g, b))
    got = fit(phases, 700)
    assert got.rel_rms < 1e-6
    for k in ("idle_w", "warm_w", "copy_w", "compute_w"):
        assert getattr(got, k) == pytest.approx(getattr(truth, k), rel=1e-4), k
    assert got.tau_s == pytest.approx(tau) and got.limiter_tau_s == pytest.approx(tau_lim)


def test_short_bursts_of_products_run_above_the_limit_long_ones_at_it():
    pm = PowerModel(
        idle_w=140,
        warm_w=150,
        tau_s=0.9,
        compute_w=930,
        copy_w=580,
        cap_w=700,
        device="x",
        rel_rms=0,
        rel_max=0,
        n_phases=0,
        source="",
        limiter_tau_s=0.13,
    )
    assert pm.burst_w() == 700 and pm.burst_w(10.0) == pytest.approx(700, abs=1e-6)
    assert pm.burst_w(0.0) == pytest.approx(930)
    assert pm.burst_w(0.13) == pytest.approx(700 + 230 / math.e)
    # half the time in 10 ms bursts, half waiting: the average stays under the cap, so it is not throttled
    assert pm.power_w(0.5, burst_s=0.01) == pytest.approx(0.5 * pm.burst_w(0.01) + 0.5 * pm.gap_w(0.0))
    assert pm.power_w(0.9, burst_s=0.01) == 700  # the average over the window is held at the cap
    without = PowerModel(**{**pm.as_dict(), "limiter_tau_s": None})
    assert without.burst_w(0.01) == without.burst_w() == 930  # the earlier fit: one compute power


def test_power_is_capped_and_scales_with_the_target_cap():
    pm = PowerModel(
        idle_w=140,
        warm_w=190,
        tau_s=0.2,
        compute_w=760,
        copy_w=570,
        cap_w=700,
        device="x",
        rel_rms=0,
        rel_max=0,
        n_phases=0,
        source="",
    )
    assert pm.power_w(1.0) == 700  # matrix products throttled to the limit
    assert pm.power_w(0.0, gap_s=10.0) == pytest.approx(140 + 50 * math.exp(-50))
    assert pm.power_w(0.0) == pytest.approx(190)  # gaps inside a step: warm
    assert pm.power_w(0.0, u_comm=1.0, comm_hbm_fraction=0.5) == pytest.approx(190 + 0.5 * (570 - 190))
    assert pm.power_w(0.5, cap_w=400) == pytest.approx(min(400, (0.5 * 760 + 0.5 * 190) * 400 / 700))


def test_committed_h200_duty_cycles():
    pm = fit_file(REPO / DUTY_FILE)
    assert pm.device == "NVIDIA H200" and pm.cap_w == 700 and pm.n_phases >= 25
    assert 100 < pm.idle_w < 160 and pm.idle_w < pm.warm_w < pm.copy_w < pm.compute_w
    assert pm.compute_w > pm.cap_w  # continuous matrix products run at the limit
    assert pm.rel_rms < 0.08 and pm.rel_max < 0.2
    # the limiter's window: the 20 ms compute cycles drew more than one compute power explains
    one_power = fit_file(REPO / DUTY_FILE, limiter=False)
    assert pm.limiter_tau_s is not None and one_power.limiter_tau_s is None
    assert pm.rel_rms < one_power.rel_rms and pm.rel_max < one_power.rel_max
    assert abs(pm.residuals["compute_duty_p0.02_f0.5"]) < abs(one_power.residuals["compute_duty_p0.02_f0.5"])


def test_power_limit_throttles_matrix_products_by_the_cube_law():
    pm = PowerModel(
        idle_w=140,
        warm_w=190,
        tau_s=0.2,
        compute_w=760,
        copy_w=570,
        cap_w=700,
        device="x",
        rel_rms=0,
        rel_max=0,
        n_phases=0,
        source="",
    )
    s700 = pm.clock_factor()
    assert s700 == pytest.approx(((700 - 140) / (760 - 140)) ** (1 / 3))
    # at that clock the matrix products draw exactly the limit: P = floor + (full - floor) s^3
    assert 140 + (760 - 140) * s700**3 == pytest.approx(700)
    assert pm.clock_factor(800, 700) == 1.0  # a limit above the unthrottled draw does not throttle
    # powers carry by design power: a GPU limited at its design power throttles as the measured one
    assert pm.clock_ratio(400, 400) == pytest.approx(1.0) and pm.clock_ratio(700) == pytest.approx(1.0)
    s500 = pm.clock_ratio(500, 700)  # the same silicon held to 500 W
    assert s500 == pytest.approx(((500 - 140) / (760 - 140)) ** (1 / 3) / s700)
    assert 0.8 < s500 < 0.9 and pm.clock_ratio(600, 700) > s500


def test_a_lower_power_limit_slows_compute_bound_steps_and_not_communication():
    from scalestudy.perfmodel.cluster import load_cluster, with_overrides
    from scalestudy.perfmodel.predict import cached_calibration, clock_ratio, predict
    from scalestudy.spec.run import RunSpec

    cal = cached_calibration("data/h200-reference/raw", REPO)
    h100 = load_cluster("h100-paper", REPO)
    capped = with_overrides(h100, {"tdp_w": 500})  # design power stays the catalog's 700 W
    teton = load_cluster("h100-grand-teton", REPO)  # 500 W parts of 700 W silicon
    assert teton.values["design_power_w"].source.startswith("assumed")
    assert clock_ratio(teton, cal) == pytest.approx(clock_ratio(capped, cal))
    assert clock_ratio(h100, cal) == pytest.approx(1.0) and clock_ratio(capped, cal) < 0.9
    spec = RunSpec(
        model="llama2-7b",
        device="cuda",
        precision="bf16",
        seq_len=4096,
        micro_batch=2,
        global_batch=16,
        procs_per_node=8,
        nodes=1,
    )
    a, b = predict(spec, h100, cal, band=False), predict(spec, capped, cal, band=False)
    assert b["compute_s"] > a["compute_s"] * 1.05 and b["tokens_per_s"] < a["tokens_per_s"]
    assert b["power_w_per_gpu"] <= 500 + 1e-9
    assert [c["time_each_s"] for c in a.collectives] == [c["time_each_s"] for c in b.collectives]


def test_the_measured_communication_phase_adds_its_power_to_a_gap(tmp_path):
    import gzip
    import json
    from dataclasses import replace

    from scalestudy.perfmodel.power import PowerModel, fit_comm

    rows = [{"kind": "header", "device": "GPU"}, {"kind": "phase", "phase": "idle", "mean_power_w": 120.0}]
    for k in (8, 16, 32):  # truth: 5 W + 0.1 W a block + 0.5 W per GB/s
        rows.append({"kind": "phase", "phase": f"poll_{k}", "blocks": k, "mean_power_w": 125 + 0.1 * k})
        for r in (25.0, 50.0):
            rows.append(
                {
                    "kind": "phase",
                    "phase": f"trickle_{k}_{r:g}",
                    "blocks": k,
                    "network_gb_per_s": r,
                    "achieved_network_gb_per_s": r,
                    "mean_power_w": 125 + 0.1 * k + 0.5 * r,
                }
            )
    path = tmp_path / "comm.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    c = fit_comm(path)
    assert (c.const_w, c.per_block_w, c.per_gbps_w) == pytest.approx((5.0, 0.1, 0.5), abs=1e-9)
    pm = replace(PowerModel(140, 190, 0.2, 760, 570, 700, "GPU", 0, 0, 1, ""), comm=c)
    assert pm.power_w(0.0, u_comm=1.0, comm_gbps=50, comm_blocks=16) == pytest.approx(190 + 5 + 1.6 + 25)
    assert pm.power_w(0.0, u_comm=1.0, comm_gbps=50, comm_blocks=16, comm_scale=0.5) == pytest.approx(190 + 15.8)


def test_short_bursts_of_products_run_at_full_clock_while_the_average_stays_under_the_cap():
    pm = PowerModel(
        idle_w=140,
        warm_w=150,
        tau_s=0.9,
        compute_w=930,
        copy_w=580,
        cap_w=700,
        device="x",
        rel_rms=0,
        rel_max=0,
        n_phases=0,
        source="",
        limiter_tau_s=0.13,
    )
    s = pm.clock_factor()
    assert 0.8 < s < 1.0
    assert pm.burst_speed(0.0) == 1.0 and pm.burst_speed(1.0) == pytest.approx(1 / s)
    assert pm.burst_speed(0.5) == pytest.approx(0.5 / s + 0.5)
    assert pm.burst_speed(1.0, cap_w=500, design_w=700) == pytest.approx(1 / pm.clock_factor(500, 700))
    assert PowerModel(**{**pm.as_dict(), "limiter_tau_s": None}).burst_speed(1.0) == 1.0
    # the window's share where the average stays under the cap; back to back none
    assert pm.burst_full_clock_share(0.3, gap_s=0.01, burst_s=0.13) == pytest.approx(math.exp(-1))
    assert pm.burst_full_clock_share(1.0) == 0.0
    # 90% of the time in 20 ms bursts: the window allows 86% at full clock, the cap's average less,
    # and with that share the period draws the cap exactly
    e = pm.burst_full_clock_share(0.9, gap_s=0.002, burst_s=0.02)
    assert 0.0 < e < math.exp(-0.02 / 0.13)
    assert 0.9 * (e * 930 + (1 - e) * 700) + 0.1 * pm.gap_w(0.002) == pytest.approx(700)
    assert PowerModel(**{**pm.as_dict(), "compute_w": 650}).burst_full_clock_share(0.9, burst_s=0.02) == pytest.approx(
        math.exp(-0.02 / 0.13)
    )  # never throttled: the window alone (and no speed-up, s = 1)


def test_the_committed_fit_gives_the_h100_bursts_rates_and_power():
    """data/burst-rate: bf16 products in bursts on an H100, held out of the H200 fit. The board power
    of 5 ms bursts is the worst phase: 358 W measured, 383 W from the duty-cycle fit made by the
    package's instrument (7.1%; the removed script's fit and burst file gave 4.4%)."""
    from scalestudy.perfmodel.burst_check import rows, table

    rows = rows(REPO / catalog.gpu("NVIDIA H100 80GB HBM3").power_burst_data, power.load("NVIDIA H200", REPO))
    assert len(rows) == 9
    for r in rows:
        assert r["rate_model"] == pytest.approx(r["rate"], rel=0.05), r["phase"]
        tolerance = 0.08 if r["phase"] == "burst_5ms" else 0.05
        assert r["power_model"] == pytest.approx(r["power"], rel=tolerance), r["phase"]
    short = [r for r in rows if r["burst_ms"] and r["burst_ms"] < 30]
    assert all(r["rate"] > 1.1 * rows[0]["rate"] and r["rate_model"] > 1.08 * rows[0]["rate_model"] for r in short)
    assert table(rows).count("\n| burst_") == 7 and "worst |error|: rate 2.1%, power 7.1%" in table(rows)


def test_the_model_reads_the_power_runs_its_gpu_catalog_entry_names():
    import dataclasses

    from scalestudy.measure.instruments import read_instrument

    h200 = catalog.gpu("NVIDIA H200")
    want = dataclasses.replace(fit_file(REPO / h200.power_duty_data), comm=power.fit_comm(REPO / h200.comm_power_data))
    assert power.load("NVIDIA H200", REPO) == want
    with pytest.raises(FileNotFoundError, match="names no power-duty run for NVIDIA A100-SXM4-80GB"):
        power.load("NVIDIA A100-SXM4-80GB", REPO)
    named = 0
    for g in catalog.gpus().values():
        for field, kind in (
            ("power_duty_data", "power-duty"),
            ("comm_power_data", "comm-power"),
            ("power_burst_data", "burst-rate"),
        ):
            if getattr(g, field):
                assert read_instrument(REPO / getattr(g, field), kind).kind == kind
                named += 1
    assert named == 3
    # and the model's version (so every prediction) follows the runs the catalog names, not a list of folders
    from scalestudy.measure.code_version import model_inputs

    assert {h200.power_duty_data, h200.comm_power_data, h200.matmul_achievable_data} <= set(model_inputs())
