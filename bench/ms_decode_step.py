"""One decode step of the native MindSpore sampler at Qwen2.5-0.5B width, by part: the compiled
decode graph with its matrix products (the LM head and every linear layer) as h W^T and as
(W h^T)^T, and the host's draw from its logits,
two-level (the sampler's, :func:`mindrl.backends.mindspore.draw.draw`) and with a float64
log-softmax and one cumulative sum over the whole vocabulary. All four interleaved in one
process, one thread.

    python bench/ms_decode_step.py --rows 16,8,4 --reps 40

The model is bench/real_width.py's (random init, hidden 896, vocabulary 151,936, 2 layers,
built in a temporary directory unless ``--model``); the graph runs on a 64-slot cache with
fixed inputs. Prints the median, 25th percentile and minimum milliseconds of each part.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]

from bench.harness import loadavg, torch_one_thread  # noqa: E402


def full_cumsum_draw(logits, u):
    """The reference draw: float64 log-softmax, one cumulative sum over the vocabulary."""
    import numpy as np

    from mindrl.backends.mindspore.draw import log_softmax64

    lp = log_softmax64(logits, 1.0)
    tok = np.minimum((np.exp(lp).cumsum(-1) <= u[:, None]).sum(-1), lp.shape[-1] - 1)
    return tok, lp[np.arange(len(tok)), tok]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="", help="a model directory (default: build one)")
    ap.add_argument("--rows", default="16,8,4", help="decode bucket rows, comma-separated")
    ap.add_argument("--reps", type=int, default=40)
    a = ap.parse_args(argv)
    os.environ.setdefault("GLOG_v", "3")
    torch_one_thread()
    import numpy as np
    from mindspore import Tensor

    import real_width
    from mindrl.backends.base import build_backend
    from mindrl.backends.mindspore.draw import draw
    from mindrl.backends.mindspore.sampler import MindSporeSampler
    from mindrl.config.loader import load_config

    with tempfile.TemporaryDirectory(prefix="mindrl_ms_decode_") as tmp:
        model = Path(a.model or Path(tmp) / "model")
        if not a.model:
            real_width.build_model(model, "Qwen2.5-0.5B", 2)
        P, T = 16, 48
        cfg = load_config(None, [f"model.path={model}", "model.dtype=float32", "backend=mindspore",
                                 "train.threads=1", f"data.max_prompt_len={P}",
                                 f"rollout.max_new_tokens={T}"])
        be = build_backend("mindspore", cfg, prompt_buckets=[P], response_buckets=[T])
    spec = be.model.spec
    Nq, Nk, D, S = spec.num_attention_heads, spec.num_key_value_heads, spec.head_dim, P + T
    print("| rows | part | median ms | p25 ms | min ms | load |\n|---|---|---|---|---|---|")
    for B in [int(r) for r in a.rows.split(",")]:
        idx = np.zeros((B, Nk, 3), np.int32)
        idx[:, :, 0], idx[:, :, 1], idx[:, :, 2] = np.arange(B)[:, None], np.arange(Nk), P
        args = (Tensor(np.arange(B, dtype=np.int32) + 10),
                Tensor(np.ones((B, Nq * D), np.float32)), Tensor(np.zeros((B, Nq * D), np.float32)),
                Tensor(np.ones((B, Nk * D), np.float32)), Tensor(np.zeros((B, Nk * D), np.float32)),
                Tensor(np.zeros((B, 1, 1, S), np.float32)), Tensor(idx))
        parts = {}
        for name, rows_from in (("graph, products h W^T", 1 << 30),
                                ("graph, products (W h^T)^T", 1)):
            s = MindSporeSampler(be.model, prompt_buckets=[P], response_buckets=[T])
            s.transposed_rows = rows_from
            parts[name] = (lambda f=s._ready(B, S).decode: f(*args).asnumpy())
            parts[name]()                                            # compiles
        logits = parts["graph, products h W^T"]()
        diff = float(np.abs(parts["graph, products (W h^T)^T"]() - logits).max())
        print(f"| {B} | max abs logit difference of the two graphs: {diff:.2e} | | | | |")
        rng = np.random.default_rng(0)
        parts["draw, two-level"] = lambda: draw(logits, 1.0, rng.random(B))
        parts["draw, float64 full cumsum"] = lambda: full_cumsum_draw(logits, rng.random(B))
        times = {k: [] for k in parts}
        l0 = loadavg()
        for _ in range(a.reps):
            for k, f in parts.items():
                t = time.perf_counter()
                f()
                times[k].append(1e3 * (time.perf_counter() - t))
        for k, v in times.items():
            print(f"| {B} | {k} | {np.median(v):.1f} | {np.percentile(v, 25):.1f} | "
                  f"{min(v):.1f} | {l0:.1f}-{loadavg():.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
