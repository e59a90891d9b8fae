# Prediction studies (a `prediction` section and launch: false, e.g. paper-model): every planned
# run is predicted by the calibrated performance model (scalestudy.perfmodel) and written as a
# predicted raw log, marked as such; tables, figures and claims then follow as for measurements.
# One job a study: it re-runs when the study, a cluster file or the calibration data change.


rule predict:
    input:
        prediction_inputs,
    output:
        directory("data/{study}/raw"),
    log:
        "data/{study}/logs/predict.log",
    wildcard_constraints:
        study=PREDICTED_STUDIES,
    localrule: True
    conda:
        "../envs/scalestudy.yaml"
    params:
        study=study_arg,
        model=MODEL_CODE_VERSION,  # a change to the model's code or data reruns the predictions
    shell:
        "scalestudy model study --study {params.study:q} --out {output:q} > {log:q} 2>&1"


# The external validation ledger (workflow/validation/external.yaml) predicted with the study's
# calibration, drawn as the model_validation figure with its CSVs. Nothing is fitted to it. It
# re-runs when the analysis code or the performance model changes (params code and model).
rule model_validation:
    input:
        ledger="workflow/validation/external.yaml",
        deps=prediction_inputs,
    output:
        ledger="figures/{study}/model_validation_ledger.csv",
        pdf=report(
            "figures/{study}/model_validation.pdf",
            caption="../report/figure-pdf.rst",
            category="PDF files",
            labels={"figure": "model_validation"},
        ),
        png=report(
            "figures/{study}/model_validation.png",
            caption="../report/figure.rst",
            category=figure_category("model_validation"),
            labels={"figure": "model_validation"},
        ),
        csv="figures/{study}/model_validation.csv",
    log:
        "data/{study}/logs/model_validation.log",
    wildcard_constraints:
        study=PREDICTED_STUDIES,
    localrule: True
    conda:
        "../envs/scalestudy.yaml"
    params:
        calibration=lambda wildcards: list(get_study(wildcards.study).prediction["calibration"]),
        base=lambda wildcards: f"figures/{wildcards.study}/model_validation",
        caption=figure_caption("model_validation"),
        figure="model_validation",
        code=CODE_VERSION,
        model=MODEL_CODE_VERSION,
    shell:
        "scalestudy model validate --external --calibration {params.calibration:q} --out {output.ledger:q} "
        "--figure {params.base:q} > {log:q} 2>&1"


# The performance model beside a study of measurements (a `model_beside` section, e.g. mlperf): each
# configuration predicted on the section's cluster from its calibration, or the reason it cannot be
# expressed; the figures draw it beside the measured points. Nothing is fitted to the measurements.
rule model_beside:
    input:
        beside_inputs,
    output:
        "data/{study}/tables/model_beside.csv",
    log:
        "data/{study}/logs/model_beside.log",
    wildcard_constraints:
        study=BESIDE_STUDIES,
    localrule: True
    conda:
        "../envs/scalestudy.yaml"
    params:
        study=study_arg,
        model=MODEL_CODE_VERSION,  # a change to the model's code or data reruns it
    shell:
        "scalestudy model beside --study {params.study:q} --out {output:q} > {log:q} 2>&1"


# A prediction study's claims against the model's uncertain inputs: each claim with each input at its
# low and high value (figure claim_sensitivity), C3's step term by term and what each claim rests on
# (claims.md). Re-runs with the model (params.model) or the study's calibration.
rule claim_sensitivity:
    input:
        prediction_inputs,
    output:
        "data/{study}/tables/claim_sensitivity.csv",
        "data/{study}/tables/c3_terms.csv",
        "data/{study}/tables/claim_basis.json",
    log:
        "data/{study}/logs/claim_sensitivity.log",
    wildcard_constraints:
        study=PREDICTED_STUDIES,
    localrule: True
    conda:
        "../envs/scalestudy.yaml"
    params:
        study=study_arg,
        model=MODEL_CODE_VERSION,
    shell:
        "scalestudy model sensitivity --study {params.study:q} > {log:q} 2>&1"


# The model's measured, published and assumed inputs (perfmodel/inputs_table.py): each value with its
# unit, source, raw log and the log's content sha256, as markdown and CSV. The docs quote these values
# only in blocks generated from the same table (scalestudy model inputs --update-docs). Re-runs with the
# model (params.model: its code and catalogs) or a changed raw log.
rule model_inputs:
    input:
        prediction_inputs,
        model_input_logs,
    output:
        md="figures/{study}/model_inputs.md",
        csv=report(
            "figures/{study}/model_inputs.csv",
            caption="../report/model-inputs.rst",
            category="Tables",
            labels={"table": "model_inputs"},
        ),
    log:
        "data/{study}/logs/model_inputs.log",
    wildcard_constraints:
        study=PREDICTED_STUDIES,
    localrule: True
    conda:
        "../envs/scalestudy.yaml"
    params:
        calibration=lambda wildcards: list(get_study(wildcards.study).prediction["calibration"]),
        model=MODEL_CODE_VERSION,
    shell:
        "(scalestudy model inputs --calibration {params.calibration:q} --out {output.md:q} && "
        "scalestudy model inputs --calibration {params.calibration:q} --format csv --out {output.csv:q}) "
        "> {log:q} 2>&1"
