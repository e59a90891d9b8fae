"""Claim verdicts from synthetic per-run rows, through the summary table and its CSV."""

import pytest

from scalestudy.analysis import aggregate as agg
from scalestudy.analysis import claims
from scalestudy.analysis.collectives_table import COLLECTIVE_COLUMNS, COLLECTIVE_SUMMARY_COLUMNS, summarize_collectives
from scalestudy.measure.csv_format import write_csv
from scalestudy.analysis.run_table import RUN_COLUMNS

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"


def runs(
    model="llama2-7b",
    world=128,
    layout="fsdp",
    values=(100.0,),
    *,
    metric="tokens_per_s_per_device",
    tp=1,
    pp=1,
    lb=2,
    device="cuda",
    device_name=H100,
    experiments=("weak_scaling",),
    label="FSDP",
    status="ok",
    **other,
):
    cid = f"{model}-{world}-{layout}-t{tp}p{pp}-{device}-{device_name[:12].replace(' ', '_')}"
    out = []
    for seed, v in enumerate(values):
        r = {
            "config_id": cid,
            "run_id": f"{cid}-seed{seed}",
            "seed": seed,
            "status": status,
            "model": model,
            "world_size": world,
            "layout": layout,
            "tp": tp,
            "pp": pp,
            "local_batch": lb,
            "global_batch": lb * world // (tp * pp),
            "device": device,
            "device_names": [device_name],
            "experiments": list(experiments),
            "label": label,
            metric: v if status == "ok" else None,
        }
        if metric == "tokens_per_s_per_device" and status == "ok":
            r["tokens_per_s"] = v * world
        for k, vals in other.items():
            r[k] = vals[seed] if status == "ok" else None
        out.append(r)
    return out


def tables(tmp_path, run_rows, coll_rows=()):
    write_csv(tmp_path / agg.RUNS_FILE, RUN_COLUMNS, run_rows)
    write_csv(tmp_path / agg.SUMMARY_FILE, agg.SUMMARY_COLUMNS, agg.summarize_configs(list(run_rows)))
    write_csv(tmp_path / agg.COLLECTIVES_FILE, COLLECTIVE_COLUMNS, coll_rows)
    write_csv(
        tmp_path / agg.COLLECTIVES_SUMMARY_FILE, COLLECTIVE_SUMMARY_COLUMNS, summarize_collectives(list(coll_rows))
    )
    return agg.load_tables(tmp_path)


def verdicts(tmp_path, run_rows, coll_rows=()):
    return {r["id"]: r for r in claims.evaluate(tables(tmp_path, run_rows, coll_rows))}


def test_c1_c2_consistent(tmp_path):
    rows = runs(world=128, values=[100.0, 101.0, 99.0], power_w_per_gpu=[700.0, 702.0, 698.0]) + runs(
        world=2048, values=[62.8, 62.6, 63.0], power_w_per_gpu=[659.0, 660.0, 657.0]
    )
    v = verdicts(tmp_path, rows)
    assert v["C1"]["verdict"] == "consistent", v["C1"]
    assert v["C1"]["ours"] == pytest.approx(-37.2, abs=0.1)
    assert v["C1"]["ours_ci95_low"] < -37.22 < v["C1"]["ours_ci95_high"]
    assert v["C2"]["verdict"] == "consistent", v["C2"]
    assert len(v["C1"]["run_ids"]) == 6 and "paper's value lies inside our 95% CI" in v["C1"]["rule"]


def test_c1_not_consistent_when_paper_outside_interval(tmp_path):
    rows = runs(world=128, values=[100.0, 101.0, 99.0]) + runs(world=2048, values=[90.0, 91.0, 89.0])
    c1 = verdicts(tmp_path, rows)["C1"]
    assert c1["verdict"] == "not consistent" and "outside our 95% CI" in c1["reason"]


def test_c1_one_seed_is_not_comparable(tmp_path):
    c1 = verdicts(tmp_path, runs(world=128, values=[100.0]) + runs(world=2048, values=[63.0]))["C1"]
    assert c1["verdict"] == "not comparable" and "one seed" in c1["reason"]
    assert c1["ours"] == pytest.approx(-37.0)


