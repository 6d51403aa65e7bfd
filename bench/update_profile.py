"""Where the torch update's time goes at real model width: torch.profiler over mindrl's
``train_step`` on the machine part's batch of bench/real_width.py (a random-init model of
Qwen2.5-0.5B's width, 2 layers; 8 rows of 16 prompt + 48 response tokens in micro-batches of 4),
one thread, after a warm-up step; prints the top ops by self CPU time per dtype.

    python bench/update_profile.py                       # float32 and bfloat16
    python bench/update_profile.py --dtypes float32 --top 25
    python bench/update_profile.py --ab 3                # fused paths on / off, interleaved

``--ab N``: no profile; the same backend's update timed with the update's fused paths on and
off (chunked-head log-probs, the tied embedding's sparse gradient, fused AdamW: what
``bench/real_width.py --update-baseline`` switches off), alternately, N times each after a
warm-up pair; prints the medians.

``--ab-head N``: the same for the fused head's weight gradient written into kept memory and
its element-wise passes in cache-sized blocks of rows (``chunked_head.GRAD_INTO_BUFFER``,
``BLOCK_BYTES``) on and off, the rest on; prints the wall and CPU medians and the update's
FLOP/s over the GEMM rate at the model's shapes (bench/real_width.py's figure), that rate
measured in the same process once per round.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]


def profile(model_dir: Path, dtype: str, top: int, steps: int, ab: int = 0,
            ab_head: int = 0) -> str:
    import numpy as np
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile

    from bench.real_width import UPDATE
    from mindrl.backends.base import build_backend
    from mindrl.config.loader import load_config
    from mindrl.types import LossNormalizers, TokenBatch, TrainBatch

    u = UPDATE["cpu"]
    R, P, T, M = u["rows"], u["prompt"], u["response"], u["micro"]
    cfg = load_config(None, [f"model.path={model_dir}", f"model.dtype={dtype}", "device=cpu",
                             "train.threads=1", f"train.micro_batch_size={M}",
                             f"data.max_prompt_len={P}", f"rollout.max_new_tokens={T}",
                             "algorithm.kl.coef=0", "train.lr=1e-6"])
    backend = build_backend("torch", cfg)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 1000, size=(R, P + T)).astype(np.int64)
    batch = TrainBatch(TokenBatch(ids, np.ones_like(ids), np.ones((R, T), np.float32), P),
                       rng.standard_normal((R, T)).astype(np.float32),
                       np.zeros((R, T), np.float32))
    micro = [batch.rows(np.arange(i, i + M)) for i in range(0, R, M)]
    norm = LossNormalizers(global_tokens=float(R * T), global_seqs=float(R), max_len=T)
    if ab_head:
        return _ab_head(backend, micro, norm, dtype, ab_head, model_dir)
    if ab:
        return _ab(backend, micro, norm, dtype, ab)
    backend.train_step(micro, norm)                                # warm-up
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            backend.train_step(micro, norm)
    total = sum(e.self_cpu_time_total for e in prof.key_averages())
    rows = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:top]
    out = [f"### {dtype}: {steps} train_step(s), {total / 1e6 / steps:.2f} s self CPU per step",
           "", "| op | calls/step | self CPU s/step | share |", "|---|---|---|---|"]
    for e in rows:
        out.append(f"| {e.key} | {e.count / steps:g} | {e.self_cpu_time_total / 1e6 / steps:.3f}"
                   f" | {e.self_cpu_time_total / total:.1%} |")
    return "\n".join(out)


def _ab(backend, micro, norm, dtype: str, n: int) -> str:
    import statistics
    import time

    from mindrl.backends.torch import chunked_head

    emb = backend.model.get_input_embeddings()
    times = {True: [], False: []}
    for i in range(n + 1):
        for on in (True, False):
            chunked_head.FUSED_TARGET_LOGP = on
            emb.sparse = on
            for group in backend.optimizer.param_groups:
                group["fused"] = on
            t0 = time.perf_counter()
            backend.train_step(micro, norm)
            if i:
                times[on].append(time.perf_counter() - t0)
    on, off = statistics.median(times[True]), statistics.median(times[False])
    return (f"{dtype}: update median {on:.2f} s with the fused paths, {off:.2f} s without "
            f"({off / on:.2f}x); {n} steps each, interleaved")


def _ab_head(backend, micro, norm, dtype: str, n: int, model_dir: Path) -> str:
    import json
    import os
    import statistics
    import time

    import torch

    from bench.real_width import UPDATE, gemm_rate, update_flops
    from mindrl.backends.torch import chunked_head

    c = json.loads((model_dir / "config.json").read_text())
    u = UPDATE["cpu"]
    R, P, T, M = u["rows"], u["prompt"], u["response"], u["micro"]
    flops = update_flops(c, R * (P + T), R * T, (P + T) / 2)
    block = chunked_head.BLOCK_BYTES
    wall, cpu, gemm = {True: [], False: []}, {True: [], False: []}, []
    load0 = os.getloadavg()[0]
    for i in range(n + 1):
        if i:
            gemm.append(gemm_rate(c, M * (P + T), M * T, getattr(torch, dtype),
                                  torch.device("cpu"), 1)["flops_per_s"])
        for on in (True, False):
            chunked_head.GRAD_INTO_BUFFER = on
            chunked_head.BLOCK_BYTES = block if on else 0
            t0, c0 = time.perf_counter(), time.process_time()
            backend.train_step(micro, norm)
            if i:
                wall[on].append(time.perf_counter() - t0)
                cpu[on].append(time.process_time() - c0)
    chunked_head.GRAD_INTO_BUFFER, chunked_head.BLOCK_BYTES = True, block
    g = statistics.median(gemm)
    out = [f"{dtype}: {n} steps each, interleaved; GEMM at the model's shapes {g / 1e9:.1f} "
           f"GFLOP/s (median of {n}); load {load0:.1f} at start, {os.getloadavg()[0]:.1f} "
           "at end"]
    for on in (True, False):
        w = statistics.median(wall[on])
        out.append(f"  kept gradient + blocks {'on ' if on else 'off'}: wall {w:.2f} s, CPU "
                   f"{statistics.median(cpu[on]):.2f} s; {flops / w / 1e9:.1f} GFLOP/s = "
                   f"{flops / w / g:.0%} of the GEMM rate")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--ab", type=int, default=0, help="time the fused paths on / off instead")
    ap.add_argument("--ab-head", type=int, default=0, help="time the head's kept weight "
                    "gradient and blocked passes on / off instead")
    a = ap.parse_args(argv)
    from bench.harness import torch_one_thread

    torch_one_thread()
    from bench.real_width import build_model

    with tempfile.TemporaryDirectory(prefix="mindrl_update_profile_") as tmp:
        model_dir = Path(tmp) / "model"
        build_model(model_dir, "Qwen2.5-0.5B", a.layers)
        for dtype in a.dtypes.split(","):
            print(profile(model_dir, dtype, a.top, a.steps, a.ab, a.ab_head), "\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
