#!/usr/bin/env bash
# One borrowed-GPU command, prepared here: the MNTP step's MFU side by side (benchmarks/mntp_gpu_step.py), then the
# notebooks on CUDA in bf16 and on the fp16 path, then the training steps at the gpu sizes (scripts/gpu_run.py).
# Everything it writes lands in $OUT (or runs/gpu_session): env.log, mfu.log, mfu.json, gpu_run.log and gpu_run/.
#
#   bash scripts/gpu_session.sh              # SECONDS_ALLOWED (default 560) bounds the whole command
# carry: .whl (docs/gpu.md lists the wheels) and runs/gpu_pack (`python scripts/gpu_run.py --pack`)
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/gpu_session}
mkdir -p "$OUT"
ALLOWED=${SECONDS_ALLOWED:-560}
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
left() { echo $((ALLOWED - SECONDS)); }

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$OUT/env.log"
if compgen -G ".whl/*.whl" >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | tail -3
  export PYTHONPATH="$PYTHONPATH:/tmp/site"  # the machine's own packages first; the wheels fill what it lacks
fi
versions='import torch, transformers, peft, accelerate; print("torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__, "accelerate", accelerate.__version__, "cuda", torch.cuda.is_available())'
$PY -c "$versions" 2>&1 | tee -a "$OUT/env.log"
$PY -c 'import nbclient, ipykernel, ipywidgets, diffusers, seqeval, rouge_score, rdata; print("notebook packages: ok")' \
  2>&1 | tail -1 | tee -a "$OUT/env.log"
echo "[session] $(left) s left after the packages" | tee -a "$OUT/env.log"

timeout $(( $(left) < 210 ? $(left) - 120 : 210 )) $PY benchmarks/mntp_gpu_step.py --json "$OUT/mfu.json" 2>&1 \
  | grep -v '^USDT' | tee "$OUT/mfu.log"
echo "[session] mfu exit $? ; $(left) s left" | tee -a "$OUT/env.log"

budget=$(( $(left) - 25 ))
timeout $(( budget + 15 )) $PY scripts/gpu_run.py --out "$OUT/gpu_run" --budget "$budget" --notebook-timeout 90 \
  --fp16-notebooks 02 03 04 07 --step-timeout 60 2>&1 | tee "$OUT/gpu_run.log"
echo "[session] gpu_run exit $? ; $(left) s left" | tee -a "$OUT/env.log"
