"""The instruments (spec/instruments.py): measurements of one GPU that the performance model reads
besides training runs, each writing a sealed raw log as every run of the package does. One module an
instrument; common.py holds the board (NVML), its sampler and the run they share."""
