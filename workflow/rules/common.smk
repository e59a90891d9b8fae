# Functions of the workflow (no rules here): the study, its runs, and their job resources.
# Every planning decision lives in the package (scalestudy.spec.studies, scalestudy.launch.launcher).
import os
import sys
from functools import lru_cache
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

from scalestudy.measure.code_version import code_version, model_version
from scalestudy.launch.launcher import job_resources
from scalestudy.launch.slurm import submit_problem
from scalestudy.spec.site import SiteError, load_site
from scalestudy.spec.studies import (
    ALL_FIGURES,
    FIGURES,
    RANK_FIGURES,
    StudyError,
    load_study,
    study_headers,
    study_path,
)
from scalestudy.spec.workflow_plan import NoRawLogs, model_inputs, raw_dirs, runs_in_words, studies_with, table_files


@lru_cache(maxsize=None)
def get_study(name):
    """The study whose outputs live under data/NAME and figures/NAME."""
    source = STUDY_SOURCES.get(name, name)
    try:
        return load_study(source)
    except StudyError as e:
        raise WorkflowError(f"invalid study: {e}") from None


def study_arg(wildcards):
    """What `scalestudy ... --study` needs to find the study: its name, or its YAML path."""
    return STUDY_SOURCES.get(wildcards.study, wildcards.study)


# The configured study is planned (and so validated) when the workflow is parsed: an invalid
# study fails at once, naming its field.
STUDY_SOURCES = {study_path(config["study"]).stem: config["study"]}
STUDY = get_study(study_path(config["study"]).stem)


# The other study files: one that cannot be read is left out (with a warning naming it), so
# that it breaks only its own study.
STUDY_HEADERS, BROKEN_STUDIES = study_headers()
for _name, _why in sorted(BROKEN_STUDIES.items()):
    if _name != STUDY.name:
        print(f"scalestudy: warning: study {_name!r} is left out: {_why}", file=sys.stderr)


# The studies the run, predict and beside jobs may match (scalestudy.spec.workflow_plan), in turn the
# launched ones (`launch: false`: raw logs committed instead), the predicted ones, those with the model beside.
LAUNCHED_STUDIES = studies_with("launch", STUDY, STUDY_HEADERS)
PREDICTED_STUDIES = studies_with("prediction", STUDY, STUDY_HEADERS)
BESIDE_STUDIES = studies_with("model_beside", STUDY, STUDY_HEADERS)


def model_rule_inputs(section):
    """The inputs of the model's jobs for a study's `section` (prediction or model_beside), namely its
    study file, the cluster files, the calibration runs and the measured rank shares (workflow_plan)."""

    def inputs(wildcards):
        study = get_study(wildcards.study)
        shares = (getattr(study, section) or {}).get("rank_shares")
        return model_inputs(study, section, get_study(shares) if shares else None)

    return inputs


beside_inputs, prediction_inputs = model_rule_inputs("model_beside"), model_rule_inputs("prediction")


def model_input_logs(wildcards):
    """The raw logs the model's inputs table reads (each run's sealed status.json) and the study's
    calibration runs' run.json (perfmodel/inputs_table.py input_files; rule model_inputs)."""
    from scalestudy.perfmodel.inputs_table import input_files

    return input_files(".", get_study(wildcards.study).prediction["calibration"])


def planned_run(wildcards):
    study = get_study(wildcards.study)
    if not study.launch:
        raise WorkflowError(
            f"study {study.name!r} is not launched by the workflow (launch: false): "
            f"{study.raw_dir}/{wildcards.run_id} must come from the committed raw logs"
        )
    try:
        return study.run(wildcards.run_id).spec
    except KeyError:
        try:
            return study.collective(wildcards.run_id)
        except KeyError:
            raise WorkflowError(f"study {study.name!r} plans no run {wildcards.run_id!r}") from None


# The cluster's settings (slurm/site.yaml, or the file SCALESTUDY_SLURM_SITE names): partition,
# account, GPUs per node, time limits, ... for `snakemake --profile slurm`; harmless locally.
try:
    SITE = load_site()
except SiteError as e:
    raise WorkflowError(f"invalid site settings: {e}") from None
# A run stopped by a time limit or a preemption is run again this many times (the launcher
# exits 3 for it while attempts remain; the last attempt records the status as data).
RUN_RETRIES = SITE.retries


