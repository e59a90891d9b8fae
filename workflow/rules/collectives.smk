# One job a world size of the collectives benchmark (Figure 2), launched like a training run.


rule collectives:
    output:
        directory("data/{study}/raw/{run_id}"),
    log:
        "data/{study}/logs/runs/{run_id}.log",
    wildcard_constraints:
        study=LAUNCHED_STUDIES,
        run_id=r"collectives-[^/]+",
    params:
        study=study_arg,
        time_limit_s=run_resource("time_limit_s"),
    threads: run_resource("threads")
    resources:
        nodes=run_resource("nodes"),
        tasks=run_resource("tasks"),
        gpus=run_resource("gpus"),
        mem_mb=run_resource("mem_mb"),
        runtime=run_resource("runtime"),
        slurm_extra=run_resource("slurm_extra"),
    conda:
        "../envs/scalestudy.yaml"
    shell:
        "scalestudy launch --study {params.study} --run-id {wildcards.run_id}"
        " --run-dir {output} --log {log} --time-limit-s {params.time_limit_s}"