def test_c1_missing_scale_names_it(tmp_path):
    c1 = verdicts(tmp_path, runs(world=8, values=[100.0, 99.0]) + runs(world=16, values=[90.0, 91.0]))["C1"]
    assert c1["verdict"] == "not comparable" and "128 and 2048 GPUs" in c1["reason"] and "8, 16" in c1["reason"]


def test_c1_failed_run_and_cpu_data(tmp_path):
    c1 = verdicts(tmp_path, runs(world=128, values=[100.0, 99.0]) + runs(world=2048, values=[0.0], status="oom"))["C1"]
    assert c1["verdict"] == "not comparable" and "failed (oom)" in c1["reason"]
    cpu = verdicts(
        tmp_path,
        runs(world=128, values=[100.0, 101.0, 99.0], device="cpu")
        + runs(world=2048, values=[62.8, 62.6, 63.0], device="cpu"),
    )["C1"]
    assert cpu["verdict"] == "not comparable" and "CPU smoke data" in cpu["reason"] and cpu["ours"] is not None


def test_c3_tensor_parallel_gain(tmp_path):
    rows = runs(world=2048, values=[10.0, 10.1, 9.9]) + runs(
        world=2048, layout="fsdp+tp", tp=2, values=[15.26, 15.3, 15.2], label="TP=2", lb=4
    )
    c3 = verdicts(tmp_path, rows)["C3"]
    assert c3["verdict"] == "consistent", c3
    assert "TP=2" in c3["ours_text"]


def test_c4_hardware_generations(tmp_path):
    """Both GPU kinds at one GPU count (the smallest both have), never across scales."""
    a = runs(
        world=8,
        values=[1.0, 1.0, 1.0],
        device_name=A100,
        experiments=("hardware_generations",),
        mfu=[0.597, 0.596, 0.598],
    )
    h = runs(
        world=8,
        values=[1.0, 1.0, 1.0],
        device_name=H100,
        experiments=("hardware_generations",),
        mfu=[0.407, 0.409, 0.408],
    )
    h16 = runs(
        world=16,
        values=[1.0, 1.0, 1.0],
        device_name=H100,
        experiments=("hardware_generations",),
        mfu=[0.50, 0.50, 0.50],
    )
    v = verdicts(tmp_path, a + h + h16)
    assert v["C4"]["verdict"] == "consistent", v["C4"]
    assert v["C4"]["ours"] == pytest.approx(18.9, abs=0.05) and v["C4"]["unit"] == " pp"
    assert v["C4"]["ours_text"].startswith("at 8 GPUs:")
    apart = verdicts(tmp_path, a + h16)["C4"]
    assert apart["verdict"] == "not comparable" and "not compared across scales" in apart["reason"]
    only = verdicts(tmp_path, h)["C4"]
    assert only["verdict"] == "not comparable" and H100 in only["reason"]


def test_a_verdict_that_cannot_fail_is_undecided(tmp_path):
    """C3 +52.6%: seeds spread so wide that double the paper's effect is inside the interval too."""
    rows = runs(world=2048, values=[10.0, 10.1, 9.9]) + runs(
        world=2048, layout="fsdp+tp", tp=2, values=[9.0, 15.3, 30.0], label="TP=2", lb=4
    )
    c3 = verdicts(tmp_path, rows)["C3"]
    assert c3["verdict"] == "undecided", c3
    assert "too wide to decide" in c3["reason"] and "double" in c3["reason"]


def test_c5_communication_bound(tmp_path):
    rows = (
        runs(world=128, values=[100.0, 100.5, 99.5], exposed_comm_share=[0.10, 0.11, 0.09])
        + runs(world=256, values=[70.0, 70.5, 69.5], exposed_comm_share=[0.30, 0.31, 0.29])
        + runs(world=256, layout="fsdp+tp", tp=2, values=[90.0, 90.5, 89.5], label="TP=2")
    )
    c5 = verdicts(tmp_path, rows)["C5"]
    assert c5["verdict"] == "consistent", c5
    reversed_ = (
        runs(world=128, values=[100.0, 100.5], exposed_comm_share=[0.30, 0.31])
        + runs(world=256, values=[70.0, 70.5], exposed_comm_share=[0.10, 0.11])
        + runs(world=256, layout="fsdp+tp", tp=2, values=[90.0, 90.5], label="TP=2")
    )
    assert verdicts(tmp_path, reversed_)["C5"]["verdict"] == "not consistent"


