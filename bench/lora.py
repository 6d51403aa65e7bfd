"""Full fine-tuning vs LoRA: peak memory (RSS) and train-step time on a builtin model.

    python bench/lora.py [--model builtin:small] [--backends torch,mindspore] [--repeats 3]
                         [--steps 6] [--warmup 2] [--batch 8] [--prompt 32] [--response 32]

Each (backend, mode) runs in its own one-thread subprocess (so its peak RSS is its own), with
the reference policy on (``algorithm.kl.coef`` > 0: full fine-tuning loads a second model, LoRA
uses the adapters-off policy), ``--repeats`` times; the table shows the median step time over
the measured steps of all repeats (warm-up dropped), the median peak RSS, the trainable
parameter count, and LoRA's ratios to full fine-tuning. Peak RSS includes the framework itself
(hundreds of MB of libraries), which dominates on these small models: the difference between
the two columns, not the ratio, is the memory LoRA saves.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

_BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = Path(_BENCH).parent
sys.path[:] = [str(REPO)] + [p for p in sys.path if os.path.abspath(p or ".") != _BENCH]

from bench.harness import QUIET_ONE_THREAD_ENV, emit, run_worker  # noqa: E402


def worker(args) -> None:
    import numpy as np

    from mindrl.backends.base import build_backend
    from mindrl.config.loader import load_config
    from mindrl.types import LossNormalizers, TrainBatch, pad_token_batch

    over = [f"model.path={args.model}", f"backend={args.backend}", "algorithm.kl.coef=0.05",
            f"train.micro_batch_size={args.batch}", f"data.max_prompt_len={args.prompt}",
            f"rollout.max_new_tokens={args.response}", "train.lr=1e-4"]
    if args.mode == "lora":
        over += ["model.lora.enabled=true", f"model.lora.rank={args.rank}"]
    cfg = load_config(None, over)
    be = build_backend(args.backend, cfg, with_reference=True)
    rng = np.random.default_rng(0)
    vocab = 1000
    prompts = [list(rng.integers(10, vocab, args.prompt)) for _ in range(args.batch)]
    resps = [list(rng.integers(10, vocab, args.response)) for _ in range(args.batch)]
    tb = pad_token_batch(prompts, resps, 0, args.prompt, args.response)
    adv = (rng.normal(size=tb.response_mask.shape)).astype(np.float32)
    norm = LossNormalizers(float(tb.response_mask.sum()), float(args.batch),
                           float(args.response))
    times = []
    for _ in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        ref = be.logprobs(tb, temperature=1.0, reference=True, micro_batch_size=args.batch)
        be.train_step([TrainBatch(tb, adv, None, ref, None)], norm)
        times.append((time.perf_counter() - t0) * 1e3)
    if args.backend == "torch":
        trainable = sum(p.numel() for p in be.params)
    else:
        trainable = sum(int(np.prod(p.shape)) for p in be.params)
    emit({"step_times": times, "warmup": args.warmup, "trainable": int(trainable),
          "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="builtin:small")
    ap.add_argument("--backends", default="torch,mindspore")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--response", type=int, default=32)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--backend", default="torch", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="full", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    common = ["--model", args.model, "--steps", str(args.steps), "--warmup", str(args.warmup),
              "--batch", str(args.batch), "--prompt", str(args.prompt), "--response",
              str(args.response), "--rank", str(args.rank)]
    print(f"{args.model}: batch {args.batch} x ({args.prompt} prompt + {args.response} response) "
          f"tokens, KL reference on, LoRA rank {args.rank} on all 7 linear layers, "
          f"{args.repeats} runs x {args.steps} steps (median)")
    print(f"{'backend':10s} {'mode':5s} {'trainable':>10s} {'step ms':>9s} {'peak RSS MB':>12s}"
          f" {'step ratio':>10s} {'RSS saved MB':>12s}")
    for backend in [b for b in args.backends.split(",") if b]:
        res = {}
        for r in range(args.repeats):
            for mode in ("full", "lora"):       # alternate, so load drift hits both
                cmd = [sys.executable, __file__, "--worker", "--backend", backend, "--mode",
                       mode] + common
                out = run_worker(cmd, what=f"{backend} {mode}", cwd=REPO, timeout=1800,
                                 env=QUIET_ONE_THREAD_ENV, repo=REPO)
                res.setdefault(mode, []).append(out)
        rows = {}
        for mode, runs in res.items():
            steps = [t for x in runs for t in x["step_times"][x["warmup"]:]]
            rows[mode] = (runs[0]["trainable"], statistics.median(steps),
                          statistics.median(x["peak_rss_mb"] for x in runs))
        for mode in ("full", "lora"):
            n, ms, rss = rows[mode]
            ratio = ms / rows["full"][1]
            saved = rows["full"][2] - rss
            print(f"{backend:10s} {mode:5s} {n:10d} {ms:9.1f} {rss:12.1f} {ratio:10.2f}x"
                  f" {saved:12.1f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
