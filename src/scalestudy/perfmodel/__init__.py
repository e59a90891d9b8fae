"""A calibrated performance model of Llama training (issue: "a calibrated performance model").
In: specs, the catalog, measured raw logs and rank-share tables. Out: predictions, written as raw
logs of predicted runs that the analysis draws like measured ones.

Per-iteration time of a RunSpec on a described cluster =
  computation   (compute.py: kernel-category times of measured runs, scaled by FLOPs and bytes)
+ communication (layout_comm.py: the collectives each layout issues, with message sizes;
                 collectives.py: an alpha-beta model per collective, fitted to `collective`
                 records of raw logs, or to the published all-reduce panel where none are measured)
- the overlap the layout allows (overlap.py: FSDP prefetch on a second stream, TP synchronous,
                 the pipeline bubble), and power from measured power against utilisation (power.py).

Everything here is analysis-side: numpy, no torch, no scalestudy.harness. Every parameter carries
its source (`measured`, `fit`, `published panel`, `datasheet`, `paper`, `assumed`), and every
prediction lists them, so that a reader can tell what is calibrated from what is assumed.

Entry points: `predict.predict(spec, cluster, calibration)`, `validate.held_out(...)`,
`validate.paper_claims(...)`; the CLI is `scalestudy model` (scalestudy/cli/model.py).
"""

MODEL_VERSION = "scalestudy.perfmodel/1"