def _coll(op, nodes, seed, bus):
    return {
        "run_id": f"c-n{nodes}-seed{seed}",
        "config_id": f"c-n{nodes}",
        "seed": seed,
        "status": "ok",
        "device": "cuda",
        "device_names": [H100],
        "op": op,
        "size_bytes": 1 << 24,
        "dtype": "float32",
        "world_size": 8 * nodes,
        "nodes": nodes,
        "procs_per_node": 8,
        "busbw_GBps": bus,
        "algbw_GBps": bus,
        "time_s": 1.0,
        "correct": True,
    }


def test_c6_allreduce_holds_up(tmp_path):
    coll = (
        [_coll("all_reduce", 1, s, b) for s, b in ((0, 100.0), (1, 101.0))]
        + [_coll("all_reduce", 4, s, b) for s, b in ((0, 95.0), (1, 96.0))]
        + [_coll("all_gather", 1, s, b) for s, b in ((0, 100.0), (1, 101.0))]
        + [_coll("all_gather", 4, s, b) for s, b in ((0, 50.0), (1, 51.0))]
    )
    c6 = verdicts(tmp_path, runs(values=[1.0]), coll)["C6"]
    assert c6["verdict"] == "consistent", c6
    assert "all_reduce keeps" in c6["ours_text"]
    swapped = [dict(r, op={"all_reduce": "all_gather", "all_gather": "all_reduce"}[r["op"]]) for r in coll]
    assert verdicts(tmp_path, runs(values=[1.0]), swapped)["C6"]["verdict"] == "not consistent"
    one_node = verdicts(tmp_path, runs(values=[1.0]), coll[:2] + coll[4:6])["C6"]
    assert one_node["verdict"] == "not comparable" and "node counts" in one_node["reason"]


def test_c7_tokens_per_joule(tmp_path):
    down = runs(world=8, values=[1.0, 1.0, 1.0], experiments=("power",), tokens_per_joule=[10.0, 10.1, 9.9]) + runs(
        world=64, values=[1.0, 1.0, 1.0], experiments=("power",), tokens_per_joule=[8.0, 8.1, 7.9]
    )
    assert verdicts(tmp_path, down)["C7"]["verdict"] == "consistent"
    noisy = runs(world=8, values=[1.0, 1.0], experiments=("power",), tokens_per_joule=[10.0, 6.0]) + runs(
        world=64, values=[1.0, 1.0], experiments=("power",), tokens_per_joule=[8.0, 9.0]
    )
    c7 = verdicts(tmp_path, noisy)["C7"]
    assert c7["verdict"] == "not comparable" and "includes no change" in c7["reason"]
    up = runs(world=8, values=[1.0], experiments=("power",), tokens_per_joule=[8.0]) + runs(
        world=64, values=[1.0], experiments=("power",), tokens_per_joule=[10.0]
    )
    c7 = verdicts(tmp_path, up)["C7"]
    assert c7["verdict"] == "not consistent" and "one seed" in c7["reason"]


def test_hsdp_question_reports_ours_without_verdict(tmp_path):
    rows = (
        runs(world=256, layout="hsdp", values=[80.0, 81.0], label="HSDP")
        + runs(world=256, layout="fsdp+tp", tp=2, values=[75.0, 76.0], label="TP=2")
        + runs(world=256, values=[70.0, 70.5])
    )
    v = verdicts(tmp_path, rows)
    assert v["HSDP-256"]["verdict"] == "not comparable" and v["HSDP-256"]["ours"] > 0
    assert "HSDP vs FSDP" in v["HSDP-256"]["ours_text"]
    assert "reports no HSDP number" in v["HSDP-256"]["reason"]
    assert "no Llama-7B HSDP run at 2048 GPUs" in v["HSDP-2048"]["reason"]


