# Prediction studies (a `prediction` section and launch: false, e.g. paper-model): every planned
# run is predicted by the calibrated performance model (scalestudy.perfmodel) and written as a
# predicted raw log, marked as such; tables, figures and claims then follow as for measurements.
# One job a study: it re-runs when the study, a cluster file or the calibration data change.


rule predict:
    localrule: True
    input:
        prediction_inputs,
    output:
        directory("data/{study}/raw"),
    log:
        "data/{study}/logs/predict.log",
    wildcard_constraints:
        study=PREDICTED_STUDIES,
    params:
        study=study_arg,
        model=MODEL_CODE_VERSION,  # a change to the model's code or data reruns the predictions
    conda:
        "../envs/scalestudy.yaml"
    shell:
        "scalestudy model study --study {params.study:q} --out {output:q} > {log:q} 2>&1"


# The external validation ledger (workflow/validation/external.yaml) predicted with the study's
# calibration, drawn as the model_validation figure with its CSVs. Nothing is fitted to it. It
# re-runs when the analysis code or the performance model changes (params code and model).
rule model_validation:
    localrule: True
    input:
        ledger="workflow/validation/external.yaml",
        deps=prediction_inputs,
    output:
        ledger="figures/{study}/model_validation_ledger.csv",
        pdf=report(
            "figures/{study}/model_validation.pdf",
            caption="../report/figure.rst",
            category=figure_category("model_validation"),
            labels={"figure": "model_validation", "format": "PDF"},
        ),
        png=report(
            "figures/{study}/model_validation.png",
            caption="../report/figure.rst",
            category=figure_category("model_validation"),
            labels={"figure": "model_validation", "format": "PNG"},
        ),
        csv="figures/{study}/model_validation.csv",
    log:
        "data/{study}/logs/model_validation.log",
    wildcard_constraints:
        study=PREDICTED_STUDIES,
    params:
        calibration=lambda wildcards: list(get_study(wildcards.study).prediction["calibration"]),
        base=lambda wildcards: f"figures/{wildcards.study}/model_validation",
        caption=figure_caption("model_validation"),
        code=CODE_VERSION,
        model=MODEL_CODE_VERSION,
    conda:
        "../envs/scalestudy.yaml"
    shell:
        "scalestudy model validate --external --calibration {params.calibration:q} --out {output.ledger:q} "
        "--figure {params.base:q} > {log:q} 2>&1"
