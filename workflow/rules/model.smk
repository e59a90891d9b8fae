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
    conda:
        "../envs/scalestudy.yaml"
    shell:
        "scalestudy model study --study {params.study:q} --out {output:q} > {log:q} 2>&1"
