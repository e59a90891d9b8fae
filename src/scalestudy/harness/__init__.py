"""The part that runs on GPUs (or CPUs): model, parallel layouts, training loop, measurement
hooks. It writes raw logs; nothing on the analysis side imports it."""
