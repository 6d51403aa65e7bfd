"""Resident memory and wall time of the MindSpore RL step by phase, at real model width.

One process builds the MindSpore backend on MODEL_DIR (built there first when it does not exist,
as bench/memory_plan.py builds its model: Qwen2.5-0.5B's width, 2 layers, random) and runs ``--steps`` RL steps of a case of bench/memory_plan.py
(or ``real-width``: bench/real_width.py's MindSpore batch, 4 x (16 + 48), one micro-batch): the
old-log-prob pass, then ``train_step``. A thread polls the process's RSS every 3 ms and charges
it, and the wall time, to the phase running: the log-prob pass's decoder, the head chunks'
forward (``head-fwd``, both passes), the loss, the chunks' head gradients (``head-bwd``), the
decoder backward with the accumulation, the gradient norm, AdamW. Printed: per step and phase,
the peak RSS above the RSS before the backend was built, and the seconds spent. MindSpore runs
asynchronously, so a phase's time can land in the next phase that waits for it.

    python bench/ms_step_phases.py MODEL_DIR --case real-width --steps 3
    python bench/ms_step_phases.py MODEL_DIR --case real-width --steps 3 --recompute

``--recompute``: the chunked head runs each chunk's head again in the backward even where it
would keep the chunks' logits (its path above the memory budget), for a comparison.
``--compiled-head``: the chunks as compiled MindSpore calls instead of NumPy in host memory
(``mindrl.backends.mindspore.host_head``).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("VmRSS")


class Phases:
    """The phase running now, and per phase its peak RSS and summed wall time."""

    def __init__(self):
        self.now, self.peak, self.spent, self.order = "build", {}, {}, []
        self.t = time.perf_counter()

    def set(self, name: str) -> None:
        t = time.perf_counter()
        self.spent[self.now] = self.spent.get(self.now, 0.0) + t - self.t
        self.t, self.now = t, name

    def poll(self) -> None:
        while True:
            r, k = _rss(), self.now
            if k not in self.peak:
                self.peak[k] = 0
                self.order.append(k)
            self.peak[k] = max(self.peak[k], r)
            time.sleep(0.003)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--case", default="real-width")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--compiled-head", action="store_true",
                    help="the chunked head as compiled MindSpore chunks, not in host memory")
    ap.add_argument("--recompute", action="store_true",
                    help="the chunked head recomputes every chunk's logits in the backward "
                    "(its path above the memory budget) even where it would keep them")
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import numpy as np
    import mindspore  # noqa: F401  (imported before the baseline, as bench/memory_plan.py does)
    import torch  # noqa: F401
    import transformers  # noqa: F401

    import memory_plan as mp
    import mindrl.backends.mindspore.chunked_head as ch
    import mindrl.backends.mindspore.host_head as hh
    from mindrl.backends.base import build_backend
    from mindrl.config.loader import load_config
    from mindrl.types import LossNormalizers, TokenBatch, TrainBatch

    mp.CASES["real-width"] = ("float32", False, 4, 16, 48)
    if a.case not in mp.CASES or a.case.startswith("sft"):
        ap.error(f"--case: one of {', '.join(c for c in mp.CASES if not c.startswith('sft'))}")
    if not Path(a.model_dir).is_dir():
        mp.build_model(Path(a.model_dir), 2)
    ph = Phases()
    step = [0]

    def labelled(fn, name):
        def run(*args, **kw):
            ph.set(f"{step[0]}:{name}")
            return fn(*args, **kw)
        return run

    stats, grads, to_rows = ch.make_stats_fn, ch.make_grad_fn, ch.TokenChunks.to_rows
    kept_grads, post, real_rows = ch.make_kept_grad_fn, ch.make_post_fn, \
        ch.TokenChunks.real_rows_to_rows
    ch.make_stats_fn = lambda *x, **k: labelled(stats(*x, **k), "head-fwd")
    ch.make_grad_fn = lambda *x, **k: labelled(grads(*x, **k), "head-bwd")
    ch.make_post_fn = lambda *x, **k: labelled(post(*x, **k), "head-fwd")
    ch.make_kept_grad_fn = lambda *x, **k: labelled(kept_grads(*x, **k), "head-bwd")
    ch.kept_logits = labelled(ch.kept_logits, "head-fwd")
    ch.kept_head_grads = labelled(ch.kept_head_grads, "head-bwd")

    def rows_then(self, parts):            # after the chunks: the loss, or the decoder backward
        out = to_rows(self, parts)
        ph.set(ph.now.replace("head-fwd", "loss").replace("head-bwd", "decoder-bwd"))
        return out

    def real_rows_then(self, x):           # the kept head's gradients, then the decoder backward
        out = real_rows(self, x)
        ph.set(ph.now.replace("head-bwd", "decoder-bwd"))
        return out

    # the head in host memory (host_head): its forward, the loss after it, its backward, then
    # the decoder backward after the weight gradient's products
    def then(fn, name, after=None):
        def run(*args, **kw):
            ph.set(f"{step[0]}:{name}")
            out = fn(*args, **kw)
            if after:
                ph.set(f"{step[0]}:{after}")
            return out
        return run

    hh.host_scores = then(hh.host_scores, "head-fwd", "loss")
    hh.grad_in_place = then(hh.grad_in_place, "head-bwd")
    hh.add_weight_grad = then(hh.add_weight_grad, "head-bwd", "decoder-bwd")
    ch.TokenChunks.to_rows = rows_then
    ch.TokenChunks.real_rows_to_rows = real_rows_then
    ch.KEEP_CHUNK_LOGITS = not a.recompute
    hh.HOST_HEAD = not a.compiled_head
    cfg = load_config(None, mp.overrides(Path(a.model_dir), a.case, "mindspore"))
    base = _rss()
    threading.Thread(target=ph.poll, daemon=True).start()
    backend = build_backend("mindspore", cfg)
    opt = backend.optimizer
    opt.grad_norm = labelled(opt.grad_norm, "grad-norm")
    opt.apply = labelled(opt.apply, "adamw")
    _, _, rows, P, T = mp.CASES[a.case]
    n = cfg.train.prompts_per_step * cfg.rollout.n
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 1000, size=(n, P + T)).astype(np.int64)
    tokens = TokenBatch(ids, np.ones_like(ids), np.ones((n, T), np.float32), P)
    norm = LossNormalizers(global_tokens=float(n * T), global_seqs=float(n), max_len=T)
    for s in range(a.steps):
        step[0] = s
        ph.set(f"{s}:logprobs")
        t0 = time.perf_counter()
        old = backend.logprobs(tokens, temperature=1.0, micro_batch_size=rows)
        batch = TrainBatch(tokens, rng.standard_normal((n, T)).astype(np.float32), old)
        micro = [batch.rows(np.arange(i, i + rows)) for i in range(0, n, rows)]
        ph.set(f"{s}:hidden")
        t1 = time.perf_counter()
        backend.train_step(micro, norm)
        ph.set(f"{s}:done")
        print(f"step {s}: old log-probs {t1 - t0:.2f} s, train_step "
              f"{time.perf_counter() - t1:.2f} s", flush=True)
    time.sleep(0.05)
    print(f"sliced AdamW: {opt.sliced} ({len(opt._slices)} slices); head logits kept: "
          f"{getattr(backend, '_head_kept', None)}; load average {os.getloadavg()[0]:.1f}")
    for k in ph.order:
        print(f"{k:18s} peak +{(ph.peak[k] - base) / 1e9:5.2f} GB  {ph.spent.get(k, 0.0):7.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
