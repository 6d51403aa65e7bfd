"""MindSpore compiled train step vs torch eager step on the same tiny model and batch, plus the
native MindSpore sampler vs transformers ``generate``.

    python bench/backends.py [--batch 8] [--prompt 32] [--response 32] [--steps 10]

Prints a table: median step ms of each backend and their ratio, the MindSpore train-step mode
("fused": rl_loss inside the graph; "split": the fallback when rl_loss does not compile), its
compile count and compile seconds, and sampler tokens/s. Run with one thread per process
(OMP_NUM_THREADS=1) on an otherwise idle machine for stable numbers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("GLOG_v", "3")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np  # noqa: E402


def make_batch(rng, B, P, T, vocab):
    from mindrl.types import TrainBatch, pad_token_batch

    prompts = [list(rng.integers(10, vocab, int(rng.integers(P // 2, P + 1)))) for _ in range(B)]
    resps = [list(rng.integers(10, vocab, int(rng.integers(T // 2, T + 1)))) for _ in range(B)]
    tb = pad_token_batch(prompts, resps, 0, P, T)
    adv = (rng.normal(size=tb.response_mask.shape) * tb.response_mask).astype(np.float32)
    return TrainBatch(tb, adv, None, None, None)


def timed(fn, steps):
    out = []
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--response", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--new-tokens", type=int, default=32)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from mindrl.backends.base import build_backend
    from mindrl.config.loader import load_config
    from mindrl.models.tiny import build_tiny_model
    from mindrl.types import LossNormalizers, SamplingParams

    directory = build_tiny_model(tempfile.mkdtemp(prefix="mindrl_bench_"))
    over = [f"train.micro_batch_size={args.batch}", "train.lr=1e-4",
            f"rollout.max_new_tokens={max(args.response, args.new_tokens)}",
            f"data.max_prompt_len={args.prompt}", f"model.path={directory}"]
    rng = np.random.default_rng(0)
    vocab = 1000
    batch = make_batch(rng, args.batch, args.prompt, args.response, vocab)
    norm = LossNormalizers(float(batch.tokens.response_mask.sum()), float(args.batch),
                           float(args.response))
    rows = []

    tb = build_backend("torch", load_config(None, over + ["backend=torch"]))
    tb.train_step([batch], norm)                                   # warm-up
    torch_ms = timed(lambda: tb.train_step([batch], norm), args.steps)

    t0 = time.perf_counter()
    mb = build_backend("mindspore", load_config(None, over + ["backend=mindspore"]),
                       prompt_buckets=[args.prompt], response_buckets=[args.response])
    mb.train_step([batch], norm)                                   # compiles
    first = time.perf_counter() - t0
    ms_ms = timed(lambda: mb.train_step([batch], norm), args.steps)
    rows.append(("train step (ms, median)", f"{torch_ms:.1f}", f"{ms_ms:.1f}",
                 f"MindSpore/torch = {ms_ms / torch_ms:.2f}x"))
    rows.append(("MindSpore step mode", "-", mb.train_mode,
                 mb.fallback_reason[:60] if mb.fallback_reason else ""))
    rows.append(("compiles / compile s", "-",
                 f"{mb.compile_count} / {mb.compile_seconds.get('train_step', 0):.1f}",
                 f"first step incl. init {first:.1f} s"))

    prompts = [list(rng.integers(10, vocab, 12)) for _ in range(8)]
    sp = SamplingParams(n=4, temperature=1.0, max_new_tokens=args.new_tokens, seed=0)
    eng = mb.native_engine()
    eng.generate(prompts, sp)                                      # compiles
    tok = []
    for _ in range(3):
        eng.generate(prompts, sp)
        tok.append(eng.last_stats["tokens_per_s"])
    hf = tb.model.eval()
    ids = torch.tensor([p for p in prompts for _ in range(4)])
    with torch.no_grad():
        hf.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True,
                    max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens)
        t0 = time.perf_counter()
        for _ in range(3):
            hf.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True,
                        max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens)
        hf_tps = 3 * ids.shape[0] * args.new_tokens / (time.perf_counter() - t0)
    rows.append(("sampler tokens/s (32x%d)" % args.new_tokens, f"{hf_tps:.0f}",
                 f"{statistics.median(tok):.0f}", "transformers generate vs native MindSpore"))

    print(f"\ntiny Qwen2 (hidden 64, 2 layers), batch {args.batch} x ({args.prompt}+"
          f"{args.response}) tokens, 1 thread")
    print(f"| {'metric':28s} | {'torch':>8s} | {'MindSpore':>10s} | note")
    print(f"|{'-' * 30}|{'-' * 10}|{'-' * 12}|------")
    for name, a, b, note in rows:
        print(f"| {name:28s} | {a:>8s} | {b:>10s} | {note}")


if __name__ == "__main__":
    main()
