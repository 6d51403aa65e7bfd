"""The LM head's memory at the real vocabulary: RSS peak of per-token log-probs + backward of
one row on ``builtin:tiny-vocab152k`` (hidden 64, 2 layers, V = 151,936), each measurement in
a fresh process (the peak, VmHWM, reset just before), the model built into ``--cache``.

    python bench/head_memory.py --tokens 1024,8192 --chunks=-1,0

``--chunks``: values of ``train.logprob_chunk_tokens`` (-1 automatic, 0 full logits). The
script also checks the chunked head against full logits on a 64-token row (log-probs and the
head's gradient). tests/backends/torch/test_chunked_head.py runs the 8,192-token row.
``--backend mindspore``: the RL gradient of the compiled MindSpore step instead (decoder, head,
loss, backward), checked against full logits on a 64-token row in chunks of 16;
tests/backends/mindspore/test_ms_chunked_head.py runs a 1,024-token row and
tests/backends/mindspore/test_ms_long_rows.py an 8,192-token one (the decoder's attention in
query blocks past ``--long-rows``). ``--step sft`` / ``--step dpo``: the SFT step, or the DPO
step of one pair (two responses of half the tokens, the reference pass included);
tests/backends/mindspore/test_ms_chunked_sft_pref.py runs both.
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

    before = reset_peak()
    logp, _ = packing.score(be, be.model, row, 1.0, None)
    (-logp.sum()).backward()
    out["peak_delta"] = rss()["VmHWM"] - before
    out["tokens"] = int(logp.numel())
    out["finite"] = bool(torch.isfinite(logp).all())
    out["head_grad"] = float(be.model.lm_head.weight.grad.abs().sum())
    print("RESULT " + json.dumps(out))
""")


# backend=mindspore: the gradient of one row through a compiled step (decoder, head, loss,
# backward into the optimizer's accumulator). step "rl": GRPO defaults with a KL to old
# log-probs; "sft": the mean NLL of the row; "dpo": one pair of T/2-token responses, the
# reference model's log-probs of both included in the measurement.
SCRIPT_MS = textwrap.dedent("""
    import dataclasses, json, os, sys
    os.environ.setdefault("GLOG_v", "3")
    import numpy as np
    from mindrl.config.loader import load_config
    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.types import LossNormalizers, TrainBatch, pad_token_batch

    T, chunk, cache, step = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    os.environ["MINDRL_CACHE"] = cache
    if len(sys.argv) > 5:       # the portable attention's long-row threshold (0 = never blocked)
        from mindrl.backends.mindspore import kernels
        kernels.PORTABLE = dataclasses.replace(kernels.PORTABLE, long_rows=int(sys.argv[5]))
    be = MindSporeBackend(load_config(None, [
        "backend=mindspore", "model.path=builtin:tiny-vocab152k", "train.micro_batch_size=1",
        "data.max_prompt_len=16", f"rollout.max_new_tokens={max(T, 64)}",
        "algorithm.entropy_coef=0.01", "preference.loss=dpo",
        f"train.logprob_chunk_tokens={chunk}"]), with_reference=step == "dpo")
    V = be.spec.vocab_size

    def set_chunk(n):
        be.cfg = dataclasses.replace(be.cfg, train=dataclasses.replace(
            be.cfg.train, logprob_chunk_tokens=n))

    rng = np.random.default_rng(0)

    def tokens(n):
        return pad_token_batch([rng.integers(3, 1000, 16).tolist()],
                               [rng.integers(3, V, n).tolist()], 0)

    def row(n):
        # (micro-batches, normaliser, gradient kind) of n scored tokens
        if step == "dpo":
            prompt = rng.integers(3, 1000, 16).tolist()
            pair = [pad_token_batch([prompt], [rng.integers(3, V, n // 2).tolist()], 0)
                    for _ in range(2)]
            return pair, 1.0, "pref"
        tb = tokens(n)
        m = tb.response_mask
        norm = LossNormalizers(float(m.sum()), 1.0, n)
        if step == "sft":
            return [tb], norm, "sft"
        adv = (rng.normal(size=m.shape) * m).astype(np.float32)
        old = ((rng.normal(size=m.shape) * 0.1 - 12.0) * m).astype(np.float32)
        return [TrainBatch(tb, adv, old, None, None)], norm, "rl"

    def gradients(mbs, norm, kind):
        if kind == "pref":          # the reference pass, then the DPO gradient
            ref = [be.logprobs(tb, temperature=1.0, reference=True, micro_batch_size=1)
                   for tb in mbs]
            mbs = [(mbs[0], mbs[1], ref[0] - 0.5 * mbs[0].response_mask, ref[1])]
        return be.gradients(mbs, norm, kind=kind)

    out = {"vocab": V, "tokenizer": len(be.tokenizer), "step": step}
    # equality with full logits on a short row (64 tokens, chunks of 16)
    mb, norm, kind = row(64)
    res = {}
    for n in (0, 16):
        set_chunk(n)
        res[n] = gradients(mb, norm, kind)
    head = "lm_head.weight" if "lm_head.weight" in res[0] else "model.embed_tokens.weight"
    out["short_grad_rel"] = max(float(np.abs(res[16][k] - res[0][k]).max()
                                      / max(np.abs(res[0][k]).max(), 1e-30)) for k in res[0])
    out["short_chunked"] = be._head_chunk(64) == 16
    set_chunk(chunk)
    del res
    mb, norm, kind = row(T)

    before = reset_peak()
    grads = gradients(mb, norm, kind)
    out["peak_delta"] = rss()["VmHWM"] - before
    out["tokens"] = int(sum((m if kind != "rl" else m.tokens).response_mask.sum() for m in mb))
    out["chunk"] = be._head_chunk(T)
    out["long_rows"] = be.model.kernels.long_rows
    out["finite"] = bool(all(np.isfinite(g).all() for g in grads.values()))
    out["head_grad"] = float(np.abs(grads[head]).sum())
    print("RESULT " + json.dumps(out))
""")


