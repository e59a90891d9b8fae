# Raw logs -> tables (docs/analysis-outputs.md): one row a run, one a configuration (mean and
# spread over seeds), one a collective measurement and its summary over seeds, and the run
# directories the study did not plan. Every number of the figures comes from these tables.


rule aggregate:
    # light work on the submit host: under --profile slurm only the runs are cluster jobs
    localrule: True
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
    params:
        study=study_arg,
    conda:
        "../envs/scalestudy.yaml"
    shell:
        "scalestudy aggregate --study {params.study:q} > {log:q} 2>&1"
