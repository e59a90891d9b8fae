# Raw logs -> tables (docs/analysis-outputs.md): one row a run, one a configuration (mean and
# spread over seeds), one a collective measurement and its summary over seeds, and the run
# directories the study did not plan. Every number of the figures comes from these tables.


rule aggregate:
    input:
        raw_inputs,
    output:
        runs="data/{study}/tables/runs.csv",
        summary="data/{study}/tables/summary.csv",
        collectives="data/{study}/tables/collectives.csv",
        collectives_summary="data/{study}/tables/collectives_summary.csv",
        unplanned="data/{study}/tables/unplanned_runs.csv",
    log:
        "data/{study}/logs/aggregate.log",
    # light work on the submit host: under --profile slurm only the runs are cluster jobs
    localrule: True
    conda:
        "../envs/scalestudy.yaml"
    params:
        study=study_arg,
        code=CODE_VERSION,
    shell:
        "scalestudy aggregate --study {params.study:q} > {log:q} 2>&1"


rule rank_shares:
    input:
        raw_inputs,
    output:
        shares="data/{study}/tables/rank_shares.csv",
        configs="data/{study}/tables/rank_configs.csv",
    log:
        "data/{study}/logs/rank_shares.log",
    # rank shares (spec comm: fake): one rank's compute time and memory, communication not
    # executed, and each configuration's pipeline stages put together (docs/rank-shares.md)
    localrule: True
    conda:
        "../envs/scalestudy.yaml"
    params:
        study=study_arg,
    shell:
        "scalestudy rank-shares --study {params.study:q} > {log:q} 2>&1"
