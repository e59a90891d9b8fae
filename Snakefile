# The study's workflow: runs -> raw logs -> tables -> figures -> claims.
#
#   snakemake --cores 2                          # the default study (smoke: CPU, minutes)
#   snakemake -n --config study=paper            # plan the paper's grid without running it
#   snakemake --cores 2 --config study=paper-model   # the paper's figures PREDICTED by the model
#   snakemake figures/smoke/weak_scaling.pdf --force   # rebuild one figure alone
#   snakemake --report report.html               # figures with their captions
#
# Run it from the repository root (this directory). Defaults for the command line are in
# profiles/default/config.yaml, which Snakemake 9 reads by itself for this Snakefile.
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "workflow/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/runs.smk"
include: "workflow/rules/collectives.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/claims.smk"
include: "workflow/rules/model.smk"


# the report's home page says what the study's numbers are: measured, predicted, imported or
# one rank's share (scalestudy.spec.evidence)
report: report_page(STUDY)


rule all:
    default_target: True
    input:
        all_targets,
