#!/usr/bin/env bash
# GRPO launcher.
#   bash launch/run_grpo.sh                              CPU demo (tiny model: SFT, then GRPO)
#   MINDRL_BACKEND=mindspore bash launch/run_grpo.sh     the same demo on the MindSpore backend
#   bash launch/run_grpo.sh RECIPE [key=value ...]       a recipe; extra arguments are overrides
# With a recipe, the launcher follows distributed.launcher / nproc / nnodes:
#   torchrun (torch backend, GPU or CPU/gloo), msrun (MindSpore, Ascend or CPU), one process,
#   or ray (run from any node of a Ray cluster: msrun/torchrun is started on each of nnodes nodes).
# Multi-node by hand or by a scheduler: run this on every node with NNODES, NODE_RANK,
# MASTER_ADDR, MASTER_PORT set; msrun also takes MSRUN_JOIN (default True) and MSRUN_LOG_DIR.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash launch/setup_env.sh
VENV="$(cd "${MINDRL_VENV:-.venv}" && pwd)"
PY="$VENV/bin/python"
export PATH="$VENV/bin:$PATH"   # msrun starts plain `python` from PATH
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" GLOG_v="${GLOG_v:-3}" \
       VLLM_LOGGING_LEVEL="${VLLM_LOGGING_LEVEL:-ERROR}" TRANSFORMERS_VERBOSITY=error \
       HF_HUB_DISABLE_PROGRESS_BARS=1 TOKENIZERS_PARALLELISM=false RAY_AUTH_MODE=disabled

# the one line a user types next to get `mindrl` on their PATH
activate_hint() { echo "[run_grpo] to use the mindrl command in your shell: source $VENV/bin/activate" >&2; }

if [ $# -eq 0 ]; then
  rc=0; "$PY" -m mindrl demo --backend "${MINDRL_BACKEND:-torch}" || rc=$?
  activate_hint; exit $rc
fi

extra=()
[ -n "${MINDRL_BACKEND:-}" ] && extra+=("backend=${MINDRL_BACKEND}")
# `mindrl launch` resolves the recipe first (errors stop here, before any worker starts), then
# becomes torchrun / msrun / one process, or drives a launcher per node on Ray.
rc=0; "$PY" -m mindrl launch --run "${MINDRL_RUN:-train}" "$1" "${extra[@]}" "${@:2}" || rc=$?
activate_hint; exit $rc
