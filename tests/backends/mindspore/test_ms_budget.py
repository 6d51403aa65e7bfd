"""MindSpore honours train.max_tokens_per_micro_batch: each micro-batch is padded to its own
(rows, prompt bucket, response bucket) shape, cut so that rows x padded length stays within
the budget, and the micro-batches still give the whole batch's gradient."""

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from mindrl.types import TrainBatch, pad_token_batch

BUDGET = 600


def _setup(tiny_dir):
    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.config.loader import load_config
    from mindrl.trainer.rl import RLTrainer

    cfg = load_config(None, [f"model.path={tiny_dir}", "backend=mindspore",
                             "rollout.max_new_tokens=300", "data.max_prompt_len=16",
                             "train.micro_batch_size=16", "train.prompts_per_step=2",
                             "rollout.n=8", f"train.max_tokens_per_micro_batch={BUDGET}"])
    be = MindSporeBackend(cfg)
    rng = np.random.default_rng(0)
    # one row of 10 + 290 tokens and 15 rows of 10 + 20 (lengths 300 + 15 x 30)
    resp = [290] + [20] * 15
    tokens = pad_token_batch([rng.integers(5, 1000, 10).tolist() for _ in resp],
                             [rng.integers(5, 1000, n).tolist() for n in resp], 0)
    adv = rng.normal(size=(16, 1)).astype(np.float32) * tokens.response_mask
    batch = TrainBatch(tokens, adv, None)
    host = SimpleNamespace(cfg=cfg, world=1, allsum=lambda x: x, backend=be)
    (micro, norm), = RLTrainer.mini_batches(host, batch, seed=0)
    return be, batch, micro, norm


def test_micro_batch_shapes_stay_within_the_token_budget(tiny_dir):
    be, batch, micro, norm = _setup(tiny_dir)
    assert sorted(int(i) for mb in micro for i in mb.tokens.response_mask.sum(axis=1)) == \
        sorted(int(i) for i in batch.tokens.response_mask.sum(axis=1))
    _, shapes, inputs = be._rl_inputs(micro, norm)
    costs = [rows * (P + T) for rows, P, T in shapes]
    # buckets: prompts 16, responses 16 32 64 128 256 300; padded lengths 16 + 300 and 16 + 32
    assert shapes[0] == (1, 16, 300)           # the long row alone: 2 x 316 > 600
    assert [s[1:] for s in shapes[1:]] == [(16, 32)] * (len(shapes) - 1)
    assert all(c <= BUDGET for c in costs), costs          # before: 16 x 316 = 5056 each
    assert sum(len(mb) for mb in micro) == 16 and len(micro) == 3, [len(m) for m in micro]
    assert costs == [316, 576, 192]            # 12 rows, then 3 rows padded to 4
    for (args, _), (rows, P, T) in zip(inputs, shapes):
        assert args[0].shape == (rows, P + T)


@pytest.mark.slow
def test_token_budget_micro_batches_give_the_whole_batch_gradient(tiny_dir):
    be, batch, micro, norm = _setup(tiny_dir)
    got = be.gradients(micro, norm)
    be.cfg = dataclasses.replace(be.cfg, train=dataclasses.replace(
        be.cfg.train, max_tokens_per_micro_batch=0))
    want = be.gradients([batch], norm)                     # one micro-batch of all 16 rows
    worst = 0.0
    for name, ref in want.items():
        scale = max(float(np.abs(ref).max()), 1e-8)
        worst = max(worst, float(np.abs(got[name] - ref).max()) / scale)
    assert worst < 1e-4, worst
