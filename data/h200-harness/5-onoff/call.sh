#!/usr/bin/env bash
# Session 4's one device call: ekern on/off on the final code (l16 eager), then l16 compiled with
# inductor's coordinate-descent tuning of its generated kernels against the same code without.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $OUT/gpu.txt
python3 -c "import torch; print(torch.__version__, torch.version.cuda)" | tee -a $OUT/gpu.txt
timeout 100 python3 benchmarks/harness_vs_torchtitan.py run --out $OUT/ekern --warmup-iters 3 --measured-iters 8 \
  --configs l16-eager --variants after,no-ekern --plain '' --timeout-s 90 2>&1 | tee $OUT/ekern-console.txt
timeout 70 python3 benchmarks/harness_vs_torchtitan.py run --out $OUT/compile --warmup-iters 3 --measured-iters 8 \
  --configs l16-compile --variants after --plain '' --timeout-s 65 2>&1 | tee $OUT/compile-console.txt
TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1 timeout 90 python3 benchmarks/harness_vs_torchtitan.py run --out $OUT/compile-cdt \
  --warmup-iters 3 --measured-iters 8 --configs l16-compile --variants after --plain '' --timeout-s 85 2>&1 | tee $OUT/compile-cdt-console.txt
