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


@pytest.mark.parametrize("padding_free", [True, False])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_packed_logprobs_equal_a_plain_padded_forward(tiny_dir, make_cfg, temperature,
                                                      padding_free):
    # padded: rows are scored in length-sorted micro-batches and must come back in place
    cfg = make_cfg(tiny_dir, train={"padding_free": padding_free})
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
    from mindrl.backends.batching import micro_batch_rows

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
    from mindrl.backends.batching import micro_batch_rows

    lengths = np.array([10, 3, 7, 3, 12])
    # by count: longest first 12, 10 | 7, 3 | 3 (ties keep row order), rows ascending in each
    by_count = micro_batch_rows(lengths, count=2)
    assert [c.tolist() for c in by_count] == [[0, 4], [1, 2], [3]]
    # a backend that pads every micro-batch to one shape (MindSpore) keeps the row order
    in_order = micro_batch_rows(lengths, count=2, by_length=False)
    assert [c.tolist() for c in in_order] == [[0, 1], [2, 3], [4]]
    # padded: longest first 12 | 10 (2x12=24 > 20) | 10,7 (2x10=20) | 3,3 (3x7=21 > 20 -> new)
    padded = micro_batch_rows(lengths, count=2, max_tokens=20)
    assert [c.tolist() for c in padded] == [[4], [0, 2], [1, 3]]
    # packed: 12 | 10+7=17 (12+10=22 > 20) | 17+3=20 | 3
    packed = micro_batch_rows(lengths, count=2, max_tokens=20, packed=True)
    assert [c.tolist() for c in packed] == [[4], [0, 1, 2], [3]]


# ------------------------------------------------------- length-sorted micro-batches (default)
AGG = ["token_mean", "seq_mean_token_sum", "seq_mean_token_mean", "seq_mean_token_sum_norm"]


def _reference_grad(be, batch, rows, agg, max_len):
    """Independent full-batch gradient of the on-policy clipped loss over ``rows`` of ``batch``:
    each row alone through the model, unpadded (so no micro-batching and no masking at all),
    loss = -A logp per token (its gradient at ratio 1), aggregated by hand with the counts of
    exactly these rows."""
    tb = batch.tokens
    P = tb.prompt_len
    be.model.zero_grad(set_to_none=True)
    per_row = []
    for i in rows:
        prompt = tb.input_ids[i, :P][tb.attention_mask[i, :P] == 1]
        r = int(tb.response_mask[i].sum())
        seq = torch.from_numpy(np.concatenate([prompt, tb.input_ids[i, P:P + r]]))[None]
        logits = be.model(input_ids=seq).logits[0, len(prompt) - 1:len(prompt) - 1 + r]
        logp = torch.log_softmax(logits.float(), -1).gather(-1, seq[0, len(prompt):, None])[:, 0]
        per_row.append(-(torch.from_numpy(batch.advantages[i, :r]) * logp))
    tokens, seqs = sum(len(x) for x in per_row), len(per_row)
    loss = {"token_mean": lambda: sum(x.sum() for x in per_row) / tokens,
            "seq_mean_token_sum": lambda: sum(x.sum() for x in per_row) / seqs,
            "seq_mean_token_mean": lambda: sum(x.mean() for x in per_row) / seqs,
            "seq_mean_token_sum_norm": lambda: sum(x.sum() for x in per_row) / (seqs * max_len),
            }[agg]()
    loss.backward()
    return torch.cat([p.grad.flatten() for p in be.params]).clone()


def _own_norm(mb, max_len):
    """The per-micro-batch normalisers a broken trainer would pass."""
    return LossNormalizers(global_tokens=float(mb.tokens.response_mask.sum()),
                           global_seqs=float(len(mb)), max_len=max_len)


