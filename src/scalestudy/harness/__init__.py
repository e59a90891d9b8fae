"""The part that runs on GPUs (or CPUs): model, parallel layouts, training loop, measurement hooks.
In: one RunSpec, in each process a launcher started. Out: that run's raw log. Nothing on the
analysis or model side imports it."""
