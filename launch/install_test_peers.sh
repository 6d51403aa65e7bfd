#!/usr/bin/env bash
# Installs the independent implementations that tests compare mindrl against (NOT mindrl
# dependencies) into tests/.verl_pkgs, outside the project venv, so their pins (verl wants its
# own transformers etc.) never touch it: only the modules verl.trainer.ppo.core_algos and
# rollout_corr_helper import, with --no-deps. Idempotent: returns at once when present.
#   bash launch/install_test_peers.sh            (PYTHON=/path/to/python to choose the pip)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"; else PY=python3; fi
fi
DEST="$ROOT/tests/.verl_pkgs"
PINS="verl==0.9.1 tensordict==0.15.3 pyvers==0.2.3 omegaconf==2.4.0 codetiming==1.4.0 orjson==3.13.0"
STAMP="$DEST/.installed-$(echo "$PINS" | tr ' =' '_-')"
if [ ! -f "$STAMP" ]; then
  rm -rf "$DEST"
  # shellcheck disable=SC2086
  "$PY" -m pip install --quiet --disable-pip-version-check --no-deps --target "$DEST" $PINS
  touch "$STAMP"
  echo "test peers installed in $DEST"
fi
# The frameworks the plugins are tested inside (verl, OpenRLHF, TRL): tests/.peers/<name>.
VENV_DIR="$(dirname "$(dirname "$PY")")"
[ -x "$VENV_DIR/bin/python" ] || VENV_DIR="$ROOT/.venv"
MINDRL_VENV="$VENV_DIR" bash "$ROOT/launch/install_peers_plugins.sh"
