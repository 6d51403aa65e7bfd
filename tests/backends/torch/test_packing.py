"""Padding-free training (train.padding_free) and token-budget micro-batches
(train.max_tokens_per_micro_batch): the packed layout by hand, log-probs equal to a plain padded
forward, and the summed gradient unchanged however the rows are cut and packed."""

import dataclasses

import numpy as np
import pytest
import torch

from mindrl.types import LossNormalizers, TrainBatch, pad_token_batch


def _backend(cfg, **kw):
    from mindrl.backends.base import build_backend

    return build_backend("torch", cfg, **kw)


def _mixed_batch(seed=0, B=8, vocab=1000):
    """Prompts of 2-7 tokens, responses of 1-24 tokens (long-tailed), random advantages."""
    rng = np.random.default_rng(seed)
    prompts = [rng.integers(5, vocab, rng.integers(2, 8)).tolist() for _ in range(B)]
    lengths = [1, 24, 3, 9, 2, 17, 5, 1][:B]
    responses = [rng.integers(5, vocab, n).tolist() for n in lengths]
    tokens = pad_token_batch(prompts, responses, pad_id=0)
    adv = rng.normal(size=tokens.response_mask.shape).astype(np.float32) * tokens.response_mask
    return TrainBatch(tokens, adv, None)


def test_pack_lays_rows_end_to_end_with_restarting_positions():
    from mindrl.backends.torch.packing import pack

    # row 0: prompt [7, 8] response [9]; row 1: prompt [5] response [6, 4] (P=2, T=2)
    tb = pad_token_batch([[7, 8], [5]], [[9], [6, 4]], pad_id=0)
    p = pack(tb, "cpu")
    assert p.input_ids.tolist() == [[7, 8, 9, 5, 6, 4]]
    assert p.position_ids.tolist() == [[0, 1, 2, 0, 1, 2]]
    # the logits at packed position 1 predict 9; at 3 and 4 they predict 6 and 4
    assert p.keep.tolist() == [1, 3, 4]
    assert p.targets.tolist() == [9, 6, 4]
    assert p.rows.tolist() == [0, 1, 1] and p.cols.tolist() == [0, 0, 1]
    assert p.shape == (2, 2)


def test_trim_drops_columns_padded_in_every_row():
    from mindrl.backends.torch.packing import trim_tokens

    tb = pad_token_batch([[7, 8], [5]], [[9], [6]], pad_id=0, prompt_len=5, response_len=4)
    t = trim_tokens(tb)
    assert t.prompt_len == 2 and t.response_len == 1
    assert t.input_ids.tolist() == [[7, 8, 9], [0, 5, 6]]
    np.testing.assert_array_equal(t.position_ids, tb.position_ids[:, 3:6])


