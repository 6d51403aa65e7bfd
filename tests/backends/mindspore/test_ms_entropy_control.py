"""Adaptive entropy control on the MindSpore backend: the compiled RL step takes the entropy
coefficient as an input, so a new coefficient each step changes the gradient (equal to the
torch backend's with that coefficient as a constant) without compiling a new graph."""

import numpy as np
import pytest

from mindrl.config.loader import load_config
from mindrl.types import LossNormalizers, TrainBatch, pad_token_batch


def _cfg(backend, tiny_dir, *extra):
    return load_config(None, [f"backend={backend}", f"model.path={tiny_dir}",
                              "rollout.max_new_tokens=16", "data.max_prompt_len=16",
                              "train.micro_batch_size=4", *extra])


@pytest.mark.slow
def test_step_coefficient_is_an_input_and_matches_torch(tiny_dir):
    import torch

    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.backends.torch.backend import TorchBackend

    rng = np.random.default_rng(0)
    prompts = [list(rng.integers(5, 1024, rng.integers(2, 10))) for _ in range(8)]
    resps = [list(rng.integers(5, 1024, rng.integers(1, 13))) for _ in range(8)]
    tb = pad_token_batch(prompts, resps, 0)
    adv = (rng.normal(size=tb.response_mask.shape) * tb.response_mask).astype(np.float32)
    batch = TrainBatch(tb, adv, None, None, None)
    micro = [batch.rows(np.arange(0, 4)), batch.rows(np.arange(4, 8))]
    tokens = float(tb.response_mask.sum())
    ms_be = MindSporeBackend(_cfg("mindspore", tiny_dir, "algorithm.entropy_control.enabled=true",
                                  "algorithm.entropy_control.max_coef=1.0"))
    compiled = None
    for coef in (0.0, 0.3, 0.7):
        got = ms_be.gradients(micro, LossNormalizers(tokens, 8.0, 16.0, entropy_coef=coef))
        if compiled is None:
            compiled = len(ms_be._train_fns)
        assert len(ms_be._train_fns) == compiled          # no new graph for a new coefficient
        ref_be = TorchBackend(_cfg("torch", tiny_dir, f"algorithm.entropy_coef={coef}"))
        ref_be.model.zero_grad()
        norm = LossNormalizers(tokens, 8.0, 16.0)
        for mb in micro:
            loss, _ = ref_be._micro_loss(mb, norm)
            loss.backward()
        ref = {n: p.grad.numpy() for n, p in ref_be.model.named_parameters()
               if p.grad is not None}
        for name, r in ref.items():
            scale = max(np.abs(r).max(), 1e-8)
            err = np.abs(got[name] - r).max() / scale
            assert err < 1e-4, f"coef {coef}, {name}: relative gradient error {err:.2e}"
        if coef == 0.0:
            g0 = got
    diff = max(np.abs(got[n] - g0[n]).max() for n in got)
    assert diff > 1e-6                                     # the coefficient reached the graph
