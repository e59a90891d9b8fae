#!/usr/bin/env bash
# The megatron-core backend's validation on one H200 (or any one GPU), in one device call of
# about 5 minutes (about 8 at worst: every step has a time limit, the last pair is dropped late):
#   1. megatron-core from the wheel in .whl/ (the device has no registry; it has torch, numpy,
#      packaging and einops, megatron-core's other needs)
#   2. weight copy: GPTModel with the torch model's weights copied by name, one forward and
#      backward on the GPU, fp32 (benchmarks/megatron_agreement.py)
#   3. loss curves: `scalestudy train` with backend torch and backend megatron from the same spec
#      (identical initial weights: the megatron backend loads the torch backend's init by name),
#      a 4-layer slice of llama-1b (GQA), seq 1024, micro batch 4, 30 steps, bf16 then fp32
#   4. throughput: Llama-2 7B, seq 4096, micro batch 2, bf16, full activation checkpointing,
#      TP=PP=1, 10 warm-up + 50 measured iterations, each backend, NVML energy on
# Needs train.py's dispatch on spec.backend. Raw logs go to $OUT/megatron-raw.tar.gz, the console
# to $OUT/megatron-console.txt, the weight-copy check to $OUT/agreement.jsonl and
# `python benchmarks/megatron_summary.py` of it all to $OUT/megatron-summary.json.
#
#   device run: carry [".whl"], command: bash benchmarks/megatron_validation.sh
set -uo pipefail
OUT=${OUT:-megatron-out}
RAW=$OUT/megatron-raw
mkdir -p "$RAW"
log=$OUT/megatron-console.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/megatron_core-*.whl 2>&1 | tee -a "$log" || exit 1
export PYTHONPATH=$PWD/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
SMALL=(--model llama-1b --n-layers 4 --seq-len 1024 --micro-batch 4 --device cuda --warmup-iters 0
       --measured-iters 30 --no-power --quiet --time-limit-s 60)  # about 20 s each
BIG=(--model llama2-7b --seq-len 4096 --micro-batch 2 --device cuda --precision bf16 --activation-checkpointing full
     --warmup-iters 10 --measured-iters 50 --quiet --time-limit-s 120)  # about 90 s each (a step ~1 s)

train() {  # NAME HARD_TIMEOUT ARGS...
  local name=$1 limit=$2; shift 2
  echo "== $name $* ($((SECONDS))s into the script)" | tee -a "$log"
  timeout "$limit" python3 -m scalestudy train --run-dir "$RAW/$name" "$@" >>"$log" 2>&1
  local rc=$?
  local st
  st=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['status'])" "$RAW/$name/status.json" 2>/dev/null \
       || echo none)
  echo "   exit $rc status $st" | tee -a "$log"
  [ "$st" = ok ]
}

nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee -a "$log"
python3 -c "import torch, megatron.core as m; print('torch', torch.__version__, torch.version.cuda, \
'megatron-core', m.__version__)" 2>&1 | tee -a "$log"

echo "== weight copy check" | tee -a "$log"
timeout 60 python3 benchmarks/megatron_agreement.py --model llama-1b --n-layers 4 --seq-len 1024 --micro-batch 2 \
  2>>"$log" | tee -a "$OUT/agreement.jsonl"

megatron_ok=1
train megatron-l4-bf16 75 "${SMALL[@]}" --precision bf16 --backend megatron || megatron_ok=0
train torch-l4-bf16 75 "${SMALL[@]}" --precision bf16 --backend torch
if [ $megatron_ok = 1 ]; then
  train megatron-7b-ac 135 "${BIG[@]}" --backend megatron
else
  echo "== megatron-7b-ac skipped: the small megatron run failed (see above)" | tee -a "$log"
fi
train torch-7b-ac 135 "${BIG[@]}" --backend torch
if [ $SECONDS -lt 330 ] && [ $megatron_ok = 1 ]; then
  train megatron-l4-fp32 75 "${SMALL[@]}" --precision fp32 --backend megatron
  train torch-l4-fp32 75 "${SMALL[@]}" --precision fp32 --backend torch
else
  echo "== fp32 loss-curve pair skipped ($SECONDS s used)" | tee -a "$log"
fi

cp "$OUT/agreement.jsonl" "$RAW/" 2>/dev/null
python3 benchmarks/megatron_summary.py "$RAW" > "$OUT/megatron-summary.json" 2>>"$log"
tar czf "$OUT/megatron-raw.tar.gz" -C "$OUT" megatron-raw && rm -rf "$RAW"
python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
for r in d['side_by_side']: print(json.dumps(r))
for k, v in d['loss_curves'].items(): print(k, json.dumps(v))
for w in d['weight_copy_check']: print(json.dumps(w))
" "$OUT/megatron-summary.json" | tee -a "$log"
echo "== done in $SECONDS s" | tee -a "$log"
ls -la "$OUT"
