"""The analysis side: from raw logs to tables, figures, claims, provenance and audits.
In: raw logs and the specs of a study. Out: tables, figures, claims; and the audit's verdict.

Pure Python with pandas, seaborn and matplotlib: no torch and no scalestudy.harness import, so a
laptop without GPUs can audit everything.

run_table.py          one row per training run and seed (metrics recomputed from the records)
collectives_table.py  rows of the collectives benchmark and their summary over seeds
stats.py              mean, sample std, Student-t 95% CI; relative changes and differences
csv_format.py         deterministic CSV writing and reading
aggregate.py          aggregate(study): runs.csv, summary.csv, collectives*.csv, unplanned_runs.csv
figures/              one module per figure, and the registry FIGURES with render()
claims.py             the paper's claims C1-C7 and the HSDP question: claims.csv, claims.md
provenance.py         provenance(file): the runs, files, checksums and environment behind each row
audit.py              audit(study): rebuild everything from the raw logs and compare bytes
"""
