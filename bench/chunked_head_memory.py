"""Resident memory of the torch chunked log-prob head alone (``token_stats``) on CPU: the growth
of the process's peak resident memory (VmHWM, reset before each) in the forward and in the
backward of ``sum(log p)`` over ``tokens`` random hidden rows, vocabulary 151,936, hidden 896
(Qwen2.5-0.5B's head), as a multiple of the head's weight (V x h in the dtype).

    python bench/chunked_head_memory.py float32 1025            # the automatic chunk (110)
    python bench/chunked_head_memory.py bfloat16 1025 330       # a chunk of 330 tokens
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _rss(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(field)


def main() -> int:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    from mindrl.backends.torch.chunked_head import chunk_tokens, token_stats

    torch.set_num_threads(1)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[sys.argv[1]]
    tokens = int(sys.argv[2])
    V, H = 151936, 896
    chunk = int(sys.argv[3]) if len(sys.argv) > 3 else chunk_tokens(-1, V)
    head = torch.nn.Linear(H, V, bias=False).to(dtype)
    hidden = torch.randn(tokens, H, dtype=dtype, requires_grad=True)
    targets = torch.randint(0, V, (tokens,))
    Path("/proc/self/clear_refs").write_text("5")
    base = _rss("VmRSS")
    logp, _, _ = token_stats(hidden, head, targets, temperature=1.0, chunk=chunk, ops=None)
    fwd = _rss("VmHWM") - base
    Path("/proc/self/clear_refs").write_text("5")
    base = _rss("VmRSS")
    logp.sum().backward()
    bwd = _rss("VmHWM") - base
    weight = V * H * hidden.element_size()
    print(json.dumps(dict(dtype=sys.argv[1], tokens=tokens, chunk=chunk, forward_gb=fwd / 1e9,
                          backward_gb=bwd / 1e9, weight_gb=weight / 1e9,
                          backward_over_weight=round(bwd / weight, 2))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
