"""Long rows on the MindSpore backend's portable attention: past ``Kernels.long_rows`` queries the
causal self-attention runs in query blocks (kernels.BlockedCausalAttention) with a backward that
recomputes each block, equal to the full-bias kernel, and an 8,192-token row at the real
vocabulary back-propagates in bounded memory."""

import dataclasses
import os

import numpy as np
import pytest

import mindspore as ms
from mindspore import Tensor

from mindrl.backends.mindspore import kernels as K
from mindrl.types import LossNormalizers, TrainBatch, pad_token_batch


def _full_bias(key_mask: np.ndarray) -> np.ndarray:
    """The (B, 1, S, S) additive bias of Qwen2ForCausalLM.attn_bias, in NumPy."""
    S = key_mask.shape[1]
    allowed = np.tril(np.ones((S, S), np.float32))[None] * key_mask[:, None, :]
    return ((1.0 - allowed) * K.NEG_INF)[:, None].astype(np.float32)


@pytest.mark.parametrize("block,scores", [(16, K.BLOCK_SCORES), (64, 16 * 70)])
def test_blocked_attention_equals_the_full_bias_kernel_with_its_gradients(block, scores):
    # GQA (4 query heads on 2 kv heads), 70 slots in blocks of 16 (the queries padded to 80):
    # given, or blocks of 64 halved twice to keep a block within 16 x 70 query-key pairs;
    # a row left-padded by 5 (queries with no key allowed) and a row right-padded by 7; a
    # weighted sum of the real queries' outputs as the loss (a query with no key allowed is
    # padding: it averages the values the full kernel's does only when its run of query blocks
    # scores every key), through mindspore.jit (the training path)
    B, Nq, Nk, S, D, scale = 2, 4, 2, 70, 16, 0.25
    rng = np.random.default_rng(0)
    q = rng.normal(size=(B, Nq, S, D)).astype(np.float32)
    k = rng.normal(size=(B, Nk, S, D)).astype(np.float32)
    v = rng.normal(size=(B, Nk, S, D)).astype(np.float32)
    mask = np.ones((B, S), np.float32)
    mask[0, :5] = 0
    mask[1, S - 7:] = 0
    w = Tensor(rng.normal(size=(B, Nq, S, D)).astype(np.float32) * mask[:, None, :, None])
    bias = Tensor(_full_bias(mask))
    blocked = K.BlockedCausalAttention(scale, block, scores)

    def full_out(q, k, v, m):
        return K.attention_portable(q, k, v, bias, scale)

    def blocked_out(q, k, v, m):
        return blocked(q, k, v, m)

    def full_loss(q, k, v, m):
        return (full_out(q, k, v, m) * w).sum()

    def blocked_loss(q, k, v, m):
        return (blocked_out(q, k, v, m) * w).sum()

    args = [Tensor(a) for a in (q, k, v, mask)]
    want = ms.jit(ms.value_and_grad(full_loss, (0, 1, 2)))(*args)
    got = ms.jit(ms.value_and_grad(blocked_loss, (0, 1, 2)))(*args)
    assert float(got[0]) == pytest.approx(float(want[0]), rel=1e-5)
    for g, gw, name in zip(got[1], want[1], "qkv"):
        g, gw = g.asnumpy(), gw.asnumpy()
        assert np.abs(gw).max() > 1e-2
        assert np.abs(g - gw).max() <= 1e-5 * np.abs(gw).max(), name
    real = mask[:, None, :, None]
    out = ms.jit(blocked_out)(*args).asnumpy()
    ref = ms.jit(full_out)(*args).asnumpy()
    np.testing.assert_allclose(out * real, ref * real, rtol=0, atol=1e-5 * np.abs(ref).max())
    # against an independent reference: softmax in float64, the real queries
    s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), np.repeat(k, 2, 1)) * scale
    s = s + _full_bias(mask)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o64 = np.einsum("bhqk,bhkd->bhqd", p, np.repeat(v, 2, 1).astype(np.float64))
    np.testing.assert_allclose(out * real, o64 * real, rtol=0, atol=1e-5)


def test_query_blocks_shrink_on_long_rows_to_bound_one_block():
    # 128 queries per block up to 5,120 keys; an 8K row (8,192 + a 16-token prompt) in 64s,
    # a 16K one in 32s, never below 16
    assert K.BLOCK_SCORES == 128 * 5120
    assert K.query_block(128, 1516) == K.query_block(128, 5120) == 128
    assert K.query_block(128, 5121) == K.query_block(128, 8208) == 64
    assert K.query_block(128, 16400) == 32 and K.query_block(128, 10 ** 6) == 16
    assert K.query_block(64, 70, 16 * 70) == 16 and K.query_block(16, 70, 1) == 16


def _backend(path, *over):
    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.config.loader import load_config

    cfg = load_config(None, [f"model.path={path}", "backend=mindspore",
                             "rollout.max_new_tokens=1600", "data.max_prompt_len=16",
                             "train.micro_batch_size=2", "algorithm.entropy_coef=0.01",
                             "algorithm.kl.coef=0.05", *over])
    return MindSporeBackend(cfg, with_reference=True)