def test_trim_train_cuts_every_per_token_field():
    # every (B, T) field of a TrainBatch survives the trim, cut to the kept columns (a field
    # dropped here, e.g. the distillation teacher's log-probs, silently turns a loss term off)
    from mindrl.backends.torch.packing import trim_train

    tb = pad_token_batch([[7, 8], [5]], [[9], [6]], pad_id=0, prompt_len=5, response_len=4)
    arr = lambda k: np.arange(8, dtype=np.float32).reshape(2, 4) + 10 * k  # noqa: E731
    mb = TrainBatch(tb, arr(0), arr(1), ref_logp=arr(2), rollout_logp=None, teacher_logp=arr(4))
    t = trim_train(mb)
    assert t.tokens.response_len == 1 and t.rollout_logp is None
    for k, name in enumerate(["advantages", "old_logp", "ref_logp", "rollout_logp",
                              "teacher_logp"]):
        if name != "rollout_logp":
            np.testing.assert_array_equal(getattr(t, name), arr(k)[:, :1], err_msg=name)
    full = TrainBatch(pad_token_batch([[7], [5]], [[9, 1], [6, 2]], pad_id=0, prompt_len=1,
                                      response_len=2), arr(0)[:, :2], None,
                      teacher_logp=arr(4)[:, :2])
    np.testing.assert_array_equal(trim_train(full).teacher_logp, arr(4)[:, :2])


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_packed_logprobs_equal_a_plain_padded_forward(tiny_dir, make_cfg, temperature):
    cfg = make_cfg(tiny_dir, train={"padding_free": True})
    be = _backend(cfg)
    tokens = _mixed_batch().tokens
    logp, ent = be.logprobs_and_entropy(tokens, temperature=temperature, micro_batch_size=3)
    ids = torch.from_numpy(tokens.input_ids)
    with torch.no_grad():   # independent reference: one padded forward of the whole batch
        logits = be.model(input_ids=ids, attention_mask=torch.from_numpy(tokens.attention_mask),
                          position_ids=torch.from_numpy(tokens.position_ids)).logits
    P, T = tokens.prompt_len, tokens.response_len
    ref = torch.log_softmax(logits[:, P - 1:P - 1 + T] / temperature, -1)
    want = ref.gather(-1, ids[:, P:].unsqueeze(-1)).squeeze(-1).numpy() * tokens.response_mask
    assert logp.shape == want.shape == (8, 24)
    np.testing.assert_allclose(logp, want, atol=1e-5, rtol=0)
    want_ent = -(ref.exp() * ref).sum(-1).numpy() * tokens.response_mask
    np.testing.assert_allclose(ent, want_ent, atol=1e-4, rtol=0)


def _grads(be, micro, norm):
    be.model.zero_grad(set_to_none=True)
    for mb in micro:
        loss, _ = be._micro_loss(mb, norm)
        loss.backward()
    return torch.cat([p.grad.flatten() for p in be.params]).clone()


@pytest.mark.parametrize("agg", ["token_mean", "seq_mean_token_mean"])
def test_token_budget_packed_micro_batches_give_the_padded_gradient(tiny_dir, make_cfg, agg):
    from mindrl.trainer.batching import micro_batch_rows

    batch = _mixed_batch(seed=1)
    batch.old_logp = None
    norm = LossNormalizers(global_tokens=float(batch.tokens.response_mask.sum()),
                           global_seqs=float(len(batch)), max_len=24.0)
    padded = make_cfg(tiny_dir, algorithm={"loss_agg_mode": agg})
    be = _backend(padded)
    want = _grads(be, [batch], norm)                    # one padded micro-batch
    lengths = batch.tokens.attention_mask.sum(axis=1)
    cuts = micro_batch_rows(lengths, count=8, max_tokens=40, packed=True)
    assert len(cuts) >= 3 and sorted(np.concatenate(cuts).tolist()) == list(range(8))
    be.cfg = dataclasses.replace(be.cfg, train=dataclasses.replace(be.cfg.train,
                                                                   padding_free=True))
    got = _grads(be, [batch.rows(c) for c in cuts], norm)
    assert float(want.abs().max()) > 1e-4
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6, rtol=0)


def test_micro_batch_rows_by_count_and_by_budget():
    from mindrl.trainer.batching import micro_batch_rows

    lengths = np.array([10, 3, 7, 3, 12])
    by_count = micro_batch_rows(lengths, count=2)
    assert [c.tolist() for c in by_count] == [[0, 1], [2, 3], [4]]
    # padded: longest first 12 | 10 (2x12=24 > 20) | 10,7 (2x10=20) | 3,3 (3x7=21 > 20 -> new)
    padded = micro_batch_rows(lengths, count=2, max_tokens=20)
    assert [c.tolist() for c in padded] == [[4], [0, 2], [1, 3]]
    # packed: 12 | 10+7=17 (12+10=22 > 20) | 17+3=20 | 3
    packed = micro_batch_rows(lengths, count=2, max_tokens=20, packed=True)
    assert [c.tolist() for c in packed] == [[4], [0, 1, 2], [3]]
