# The paper's numbered claims (C1 to C7) against this study's numbers, with their uncertainty.


rule claims:
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
    # light work on the submit host: under --profile slurm only the runs are cluster jobs
    localrule: True
    conda:
        "../envs/scalestudy.yaml"
    params:
        study=study_arg,
        evidence=study_evidence_of,
        code=CODE_VERSION,
    shell:
        "scalestudy claims --study {params.study:q} > {log:q} 2>&1"