# the child's peak-memory probe, put before either script
PEAK = textwrap.dedent("""
    def rss():
        with open("/proc/self/status") as f:
            fields = dict(line.split(":", 1) for line in f)
        return {k: int(fields[k].split()[0]) * 1024 for k in ("VmRSS", "VmHWM")}

    def reset_peak():
        with open("/proc/self/clear_refs", "w") as f:      # reset the peak (VmHWM) to now
            f.write("5")
        return rss()["VmRSS"]
""")


def measure(tokens: int, chunk: int, cache: str, backend: str = "torch",
            step: str = "rl", long_rows: int | None = None) -> dict:
    """Run :data:`SCRIPT` (:data:`SCRIPT_MS` for ``backend`` mindspore) in a fresh process: the
    RSS peak of log-probs + backward of one row of ``tokens`` response tokens at
    ``train.logprob_chunk_tokens=chunk`` (MindSpore: of the ``step`` "rl", "sft" or "dpo").
    ``long_rows`` (mindspore): the portable attention's ``Kernels.long_rows`` instead of its
    default (0: the full-bias kernel at every length)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
               OMP_NUM_THREADS="1", TRANSFORMERS_VERBOSITY="error",
               HF_HUB_DISABLE_PROGRESS_BARS="1")
    script = PEAK + (SCRIPT_MS if backend == "mindspore" else SCRIPT)
    extra = [str(long_rows)] if long_rows is not None and backend == "mindspore" else []
    proc = subprocess.run([sys.executable, "-c", script, str(tokens), str(chunk), str(cache),
                           step] + extra,
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
    ap.add_argument("--backend", default="torch", choices=("torch", "mindspore"),
                    help="torch: log-probs + backward of -sum(logp); mindspore: the RL "
                         "gradient of the compiled step (decoder, head, loss, backward)")
    ap.add_argument("--step", default="rl", choices=("rl", "sft", "dpo"),
                    help="with --backend mindspore: the RL step, SFT, or DPO (one pair of "
                         "responses of half the tokens each, with its reference pass)")
    ap.add_argument("--long-rows", type=int, default=None,
                    help="mindspore: rows longer than this attend in query blocks (default: "
                         "the portable kernels' own threshold; 0 = never)")
    args = ap.parse_args(argv)
    from mindrl.models.tiny import default_cache_dir

    cache = args.cache or default_cache_dir()
    print("| response tokens | train.logprob_chunk_tokens | peak RSS added (GB) | per token |")
    print("|---|---|---|---|")
    for t in (int(x) for x in args.tokens.split(",")):
        for c in (int(x) for x in args.chunks.split(",")):
            out = measure(t, c, cache, args.backend, args.step, args.long_rows)
            gb = out["peak_delta"] / 1e9
            print(f"| {t:,} | {c} | {gb:.2f} | {out['peak_delta'] / t / 1e6:.2f} MB |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
