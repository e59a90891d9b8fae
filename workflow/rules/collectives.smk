# One job a world size of the collectives benchmark (Figure 2), launched like a training run.


rule collectives:
    output:
        # update(): Snakemake never deletes a run directory that exists when the job starts (it appeared
        # after the DAG was built: another workflow, a copy); the launcher moves it aside to
        # RUN_ID.found-STAMP, kept and named (scalestudy.launch.launcher), and measures the run again
        update(directory("data/{study}/raw/{run_id}")),
    log:
        "data/{study}/logs/runs/{run_id}.log",
    wildcard_constraints:
        study=LAUNCHED_STUDIES,
        run_id=r"collectives-[^/]+",
    retries: RUN_RETRIES
    conda:
        "../envs/scalestudy.yaml"
    threads: run_threads
    resources:
        nodes=run_resource("nodes"),
        tasks=run_resource("tasks"),
        gpus=run_resource("gpus"),
        mem_mb=run_resource("mem_mb"),
        runtime=run_resource("runtime"),
        slurm_extra=run_resource("slurm_extra"),
        # for the SLURM executor plugin (scalestudy.launch.slurm.job_resources; unset ones are dropped)
        cpus_per_task=run_resource("cpus_per_task"),
        mpi=run_resource("mpi"),
        slurm_partition=run_resource("slurm_partition"),
        slurm_account=run_resource("slurm_account"),
        qos=run_resource("qos"),
        constraint=run_resource("constraint"),
        attempt=attempt_number,
    params:
        study=study_arg,
        time_limit_s=run_resource("time_limit_s"),
        max_attempts=RUN_RETRIES + 1,
    shell:
        # exec: the launcher itself gets SLURM's SIGTERM and outlives the shell, to record why
        "exec scalestudy launch --study {params.study:q} --run-id {wildcards.run_id:q}"
        " --run-dir {output:q} --log {log:q} --time-limit-s {params.time_limit_s}"
        " --attempt {resources.attempt} --max-attempts {params.max_attempts}"