def _rows(seed, lengths, vocab=1000):
    """One micro-batch of ragged rows (prompts 3-8 tokens, responses of ``lengths``), old and
    reference log-probs near the model's, random advantages."""
    rng = np.random.default_rng(seed)
    prompts = [rng.integers(3, vocab, rng.integers(3, 9)).tolist() for _ in lengths]
    tb = pad_token_batch(prompts, [rng.integers(3, vocab, n).tolist() for n in lengths], 0)
    m = tb.response_mask
    adv = (rng.normal(size=m.shape) * m).astype(np.float32)
    old = ((rng.normal(size=m.shape) * 0.2 - 7.0) * m).astype(np.float32)
    ref = ((rng.normal(size=m.shape) * 0.2 - 7.0) * m).astype(np.float32)
    return TrainBatch(tb, adv, old, ref, None), LossNormalizers(float(m.sum()), 2.0, 1.0 *
                                                                  max(lengths))


@pytest.mark.slow
@pytest.mark.parametrize("lengths,long_rows,block", [((60, 41), 16, 16),
                                                     ((1500, 1100), K.LONG_ROWS,
                                                      K.QUERY_BLOCK)])
def test_rl_gradient_and_logprobs_of_long_rows_equal_the_full_bias_path(
        tiny_dir, monkeypatch, lengths, long_rows, block):
    # The whole model's RL gradient (every parameter) and the log-prob pass with the blocked
    # attention against the same backend with it off: short rows in many small blocks, and
    # medium rows past the default threshold in default blocks; the second row is right-padded
    # and the prompts are left-padded.
    mb, norm = _rows(0, lengths)
    S = mb.tokens.input_ids.shape[1]
    results = []
    for on in (False, True):
        monkeypatch.setattr(K, "PORTABLE", dataclasses.replace(
            K.PORTABLE, long_rows=long_rows if on else 0, query_block=block))
        be = _backend(tiny_dir)
        mask = be.model.causal_mask(Tensor(np.ones((1, S), np.float32)))
        assert len(mask.shape) == (2 if on else 4)            # the blocked path is taken
        grads = be.gradients([mb], norm)
        lp = be.logprobs(mb.tokens, temperature=1.0)
        results.append((grads, lp))
    (want, lp_want), (got, lp_got) = results
    assert set(got) == set(want) and len(want) > 10
    for name, g in want.items():
        scale = float(np.abs(g).max())
        assert scale > 0, name
        err = float(np.abs(got[name] - g).max())
        assert err <= 1e-5 * scale, f"{name}: {err:.3g} vs scale {scale:.3g}"
    real = mb.tokens.response_mask > 0
    np.testing.assert_allclose(lp_got[real], lp_want[real], rtol=1e-5, atol=2e-6)


@pytest.mark.slow
def test_an_8k_row_at_the_real_vocabulary_trains_in_bounded_memory(tmp_path_factory,
                                                                   head_memory_bench):
    # The RL gradient of one 8,192-token row at V = 151,936 through the compiled step, the head
    # in automatic chunks and the attention in query blocks. With the full-bias attention the
    # decoder alone holds (S, S) float32 scores, probabilities and their gradients per layer:
    # +5.6 GB at 4,096 tokens (the Benchmarks page), ~4x that at 8,192.
    cache = os.environ.get("MINDRL_TEST_CACHE") or str(tmp_path_factory.getbasetemp() / "cache")
    out = head_memory_bench.measure(8192, -1, cache, backend="mindspore")
    print(f"8192-token row, V={out['vocab']}: peak RSS +{out['peak_delta'] / 1e9:.3f} GB")
    assert out["vocab"] == out["tokenizer"] == 151936 and out["tokens"] == 8192
    assert out["long_rows"] == K.LONG_ROWS < 8192
    assert out["short_grad_rel"] <= 1e-5, out
    assert out["finite"] and out["head_grad"] > 0
    assert out["peak_delta"] < 1.5e9, f"peak {out['peak_delta'] / 1e9:.2f} GB: {out}"


def test_key_spans_cut_the_query_blocks_into_runs():
    # each run [lo, hi) of query blocks scores the keys of blocks 0..hi-1 only
    assert K.KEY_SPANS == 2
    assert K.key_spans(9, 4, 1040) == ((0, 2), (2, 4), (4, 6), (6, 9))
    assert K.key_spans(3, 4, 300) == ((0, 1), (1, 2), (2, 3))
    assert K.key_spans(9, 1, 1040) == ((0, 9),)
    # past SPAN_KEYS keys (blocks shrunk to bound memory) one run: each run keeps its buffers
    assert K.SPAN_KEYS == 5120
    assert K.key_spans(40, 4, 5120) == ((0, 10), (10, 20), (20, 30), (30, 40))
    assert K.key_spans(129, 4, 8208) == ((0, 129),)