# Under --profile slurm: refuse at once, in one sentence, what would fail every submission.
onstart:
    if getattr(workflow.executor_plugin, "name", None) == "slurm":
        problem = submit_problem(SITE)
        if problem:
            raise WorkflowError(problem)


# One-host CPU runs fork their workers from a warm server that imported torch once for the
# workflow (scalestudy.launch.warm_workers), not once a run; SCALESTUDY_LOCAL_LAUNCHER=local or torchrun
# in the environment starts them afresh. GPU and SLURM runs start with torchrun either way.
os.environ.setdefault("SCALESTUDY_LOCAL_LAUNCHER", "warm")
# The host's locks (and warm servers) at the site file's lock_dir, when it names one; else the fixed
# default of scalestudy.launch.run_guard.lock_dir (never TMPDIR's). SCALESTUDY_LOCK_DIR overrides both.
if SITE.lock_dir:
    os.environ.setdefault("SCALESTUDY_LOCK_DIR", SITE.lock_dir)


def retire_warm_servers():
    from scalestudy.launch.warm_workers import stop_servers

    stop_servers()


onsuccess:
    retire_warm_servers()


onerror:
    retire_warm_servers()


# The study's cost at the workflow's start (also on a dry run): jobs by size, GPU-hours at the
# requested time limits and expected; a plan over its GPU-hour budget is refused here, before
# anything is submitted (scalestudy.launch.cost). Not repeated inside the cluster's jobs.
if workflow.is_main_process and STUDY.launch:
    from scalestudy.launch.cost import BudgetError, budget_of, check_budget, format_cost, study_cost

    try:
        _cost = study_cost(STUDY, SITE)
        _budget, _budget_source = budget_of(STUDY, SITE, config.get("gpu_hours_budget"))
        logger.info(format_cost(_cost, _budget, _budget_source))
        if "budget_gpu_s" not in config:  # a device-time budget makes part of the study, within it
            check_budget(_cost, _budget, _budget_source)
    except (BudgetError, SiteError) as e:
        raise WorkflowError(str(e)) from None


# A study's metrics sink whose library is missing: refused before any job runs (each run would fail
# on it), with the README's install words (scalestudy.harness.metrics_sink.check).
if workflow.is_main_process and STUDY.launch and STUDY.metrics_sink:
    from scalestudy.harness.metrics_sink import SinkUnavailable, check as check_sink

    try:
        check_sink(STUDY.metrics_sink, where=f"study {STUDY.name!r}: metrics_sink")
    except SinkUnavailable as e:
        raise WorkflowError(str(e)) from None


# A launched study's runs that this host cannot run as planned (launch.launcher.host_problem): refused
# before anything runs, on a local run of the workflow (a cluster's nodes are not this host).
if workflow.is_main_process and STUDY.launch and workflow.local_exec:
    from scalestudy.launch.launcher import host_problem

    _host = [p for p in (host_problem(spec) for _, spec in STUDY.jobs) if p]
    if _host:
        raise WorkflowError(
            _host[0] + (f" (and {len(_host) - 1} more run(s) of study {STUDY.name!r})" if len(_host) > 1 else "")
        )


# --config budget_gpu_s=N: the missing runs that fit it (scalestudy.launch.budget), and the figures
# only once none is missing.
BUDGET_PLAN = None
if "budget_gpu_s" in config:
    from scalestudy.launch.budget import BudgetTooSmall, plan_budget

    if not STUDY.launch:
        raise WorkflowError(f"budget_gpu_s: study {STUDY.name!r} is not launched (launch: false)")
    try:
        BUDGET_PLAN = plan_budget(STUDY, config["budget_gpu_s"], SITE)
    except BudgetTooSmall as e:
        raise WorkflowError(f"budget_gpu_s: {e}") from None
    if workflow.is_main_process:
        logger.info(BUDGET_PLAN.describe())


def run_resource(key):
    """A job resource of a planned run (scalestudy.launch.launcher.job_resources); None: not set."""

    def resource(wildcards):
        study = get_study(wildcards.study)
        try:
            return job_resources(planned_run(wildcards), study.time_limit_s, SITE)[key]
        except SiteError as e:
            raise WorkflowError(f"study {study.name!r}: {e}") from None

    return resource


