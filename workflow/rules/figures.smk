# One rule a figure, named by its content (figure_weak_scaling, ...): tables -> PDF, PNG and the
# CSV of exactly the numbers plotted. The report shows the PNG with its caption (the PDF under
# "PDF files"); the caption is the figure module's DESCRIPTION
# (scalestudy.analysis.figures.caption, through the one template report/figure.rst), and
# params.code (the analysis code's version) reruns it when that code changes.
# `snakemake --forcerun figure_NAME -- figures/STUDY/NAME.pdf` rebuilds one.

for figure_name in ALL_FIGURES:

    rule:
        name:
            f"figure_{figure_name}"
        input:
            figure_inputs(figure_name),
        output:
            # the PNG shows inline with the caption; the PDF is a download of its own
            pdf=report(
                f"figures/{{study}}/{figure_name}.pdf",
                caption="../report/figure-pdf.rst",
                category="PDF files",
                labels={"figure": figure_name},
            ),
            png=report(
                f"figures/{{study}}/{figure_name}.png",
                caption="../report/figure.rst",
                category=figure_category(figure_name),
                labels={"figure": figure_name},
            ),
            csv=f"figures/{{study}}/{figure_name}.csv",
        log:
            f"data/{{study}}/logs/figure_{figure_name}.log",
        # light work on the submit host: under --profile slurm only the runs are cluster jobs
        localrule: True
        conda:
            "../envs/scalestudy.yaml"
        params:
            figure=figure_name,
            study=study_arg,
            caption=figure_caption(figure_name),
            code=CODE_VERSION,
        shell:
            "scalestudy figure {params.figure:q} --study {params.study:q} > {log:q} 2>&1"


# The README's pictures: copies of the paper-model study's figures (its outputs are regenerated, not
# committed), made whenever that study is drawn; tests/test_readme_pictures.py refuses copies that
# this code would draw otherwise.
README_STUDY = "paper-model"
README_FIGURES = ("weak_scaling", "kernel_breakdown", "tp_pp_grid", "collectives_bandwidth")


rule readme_pictures:
    input:
        "figures/{study}/{figure}.png",
    output:
        "docs/img/{study}/{figure}.png",
    log:
        "data/{study}/logs/readme_{figure}.log",
    wildcard_constraints:
        study=README_STUDY,
        figure="|".join(README_FIGURES),
    localrule: True
    conda:
        "../envs/scalestudy.yaml"
    shell:
        "cp {input:q} {output:q} > {log:q} 2>&1"
