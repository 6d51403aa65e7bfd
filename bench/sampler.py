"""Generation alone: the MindSpore native sampler vs the torch native engine (transformers
``generate``) on the same builtin model, calls interleaved in one process, so both see the
same load.

    .venv/bin/python bench/sampler.py --lengths 64,256,1024 --reps 3

Each call: ``--prompts`` prompts x ``--n`` samples, every response exactly the length asked
(EOS suppressed on both sides), temperature 1, one thread. Reports the median wall and
process CPU seconds of ``--reps`` calls after one warm-up call (MindSpore compiles in it), per
decoding step and as the MindSpore/torch ratio.
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

from bench.harness import torch_one_thread  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="builtin:tiny")
    ap.add_argument("--lengths", default="64,256,1024")
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args(argv)
    torch_one_thread()
    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.config.loader import load_config
    from mindrl.rollout.native_torch import NativeTorchEngine
    from mindrl.types import SamplingParams
    from trl_compare import wrap_generate

    lengths = [int(x) for x in a.lengths.split(",")]
    cfg = load_config(None, ["backend=mindspore", f"model.path={a.model}", "train.threads=1",
                             f"rollout.max_new_tokens={max(lengths)}", "data.max_prompt_len=64"])
    ms_engine = MindSporeBackend(cfg).native_engine()
    ms_engine.eos_ids = ()                     # sample without stop ids: every row runs to T
    torch_engine = NativeTorchEngine.from_config(cfg)
    prompts = [[5 + 3 * i + j for j in range(7 + 3 * i)] for i in range(a.prompts)]
    print("| response length | rows | torch wall s (ms/step) | torch CPU s | MindSpore wall s "
          "(ms/step) | MindSpore CPU s | ratio wall | ratio CPU |")
    print("|---|---|---|---|---|---|---|---|")
    wrap_generate(torch_engine.model, max(lengths), False, torch_engine.tokenizer.eos_token_id)
    for T in lengths:
        sp = SamplingParams(n=a.n, temperature=1.0, max_new_tokens=T, seed=1)
        res = {"torch": [], "ms": []}
        for rep in range(a.reps + 1):
            for name, eng in (("torch", torch_engine), ("ms", ms_engine)):
                t, c = time.perf_counter(), time.process_time()
                ro = eng.generate(prompts, sp)
                wall, cpu = time.perf_counter() - t, time.process_time() - c
                assert all(len(r) == T for r in ro.response_ids)
                if rep:                          # the first call compiles: dropped
                    res[name].append((wall, cpu))
        med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
               for k, v in res.items()}
        (tw, tc), (mw, mc) = med["torch"], med["ms"]
        print(f"| {T} | {a.prompts * a.n} | {tw:.3f} ({1e3 * tw / T:.2f}) | {tc:.3f} | "
              f"{mw:.3f} ({1e3 * mw / T:.2f}) | {mc:.3f} | {mw / tw:.2f} | {mc / tc:.2f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
