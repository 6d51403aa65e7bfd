#!/usr/bin/env bash
# Installs the independent implementations the tests compare mindrl against (NOT mindrl
# dependencies): verl (parity of losses, corrections, estimators), OpenRLHF and TRL (plugins),
# each into tests/.peers/<name>, outside the project venv, so their pins never touch it.
# Idempotent: returns at once when present (launch/install_peers_plugins.sh does the work).
#   bash launch/install_test_peers.sh            (PYTHON=/path/to/venv/bin/python to choose the venv)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
VENV_DIR="$(dirname "$(dirname "$PY")")"
[ -x "$VENV_DIR/bin/python" ] || VENV_DIR="$ROOT/.venv"
MINDRL_VENV="$VENV_DIR" bash "$ROOT/launch/install_peers_plugins.sh"
