"""The decode step's matrix products on this CPU: torch's default kernels against weights packed
once in oneDNN's blocked layout (:mod:`mindrl.backends.torch.decode_linear`, what the native
torch sampler uses on CPU).

A decode step multiplies the live rows (1 to a few dozen) by every weight matrix, so it reads
each weight once and memory bandwidth bounds it. Per weight shape of Qwen2.5-0.5B (the
vocabulary head 151,936 x 896 and one decoder layer's linears), per row count and dtype, one
thread, the variants interleaved within each repeat (load drift hits all alike), best of
``--repeats``:

* ``linear``: ``F.linear(x, W)`` (float32: MKL; bfloat16: oneDNN, which reorders W into its
  blocked layout on every call);
* ``W @ x.T``: the same product with the weight as the left operand (float32 only);
* ``packed``: ``torch.ops.mkldnn._linear_pointwise`` on W packed once.

Reported: ms per product and the weight bytes read per second (GB/s), the ratio packed / linear
(< 1: packed is faster) and the one-off packing time per shape.

    python bench/decode_matmul.py                        # head and body, float32 and bf16
    python bench/decode_matmul.py --shapes head --rows 1,2,4,8,16 --repeats 7
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.harness import loadavg, torch_one_thread  # noqa: E402

# (out, in) of each weight, Qwen2.5-0.5B
SHAPES = {"head": (151936, 896), "gate/up": (4864, 896), "down": (896, 4864),
          "q/o": (896, 896), "k/v": (128, 896)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated, of: "
                    + ", ".join(SHAPES))
    ap.add_argument("--rows", default="1,2,3,4,6,8,12,16,32,64")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch_one_thread()
    import torch
    import torch.nn.functional as F

    from mindrl.backends.torch.decode_linear import pack_weight, packed_linear, packing_supported

    rows = [int(r) for r in a.rows.split(",")]
    load0, t0 = loadavg(), time.perf_counter()
    lines = []
    for dtype_name in a.dtypes.split(","):
        dt = getattr(torch, dtype_name)
        if not packing_supported(dt):
            lines.append(f"{dtype_name}: oneDNN packing not supported on this CPU / torch")
            continue
        for shape in a.shapes.split(","):
            out_f, in_f = SHAPES[shape]
            torch.manual_seed(0)
            w = (torch.randn(out_f, in_f) * 0.02).to(dt)
            t = time.perf_counter()
            packed = pack_weight(w)
            pack_s = time.perf_counter() - t
            variants = {"linear": lambda x: F.linear(x, w),
                        "packed": lambda x: packed_linear(x, packed, None)}
            if dt == torch.float32:
                variants["W @ x.T"] = lambda x: (w @ x.t()).t()
            xs = {r: torch.randn(r, in_f).to(dt) for r in rows}
            best = {(r, k): float("inf") for r in rows for k in variants}
            for r in rows:                                             # warm-up
                for f in variants.values():
                    f(xs[r])
            for _ in range(a.repeats):
                for r in rows:
                    for k, f in variants.items():
                        t = time.perf_counter()
                        f(xs[r])
                        best[r, k] = min(best[r, k], time.perf_counter() - t)
            nbytes = w.numel() * w.element_size()
            names = list(variants)
            lines += ["", f"{dtype_name} {shape} {out_f} x {in_f} ({nbytes / 1e6:.0f} MB; "
                      f"packing {pack_s * 1e3:.0f} ms once): ms, GB/s",
                      "| rows | " + " | ".join(names) + " | packed / linear |",
                      "|---" * (len(names) + 2) + "|"]
            for r in rows:
                cells = [f"{best[r, k] * 1e3:.2f} ms, {nbytes / best[r, k] / 1e9:.1f}"
                         for k in names]
                lines.append(f"| {r} | " + " | ".join(cells)
                             + f" | {best[r, 'packed'] / best[r, 'linear']:.2f} |")
            print("\n".join(lines[-len(rows) - 3:]), file=sys.stderr, flush=True)
    print(f"decode matmuls, 1 thread, best of {a.repeats}; load {load0:.2f} at start, "
          f"{loadavg():.2f} at end; {time.perf_counter() - t0:.0f} s")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
