"""The memory plan (``mindrl plan``) against a measured training step on CPU.

Each case builds a randomly initialised Qwen2-architecture model of real width (Qwen2.5-0.5B's
config: hidden 896, 14 / 2 heads, intermediate 4864, vocabulary 151,936; fewer layers), then
runs, in a fresh process, the torch backend's own RL step on a synthetic full-length batch:
the old-log-prob pass and ``train_step`` (forward and backward of each micro-batch of the
step's rollouts, AdamW), twice, so the second step has the optimizer moments the run keeps. Measured: the process's peak resident memory during
the steps (VmHWM, reset after the model is built) minus its resident memory before the model
was built (Python, torch and transformers). Planned: ``mindrl.memory.plan`` for the same config
(the peak: held parts plus the largest working set).

The ``sft-*`` cases run the torch backend's SFT step instead (``sft_step``: two micro-batches of
full-length rows per optimizer step, or one for ``sft-fp32-one``, twice) against the plan of an SFT run at those lengths
(data.max_prompt_len + data.max_response_len): longer rows, where the activations are a
larger share of the peak than in the RL cases.

    python bench/memory_plan.py                      # the default cases (~15 min on 1 core)
    python bench/memory_plan.py --layers 2 --cases fp32,bf16
    python bench/memory_plan.py --cases sft-fp32
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# name: (dtype, gradient checkpointing, rows per micro-batch, prompt tokens, response tokens)
CASES = {
    "fp32": ("float32", False, 4, 64, 64),
    "fp32-recompute": ("float32", True, 4, 64, 64),
    "fp32-long": ("float32", False, 1, 32, 1024),
    # 1,000 tokens: MindSpore's portable attention still builds the (S, S) scores (rows past
    # 1,024 tokens attend in blocks of queries, as fp32-long's 1,056 do)
    "fp32-1k": ("float32", False, 1, 32, 968),
    "bf16-long": ("bfloat16", True, 1, 32, 1024),
    "bf16": ("bfloat16", False, 4, 64, 64),
    "bf16-recompute": ("bfloat16", True, 4, 64, 64),
    # 4 x 48 = 192 scored tokens; the torch chunked head keeps the logits for the backward up
    # to 441 tokens in float32, 883 in bf16 at V = 151,936 (the fused log-prob path): the 256
    # of fp32 / bf16 keep them too, the 1,024 of the long cases are recomputed
    "fp32-short": ("float32", False, 4, 64, 48),
    "bf16-short": ("bfloat16", False, 4, 64, 48),
    # SFT: rows per micro-batch; micro-batches per optimizer step in SFT below
    "sft-fp32": ("float32", False, 4, 32, 480),
    "sft-fp32-one": ("float32", False, 4, 32, 480),
}
SFT = {"sft-fp32": 2, "sft-fp32-one": 1}


def build_model(directory: Path, layers: int) -> None:
    """Qwen2.5-0.5B's width, ``layers`` decoder layers, random weights (float32 on disk) and
    the built-in tiny tokenizer (its ids are a subset of the vocabulary)."""
    import torch
    import transformers

    from mindrl.memory.shapes import KNOWN_MODELS
    from mindrl.models.tiny import TOKENIZER_FILES, resolve_model_path

    tiny = Path(resolve_model_path("builtin:tiny"))
    directory.mkdir(parents=True, exist_ok=True)
    for name in list(TOKENIZER_FILES) + ["generation_config.json"]:
        if (tiny / name).is_file():
            shutil.copy(tiny / name, directory / name)
    fields = {k: v for k, v in KNOWN_MODELS["Qwen2.5-0.5B"].items() if k != "model_type"}
    fields.update(num_hidden_layers=layers, use_sliding_window=False, torch_dtype="float32")
    config = transformers.Qwen2Config(**fields)
    torch.manual_seed(0)
    transformers.Qwen2ForCausalLM(config).save_pretrained(directory, safe_serialization=True)


def overrides(model_dir: Path, case: str, backend: str = "torch"):
    dtype, gc, rows, P, T = CASES[case]
    if case in SFT:
        return [f"backend={backend}", f"model.path={model_dir}", f"model.dtype={dtype}",
                f"model.gradient_checkpointing={str(gc).lower()}",
                f"train.prompts_per_step={SFT[case] * rows}", f"train.micro_batch_size={rows}",
                f"data.max_prompt_len={P}", f"data.max_response_len={T}", "train.threads=1",
                "plan.device_memory_gb=1000"]
    return [f"backend={backend}", f"model.path={model_dir}", f"model.dtype={dtype}",
            f"model.gradient_checkpointing={str(gc).lower()}", "rollout.n=2",
            f"train.prompts_per_step={rows // 2 or 1}", f"train.micro_batch_size={rows}",
            f"data.max_prompt_len={P}", f"rollout.max_new_tokens={T}", "algorithm.kl.coef=0",
            "train.threads=1", "plan.device_memory_gb=1000"]


def _rss(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(field)


def child(model_dir: str, case: str, backend_name: str = "torch") -> None:
    """One case in this process: prints a JSON line {measured, plan, parts}."""
    import dataclasses

    import numpy as np
    import torch  # noqa: F401  (imported before the baseline)
    import transformers  # noqa: F401

    from mindrl.backends.base import build_backend
    from mindrl.config.loader import load_config
    from mindrl.config.stages import Stage
    from mindrl.memory.plan import model_shape, plan_memory, plan_stages, setup_from_config
    from mindrl.types import LossNormalizers, TokenBatch, TrainBatch

    cfg = load_config(None, overrides(Path(model_dir), case, backend_name))
    if case in SFT:      # the worst row: the synthetic batch is at full length
        shape = model_shape(cfg)
        plan = plan_memory(shape, setup_from_config(cfg, "sft", shape))
    else:
        plan = plan_stages([Stage(1, "", "train", cfg, 1)])[0]
    if backend_name == "torch":
        import mindrl.backends.torch.optim as optim

        masters = hasattr(optim, "MasterWeights")     # float32 master weights in this checkout
    else:
        import mindspore  # noqa: F401  (imported before the baseline)

        import mindrl.backends.mindspore  # noqa: F401

        masters = plan.setup.master_weights
    if plan.setup.master_weights != masters:
        plan = plan_memory(plan.shape, dataclasses.replace(plan.setup, master_weights=masters),
                           plan.label)
    base = _rss("VmRSS")
    backend = build_backend(backend_name, cfg)
    _, _, rows, P, T = CASES[case]
    batch_rows = cfg.train.prompts_per_step * (1 if case in SFT else cfg.rollout.n)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 1000, size=(batch_rows, P + T)).astype(np.int64)
    tokens = TokenBatch(ids, np.ones_like(ids), np.ones((batch_rows, T), np.float32), P)
    norm = LossNormalizers(global_tokens=float(batch_rows * T), global_seqs=float(batch_rows),
                           max_len=T)
    Path("/proc/self/clear_refs").write_text("5")          # reset VmHWM: the steps only
    t0 = time.perf_counter()
    for _ in range(2 if case in SFT else 0):
        micro = [tokens.rows(np.arange(i, i + rows)) for i in range(0, batch_rows, rows)]
        backend.sft_step(micro, norm)
    for _ in range(0 if case in SFT else 2):
        old = backend.logprobs(tokens, temperature=1.0, micro_batch_size=rows)
        batch = TrainBatch(tokens, rng.standard_normal((batch_rows, T)).astype(np.float32), old)
        micro = [batch.rows(np.arange(i, i + rows)) for i in range(0, batch_rows, rows)]
        backend.train_step(micro, norm)      # gradient accumulation over the micro-batches
    seconds = time.perf_counter() - t0
    peak = _rss("VmHWM") - base
    # MindSpore: which step ran (fused, split after a failed compile, or the chunked head)
    mode = {"train_mode": getattr(backend, "train_mode", None),
            "fallback_reason": getattr(backend, "fallback_reason", None),
            "chunked": any("chunked" in k for k in getattr(backend, "_train_fns", {}))}
    print(json.dumps(dict(case=case, measured=peak, plan=plan.peak(), masters=masters,
                          seconds=seconds, params=plan.shape.params(), **mode,
                          parts={p.name: p.bytes for p in plan.counted()})))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--backend", default="torch", choices=["torch", "mindspore"],
                    help="mindspore: float32 cases only (no bf16 MatMul on CPU)")
    ap.add_argument("--child", nargs=3, metavar=("MODEL_DIR", "CASE", "BACKEND"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.child:
        child(*args.child)
        return 0
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {unknown}; known: {', '.join(CASES)}")
    tmp = Path(tempfile.mkdtemp(prefix="mindrl_memplan_"))
    try:
        build_model(tmp / "model", args.layers)
        rows = []
        for case in cases:
            out = subprocess.run([sys.executable, __file__, "--child", str(tmp / "model"), case,
                                  args.backend],
                                 capture_output=True, text=True, env={**os.environ,
                                                                      "PYTHONPATH": str(REPO)})
            if out.returncode:
                print(out.stderr[-3000:], file=sys.stderr)
                return 1
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"Qwen2.5-0.5B width, {args.layers} layers "
              f"({rows[0]['params'] / 1e6:.0f}M parameters), {args.backend} backend, CPU; "
              "float32 masters under bf16: " + ("yes" if rows[0]["masters"] else "no"))
        print("| case | dtype | recompute | rows x (prompt + response) | plan GB | measured GB "
              "| measured / plan | step s |")
        print("|---|---|---|---|---|---|---|---|")
        worst = 0.0
        for r in rows:
            dtype, gc, n, P, T = CASES[r["case"]]
            ratio = r["measured"] / r["plan"]
            worst = max(worst, abs(ratio - 1))
            mbs = SFT.get(r["case"], 0)
            shape = f"{n} x ({P} + {T})" + (f", {mbs} micro-batch{'es' if mbs > 1 else ''}"
                                             if mbs else "")
            print(f"| {r['case']} | {dtype} | {'yes' if gc else 'no'} | {shape} | "
                  f"{r['plan'] / 1e9:.2f} | {r['measured'] / 1e9:.2f} | {ratio:.2f} | "
                  f"{r['seconds'] / 2:.1f} |")
        print(f"\nlargest deviation: {worst:.1%}")
        for r in rows:
            print(r["case"] + ": " + ", ".join(f"{k} {v / 1e9:.2f}" for k, v in
                                                r["parts"].items()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
