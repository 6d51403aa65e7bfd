#!/usr/bin/env bash
# DPO launcher: bash launch/run_dpo.sh RECIPE [key=value ...]
# The same launch as run_grpo.sh (one process, torchrun, msrun, or Ray across nodes, per the
# recipe's distributed.* settings); each worker runs `mindrl dpo`.
set -euo pipefail
if [ $# -eq 0 ]; then
  echo "usage: bash launch/run_dpo.sh RECIPE [key=value ...]" >&2; exit 2
fi
MINDRL_RUN=dpo exec bash "$(dirname "${BASH_SOURCE[0]}")/run_grpo.sh" "$@"
