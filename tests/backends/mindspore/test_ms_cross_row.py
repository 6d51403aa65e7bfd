"""MindSpore with a loss whose token choice spans rows (clip_cov, kl_cov): the trainer picks the
tokens over the whole mini-batch, and MindSpore's in-order, bucket-padded micro-batches give the
torch gradient of the whole mini-batch in one call (which picks over all its rows)."""

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from mindrl.types import LossNormalizers

LOSSES = {"clip_cov": ["algorithm.clip_cov_ratio=0.5", "algorithm.clip_cov_lb=0.0",
                       "algorithm.clip_cov_ub=50.0"],
          "kl_cov": ["algorithm.kl_cov_ratio=0.1", "algorithm.ppo_kl_coef=5.0"]}


@pytest.mark.slow
@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_mindspore_micro_batches_give_the_whole_mini_batch_gradient(tiny_dir, loss):
    from mindrl.backends.base import build_backend
    from mindrl.backends.batching import micro_batch_rows
    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.config.loader import load_config
    from mindrl.trainer.rl import select_tokens
    from mindrl.types import TrainBatch, pad_token_batch

    over = [f"model.path={tiny_dir}", f"algorithm.policy_loss={loss}", *LOSSES[loss],
            "rollout.max_new_tokens=24", "train.micro_batch_size=4"]
    rng = np.random.default_rng(0)
    lengths = [1, 24, 3, 9, 2, 17, 5, 1]
    prompts = [rng.integers(5, 1000, rng.integers(2, 8)).tolist() for _ in lengths]
    tokens = pad_token_batch(prompts, [rng.integers(5, 1000, n).tolist() for n in lengths], 0)
    mask = tokens.response_mask
    adv = rng.normal(size=(8, 1)).astype(np.float32) * mask
    ms_be = MindSporeBackend(load_config(None, ["backend=mindspore", *over]))
    logp = ms_be.logprobs(tokens, temperature=1.0)
    old = ((logp + rng.normal(0, 0.3, logp.shape)) * mask).astype(np.float32)
    batch = TrainBatch(tokens, adv, old)
    host = SimpleNamespace(cfg=ms_be.cfg, world=1, backend=ms_be)
    # after an update: the pick comes from a forward under the current weights
    part = select_tokens(host, batch, fresh=False)
    assert part.cov_picked.sum() >= 3
    cuts = micro_batch_rows(mask.sum(axis=1), count=4, by_length=False)
    assert [c.tolist() for c in cuts] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    norm = LossNormalizers(float(mask.sum()), 8.0, 24.0)
    got = ms_be.gradients([part.rows(c) for c in cuts], norm)

    th = build_backend("torch", load_config(None, ["backend=torch", *over]))
    th.model.zero_grad(set_to_none=True)
    th._micro_loss(batch, norm)[0].backward()        # one call, no pick given: all 8 rows
    want = {n: p.grad.numpy() for n, p in th.model.named_parameters()}
    th.model.zero_grad(set_to_none=True)             # picking per micro-batch differs
    for c in cuts:
        th._micro_loss(dataclasses.replace(batch.rows(c), cov_picked=None), norm)[0].backward()
    own = {n: p.grad.numpy() for n, p in th.model.named_parameters()}
    worst = own_worst = 0.0
    for name, ref in want.items():
        scale = max(float(np.abs(ref).max()), 1e-8)
        worst = max(worst, float(np.abs(got[name] - ref).max()) / scale)
        own_worst = max(own_worst, float(np.abs(own[name] - ref).max()) / scale)
    assert worst < 1e-4, worst
    assert own_worst > 1e-2, own_worst
