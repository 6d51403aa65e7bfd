"""Engine ``vllm`` on a mixture-of-experts checkpoint (tiny Qwen3-MoE): weight loads reach the
experts (vLLM's CPU MoE layers are repacked after each load), and an MoE engine starts after a
dense one in the same process once that one is closed."""

import numpy as np
import pytest
import torch

from mindrl.types import SamplingParams

pytestmark = pytest.mark.slow

PROMPTS = [list(range(40, 80)), list(range(300, 321)), [1, 328, 201, 19, 20, 21]]


def _max_gap(forward_logprobs, model, r, temperature):
    lp = forward_logprobs(model, r, temperature)
    return max(float(np.abs(lp[i, :len(x)] - x).max()) for i, x in enumerate(r.logprobs))


def test_moe_weight_loads_keep_the_experts_in_sync(tmp_path, tiny_dir, make_cfg,
                                                    forward_logprobs):
    """A Qwen3-MoE checkpoint: after each ``load_weights`` (the torch trainer's fused expert
    tensors) vLLM's CPU experts are repacked, so its log-probs stay those of the trainer's
    weights. Without the repack the experts run scrambled (gap ~5e-2 nats). A dense engine ran
    and closed first in this process: the MoE engine must not reuse its process groups."""
    pytest.importorskip("vllm")
    from mindrl.backends.base import build_backend
    from mindrl.models.tiny import resolve_model_path
    from mindrl.rollout import build_engine

    dense = build_engine("vllm", make_cfg(tiny_dir, data={"max_prompt_len": 64}))
    dense.close()
    path = resolve_model_path("builtin:tiny-qwen3-moe", cache_dir=str(tmp_path))
    backend = build_backend("torch", make_cfg(path))
    eng = build_engine("vllm", make_cfg(path, data={"max_prompt_len": 64},
                                        rollout={"max_new_tokens": 16}))
    try:
        sp = SamplingParams(n=2, temperature=1.0, max_new_tokens=10, seed=0)
        assert _max_gap(forward_logprobs, backend.model, eng.generate(PROMPTS, sp), 1.0) < 1e-4
        gen = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for p in backend.model.parameters():
                p.add_(0.05 * torch.randn(p.shape, generator=gen))
        eng.load_weights(backend.named_tensors())
        assert _max_gap(forward_logprobs, backend.model, eng.generate(PROMPTS, sp), 1.0) < 1e-4
        assert eng.sent["moe_repacks"] == 2                     # one per MoE layer
    finally:
        eng.close()
