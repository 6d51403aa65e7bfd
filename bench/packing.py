"""The update alone: forward + backward of one RL mini-batch with mixed-length responses, cut
and laid out five ways (torch backend, one thread).

    .venv/bin/python bench/packing.py                     # small model, 64 rows, up to 128 tokens
    .venv/bin/python bench/packing.py --size tiny --max-len 32 --reps 5

Layouts: the padded batch as before this bench existed (micro-batches of 8 in order, every row
padded to the batch's longest response), the same trimmed to each micro-batch's longest row,
micro-batches of 8 cut from the rows sorted by length, each trimmed (the default now),
packed (``train.padding_free``) micro-batches of 8 in order, padded micro-batches by token
budget (``train.max_tokens_per_micro_batch``: rows sorted by length), and packed micro-batches
by token budget. All give the same gradient (tests/backends/torch/
test_packing.py); the table shows the median process CPU seconds of each (CPU time: on a shared
machine wall time mostly measures the other jobs), the layouts interleaved ``--reps`` times
(the first dropped), and the tokens each one pushes through the model.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != HERE] + \
    [str(HERE)]
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="small")
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=20)
    ap.add_argument("--max-len", type=int, default=128)
    ap.add_argument("--reps", type=int, default=4)
    a = ap.parse_args(argv)

    import numpy as np
    import torch

    from bench.harness import torch_one_thread
    from mindrl.backends.base import build_backend
    from mindrl.backends.torch import packing
    from mindrl.config.loader import load_config
    from mindrl.backends.batching import micro_batch_rows
    from mindrl.types import LossNormalizers, TrainBatch, pad_token_batch
    from trl_compare import mixed_lengths

    torch_one_thread()
    be = build_backend("torch", load_config(None, [f"model.path=builtin:{a.size}",
                                                   "model.chat_template=none",
                                                   "train.threads=1"]))
    rng = np.random.default_rng(0)
    lengths = mixed_lengths(a.rows, a.max_len)
    vocab = be.model.config.vocab_size
    prompts = [rng.integers(5, vocab, a.prompt_len).tolist() for _ in range(a.rows)]
    tokens = pad_token_batch(prompts, [rng.integers(5, vocab, n).tolist() for n in lengths], 0)
    adv = (rng.normal(size=tokens.response_mask.shape) * tokens.response_mask).astype(np.float32)
    batch = TrainBatch(tokens, adv, None)
    norm = LossNormalizers(float(tokens.response_mask.sum()), float(a.rows), float(a.max_len))
    row_len = tokens.attention_mask.sum(axis=1)
    no_trim = lambda mb: mb  # noqa: E731

    def layout(packed: bool, budget: int, trim: bool = True, in_order: bool = False):
        cuts = micro_batch_rows(row_len, count=8, max_tokens=budget, packed=packed,
                                by_length=not packed)     # as the trainer cuts them
        if in_order:
            cuts = [np.arange(s, min(s + 8, a.rows)) for s in range(0, a.rows, 8)]
        P = tokens.prompt_len
        if not trim:
            work = a.rows * tokens.input_ids.shape[1]
        elif packed:
            work = int(row_len.sum())
        else:
            work = sum(len(c) * (P + int(tokens.response_mask[c].sum(1).max())) for c in cuts)

        def step():
            be.cfg = dataclasses.replace(be.cfg, train=dataclasses.replace(
                be.cfg.train, padding_free=packed))
            saved = packing.trim_train
            packing.trim_train = packing.trim_train if trim else no_trim
            try:
                be.model.zero_grad(set_to_none=True)
                for c in cuts:
                    loss, _ = be._micro_loss(batch.rows(c), norm)
                    loss.backward()
            finally:
                packing.trim_train = saved
        return step, len(cuts), work

    layouts = {
        "padded to the batch's longest row, 8 rows in order": layout(False, 0, trim=False,
                                                                      in_order=True),
        "padded, trimmed per micro-batch, 8 rows in order": layout(False, 0, in_order=True),
        "padded, trimmed, 8 rows sorted by length (default)": layout(False, 0),
        "packed (train.padding_free), 8 rows in order": layout(True, 0),
        "padded by token budget 1024 (sorted)": layout(False, 1024),
        "packed by token budget 512": layout(True, 512),
        "packed by token budget 2048": layout(True, 2048),
    }
    times = {k: [] for k in layouts}
    for _ in range(a.reps):
        for k, (step, _, _) in layouts.items():
            t0 = time.process_time()
            step()
            times[k].append(time.process_time() - t0)
    base = None
    print(f"builtin:{a.size}, {a.rows} rows, prompts {a.prompt_len} tokens, responses "
          f"{min(lengths)}-{max(lengths)} (mean {np.mean(lengths):.1f}); median CPU s of "
          f"{a.reps - 1} reps\n")
    print("| layout | micro-batches | tokens through the model | CPU s | vs before |")
    print("|---|---|---|---|---|")
    for k, (_, n, work) in layouts.items():
        m = statistics.median(times[k][1:] or times[k])
        base = base or m
        print(f"| {k} | {n} | {work} | {m:.3f} | {m / base:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
