"""How a run is started and owned: the launcher (one run from its spec to a finished raw log), the
run guard (process tokens, host and run locks), SLURM and its queue, local and warm workers, a
study's cost and status, and the end-of-run summary. In: specs and a site. Out: runs in raw logs."""
