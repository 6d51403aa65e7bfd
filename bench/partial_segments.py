"""What partial rollouts cost on vLLM: a rollout worker without an interrupt hook generates in
segments of ``rollout.partial_check_tokens`` tokens and continues each from its prefix (prompt +
tokens so far). With vLLM's prefix cache the prefix's full blocks are not computed again.

    .venv/bin/python bench/partial_segments.py --prefix-caching on
    .venv/bin/python bench/partial_segments.py --prefix-caching off

One vLLM engine (CPU, in-process) on a builtin model; ``--prompt-len`` random prompt tokens,
``--n`` samples of exactly ``--tokens`` tokens (EOS ignored). Reports the median of ``--reps``
calls, after one warm-up of each, of one uninterrupted ``generate`` and of
:func:`mindrl.trainer.async_ray.sample_partial` in segments of ``--check`` tokens with no new
policy published (resumes must read 0), and the ratio.
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
    ap.add_argument("--model", default="builtin:small")
    ap.add_argument("--prefix-caching", choices=["on", "off"], default="on")
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--check", type=int, default=8)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args(argv)
    torch_one_thread()
    import numpy as np

    from mindrl.config.loader import load_config
    from mindrl.rollout.vllm_engine import VLLMEngine
    from mindrl.trainer.async_ray import sample_partial
    from mindrl.types import SamplingParams

    cfg = load_config(None, [f"model.path={a.model}", "model.chat_template=none",
                             "rollout.engine=vllm", f"rollout.max_new_tokens={a.tokens}",
                             f"data.max_prompt_len={a.prompt_len + 16}"])
    engine = VLLMEngine(cfg, enable_prefix_caching=a.prefix_caching == "on")
    engine.eos_ids = []
    plain = engine._vllm_params

    def no_eos(sampling, seed):          # every response exactly --tokens long
        p = plain(sampling, seed)
        p.ignore_eos = True
        return p

    engine._vllm_params = no_eos
    rng = np.random.default_rng(0)
    prompt = rng.integers(10, 1000, a.prompt_len).tolist()
    sp = SamplingParams(n=a.n, temperature=1.0, max_new_tokens=a.tokens, seed=1)

    class NoNewer:
        check_tokens = a.check

        def __call__(self):
            return False

    def whole():
        ro = engine.generate([prompt], sp)
        assert all(len(r) == a.tokens for r in ro.response_ids)

    def segmented():
        ro, _, resumes = sample_partial(engine, prompt, sp, 0, lambda: 0, NoNewer())
        assert resumes == 0 and all(len(r) == a.tokens for r in ro.response_ids)

    out = {}
    for name, fn in (("whole", whole), ("segments", segmented)):
        fn()                                                  # warm-up
        times = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        out[name] = statistics.median(times)
    engine.close()
    print(f"model {a.model}, prompt {a.prompt_len} tokens, {a.n} x {a.tokens} tokens, segments "
          f"of {a.check}, prefix caching {a.prefix_caching}: whole {out['whole']:.3f} s, "
          f"segments {out['segments']:.3f} s ({out['segments'] / out['whole']:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
