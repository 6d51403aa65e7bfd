#!/usr/bin/env bash
# GRPO launcher.
#   bash launch/run_grpo.sh                              CPU demo (tiny model: SFT, then GRPO)
#   MINDRL_BACKEND=mindspore bash launch/run_grpo.sh     the same demo on the MindSpore backend
#   bash launch/run_grpo.sh RECIPE [key=value ...]       a recipe; extra arguments are overrides
# With a recipe, the launcher follows distributed.launcher / distributed.nproc:
#   torchrun (torch backend, GPU or CPU/gloo), msrun (MindSpore, Ascend or CPU), or one process.
# Multi-node: NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT from the environment override the
# recipe; msrun also takes MSRUN_JOIN (default True) and MSRUN_LOG_DIR.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash launch/setup_env.sh
PY="$PWD/.venv/bin/python"
export PATH="$PWD/.venv/bin:$PATH"   # msrun starts plain `python` from PATH
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" GLOG_v="${GLOG_v:-3}" \
       VLLM_LOGGING_LEVEL="${VLLM_LOGGING_LEVEL:-ERROR}" TRANSFORMERS_VERBOSITY=error \
       HF_HUB_DISABLE_PROGRESS_BARS=1 TOKENIZERS_PARALLELISM=false RAY_AUTH_MODE=disabled

if [ $# -eq 0 ]; then
  exec "$PY" -m mindrl demo --backend "${MINDRL_BACKEND:-torch}"
fi

recipe="$1"; shift
extra=()
[ -n "${MINDRL_BACKEND:-}" ] && extra+=("backend=${MINDRL_BACKEND}")
# Resolve the recipe once: errors in it stop here, before any worker starts.
read -r backend launcher nproc nnodes addr port < <("$PY" - "$recipe" "${extra[@]}" "$@" <<'PYEOF'
import sys
from mindrl.config.loader import load_config
from mindrl.config.schema import ConfigError
try:
    c = load_config(sys.argv[1], sys.argv[2:])
except ConfigError as e:
    print(f"mindrl: configuration error: {e}", file=sys.stderr); sys.exit(2)
d = c.distributed
print(c.backend, d.launcher, d.nproc, d.nnodes, d.master_addr, d.master_port)
PYEOF
)
nnodes="${NNODES:-$nnodes}"; node_rank="${NODE_RANK:-0}"
addr="${MASTER_ADDR:-$addr}"; port="${MASTER_PORT:-$port}"
if [ "$launcher" = "none" ]; then
  [ "$backend" = "mindspore" ] && launcher=msrun || launcher=torchrun
  [ "$nproc" = "1" ] && [ "$nnodes" = "1" ] && launcher=single
fi
case "$launcher" in
  single)
    exec "$PY" -m mindrl train "$recipe" "${extra[@]}" "$@" ;;
  torchrun)
    exec "$PWD/.venv/bin/torchrun" --nproc_per_node "$nproc" --nnodes "$nnodes" \
      --node_rank "$node_rank" --master_addr "$addr" --master_port "$port" \
      -m mindrl train "$recipe" "${extra[@]}" "$@" ;;
  msrun)
    exec msrun --worker_num "$((nproc * nnodes))" --local_worker_num "$nproc" \
      --master_addr "$addr" --master_port "$port" --node_rank "$node_rank" \
      --log_dir "${MSRUN_LOG_DIR:-runs/msrun_logs}" --join "${MSRUN_JOIN:-True}" \
      launch/train_entry.py train "$recipe" "${extra[@]}" "$@" ;;
  *) echo "unknown distributed.launcher '$launcher'" >&2; exit 2 ;;
esac
