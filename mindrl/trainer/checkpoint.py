"""Atomic checkpoints: written to a temporary directory, then renamed.

Layout of ``RUN_DIR/checkpoints/step_000012/``::

    model/            Hugging Face weights + config + tokenizer (transformers and vLLM load it),
                      and mindrl_meta.json (chat template, base model, step)
    state/            optimizer, scheduler and framework RNG state (backend-specific files)
    trainer.json      step, data position, NumPy / Python RNG states
    COMPLETE          written last; a directory without it is ignored (and cleaned up)
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Dict, List, Optional

COMPLETE = "COMPLETE"


def step_dir(root: Path, step: int) -> Path:
    return Path(root) / f"step_{step:06d}"


def list_checkpoints(root: Path) -> List[Path]:
    """Complete checkpoints, oldest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [p for p in root.glob("step_*") if p.is_dir() and (p / COMPLETE).is_file()]
    return sorted(found, key=lambda p: int(p.name.split("_")[1]))


def latest_checkpoint(root: Path) -> Optional[Path]:
    found = list_checkpoints(root)
    return found[-1] if found else None


def save_checkpoint(root: Path, step: int, backend: Any, trainer_state: Dict, keep_last: int,
                    is_main: bool = True, meta: Optional[Dict] = None) -> Path:
    """Write a checkpoint atomically (rank 0 writes; other ranks return at once)."""
    final = step_dir(root, step)
    if not is_main:
        return final
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp_{final.name}_{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    backend.save_pretrained(str(tmp / "model"))
    if meta:  # read by `mindrl eval` (the chat template the model was trained with)
        (tmp / "model" / "mindrl_meta.json").write_text(json.dumps(meta, indent=1))
    backend.save_state(str(tmp / "state"))
    (tmp / "trainer.json").write_text(json.dumps(trainer_state))
    (tmp / COMPLETE).write_text(str(step))
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    for old in list_checkpoints(root)[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    for stale in root.glob(".tmp_step_*"):  # left by a crash mid-write
        shutil.rmtree(stale, ignore_errors=True)
    return final


def read_trainer_state(ckpt: Path) -> Dict:
    return json.loads((Path(ckpt) / "trainer.json").read_text())
