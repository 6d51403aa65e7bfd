"""The torch backend and the native engine on CUDA in bf16 (run by launch/ci_gpu.sh through
``-m gpu``); skipped with the reason on machines without an NVIDIA GPU."""

import numpy as np
import pytest
import torch

from mindrl.rollout.native_torch import make_native_engine
from mindrl.types import LossNormalizers, SamplingParams, pad_token_batch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")]


def test_bf16_backend_and_native_engine_on_cuda(tiny_dir, make_cfg, fixed_batch):
    from mindrl.backends.base import build_backend

    cfg = make_cfg(tiny_dir, device="cuda", model={"dtype": "bfloat16"},
                   train={"lr": 1e-3}, rollout={"temperature": 1.0})
    be = build_backend("torch", cfg)
    assert next(be.model.parameters()).is_cuda
    batch = fixed_batch()
    batch.old_logp = be.logprobs(batch.tokens, temperature=1.0)
    before = [p.detach().clone() for p in be.model.parameters()]
    norm = LossNormalizers(float(batch.tokens.response_mask.sum()), float(len(batch)), 5.0)
    m = be.train_step([batch.rows(slice(0, 4)), batch.rows(slice(4, 8))], norm)
    assert np.isfinite(m["loss"]) and m["update_skipped"] == 0.0
    assert any((a != b).any() for a, b in zip(before, be.model.parameters()))

    engine = make_native_engine(cfg, backend=be)
    r = engine.generate([[1, 328, 201, 19], list(range(40, 70))],
                        SamplingParams(n=4, max_new_tokens=16, seed=0))
    tokens = pad_token_batch(r.prompt_ids, r.response_ids, pad_id=0)
    trainer = be.logprobs(tokens, temperature=1.0)
    gap = np.mean([np.abs(trainer[i, :len(x)] - x).mean() for i, x in enumerate(r.logprobs)])
    assert gap < 0.05, gap                          # bf16: cached decode vs full forward
