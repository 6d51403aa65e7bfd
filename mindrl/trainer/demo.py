"""The CPU demo behind ``bash launch/run_grpo.sh``: build the tiny model, SFT it briefly on
generated 3-digit addition, then GRPO on the same task, and compare held-out accuracy.

Both stages validate greedily on the same 256 held-out problems (generated from a seed and
excluded from training), so the two numbers in the final table are directly comparable.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Dict, List, Sequence

log = logging.getLogger("mindrl.demo")


def _final_val(run_dir: Path, step: int = -1) -> float:
    from mindrl.trainer.logger import read_metrics

    rows = [r for r in read_metrics(run_dir) if r.get("val/accuracy") is not None]
    if not rows:
        raise RuntimeError(f"{run_dir}/metrics.jsonl has no validation rows")
    if step >= 0:
        rows = [r for r in rows if r["step"] == step]
    return float(rows[-1]["val/accuracy"])


def run_demo(backend: str = "torch", output_dir: str = "runs/demo",
             overrides: Sequence[str] = (), sft_overrides: Sequence[str] = ()) -> Dict[str, float]:
    from mindrl.config.loader import load_config
    from mindrl.trainer.checkpoint import latest_checkpoint
    from mindrl.trainer.rl import train
    from mindrl.trainer.sft import train_sft

    out = Path(output_dir)
    t0 = time.perf_counter()
    common: List[str] = [f"backend={backend}"]
    sft_cfg = load_config("sft_tiny_demo", common + [f"logging.output_dir={out / 'sft'}"]
                          + list(sft_overrides))
    print(f"[demo] 1/2 SFT warm-up: {sft_cfg.train.steps} steps on generated addition "
          f"({backend} backend)", flush=True)
    train_sft(sft_cfg)
    sft_model = latest_checkpoint(out / "sft" / "checkpoints") / "model"
    t_sft = time.perf_counter() - t0

    rl_cfg = load_config("grpo_tiny_demo", common + [
        f"model.path={sft_model}", f"logging.output_dir={out / 'grpo'}",
        "validation.before_training=true"] + list(overrides))
    print(f"[demo] 2/2 GRPO: {rl_cfg.train.steps} steps x {rl_cfg.train.prompts_per_step} prompts"
          f" x {rl_cfg.rollout.n} samples", flush=True)
    train(rl_cfg)
    t_all = time.perf_counter() - t0
    sft_acc = _final_val(out / "grpo", step=0)
    rl_acc = _final_val(out / "grpo")
    n_val = rl_cfg.data.max_val_samples
    print()
    print(f"| model | held-out accuracy ({n_val} problems, greedy) |")
    print("|---|---|")
    print(f"| SFT warm-up | {100 * sft_acc:.1f}% |")
    print(f"| SFT + GRPO  | {100 * rl_acc:.1f}% |")
    print(f"\nGRPO gain: {100 * (rl_acc - sft_acc):+.1f} points; SFT {t_sft:.0f} s, total "
          f"{t_all:.0f} s; curves: {out / 'grpo' / 'curves.png'}")
    return {"sft_accuracy": sft_acc, "rl_accuracy": rl_acc, "seconds": t_all}
