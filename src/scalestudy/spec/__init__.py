"""What a run is, as pure data (no torch): the run and collectives specifications, their command-line
options, the studies that plan them, the model/GPU catalog, the site file and the memory estimate.
In: YAML and JSON files (studies, catalogs, site). Out: validated specs that every other wing reads."""
