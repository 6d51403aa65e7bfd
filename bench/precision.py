"""Mixed precision on the torch backend's CPU path: a bf16 compute copy with float32 master
weights (what the backend does) vs autocast(bf16) over float32 parameters vs plain float32, one
train step each (forward, float32 log-softmax loss, backward, AdamW, and for the compute copy
the gradient hand-over and the write-back of the rounded masters).

    python bench/precision.py [--sizes mini,small] [--batch 8] [--seq 128] [--steps 6]

Prints the median seconds per step of each variant, measured interleaved (round by round) so
all three see the same machine load, and the load average before and after. One thread.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="mini,small")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=6)
    args = ap.parse_args()
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import torch
    from transformers import AutoModelForCausalLM

    from mindrl.backends.torch.optim import MasterWeights
    from mindrl.models.tiny import resolve_model_path

    torch.set_num_threads(1)
    ids = torch.randint(0, 1000, (args.batch, args.seq), generator=torch.Generator().manual_seed(0))

    def loss_of(logits):
        return torch.log_softmax(logits.float(), -1).mean()

    for size in args.sizes.split(","):
        path = resolve_model_path(f"builtin:{size}")
        load = lambda: AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)  # noqa: E731
        copy = load()
        masters = MasterWeights.take(copy, torch.bfloat16)
        opt_copy = torch.optim.AdamW(masters.params, lr=1e-6)
        auto = load()
        opt_auto = torch.optim.AdamW(auto.parameters(), lr=1e-6)
        full = load()
        opt_full = torch.optim.AdamW(full.parameters(), lr=1e-6)

        def step_copy():
            loss_of(copy(input_ids=ids, use_cache=False).logits).backward()
            masters.accumulate()
            opt_copy.step()
            opt_copy.zero_grad(set_to_none=True)
            masters.publish()

        def step_autocast():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = auto(input_ids=ids, use_cache=False).logits
            loss_of(logits).backward()
            opt_auto.step()
            opt_auto.zero_grad(set_to_none=True)

        def step_fp32():
            loss_of(full(input_ids=ids, use_cache=False).logits).backward()
            opt_full.step()
            opt_full.zero_grad(set_to_none=True)

        variants = {"bf16 copy + fp32 masters": step_copy, "autocast bf16 / fp32 params":
                    step_autocast, "float32": step_fp32}
        times = {k: [] for k in variants}
        for f in variants.values():
            f()
            f()
        before = os.getloadavg()[0]
        for _ in range(args.steps):
            for k, f in variants.items():
                t = time.perf_counter()
                f()
                times[k].append(time.perf_counter() - t)
        after = os.getloadavg()[0]
        print(f"\n{size} (batch {args.batch} x seq {args.seq}), load {before:.1f} -> {after:.1f}")
        base = statistics.median(times["float32"])
        for k, ts in times.items():
            m = statistics.median(ts)
            print(f"  {k:30s} {m:.3f} s/step  {m / base:.2f}x float32")


if __name__ == "__main__":
    main()
