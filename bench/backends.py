"""MindSpore compiled train step vs torch eager step on the same model and batch, the native
MindSpore sampler vs the torch native engine, and (optionally) a whole RL step through the
trainer with each backend.

    python bench/backends.py [--sizes tiny,small] [--batch 8] [--prompt 32] [--response 32]
                             [--warmup 30] [--steps 15] [--new-tokens 32] [--rl-steps 6]

``--sizes`` takes any built-in model: ``tiny,small`` (Qwen2) and the other families at the tiny
size, ``tiny-qwen3,tiny-llama,tiny-qwen3-moe``. Per model it prints a table: median step ms of each backend and their ratio (the two
backends' steps are interleaved, so both see the same machine load), the MindSpore train-step
mode ("fused": rl_loss and the AdamW update inside one graph; "split": the fallback when rl_loss
does not compile), its compile count and compile seconds, and sampler tokens/s. The load
average is printed before and after each measurement: on a shared machine, compare ratios
measured in the same run, not absolute milliseconds across runs.

Warm-up: MindSpore's CPU kernels tune their parallel split over their first ~30 executions
(``ParallelLaunchAutoSearch``), so step times settle only after ~30 steps; ``--warmup`` runs that
many steps of each backend before timing (the compile is the first of them).

Run with one thread per process (the default here: OMP_NUM_THREADS=1, train.threads=1).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("GLOG_v", "3")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

# bench/ holds a rewards.py that would shadow the repository's ``rewards`` package
_BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [os.path.dirname(_BENCH)] + [p for p in sys.path if os.path.abspath(p or ".") != _BENCH]

import numpy as np  # noqa: E402

from bench.harness import interleaved  # noqa: E402  (the timing harness every bench shares)

SIZES = {"tiny": "hidden 64, 2 layers", "mini": "hidden 128, 4 layers",
         "small": "hidden 256, 4 layers"}


def load() -> str:
    return "%.2f" % os.getloadavg()[0]


def make_batch(rng, B, P, T, vocab):
    from mindrl.types import TrainBatch, pad_token_batch

    prompts = [list(rng.integers(10, vocab, int(rng.integers(P // 2, P + 1)))) for _ in range(B)]
    resps = [list(rng.integers(10, vocab, int(rng.integers(T // 2, T + 1)))) for _ in range(B)]
    tb = pad_token_batch(prompts, resps, 0, P, T)
    adv = (rng.normal(size=tb.response_mask.shape) * tb.response_mask).astype(np.float32)
    return TrainBatch(tb, adv, None, None, None)


def bench_size(size: str, args, rows_out):
    import torch

    from mindrl.backends.base import build_backend
    from mindrl.config.loader import load_config
    from mindrl.models.tiny import resolve_model_path
    from mindrl.types import LossNormalizers, SamplingParams

    directory = resolve_model_path(f"builtin:{size}")
    over = [f"train.micro_batch_size={args.batch}", "train.lr=1e-4", "train.threads=1",
            f"rollout.max_new_tokens={max(args.response, args.new_tokens)}",
            f"data.max_prompt_len={args.prompt}", f"model.path={directory}"]
    rng = np.random.default_rng(0)
    vocab = 1000
    batch = make_batch(rng, args.batch, args.prompt, args.response, vocab)
    norm = LossNormalizers(float(batch.tokens.response_mask.sum()), float(args.batch),
                           float(args.response))
    rows = []
    load0 = load()

    tb = build_backend("torch", load_config(None, over + ["backend=torch"]))
    t0 = time.perf_counter()
    mb = build_backend("mindspore", load_config(None, over + ["backend=mindspore"]),
                       prompt_buckets=[args.prompt], response_buckets=[args.response])
    mb.train_step([batch], norm)                                   # compiles
    first = time.perf_counter() - t0
    for _ in range(args.warmup):
        tb.train_step([batch], norm)
        mb.train_step([batch], norm)
    torch_ms, ms_ms = interleaved(lambda: tb.train_step([batch], norm),
                                  lambda: mb.train_step([batch], norm), args.steps)
    rows.append(("train step (ms, median)", f"{torch_ms:.1f}", f"{ms_ms:.1f}",
                 f"MindSpore/torch = {ms_ms / torch_ms:.2f}x"))
    rows.append(("MindSpore step mode", "-", mb.train_mode,
                 mb.fallback_reason[:60] if mb.fallback_reason else "fwd+bwd+AdamW, one graph"))
    rows.append(("compiles / compile s", "-",
                 f"{mb.compile_count} / {mb.compile_seconds.get('train_step', 0):.1f}",
                 f"first step incl. init {first:.1f} s"))
    load1 = load()

    prompts = [list(rng.integers(10, vocab, 12)) for _ in range(8)]
    sp = SamplingParams(n=4, temperature=1.0, max_new_tokens=args.new_tokens, seed=0)
    eng = mb.native_engine()
    for _ in range(3):
        eng.generate(prompts, sp)                                  # compiles, warms up
    hf = tb.model.eval()
    ids = torch.tensor([p for p in prompts for _ in range(4)])
    kw = dict(attention_mask=torch.ones_like(ids), do_sample=True, top_k=None, top_p=None,
              max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens)
    ms_tps, hf_tps = [], []
    with torch.no_grad():
        hf.generate(ids, **kw)
        for _ in range(5):                                         # interleaved as well
            eng.generate(prompts, sp)
            ms_tps.append(eng.last_stats["tokens_per_s"])
            t0 = time.perf_counter()
            hf.generate(ids, **kw)
            hf_tps.append(ids.shape[0] * args.new_tokens / (time.perf_counter() - t0))
    hf.train()
    rows.append((f"sampler tokens/s (32x{args.new_tokens})", f"{statistics.median(hf_tps):.0f}",
                 f"{statistics.median(ms_tps):.0f}",
                 f"torch native engine vs native MindSpore "
                 f"({statistics.median(ms_tps) / statistics.median(hf_tps):.2f}x)"))
    rows.append(("sampler compiles", "-",
                 "/".join(str(v) for v in eng.compile_counts.values()), "prefill/decode"))

    family = mb.spec.model_type + (f", {mb.spec.num_experts} experts top "
                                   f"{mb.spec.num_experts_per_tok}" if mb.spec.num_experts else "")
    shape = SIZES.get(size, SIZES.get(size.split("-")[0], "?"))
    print(f"\n{size} {family} ({shape}), batch {args.batch} x ({args.prompt}+"
          f"{args.response}) tokens, 1 thread; load avg {load0} -> {load1} -> {load()}; "
          f"{args.warmup} warm-up + median of {args.steps} interleaved steps")
    print(f"| {'metric':28s} | {'torch':>8s} | {'MindSpore':>10s} | note")
    print(f"|{'-' * 30}|{'-' * 10}|{'-' * 12}|------")
    for name, a, b, note in rows:
        print(f"| {name:28s} | {a:>8s} | {b:>10s} | {note}")
    rows_out[size] = rows


def bench_rl(args, size: str = "tiny"):
    """One RL step (rollout with the backend's native engine, old log-probs, update) through
    RLTrainer with each backend on the same config (``builtin:<size>``); median per-phase
    seconds."""
    from mindrl.config.loader import load_config
    from mindrl.trainer.rl import RLTrainer

    base = [f"model.path=builtin:{size}", "model.chat_template=none",
            "data.train_file=arithmetic:digits=2,ops=+", "data.max_val_samples=16",
            "rollout.n=8", "rollout.max_new_tokens=8", "train.prompts_per_step=16",
            "train.micro_batch_size=128", "train.lr=1e-4", "train.threads=1",
            "reward.num_workers=0", "reward.functions=[{name: arithmetic}]",
            "logging.tensorboard=false", "logging.progress_bar=false", "logging.plot=false",
            "checkpoint.save_final=false", "rollout.engine=native",
            f"train.steps={args.rl_steps + 2}"]
    keys = ("time/step", "time/rollout", "time/old_logprobs", "time/update")
    trainers, out = {}, {}
    for backend in ("torch", "mindspore"):
        cfg = load_config(None, base + [f"backend={backend}",
                                        f"logging.output_dir={tempfile.mkdtemp()}"])
        trainers[backend] = RLTrainer(cfg)
        for _ in range(2):
            trainers[backend].run_step()                           # compiles, warms up
        out[backend] = {k: [] for k in keys}
    load0 = load()
    for _ in range(args.rl_steps):                                 # interleaved
        for backend, tr in trainers.items():
            m = tr.run_step()
            for k in keys:
                out[backend][k].append(m.get(k, 0.0) * 1e3)
    print(f"\nRL step via RLTrainer.run_step (builtin:{size}, 16 prompts x 8 samples x <=8 tokens, "
          f"native engine; load avg {load0} -> {load()}; median of {args.rl_steps} steps "
          f"after 2 warm-up)")
    print(f"| {'phase (ms, median)':28s} | {'torch':>8s} | {'MindSpore':>10s} | ratio")
    print(f"|{'-' * 30}|{'-' * 10}|{'-' * 12}|------")
    for k in keys:
        a, b = statistics.median(out["torch"][k]), statistics.median(out["mindspore"][k])
        print(f"| {k:28s} | {a:8.1f} | {b:10.1f} | {b / max(a, 1e-9):.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="tiny,small")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--response", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--rl-steps", type=int, default=6, help="0 = skip the RL-step comparison")
    ap.add_argument("--rl-sizes", default="tiny", help="built-in models of the RL-step comparison")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    rows = {}
    for size in [s for s in args.sizes.split(",") if s]:
        bench_size(size, args, rows)
    if args.rl_steps > 0:
        for size in [s for s in args.rl_sizes.split(",") if s]:
            bench_rl(args, size)


if __name__ == "__main__":
    main()