def test_claims_files_are_written(tmp_path):
    from scalestudy.spec.studies import Study

    t = tables(tmp_path, runs(world=128, values=[100.0, 101.0]) + runs(world=2048, values=[63.0, 62.0]))
    study = Study(
        name="s", description="", hardware="H100", assumptions=(), runs=(), collectives=(), figures=(), root=tmp_path
    )
    paths = claims.write_claims(t, study, tmp_path / "out")
    text = paths[1].read_text()
    assert "| C1 |" in text and "## Comparison rules" in text
    page = paths[2].read_text()
    assert paths[2].name == "claims.html" and "<table>" in page and "<td>C1</td>" in page
    assert paths[0].read_text().splitlines()[0] == ",".join(claims.CLAIM_COLUMNS)
    assert len(paths[0].read_text().splitlines()) == 1 + 9


def test_c5_reads_the_study_cluster_not_the_hardware_comparison(tmp_path):
    """paper-model's A100 variants (experiment hardware_generations only, config id + `--a100-paper`,
    which sorts after the H100 id) share the FSDP layouts and GPU counts of the H100 runs; C5 read
    them as its FSDP pair."""
    both = ("weak_scaling", "kernel_breakdown", "hardware_generations")
    h100 = (
        runs(world=128, values=[100.0, 100.5, 99.5], exposed_comm_share=[0.10, 0.11, 0.09], experiments=both)
        + runs(world=2048, values=[70.0, 70.5, 69.5], exposed_comm_share=[0.30, 0.31, 0.29], experiments=both)
        + runs(world=2048, layout="fsdp+tp", tp=2, values=[90.0, 90.5, 89.5], label="TP=2")
    )
    a100 = []
    for world, shares in ((128, [0.40, 0.41, 0.39]), (2048, [0.20, 0.21, 0.19])):
        h100_id = runs(world=world)[0]["config_id"]
        for r in runs(
            world=world,
            values=[50.0, 50.5, 49.5],
            exposed_comm_share=shares,
            device_name=A100,
            experiments=("hardware_generations",),
        ):
            r["config_id"] = f"{h100_id}--a100-paper"
            r["run_id"] = f"{h100_id}-seed{r['seed']}--a100-paper"
            a100.append(r)
    v = verdicts(tmp_path, h100 + a100)
    c5 = v["C5"]
    assert c5["verdict"] == "consistent", c5
    assert not [cid for cid in c5["config_ids"] if cid.endswith("--a100-paper")], c5["config_ids"]
    assert "128 -> 2048 GPUs (change in share): +20.00 pp (95% CI [+17.73 pp, +22.27 pp])" in c5["ours_text"], c5[
        "ours_text"
    ]
    for claim in ("C1", "C3", "C7", "HSDP-2048"):
        assert not [cid for cid in v[claim]["config_ids"] or [] if cid.endswith("--a100-paper")], v[claim]


def test_a_caveat_on_an_input_travels_to_the_claims_it_is_behind(tmp_path):
    """A run's caveat (a predicted run that takes a measured input with a known artefact) reaches
    its configuration's summary notes once and the reason of each claim behind it; verdicts and
    values stay as without it."""
    from scalestudy.spec.studies import Study

    note = "caveat: the measured input rank shares of study r (runs x-2048) has a known artefact: host-bound"
    base = (
        runs(world=128, values=[100.0, 101.0, 99.0])
        + runs(world=2048, values=[62.8, 62.6, 63.0])
        + runs(world=256, layout="hsdp", values=[80.0, 81.0], label="HSDP")
        + runs(world=256, values=[70.0, 70.5])
    )
    marked = [{**r, "caveats": [note] if r["world_size"] == 2048 else []} for r in base]
    summary = {c["config_id"]: c for c in agg.summarize_configs([dict(r) for r in marked])}
    assert [c["notes"].count(note) for c in summary.values() if c["world_size"] == 2048] == [1]
    assert not [c for c in summary.values() if c["world_size"] != 2048 and note in c["notes"]]
    plain, cav = verdicts(tmp_path / "a", base), verdicts(tmp_path / "b", marked)
    for cid in ("C1", "C2"):
        assert (cav[cid]["verdict"], cav[cid]["ours"]) == (plain[cid]["verdict"], plain[cid]["ours"])
        assert cav[cid]["reason"] == plain[cid]["reason"] + "; " + claims.CAVEAT_REASON + note.removeprefix("caveat: ")
    assert cav["HSDP-256"]["reason"] == plain["HSDP-256"]["reason"]
    study = Study(
        name="s", description="", hardware="H100", assumptions=(), runs=(), collectives=(), figures=(), root=tmp_path
    )
    text = claims.markdown(claims.evaluate(tables(tmp_path / "b", marked)), study)
    assert "**CAVEAT**: C1, C2, C3, HSDP-2048 rest on a measured input with a known artefact" in text
    assert "**CAVEAT**" not in claims.markdown(claims.evaluate(tables(tmp_path / "a", base)), study)