@pytest.mark.parametrize("agg", AGG)
def test_length_sorted_micro_batches_give_the_in_order_full_batch_gradient(tiny_dir, make_cfg,
                                                                          agg):
    from mindrl.backends.batching import micro_batch_rows

    batch = _mixed_batch(seed=2)
    batch.old_logp = None
    be = _backend(make_cfg(tiny_dir, algorithm={"loss_agg_mode": agg}))
    norm = LossNormalizers(global_tokens=float(batch.tokens.response_mask.sum()),
                           global_seqs=float(len(batch)), max_len=24.0)
    want = _reference_grad(be, batch, range(len(batch)), agg, 24.0)
    in_order = [np.arange(s, min(s + 3, 8)) for s in range(0, 8, 3)]
    cuts = micro_batch_rows(batch.tokens.attention_mask.sum(axis=1), count=3)
    # response lengths [1, 24, 3, 9, 2, 17, 5, 1]: the long rows share a micro-batch
    assert [c.tolist() for c in cuts] != [c.tolist() for c in in_order]
    assert sorted(np.concatenate(cuts).tolist()) == list(range(8))
    scale = float(want.abs().max())
    assert scale > 1e-4
    for layout in (in_order, cuts):
        got = _grads(be, [batch.rows(c) for c in layout], norm)
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5 * scale, rtol=0)
    # normalisers counted per micro-batch would change the gradient: this test would see it
    be.model.zero_grad(set_to_none=True)
    for c in cuts:
        mb = batch.rows(c)
        be._micro_loss(mb, _own_norm(mb, 24.0))[0].backward()
    wrong = torch.cat([p.grad.flatten() for p in be.params])
    assert float((wrong - want).abs().max()) > 1e-2 * scale


@pytest.mark.parametrize("agg", AGG)
def test_ppo_mini_batches_cut_by_length_give_each_mini_batch_gradient(tiny_dir, make_cfg, agg):
    # the trainer's own mini-batching (2 epochs x 2 mini-batches of 4 rows, micro-batches of
    # 2): each mini-batch's summed micro-batch gradient equals the independent gradient of
    # exactly its rows, normalised by its own counts
    from types import SimpleNamespace

    from mindrl.trainer.rl import RLTrainer

    batch = _mixed_batch(seed=3)
    batch.old_logp = None
    cfg = make_cfg(tiny_dir, algorithm={"loss_agg_mode": agg},
                   train={"mini_batch_size": 4, "micro_batch_size": 2, "ppo_epochs": 2},
                   rollout={"max_new_tokens": 24})
    be = _backend(cfg)
    host = SimpleNamespace(cfg=cfg, world=1, allsum=lambda x: x, backend=be)
    ids = [r.tobytes() for r in batch.tokens.input_ids]
    seen = 0
    for micro, norm in RLTrainer.mini_batches(host, batch, seed=5):
        rows = sorted(ids.index(r.tobytes()) for mb in micro for r in mb.tokens.input_ids)
        assert len(rows) == 4 and len(set(rows)) == 4 and [len(mb) for mb in micro] == [2, 2]
        lengths = [mb.tokens.attention_mask.sum(axis=1) for mb in micro]
        assert lengths[0].min() >= lengths[1].max()      # the two longest rows go together
        want = _reference_grad(be, batch, rows, agg, 24.0)
        got = _grads(be, micro, norm)
        scale = float(want.abs().max())
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5 * scale, rtol=0)
        seen += 1
    assert seen == 4


