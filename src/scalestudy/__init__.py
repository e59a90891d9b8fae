"""scalestudy: rebuild the figures of "Hardware Scaling Trends and Diminishing Returns in
Large-Scale Distributed Training" (arXiv 2411.13055) from raw logs of your own runs."""

__version__ = "0.1.0"