def test_a_predicted_run_row_carries_its_caveat_notes():
    from types import SimpleNamespace

    from scalestudy.analysis.run_table import _predicted
    from scalestudy.spec.run import RunSpec

    note = "caveat: the measured input ... has a known artefact: host-bound"
    value = {
        "values": {"compute_s": 1.0, "comm_s": 0.5, "exposed_comm_s": 0.1},
        "notes": ["the memory estimate exceeds the GPU's memory", note],
    }
    log = SimpleNamespace(records=[{"key": "prediction", "value": value}])
    spec = RunSpec(model="llama2-7b", device="cuda", nodes=1, procs_per_node=8)
    row = {"step_time_mean_s": 2.0, "n_measured_steps": 1}
    assert _predicted(log, spec, row)["caveats"] == [note]
    assert (
        _predicted(SimpleNamespace(records=[{"key": "prediction", "value": {**value, "notes": []}}]), spec, row)[
            "caveats"
        ]
        == []
    )


def test_a_claim_with_measured_inputs_never_mixes_input_kinds():
    from scalestudy.analysis.claims import NOT_COMPARABLE, mixed_inputs

    both = {"verdict": "consistent", "ours_text": "+1%", "config_ids": ["a--measured-inputs", "b--measured-inputs"]}
    mixed_inputs(both)
    assert both["verdict"] == "consistent"
    mixed = {"verdict": "consistent", "ours_text": "+1%", "reason": "x", "config_ids": ["a--measured-inputs", "b"]}
    mixed_inputs(mixed)
    assert mixed["verdict"] == NOT_COMPARABLE and "mixes input kinds" in mixed["reason"]
    assert "`a--measured-inputs` take a measured rank share, `b` the model alone" in mixed["reason"]


def test_claims_md_says_predicted_once_above_the_table_not_in_every_row(tmp_path):
    from scalestudy.spec.studies import Study

    study = Study(
        name="s", description="", hardware="H100", assumptions=(), runs=(), collectives=(), figures=(), root=tmp_path
    )
    rows = [
        {
            "id": f"C{i}",
            "claim": "c",
            "where": "w",
            "paper": "-1%",
            "ours_text": "-2%",
            "verdict": "consistent",
            "reason": claims.PREDICTED_REASON + "; same sign",
            "n_seeds": claims.PREDICTED,
            "rule": "r",
        }
        for i in range(5)
    ]
    text = claims.markdown(rows, study)
    assert "**PREDICTED by scalestudy.perfmodel, not measured**" in text
    assert claims.PREDICTED_REASON not in text
    assert text.count("| PREDICTED (see above); same sign |") == 5


def test_a_reason_several_rows_give_is_written_once_above_the_table(tmp_path):
    from scalestudy.spec.studies import Study

    study = Study(
        name="s", description="", hardware="H100", assumptions=(), runs=(), collectives=(), figures=(), root=tmp_path
    )
    long = "not expressible: NVFP4 matrix products (no measured or published achievable NVFP4 rate known here)"
    reasons = [f"{long}; one scale only", long, f"a line; {long}", "a short reason given by every row"] + [
        "a short reason given by every row"
    ] * 2
    rows = [
        {
            "id": f"M{i}",
            "claim": "c",
            "where": "w",
            "paper": "",
            "ours_text": "",
            "verdict": "not comparable",
            "reason": r,
            "rule": "r",
        }
        for i, r in enumerate(reasons)
    ]
    assert claims.shared_reasons(reasons) == {long: "1"}
    text = claims.markdown(rows, study)
    assert text.count(long) == 1 and f"- note 1: {long}" in text
    assert text.index("- note 1:") < text.index("| id |")
    assert "| note 1 (above); one scale only |" in text and "| a line; note 1 (above) |" in text
    assert text.count("a short reason given by every row") == 3  # short: said where it applies
    assert "Notes the reasons refer to" not in claims.markdown(rows[3:], study)