@pytest.mark.parametrize("padding_free", [False, True])
def test_trainer_sorts_padded_micro_batches_and_keeps_packed_ones_in_order(make_cfg,
                                                                          padding_free):
    # packed micro-batches carry no padding to save: sorting would only put the longest rows in
    # one pack (dense block-diagonal mask, quadratic in its length), so they keep row order;
    # MindSpore (no trims_micro_batches) keeps it too
    from types import SimpleNamespace

    from mindrl.backends.mindspore.backend import MindSporeBackend
    from mindrl.backends.torch.backend import TorchBackend
    from mindrl.trainer.rl import RLTrainer

    batch = _mixed_batch(seed=4)          # response lengths [1, 24, 3, 9, 2, 17, 5, 1]
    cfg = make_cfg("unused", train={"micro_batch_size": 3, "padding_free": padding_free})
    ids = [r.tobytes() for r in batch.tokens.input_ids]

    def cuts(backend):
        host = SimpleNamespace(cfg=cfg, world=1, allsum=lambda x: x, backend=backend)
        (micro, _), = RLTrainer.mini_batches(host, batch, seed=0)
        return [sorted(ids.index(r.tobytes()) for r in mb.tokens.input_ids) for mb in micro]

    in_order = [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert cuts(MindSporeBackend) == in_order
    # by total length (prompt + response: 7 26 6 14 6 21 12 5), longest first: 26 21 14 |
    # 12 7 6 | 6 5 (ties keep row order)
    want = in_order if padding_free else [[1, 3, 5], [0, 2, 6], [4, 7]]
    assert cuts(TorchBackend) == want


def test_segment_attention_is_causal_attention_within_each_sequence_by_hand():
    # 3 sequences packed in one row, 2 query heads sharing 1 key/value head (grouped query):
    # each position attends to its own sequence's earlier positions only
    from types import SimpleNamespace

    from mindrl.backends.torch.segment_attention import SEGMENTS_KWARG, segment_sdpa

    g = torch.Generator().manual_seed(0)
    lengths, D, scale = (3, 5, 2), 4, 0.5
    N = sum(lengths)
    q, k, v = (torch.randn(1, h, N, D, generator=g) for h in (2, 1, 1))
    module = SimpleNamespace(is_causal=True, num_key_value_groups=2, training=False)
    out, _ = segment_sdpa(module, q, k, v, None, scaling=scale, **{SEGMENTS_KWARG: lengths})
    want = np.zeros((N, 2, D))
    starts = np.cumsum((0,) + lengths[:-1])
    for s, n in zip(starts, lengths):
        for i in range(s, s + n):
            for h in range(2):
                keys = range(s, i + 1)
                sc = np.array([float(q[0, h, i] @ k[0, 0, j]) * scale for j in keys])
                w = np.exp(sc - sc.max())
                w /= w.sum()
                want[i, h] = sum(wj * v[0, 0, j].numpy() for wj, j in zip(w, keys))
    assert out.shape == (1, N, 2, D)
    np.testing.assert_allclose(out[0].numpy(), want, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match=SEGMENTS_KWARG):        # lengths that do not fit
        segment_sdpa(module, q, k, v, None, scaling=scale, **{SEGMENTS_KWARG: (3, 5)})


def test_packed_forward_attends_over_each_sequence_not_the_whole_row(tiny_dir, make_cfg,
                                                                     monkeypatch):
    # a packed micro-batch of N tokens must not run one N x N attention with a built
    # block-diagonal mask (N^2 scores, 2B x the sequences' own): every SDPA call sees one
    # sequence's keys, causally, with no mask tensor
    cfg = make_cfg(tiny_dir, train={"padding_free": True})
    be = _backend(cfg)
    tokens = _mixed_batch().tokens
    seqs = tokens.attention_mask.sum(axis=1).tolist()
    calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def recording(q, k, v, attn_mask=None, **kw):
        calls.append((q.shape[-2], k.shape[-2], attn_mask is None, bool(kw.get("is_causal"))))
        return sdpa(q, k, v, attn_mask=attn_mask, **kw)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    logp, _ = be.logprobs_and_entropy(tokens, temperature=1.0, micro_batch_size=8)
    layers = be.model.config.num_hidden_layers
    assert len(calls) == layers * len(seqs)
    assert sorted(c[1] for c in calls) == sorted(seqs * layers)
    assert all(qn == kn and no_mask and causal for qn, kn, no_mask, causal in calls)
    assert np.isfinite(logp).all() and (logp[tokens.response_mask > 0] < 0).all()


def test_packed_gradient_with_gradient_checkpointing_is_the_padded_gradient(tiny_dir,
                                                                            make_cfg):
    # the recomputed forward of a checkpointed layer gets the sequences' lengths too
    batch = _mixed_batch(seed=2)
    batch.old_logp = None
    norm = LossNormalizers(global_tokens=float(batch.tokens.response_mask.sum()),
                           global_seqs=float(len(batch)), max_len=24.0)
    want = _grads(_backend(make_cfg(tiny_dir)), [batch], norm)
    be = _backend(make_cfg(tiny_dir, train={"padding_free": True},
                           model={"gradient_checkpointing": True}))
    be.model.train()
    assert be.model.is_gradient_checkpointing
    got = _grads(be, [batch], norm)
    assert float(want.abs().max()) > 1e-4
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6, rtol=0)
