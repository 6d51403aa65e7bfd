#!/usr/bin/env bash
# Install the peer frameworks that tests/integrations checks mindrl's plugins against, each into
# its own side directory tests/.peers/<name> (gitignored), never into the project venv:
# `pip install --target DIR --no-deps` of the package and of the few pure-python modules its
# imported code needs that the venv lacks. The tests append DIR to sys.path *after*
# site-packages, so the venv's torch / transformers / numpy / pyarrow always win.
# Idempotent: a directory whose marker matches this script is reused at once.
#   MINDRL_VENV=path   the venv whose pip to use (default .venv)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV="${MINDRL_VENV:-.venv}"
PEERS="tests/.peers"
want="$(sha256sum launch/install_peers_plugins.sh | cut -c1-16)"

install_peer() {  # name, then pip arguments
  local name="$1"; shift
  local dir="$PEERS/$name"
  if [ -f "$dir/.mindrl-peer" ] && [ "$(cat "$dir/.mindrl-peer")" = "$want" ]; then
    return 0
  fi
  echo "[install_peers_plugins] $name -> $dir" >&2
  rm -rf "$dir" "$dir.tmp"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --target "$dir.tmp" \
      --no-deps "$@" 2>&1 | grep -v "^WARNING: Location" >&2 || true
  "$VENV/bin/python" - "$dir.tmp" "$@" <<'PY'
import sys, pathlib
d = pathlib.Path(sys.argv[1])
names = [a.split("==")[0].replace("-", "_").lower() for a in sys.argv[2:] if not a.startswith("-")]
have = {p.name.split("-")[0].lower() for p in d.glob("*.dist-info")}
missing = [n for n in names if n not in have]
sys.exit(f"pip did not install {missing} into {d}" if missing else 0)
PY
  mv "$dir.tmp" "$dir"
  echo "$want" > "$dir/.mindrl-peer"
}

mkdir -p "$PEERS"
# verl 0.9.1: reward loading, reward managers, DataProto, compute_advantage. omegaconf 2.4 (its
# own ANTLR runtime; 2.3 clashes with the venv's antlr4 4.13); tensordict <= 0.10 as verl pins.
install_peer verl verl==0.9.1 tensordict==0.10.0 omegaconf==2.4.0 codetiming==1.4.0 \
    pyvers==0.2.3 orjson==3.13.0 torchdata==0.11.0 peft==0.21.2 accelerate==1.16.0 \
    datasets==5.2.0 pandas==3.1.1 xxhash==4.1.0 multiprocess==0.70.19 \
    python-dateutil==4.0.0 tzdata==2026.6
# OpenRLHF 0.11.2: only openrlhf.utils.agent (its remote reward client) is imported; the package
# needs deepspeed / flash-attn for training, not for that module. pylatexenc: openrlhf.utils.
install_peer openrlhf openrlhf==0.11.2 pylatexenc==2.10
# TRL 1.16: GRPOTrainer on the tiny model (as bench/trl_compare.py).
install_peer trl trl==1.16.0 accelerate==1.16.0 datasets==5.2.0 pandas==3.1.1 xxhash==4.1.0 \
    multiprocess==0.70.19 python-dateutil==4.0.0 tzdata==2026.6
