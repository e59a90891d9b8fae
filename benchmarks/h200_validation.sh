#!/usr/bin/env bash
# The measurement issue's validation on one H200 (or any one GPU), in two parts that each fit
# a 10-minute device call:
#   bash benchmarks/h200_validation.sh A    harness (instrumented and bare) vs plain loop, 7B with AC
#   bash benchmarks/h200_validation.sh B    7B without AC, and a 16-layer 7B slice without AC
#   bash benchmarks/h200_validation.sh C    the same with torch.compile of each block
# Raw logs go to $OUT/raw-<part>.tar.gz, plain-loop results to $OUT/plain-<part>.jsonl, the console
# to $OUT/log-<part>.txt. `python benchmarks/h200_summary.py DIR` turns them into the numbers.
set -uo pipefail
part=${1:?part A or B}
OUT=${OUT:-h200-out}
RAW=$OUT/raw-$part
mkdir -p "$RAW"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
COMMON=(--model llama2-7b --seq-len 4096 --micro-batch 2 --device cuda --precision bf16 --procs-per-node 1
        --warmup-iters 10 --measured-iters 50 --quiet)
log=$OUT/log-$part.txt

train() {  # NAME ARGS...
  local name=$1; shift
  echo "== $name $*" | tee -a "$log"
  timeout 240 python3 -m scalestudy train "${COMMON[@]}" --run-dir "$RAW/$name" "$@" >>"$log" 2>&1
  echo "   exit $? status $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['status'])" "$RAW/$name/status.json" 2>&1)" | tee -a "$log"
}
plain() {  # NAME ARGS...
  local name=$1; shift
  echo "== plain $name $*" | tee -a "$log"
  timeout 240 python3 benchmarks/plain_loop.py --model llama2-7b --seq-len 4096 --micro-batch 2 "$@" \
    2>>"$log" | sed "s/^{/{\"name\": \"$name\", /" | tee -a "$OUT/plain-$part.jsonl"
}

nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee -a "$log"
python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)" | tee -a "$log"
case $part in
  A)
    train fsdp-ac-instrumented --activation-checkpointing full --profile-iters 3 --profile-start 20
    train fsdp-ac-bare --activation-checkpointing full --no-power
    plain plain-ac --ac
    ;;
  B)
    train fsdp-noac --profile-iters 3 --profile-start 20
    train fsdp-l16-noac --n-layers 16
    plain plain-l16-noac --n-layers 16
    plain plain-noac
    ;;
  C)
    train fsdp-l16-noac-compile --n-layers 16 --compile
    plain plain-l16-noac-compile --n-layers 16 --compile
    train fsdp-ac-compile --activation-checkpointing full --compile
    ;;
esac
tar czf "$OUT/raw-$part.tar.gz" -C "$OUT" "raw-$part" && rm -rf "$RAW"
ls -la "$OUT"
