#!/usr/bin/env bash
# The GPU benchmarks of docs/benchmarks.md in one go, on random weights of the real shapes (nothing to download):
#   attention under the MAGNET hybrid mask (flex vs causal sdpa), a LoRA-MNTP step's tokens/s and MFU at 1B shape,
#   the measured CUDA peak of notebook 02's training step against helpers.memory's estimate, MAGNET's joint step,
#   and mask-predict against autoregressive decoding.
# Each benchmark has its own time limit; its full output goes to $LOGS/<name>.log, the last lines to the terminal.
#
#   bash benchmarks/gpu_checks.sh            # LOGS defaults to runs/gpu_checks
#   CHECKS='attention mntp_step' bash benchmarks/gpu_checks.sh   # a subset
# If the installed transformers/peft cannot run the helpers, wheels in .whl/ (if any) are installed to /tmp/site.
set -u
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
LOGS=${LOGS:-${OUT:-runs/gpu_checks}}
mkdir -p "$LOGS"
PY=${PYTHON:-python3}

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$LOGS/env.log"
versions='import torch, transformers, peft, accelerate; print("torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__, "accelerate", accelerate.__version__, "cuda", torch.cuda.is_available())'
$PY -c "$versions" 2>&1 | tee -a "$LOGS/env.log"
if ! timeout 60 $PY benchmarks/mntp_gpu_step.py --tiny --steps 1 >>"$LOGS/env.log" 2>&1; then
  echo "the helpers do not run on the installed packages (tail of env.log below); trying the wheels in .whl/"
  tail -n 5 "$LOGS/env.log"
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="/tmp/site:$PYTHONPATH"
  $PY -c "$versions" 2>&1 | tee -a "$LOGS/env.log"
fi

CHECKS=${CHECKS:-attention attention_llama mntp_step memory magnet_step mask_predict}
run() {  # name, seconds, command...
  local name=$1 limit=$2
  shift 2
  [[ " $CHECKS " == *" $name "* ]] || return 0
  echo "=== $name: $*"
  local start=$SECONDS
  timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1
  local status=$?
  tail -n "${TAIL:-14}" "$LOGS/$name.log"
  echo "--- $name: exit $status after $((SECONDS - start)) s"
}

run attention 80 $PY benchmarks/attention_masks.py --device cuda --batch 8 --calls 20 --repeats 9
run attention_llama 70 $PY benchmarks/attention_masks.py --device cuda --llama --batch 4 --calls 20 --repeats 9 \
  --lengths 1024 2048 4096
run mntp_step 45 $PY benchmarks/mntp_gpu_step.py --steps 10
run memory 90 $PY benchmarks/gpu_memory.py
run magnet_step 60 $PY benchmarks/magnet_joint_step.py
run mask_predict 90 $PY benchmarks/mask_predict_speed.py --weights random --device cuda --lengths 128 256 \
  --iterations 1 4 10 --seeds 3