def run_threads(wildcards):
    """A measured run owns its host: run locally, its job takes every core Snakemake was given, so
    no other job (another run's start-up while this one measures, which the load watch counts as
    foreign CPU) runs beside it; on a cluster, the cores its processes use."""
    threads = run_resource("threads")(wildcards)
    return max(threads, workflow.cores) if workflow.local_exec else threads


def attempt_number(wildcards, attempt):
    """The attempt at a job (1, 2, ...), for the launcher's --attempt."""
    return attempt


def raw_inputs(wildcards):
    """Every raw-log directory of the study: made by the run and collectives jobs, or committed."""
    try:
        return raw_dirs(get_study(wildcards.study))
    except NoRawLogs as e:
        raise WorkflowError(str(e)) from None


def study_hardware(wildcards):
    return get_study(wildcards.study).hardware


# The analysis code's version (package version and source hash): a parameter of the rules that
# make tables, figures and claims, so that a change to that code reruns them.
CODE_VERSION = code_version()
# The performance model's version (its sources, the catalogs, the external ledger and the cluster files): with
# CODE_VERSION a parameter of the model_validation rule, which draws the model's predictions, and of
# the predict rule.
MODEL_CODE_VERSION = model_version()


def figure_category(figure):
    from scalestudy.analysis.figures import description

    return description(figure).category


def report_page(study):
    """The report's home page for the study's kind of numbers (workflow/report/KIND.rst)."""
    from scalestudy.spec.evidence import study_evidence

    return f"workflow/report/{study_evidence(study).replace(' ', '-')}.rst"


def study_evidence_of(wildcards):
    """measured, predicted, imported or rank share (scalestudy.spec.evidence), for captions."""
    from scalestudy.spec.evidence import study_evidence

    return study_evidence(get_study(wildcards.study))


def figure_caption(figure):
    """The report caption of a figure of the study, from its module's DESCRIPTION."""

    def caption(wildcards):
        from scalestudy.analysis.figures import caption as make_caption

        return make_caption(figure, get_study(wildcards.study), runs=figure_runs(figure)(wildcards))

    return caption


def figure_runs(figure):
    """In words, the runs a figure of the study draws on (for its caption)."""
    return lambda wildcards: runs_in_words(get_study(wildcards.study), figure)


def tables(wildcards):
    return table_files(get_study(wildcards.study))


def study_figures(name):
    study = get_study(name)
    return expand(
        "figures/{study}/{figure}.{ext}",
        study=study.name,
        figure=study.figures,
        ext=("pdf", "png", "csv"),
    )


def figure_files(wildcards):
    return study_figures(wildcards.study)


def rank_table_files(study):
    return expand("data/{study}/tables/{table}.csv", study=study, table=("rank_shares", "rank_configs"))


def rank_tables(wildcards):
    return rank_table_files(wildcards.study)


def figure_inputs(figure):
    """A figure's tables: the study's, and for the rank figures the rank-share tables too."""
    if figure in RANK_FIGURES:
        return lambda wildcards: tables(wildcards) + rank_tables(wildcards)
    return tables


def all_targets(wildcards):
    if BUDGET_PLAN is not None and BUDGET_PLAN.left:
        return [f"data/{STUDY.name}/raw/{r.run_id}" for r in BUDGET_PLAN.chosen]
    targets = study_figures(STUDY.name)
    if any(r.spec.comm == "fake" for r in STUDY.runs):
        targets += rank_table_files(STUDY.name)
    if not set(STUDY.figures) <= set(RANK_FIGURES):  # the paper's claims need throughputs; rank shares are none
        targets += expand("figures/{study}/claims.{ext}", study=STUDY.name, ext=("csv", "md", "html"))
    if STUDY.prediction:  # the performance model against published runs (workflow/rules/model.smk)
        targets += expand(
            "figures/{study}/model_validation{ext}", study=STUDY.name, ext=(".pdf", ".png", ".csv", "_ledger.csv")
        )
        # the model's inputs, each with its source and raw log (workflow/rules/model.smk model_inputs)
        targets += expand("figures/{study}/model_inputs.{ext}", study=STUDY.name, ext=("md", "csv"))
    if STUDY.name == README_STUDY:  # the README's pictures (workflow/rules/figures.smk readme_pictures)
        targets += expand("docs/img/{study}/{figure}.png", study=README_STUDY, figure=README_FIGURES)
    return targets
