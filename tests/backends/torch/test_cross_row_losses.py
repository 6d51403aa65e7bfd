"""Losses whose token choice is a statistic across rows (clip_cov, kl_cov) give the gradient of
the whole mini-batch whatever its layout: micro-batches in row order, sorted by length (the
torch default), packed (train.padding_free), and after an update (a fresh forward picks the
tokens). The reference is one call of the loss on the whole mini-batch, which picks its tokens
over all of them."""

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from mindrl.types import LossNormalizers, TrainBatch, pad_token_batch

# band (lb, ub) wide and ratios large: several tokens are picked, every band token among them
LOSSES = {"clip_cov": {"clip_cov_ratio": 0.5, "clip_cov_lb": 0.0, "clip_cov_ub": 50.0},
          "kl_cov": {"kl_cov_ratio": 0.1, "ppo_kl_coef": 5.0}}


def _batch(seed=0, vocab=1000):
    """Responses of 1-24 tokens (long-tailed), advantages constant per row (GRPO)."""
    rng = np.random.default_rng(seed)
    lengths = [1, 24, 3, 9, 2, 17, 5, 1]
    prompts = [rng.integers(5, vocab, rng.integers(2, 8)).tolist() for _ in lengths]
    tokens = pad_token_batch(prompts, [rng.integers(5, vocab, n).tolist() for n in lengths], 0)
    adv = rng.normal(size=(len(lengths), 1)).astype(np.float32) * tokens.response_mask
    return TrainBatch(tokens, adv, None)


def _grads(be, micro, norm):
    be.model.zero_grad(set_to_none=True)
    for mb in micro:
        be._micro_loss(mb, norm)[0].backward()
    return torch.cat([p.grad.flatten() for p in be.params]).clone()


def _whole(micro):
    """The micro-batches' rows as one batch, without the trainer's pick."""
    from mindrl.types import TokenBatch

    cols = max(mb.tokens.response_len for mb in micro)
    P = max(mb.tokens.prompt_len for mb in micro)
    prompts, resps, arrays = [], [], {"advantages": [], "old_logp": []}
    for mb in micro:
        tb = mb.tokens
        for i in range(len(mb)):
            p = tb.input_ids[i, :tb.prompt_len][tb.attention_mask[i, :tb.prompt_len] > 0]
            r = tb.input_ids[i, tb.prompt_len:][tb.response_mask[i] > 0]
            prompts.append(p.tolist())
            resps.append(r.tolist())
        for k in arrays:
            a = getattr(mb, k)
            if a is not None:
                arrays[k].append(np.pad(a, ((0, 0), (0, cols - a.shape[1]))))
    tokens = pad_token_batch(prompts, resps, 0, prompt_len=P, response_len=cols)
    assert isinstance(tokens, TokenBatch)
    cat = {k: np.concatenate(v) if v else None for k, v in arrays.items()}
    return TrainBatch(tokens, cat["advantages"], cat["old_logp"])


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_cross_row_losses_give_the_whole_mini_batch_gradient_in_every_layout(tiny_dir, make_cfg,
                                                                             loss):
    from mindrl.backends.base import build_backend
    from mindrl.trainer.rl import RLTrainer

    cfg = make_cfg(tiny_dir, algorithm={"policy_loss": loss, **LOSSES[loss]},
                   train={"micro_batch_size": 3, "ppo_epochs": 2},
                   rollout={"max_new_tokens": 24})
    be = build_backend("torch", cfg)
    w0 = {k: v.clone() for k, v in be.model.state_dict().items()}
    batch = _batch()
    batch.old_logp = be.logprobs(batch.tokens, temperature=1.0)   # the trainer's, before updates

    def run(layout):
        """(trainer's micro-batch gradient, whole-batch reference, rows of each micro-batch)
        for both epochs; between them the weights move, as an update would move them."""
        be.model.load_state_dict(w0)
        be.cfg = dataclasses.replace(cfg, train=dataclasses.replace(
            cfg.train, padding_free=layout == "packed"))
        be.trims_micro_batches = layout == "sorted"
        host = SimpleNamespace(cfg=be.cfg, world=1, allsum=lambda x: x, backend=be)
        out = []
        for epoch, (micro, norm) in enumerate(RLTrainer.mini_batches(host, batch, seed=0)):
            want = _grads(be, [_whole(micro)], norm)     # one call: picks over all the rows
            got = _grads(be, micro, norm)
            out.append((got, want, [len(m) for m in micro]))
            with torch.no_grad():                        # "the update": every weight moves
                for p in be.params:
                    p.add_(0.02 * torch.sign(p.grad))
        return out

    for layout in ("in_order", "sorted", "packed"):
        for epoch, (got, want, sizes) in enumerate(run(layout)):
            assert sizes == [3, 3, 2]
            if loss == "kl_cov" and epoch == 0:
                # logp = old_logp before any update: the penalty |logp - old_logp| sits at its
                # kink, its gradient the sign of float noise that changes with every forward's
                # shape (verl's too); compared after the weights moved
                continue
            scale = float(want.abs().max())
            assert scale > 1e-4
            np.testing.assert_allclose(got.numpy(), want.numpy(), atol=2e-5 * scale, rtol=0,
                                       err_msg=f"{loss} {layout} epoch {epoch}")


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_a_pick_per_micro_batch_would_differ(tiny_dir, make_cfg, loss):
    """The check above has teeth: the same micro-batches picking over their own tokens give
    another gradient, and several tokens are picked."""
    from algorithms.policy_loss import batch_token_selection
    from algorithms.rl_loss import loss_hyper
    from mindrl.backends.base import build_backend

    cfg = make_cfg(tiny_dir, algorithm={"policy_loss": loss, **LOSSES[loss]},
                   rollout={"max_new_tokens": 24})
    be = build_backend("torch", cfg)
    batch = _batch()
    logp = be.logprobs(batch.tokens, temperature=1.0)
    rng = np.random.default_rng(1)
    batch.old_logp = (logp + rng.normal(0, 0.3, logp.shape) * batch.tokens.response_mask
                      ).astype(np.float32)
    norm = LossNormalizers(float(batch.tokens.response_mask.sum()), 8.0, 24.0)
    want = _grads(be, [batch], norm)
    picked = batch_token_selection(loss, logp, batch.old_logp, batch.advantages,
                                   batch.tokens.response_mask, loss_hyper(cfg.algorithm))
    assert picked.sum() >= 3
    cuts = [np.arange(0, 3), np.arange(3, 6), np.arange(6, 8)]
    with_pick = dataclasses.replace(batch, cov_picked=picked)
    got = _grads(be, [with_pick.rows(c) for c in cuts], norm)
    scale = float(want.abs().max())
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=2e-5 * scale, rtol=0)
    own = _grads(be, [batch.rows(c) for c in cuts], norm)
    assert float((own - want).abs().max()) > 1e-2 * scale
