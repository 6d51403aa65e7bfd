"""The CPU demo behind ``bash launch/run_grpo.sh``: build the small offline model, SFT it on
generated 2-digit addition demonstrated by an imperfect teacher (who forgets the carries half
the time), then GRPO on the same task with a reward that checks the true sum, and compare
held-out accuracy (see yaml_configs/grpo_tiny_demo.yaml).

Both stages validate greedily on the same 256 held-out problems (generated from a seed and
excluded from training), so the two numbers in the final table are directly comparable.
``overrides`` go to the GRPO stage; those of the keys in :data:`SHARED_KEYS` (the seed) go to
both stages, so ``mindrl demo train.seed=1`` reruns the whole demo with another seed.

``task`` picks the recipes (:data:`TASKS`): ``addition`` (the default), the compact
Knights-and-Knaves (``kk``) and Countdown (``countdown``) demos of :mod:`rewards.demo_tasks`, or
``tool``: 3-digit multiplication with the Python tool (:mod:`rewards.tool_demo`), whose table
adds the held-out tool calls per sample.

Each variant has a folder of its own (:func:`demo_output_dir`): ``runs/demo`` for the default,
``runs/demo-mindspore``, ``runs/demo-kk``, ``runs/demo-seed1`` ... for the others, so a variant
never resumes (or refuses to resume) another's checkpoints. ``--output-dir`` or
``logging.output_dir=DIR`` picks the folder.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

log = logging.getLogger("mindrl.demo")

SHARED_KEYS = ("train.seed",)

# task -> (SFT recipe, GRPO recipe)
TASKS = {"addition": ("sft_tiny_demo", "grpo_tiny_demo"),
         "kk": ("sft_kk_demo", "grpo_kk_demo"),
         "countdown": ("sft_countdown_demo", "grpo_countdown_demo"),
         "tool": ("sft_tool_demo", "grpo_tool_demo")}


def demo_output_dir(backend: str = "torch", task: str = "addition",
                    overrides: Sequence[str] = (), output_dir: Optional[str] = None
                    ) -> Tuple[str, List[str]]:
    """``(folder, the other overrides)``: ``output_dir`` when given, else a
    ``logging.output_dir=`` override, else ``runs/demo`` followed by ``-TASK``, ``-BACKEND`` and
    one ``-KEYVALUE`` per override (the key's last part: ``train.seed=1`` -> ``seed1``) for
    whatever differs from the default demo.

    >>> demo_output_dir("mindspore", "addition", ["train.seed=1"])
    ('runs/demo-mindspore-seed1', ['train.seed=1'])
    >>> demo_output_dir(overrides=["logging.output_dir=/tmp/d", "train.lr=2e-5"])
    ('/tmp/d', ['train.lr=2e-5'])
    """
    rest, chosen = [], output_dir
    for o in overrides:
        key, _, value = o.partition("=")
        if key.strip() == "logging.output_dir":
            chosen = chosen or value.strip()
        else:
            rest.append(o)
    if chosen:
        return chosen, rest
    parts = [task] if task != "addition" else []
    parts += [backend] if backend != "torch" else []
    for o in rest:
        key, _, value = o.partition("=")
        parts.append(re.sub(r"[^A-Za-z0-9.+-]+", "", key.strip().split(".")[-1] + value.strip()))
    name = "-".join(["demo"] + [p for p in parts if p])
    if len(name) > 60:
        name = "demo-" + hashlib.sha1("-".join(parts).encode()).hexdigest()[:10]
    return f"runs/{name}", rest


def _final_val(run_dir: Path, step: int = -1, key: str = "val/accuracy") -> float:
    from mindrl.trainer.logger import read_metrics

    rows = [r for r in read_metrics(run_dir) if r.get(key) is not None]
    if not rows:
        raise RuntimeError(f"{run_dir}/metrics.jsonl has no validation rows with {key}")
    if step >= 0:
        rows = [r for r in rows if r["step"] == step]
    return float(rows[-1][key])


def run_demo(backend: str = "torch", output_dir: str = "runs/demo",
             overrides: Sequence[str] = (), sft_overrides: Sequence[str] = (),
             task: str = "addition") -> Dict[str, float]:
    from mindrl.config.loader import load_config
    from mindrl.trainer.checkpoint import latest_checkpoint
    from mindrl.trainer.rl import train
    from mindrl.trainer.sft import train_sft

    sft_recipe, rl_recipe = TASKS[task]
    out = Path(output_dir)
    t0 = time.perf_counter()
    common: List[str] = [f"backend={backend}"] + [o for o in overrides
                                                   if o.split("=", 1)[0].strip() in SHARED_KEYS]
    sft_cfg = load_config(sft_recipe, common + [f"logging.output_dir={out / 'sft'}"]
                          + list(sft_overrides))
    print(f"[demo] task {task}: {sft_recipe} then {rl_recipe}", flush=True)
    print(f"[demo] 1/2 SFT warm-up: {sft_cfg.train.steps} steps x {sft_cfg.train.prompts_per_step}"
          f" demonstrations of {sft_cfg.data.train_file} ({sft_cfg.model.path}, {backend} backend,"
          f" seed {sft_cfg.train.seed})", flush=True)
    train_sft(sft_cfg)
    sft_model = latest_checkpoint(out / "sft" / "checkpoints") / "model"
    t_sft = time.perf_counter() - t0

    rl_cfg = load_config(rl_recipe, [f"backend={backend}"] + [
        f"model.path={sft_model}", f"logging.output_dir={out / 'grpo'}",
        "validation.before_training=true"] + list(overrides))
    print(f"[demo] 2/2 GRPO: {rl_cfg.train.steps} steps x {rl_cfg.train.prompts_per_step} prompts"
          f" x {rl_cfg.rollout.n} samples", flush=True)
    train(rl_cfg)
    t_all = time.perf_counter() - t0
    sft_acc = _final_val(out / "grpo", step=0)
    rl_acc = _final_val(out / "grpo")
    n_val = rl_cfg.data.max_val_samples
    result = {"sft_accuracy": sft_acc, "rl_accuracy": rl_acc, "seconds": t_all,
              "sft_seconds": t_sft}
    if rl_cfg.tools.enabled:                  # held-out tool calls per sample, before / after
        key = "val/tools/calls_per_sample"
        result["sft_calls"] = _final_val(out / "grpo", step=0, key=key)
        result["rl_calls"] = _final_val(out / "grpo", key=key)
    print()
    print(f"| model (seed {rl_cfg.train.seed}) | held-out accuracy ({n_val} problems, greedy) "
          + ("| tool calls per sample " if rl_cfg.tools.enabled else "") + "| wall time |")
    print("|---|---|" + ("---|" if rl_cfg.tools.enabled else "") + "---|")
    for name, acc, key, secs in (("SFT warm-up", sft_acc, "sft_calls", t_sft),
                                 ("SFT + GRPO ", rl_acc, "rl_calls", t_all - t_sft)):
        calls = f" {result[key]:.2f} |" if key in result else ""
        print(f"| {name} | {100 * acc:.1f}% |{calls} {secs:.0f} s |")
    print(f"\nGRPO gain: {100 * (rl_acc - sft_acc):+.1f} points; total {t_all:.0f} s; curves: "
          f"{out / 'grpo' / 'curves.png'}")
    return result
