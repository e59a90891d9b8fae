# The paper's numbered claims (C1 to C7) against this study's numbers, with their uncertainty.


rule claims:
    # light work on the submit host: under --profile slurm only the runs are cluster jobs
    localrule: True
    input:
        tables,
        figure_files,
    output:
        csv=report(
            "figures/{study}/claims.csv",
            caption="../report/claims-csv.rst",
            category="Tables",
            labels={"table": "claims"},
        ),
        md="figures/{study}/claims.md",
        html=report(
            "figures/{study}/claims.html",
            caption="../report/claims.rst",
            category="Claims",
            labels={"table": "claims"},
        ),
    log:
        "data/{study}/logs/claims.log",
    params:
        study=study_arg,
        evidence=study_evidence_of,
        code=CODE_VERSION,
    conda:
        "../envs/scalestudy.yaml"
    shell:
        "scalestudy claims --study {params.study:q} > {log:q} 2>&1"
