"""A figure row whose value comes from fewer seeds than its run_ids name says how many and why (issue 54)."""


def test_a_value_from_fewer_seeds_than_the_row_names_says_so():
    from scalestudy.analysis.figures import prepare

    cfg = {
        "config_id": "c",
        "status": "ok",
        "run_ids": "r0;r1",
        "exposed_comm_s_mean": 0.2,
        "exposed_comm_s_n": 1,
        "exposed_comm_s_ci95_low": None,
        "exposed_comm_s_ci95_high": None,
        "notes": "exposed_comm: r1/traces/rank0.json.gz: cut before the run sealed it;one seed: no confidence interval",
    }
    row = prepare.config_row(cfg, panel="p", series="s", **prepare.stat(cfg, "exposed_comm_s"))
    assert row["y"] == 0.2 and row["n_seeds"] == 1 and row["run_ids"] == ["r0", "r1"]
    assert row["note"] == (
        "1 of the 2 seeds in run_ids give a value (the others: r1/traces/rank0.json.gz: cut before the run sealed it)"
    )
    both = {**cfg, "exposed_comm_s_n": 2}
    assert "note" not in prepare.config_row(both, **prepare.stat(both, "exposed_comm_s"))
