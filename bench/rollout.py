"""Rollout alone on mixed response lengths: mindrl's torch decode loop (engine ``native``: one
prefill per group, finished rows leave the batch) vs transformers ``generate`` on the same model
(``generate_hf``: every row decodes to the longest, n prefills per prompt) vs vLLM-CPU.

    .venv/bin/python bench/rollout.py                     # tiny + small, 5 calls each side
    .venv/bin/python bench/rollout.py --sizes small --no-vllm --reps 3

Each side runs in its own subprocess (one thread, float32) on the benchmark's prompts
(``trl_compare.make_prompts``) x n samples at temperature 1, every row ended at the long-tailed
``trl_compare.mixed_lengths`` of its call (EOS forced there, suppressed before; vLLM: per-row
``min_tokens = max_tokens``), so all sides decode the same number of tokens. Prints, per size,
the median wall seconds of the calls after one warm-up, generated tokens/s, the process's peak
RSS, and the ratio to ``generate``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]

from bench.harness import QUIET_ONE_THREAD_ENV, loadavg, torch_one_thread  # noqa: E402
from trl_compare import SIZES, length_hook, make_prompts, mixed_lengths  # noqa: E402

SIDES = ("mindrl", "generate", "vllm")


def _side(side: str, size: str, reps: int) -> dict:
    torch_one_thread()
    from mindrl.config.loader import load_config
    from mindrl.types import SamplingParams

    S = SIZES[size]
    vllm = ["rollout.engine=vllm", "rollout.gpu_memory_utilization=0.3"] if side == "vllm" \
        else []
    cfg = load_config(None, [f"model.path={S['model']}", "model.dtype=float32",
                             "train.threads=1", f"rollout.max_new_tokens={S['tokens']}", *vllm])
    prompts_text = [r["problem"] for r in make_prompts(S["prompts"])]
    targets = mixed_lengths(S["prompts"] * S["n"], S["tokens"])
    if side == "vllm":
        from mindrl.rollout import build_engine

        eng = build_engine("vllm", cfg)
        tok = eng.tokenizer
        prompts = [tok(p)["input_ids"] for p in prompts_text]
        base = eng._vllm_params(SamplingParams(n=1, temperature=1.0,
                                               max_new_tokens=S["tokens"]), 0)

        def call(seed):
            reqs, params = [], []
            for i, p in enumerate(prompts):
                for j in range(S["n"]):
                    row = i * S["n"] + j
                    reqs.append({"prompt_token_ids": p})
                    sp = base.clone()
                    sp.seed, sp.max_tokens = seed + row, targets[row]
                    sp.min_tokens = targets[row]
                    params.append(sp)
            outs = eng.llm.generate(reqs, params, use_tqdm=False)
            return [len(o.outputs[0].token_ids) for o in outs]
    else:
        from mindrl.rollout.native_torch import NativeTorchEngine, stop_ids

        eng = NativeTorchEngine.from_config(cfg)
        tok = eng.tokenizer
        prompts = [tok(p)["input_ids"] for p in prompts_text]
        # on the model: the decode loop and generate_hf each apply it once
        eng.model.mindrl_logits_hook = length_hook(
            lambda rows: mixed_lengths(rows, S["tokens"]),
            stop_ids(tok, eng.model.generation_config))
        gen = eng.generate if side == "mindrl" else eng.generate_hf

        def call(seed):
            sp = SamplingParams(n=S["n"], temperature=1.0, max_new_tokens=S["tokens"], seed=seed)
            return [len(r) for r in gen(prompts, sp).response_ids]

    walls, lengths = [], None
    for rep in range(reps + 1):
        t0 = time.perf_counter()
        lengths = call(rep)
        if rep:
            walls.append(time.perf_counter() - t0)
    return {"wall": statistics.median(walls), "tokens": sum(lengths),
            "rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="tiny,small")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-vllm", action="store_true")
    ap.add_argument("--side", help=argparse.SUPPRESS)
    ap.add_argument("--size", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.side:
        print("@@ROLLOUT " + json.dumps(_side(a.side, a.size, a.reps)), flush=True)
        return 0
    import os

    env = {**os.environ, **QUIET_ONE_THREAD_ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    load0 = loadavg()
    lines = ["| size | rows x max tokens | side | wall s (median) | tokens | tokens/s | "
             "peak RSS GiB | wall / generate |", "|---|---|---|---|---|---|---|---|"]
    for size in a.sizes.split(","):
        S, res = SIZES[size], {}
        for side in SIDES:
            if side == "vllm" and a.no_vllm:
                continue
            print(f"{size}: {side} ...", file=sys.stderr, flush=True)
            p = subprocess.run([sys.executable, __file__, "--side", side, "--size", size,
                                "--reps", str(a.reps)], env=env, capture_output=True, text=True)
            out = [ln for ln in p.stdout.splitlines() if ln.startswith("@@ROLLOUT ")]
            if p.returncode or not out:
                raise SystemExit(f"{size} {side} failed:\n{p.stderr[-3000:]}")
            res[side] = json.loads(out[-1][len("@@ROLLOUT "):])
        g = res["generate"]["wall"]
        for side, r in res.items():
            lines.append(f"| {size} | {S['prompts'] * S['n']} x {S['tokens']} | {side} | "
                         f"{r['wall']:.3f} | {r['tokens']} | {r['tokens'] / r['wall']:.0f} | "
                         f"{r['rss_gib']:.2f} | {r['wall'] / g:.2f}x |")
    print(f"{time.strftime('%Y-%m-%d')}, load average {load0:.1f} -> {loadavg():.1f}, "
          f"{a.reps} calls per side after one warm-up")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
