"""The LM head's memory at the real vocabulary: RSS peak of per-token log-probs + backward of
one row on ``builtin:tiny-vocab152k`` (hidden 64, 2 layers, V = 151,936), each measurement in
a fresh process (the peak, VmHWM, reset just before), the model built into ``--cache``.

    python bench/head_memory.py --tokens 1024,8192 --chunks=-1,0

``--chunks``: values of ``train.logprob_chunk_tokens`` (-1 automatic, 0 full logits). The
script also checks the chunked head against full logits on a 64-token row (log-probs and the
head's gradient). tests/backends/torch/test_chunked_head.py runs the 8,192-token row.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import dataclasses, json, os, sys
    import numpy as np, torch
    from mindrl.config.loader import load_config
    from mindrl.backends.torch.backend import TorchBackend
    from mindrl.backends.torch import packing
    from mindrl.types import pad_token_batch

    T, chunk, cache = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    os.environ["MINDRL_CACHE"] = cache
    be = TorchBackend(load_config(None, ["model.path=builtin:tiny-vocab152k",
                                         f"train.logprob_chunk_tokens={chunk}"]))
    V = be.model.config.vocab_size

    def set_chunk(n):
        be.cfg = dataclasses.replace(be.cfg, train=dataclasses.replace(
            be.cfg.train, logprob_chunk_tokens=n))

    rng = np.random.default_rng(0)
    tok = be.tokenizer
    out = {"vocab": V, "tokenizer": len(tok),
           "tags": tok.encode("<think>1</think>", add_special_tokens=False)}
    # equality with full logits on a short row (64 tokens, chunks of 16)
    short = pad_token_batch([rng.integers(3, 1000, 8).tolist()],
                            [rng.integers(3, V, 64).tolist()], 0)
    res = {}
    for n in (0, 16):
        set_chunk(n)
        be.model.zero_grad(set_to_none=True)
        logp, _ = packing.score(be, be.model, short, 1.0, None)
        (-logp.sum()).backward()
        res[n] = (logp.detach().clone(), be.model.lm_head.weight.grad.clone())
    out["short_logp_diff"] = float((res[0][0] - res[16][0]).abs().max())
    out["short_grad_rel"] = float((res[0][1] - res[16][1]).abs().max()
                                  / res[0][1].abs().max())
    set_chunk(chunk)
    be.model.zero_grad(set_to_none=True)
    del res, logp
    row = pad_token_batch([rng.integers(3, 1000, 16).tolist()],
                          [rng.integers(3, V, T).tolist()], 0)

    def rss():
        with open("/proc/self/status") as f:
            fields = dict(line.split(":", 1) for line in f)
        return {k: int(fields[k].split()[0]) * 1024 for k in ("VmRSS", "VmHWM")}

    with open("/proc/self/clear_refs", "w") as f:      # reset the peak (VmHWM) to now
        f.write("5")
    before = rss()["VmRSS"]
    logp, _ = packing.score(be, be.model, row, 1.0, None)
    (-logp.sum()).backward()
    out["peak_delta"] = rss()["VmHWM"] - before
    out["tokens"] = int(logp.numel())
    out["finite"] = bool(torch.isfinite(logp).all())
    out["head_grad"] = float(be.model.lm_head.weight.grad.abs().sum())
    print("RESULT " + json.dumps(out))
""")


def measure(tokens: int, chunk: int, cache: str) -> dict:
    """Run :data:`SCRIPT` in a fresh process: the RSS peak of log-probs + backward of one row
    of ``tokens`` response tokens at ``train.logprob_chunk_tokens=chunk``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
               OMP_NUM_THREADS="1", TRANSFORMERS_VERBOSITY="error",
               HF_HUB_DISABLE_PROGRESS_BARS="1")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tokens), str(chunk), str(cache)],
                          capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", default="1024,8192", help="response lengths, comma-separated")
    ap.add_argument("--chunks", default="-1,0", help="train.logprob_chunk_tokens values")
    ap.add_argument("--cache", default=os.environ.get("MINDRL_CACHE", ""),
                    help="where builtin:tiny-vocab152k is built (default: mindrl's cache)")
    args = ap.parse_args(argv)
    from mindrl.models.tiny import default_cache_dir

    cache = args.cache or default_cache_dir()
    print("| response tokens | train.logprob_chunk_tokens | peak RSS added (GB) | per token |")
    print("|---|---|---|---|")
    for t in (int(x) for x in args.tokens.split(",")):
        for c in (int(x) for x in args.chunks.split(",")):
            out = measure(t, c, cache)
            gb = out["peak_delta"] / 1e9
            print(f"| {t:,} | {c} | {gb:.2f} | {out['peak_delta'] / t / 1e6:.2f} MB |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
