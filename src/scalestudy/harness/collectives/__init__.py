"""The collectives benchmark (the study's Figure 2), in the manner of NVIDIA's nccl-tests: one
harness (bench.py) and one small module per collective, each giving its buffers, its rank-dependent
input values, the call, and a count of the result's wrong elements."""

from scalestudy.harness.collectives import all_gather, all_reduce, all_to_all, reduce_scatter

OPS = {
    "all_reduce": all_reduce,
    "all_gather": all_gather,
    "reduce_scatter": reduce_scatter,
    "all_to_all": all_to_all,
}
