"""MindSpore's blocked causal attention (the portable kernel of rows over 1,024 tokens), forward
+ backward through ``mindspore.jit``, its query blocks in ``KEY_SPANS`` runs (each scoring only
the keys it can see) against one run scoring every key: process-CPU ms per call, interleaved
in one process, one thread.

    python bench/ms_blocked_attention.py --slots 1040,2064 --reps 5 --spans 2,4

Shapes of the builtin tiny model's update: 8 rows, 2 query heads on 1 kv head, head dim 32,
blocks of 128 queries. Prints the medians and the ratio of each run count (``--spans``, default
``KEY_SPANS``) to one run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]

from bench.harness import loadavg  # noqa: E402


def _loss(att, w):
    def loss(q, k, v, m):
        return (att(q, k, v, m) * w).sum()
    return loss


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--slots", default="1040,2064")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--spans", default="", help="run counts to time against one run "
                    "(default: KEY_SPANS)")
    a = ap.parse_args(argv)
    import numpy as np
    import mindspore as ms
    from mindspore import Tensor

    from mindrl.backends.mindspore import kernels as K

    ms.set_context(runtime_num_threads=1)
    B, Nq, Nk, D = 8, 2, 1, 32
    print(f"load at start {loadavg():.2f}", flush=True)
    counts = [int(x) for x in a.spans.split(",") if x] or [K.KEY_SPANS]
    print("| slots | one run ms | " + " | ".join(f"{n} runs ms | / one run" for n in counts) + " |")
    print("|---|---|" + "---|---|" * len(counts))
    for S in [int(x) for x in a.slots.split(",") if x]:
        rng = np.random.default_rng(0)
        args = [Tensor(rng.normal(size=sh).astype(np.float32)) for sh in
                [(B, Nq, S, D), (B, Nk, S, D), (B, Nk, S, D)]]
        args.append(Tensor(np.ones((B, S), np.float32)))
        w = Tensor(rng.normal(size=(B, Nq, S, D)).astype(np.float32))
        fns = {}
        for name, spans in [("one run", 1)] + [(f"{n} runs", n) for n in counts]:
            att = K.BlockedCausalAttention(0.25, K.QUERY_BLOCK)
            att.blocks.spans = spans
            fns[name] = ms.jit(ms.value_and_grad(_loss(att, w), (0, 1, 2)))
            fns[name](*args)[0].asnumpy()                                    # compile
        t = {n: [] for n in fns}
        for _ in range(a.reps):
            for n, f in fns.items():
                c0 = time.process_time()
                f(*args)[0].asnumpy()
                t[n].append(time.process_time() - c0)
        one = statistics.median(t["one run"])
        cells = [f"{1e3 * statistics.median(t[f'{n} runs']):.1f} | "
                 f"{statistics.median(t[f'{n} runs']) / one:.2f}" for n in counts]
        print(f"| {S} | {1e3 * one:.1f} | " + " | ".join(cells) + " |", flush=True)
    print(f"load at end {loadavg():.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
