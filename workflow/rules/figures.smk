# One rule a figure, named by its content (figure_weak_scaling, ...): tables -> PDF, PNG and the
# CSV of exactly the numbers plotted. `snakemake figures/STUDY/NAME.pdf --force` rebuilds one.

FIGURE_CATEGORIES = {
    "collectives_bandwidth": "Communication",
    "weak_scaling": "Scaling",
    "kernel_breakdown": "Communication",
    "strong_scaling": "Scaling",
    "tp_pp_grid": "Parallelism",
    "model_sizes": "Scaling",
    "hardware_generations": "Hardware",
    "power": "Power",
}

for figure_name in FIGURES:

    rule:
        name:
            f"figure_{figure_name}"
        # light work on the submit host: under --profile slurm only the runs are cluster jobs
        localrule: True
        input:
            tables,
        output:
            pdf=report(
                f"figures/{{study}}/{figure_name}.pdf",
                caption=f"../report/{figure_name}.rst",
                category=FIGURE_CATEGORIES[figure_name],
                labels={"figure": figure_name, "format": "PDF"},
            ),
            png=report(
                f"figures/{{study}}/{figure_name}.png",
                caption=f"../report/{figure_name}.rst",
                category=FIGURE_CATEGORIES[figure_name],
                labels={"figure": figure_name, "format": "PNG"},
            ),
            csv=f"figures/{{study}}/{figure_name}.csv",
        log:
            f"data/{{study}}/logs/figure_{figure_name}.log",
        params:
            figure=figure_name,
            study=study_arg,
            hardware=study_hardware,  # for the caption
            runs=figure_runs(figure_name),  # for the caption
        conda:
            "../envs/scalestudy.yaml"
        shell:
            "scalestudy figure {params.figure:q} --study {params.study:q} > {log:q} 2>&1"
