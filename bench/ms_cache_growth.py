"""The MindSpore sampler's whole ``generate`` with its KV cache growing with the response
(``MindSporeSampler.grow_from``, the default 64) against the full cache from the start
(``grow_from = 0``): ms per decode step and process-CPU ms per decode step, per response
length, the two ways and the lengths interleaved in one process (one thread), and whether the
two gave the same tokens.

    python bench/ms_cache_growth.py --lengths 64,256,1024 --reps 3

The builtin tiny model (hidden 64, 2 layers), float32, 2 prompts x 4 samples (8 rows), 11-token
prompts (prompt bucket 16), temperature 1, no stop ids (every response is the length asked).
Prints the medians and the ratio growing / full.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]

from bench.harness import loadavg, torch_one_thread  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lengths", default="64,256,1024")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args(argv)
    os.environ.setdefault("GLOG_v", "3")
    torch_one_thread()
    from mindrl.backends.mindspore.buckets import default_buckets
    from mindrl.backends.base import build_backend
    from mindrl.config.loader import load_config
    from mindrl.types import SamplingParams

    lengths = [int(x) for x in a.lengths.split(",") if x]
    print(f"load at start {loadavg():.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="mindrl_ms_growth_") as tmp:
        cfg = load_config(None, ["model.path=builtin:tiny", "model.dtype=float32",
                                 "backend=mindspore", "train.threads=1",
                                 f"rollout.max_new_tokens={max(lengths)}",
                                 f"logging.output_dir={tmp}"])
        be = build_backend("mindspore", cfg)
        eng = be.native_engine()
        eng.eos_ids = ()
        eng.response_buckets = sorted(set(eng.response_buckets) | set(default_buckets(max(lengths))))
        prompts = [[5 + i] * 11 for i in range(2)]
        ways = {"growing": 64, "full": 0}
        tokens = {}
        for L in lengths:                                              # compile both ways
            for name, g in ways.items():
                eng.grow_from = g
                sp = SamplingParams(n=4, temperature=1.0, max_new_tokens=L, seed=3)
                tokens[name, L] = eng.generate(prompts, sp).response_ids
        wall = {k: [] for k in tokens}
        cpu = {k: [] for k in tokens}
        for _ in range(a.reps):
            for L in lengths:
                for name, g in ways.items():
                    eng.grow_from = g
                    t0, c0 = time.perf_counter(), time.process_time()
                    eng.generate(prompts, SamplingParams(n=4, temperature=1.0, max_new_tokens=L))
                    wall[name, L].append(1e3 * (time.perf_counter() - t0) / L)
                    cpu[name, L].append(1e3 * (time.process_time() - c0) / L)
        print(f"load at end {loadavg():.2f}; compiled {eng.compile_counts}")
        print("| length | growing ms/step (CPU) | full ms/step (CPU) | growing / full (CPU) "
              "| same tokens |")
        print("|---|---|---|---|---|")
        for L in lengths:
            g, f = statistics.median(wall["growing", L]), statistics.median(wall["full", L])
            gc_, fc = statistics.median(cpu["growing", L]), statistics.median(cpu["full", L])
            same = tokens["growing", L] == tokens["full", L]
            print(f"| {L} | {g:.3f} ({gc_:.3f}) | {f:.3f} ({fc:.3f}) | {g / f:.2f} "
                  f"({gc_ / fc:.2f}) | {'yes' if same else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
