"""The LM head in chunks on the MindSpore backend (train.logprob_chunk_tokens): the compiled
RL step's gradient, loss and metrics and the log-prob passes equal the full-vocabulary path,
and a long row at the real vocabulary (151,936) back-propagates in bounded memory."""

import dataclasses
import os

import numpy as np
import pytest

from mindrl.types import LossNormalizers, TrainBatch, pad_token_batch


def _cache(tmp_path_factory):
    return os.environ.get("MINDRL_TEST_CACHE") or str(tmp_path_factory.getbasetemp() / "cache")


def _backend(path, *over):
    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.config.loader import load_config

    cfg = load_config(None, [f"model.path={path}", "backend=mindspore",
                             "rollout.max_new_tokens=32", "data.max_prompt_len=16",
                             "train.micro_batch_size=4", "algorithm.entropy_coef=0.01",
                             "algorithm.kl.coef=0.05", *over])
    return MindSporeBackend(cfg, with_reference=True)


def _set_chunk(be, n):
    be.cfg = dataclasses.replace(be.cfg, train=dataclasses.replace(be.cfg.train,
                                                                   logprob_chunk_tokens=n))


def _micro_batches(seed, vocab=1000):
    """Two micro-batches of 4 ragged rows (responses 1-29 tokens): old log-probs near the
    model's (ratios off 1, clips bind), reference log-probs, random advantages."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(2):
        prompts = [rng.integers(3, vocab, rng.integers(2, 9)).tolist() for _ in range(4)]
        resps = [rng.integers(3, vocab, rng.integers(1, 30)).tolist() for _ in range(4)]
        tb = pad_token_batch(prompts, resps, 0)
        m = tb.response_mask
        adv = (rng.normal(size=m.shape) * m).astype(np.float32)
        old = ((rng.normal(size=m.shape) * 0.2 - 7.0) * m).astype(np.float32)
        ref = ((rng.normal(size=m.shape) * 0.2 - 7.0) * m).astype(np.float32)
        out.append(TrainBatch(tb, adv, old, ref, None))
    norm = LossNormalizers(float(sum(mb.tokens.response_mask.sum() for mb in out)), 8.0, 32.0)
    return out, norm


def _step(be, mbs, norm):
    """(metric sums, gradients by name) of the RL loss over ``mbs``, no update."""
    from mindrl.backends.mindspore.weights import write_param

    sums = be._accumulate("rl", *be._prepare("rl", mbs, norm))[0]
    grads = {p.name: g for p, g in zip(be.params, be.optimizer.grad_arrays())}
    be.optimizer.zero_grad()
    write_param(be._loss_acc, np.zeros(1, np.float32))
    return sums, grads


def _assert_same(got, want, rel=1e-5):
    (s_got, g_got), (s_want, g_want) = got, want
    assert set(s_got) == set(s_want) and "loss" in s_want and "entropy" in s_want
    for k, v in s_want.items():
        assert s_got[k] == pytest.approx(v, rel=1e-5, abs=1e-6), k
    assert set(g_got) == set(g_want)
    for name, g in g_want.items():
        scale = float(np.abs(g).max())
        err = float(np.abs(g_got[name] - g).max())
        assert err <= rel * max(scale, 1e-6), f"{name}: {err:.3g} vs scale {scale:.3g}"


def _chunked_keys(be):
    return [k for k in be._train_fns if "chunked" in k]


@pytest.mark.slow
def test_chunked_rl_step_and_logprobs_equal_full_logits(tiny_dir):
    # builtin:tiny ties the head to the embedding: the head's gradient from the chunks is added
    # to the embedding's from the decoder. Temperature and the rollout's top-k / top-p masks
    # are applied inside each chunk.
    be = _backend(tiny_dir, "rollout.temperature=0.7", "rollout.top_k=40",
                  "rollout.top_p=0.9")
    assert be.spec.tie_word_embeddings
    mbs, norm = _micro_batches(seed=0)
    tokens = mbs[0].tokens
    _set_chunk(be, 0)
    want = _step(be, mbs, norm)
    passes = ({}, {"truncated": True}, {"reference": True})
    want_lp = [be.logprobs(tokens, temperature=0.7, micro_batch_size=2, **kw) for kw in passes]
    assert not _chunked_keys(be)
    _set_chunk(be, 7)                   # ~60 scored tokens per micro-batch: 8-9 chunks
    assert be._head_chunk(4 * 32) == 7
    got = _step(be, mbs, norm)
    assert _chunked_keys(be), "the chunked step did not run"
    _assert_same(got, want)
    scale = max(float(np.abs(g).max()) for g in want[1].values())
    assert scale > 1e-3
    for kw, lp in zip(passes, want_lp):
        # the chunked pass's head runs on NumPy's BLAS in host memory (host_head): float32
        # rounding of another GEMM, a few ulp of log-probs near -7
        np.testing.assert_allclose(be.logprobs(tokens, temperature=0.7, micro_batch_size=2,
                                               **kw), lp, atol=1e-5, rtol=0, err_msg=str(kw))
        assert np.abs(lp).max() > 1.0
    # an update through the chunked step moves every parameter
    before = dict(be.named_weights())
    out = be.train_step(mbs, norm)
    assert out["update_skipped"] == 0.0 and out["grad_norm"] > 0
    after = dict(be.named_weights())
    assert all(np.abs(after[k] - before[k]).max() > 0 for k in before)


@pytest.mark.slow
def test_chunked_rl_step_keeps_the_chunks_logits_when_they_fit(tiny_dir, monkeypatch):
    # ~60 scored tokens per micro-batch x V = 1,024 fit half the head's budget: the chunked
    # step keeps each chunk's logits from its forward and its backward never runs the head
    # again (no call of the recomputing gradient, one kept-logits gradient per chunk); over the
    # budget (one kept copy counted as 10^6) each chunk's head runs again. Both equal the full
    # logits' gradient (entropy bonus: the entropy's gradient too). The compiled chunks (the
    # path without host memory: accelerators, bf16 weights, a teacher's exact KL); the host
    # head's kept and recomputed paths are test_ms_host_head.py's.
    import mindrl.backends.mindspore.chunked_head as ch
    import mindrl.backends.mindspore.host_head as hh

    monkeypatch.setattr(hh, "HOST_HEAD", False)
    calls = {"recompute": 0, "kept": 0}

    def counted(make, key):
        def build(*args, **kw):
            fn = make(*args, **kw)

            def run(*a, **k):
                calls[key] += 1
                return fn(*a, **k)
            return run
        return build

    monkeypatch.setattr(ch, "make_grad_fn", counted(ch.make_grad_fn, "recompute"))
    monkeypatch.setattr(ch, "make_kept_grad_fn", counted(ch.make_kept_grad_fn, "kept"))
    be = _backend(tiny_dir)
    mbs, norm = _micro_batches(seed=3)
    _set_chunk(be, 0)
    want = _step(be, mbs, norm)
    chunks = sum(-(-int(mb.tokens.response_mask.sum()) // 7) for mb in mbs)
    assert chunks >= 10
    _set_chunk(be, 7)
    got = _step(be, mbs, norm)
    assert be._head_kept and calls == {"recompute": 0, "kept": chunks}
    # the kept logits' weight gradient is one product passed to the decoder backward: no
    # (V, H) accumulator is made
    assert getattr(be, "_head_acc", None) is None
    _assert_same(got, want)
    assert max(float(np.abs(g).max()) for g in want[1].values()) > 1e-3
    monkeypatch.setattr(ch, "MINDSPORE_KEPT_COPIES", 10 ** 6)
    got = _step(be, mbs, norm)
    assert not be._head_kept and calls == {"recompute": chunks, "kept": chunks}
    _assert_same(got, want)


def test_chunks_are_balanced_multiples_of_eight():
    # as many chunks as the chunk length needs, each the shortest multiple of 8 that holds the
    # tokens: 192 scored tokens in chunks of up to 44 are 5 of 40 (8 padding rows, not 28)
    from mindrl.backends.mindspore.chunked_head import TokenChunks, balanced_chunk

    assert [balanced_chunk(n, 44) for n in (192, 44, 45, 88, 89, 1, 0)] == \
        [40, 44, 24, 44, 32, 8, 44]
    for n in range(1, 400):
        c = balanced_chunk(n, 44)
        k = -(-n // 44)
        assert c % 8 == 0 or c == 44
        assert c <= 44 and k * c >= n and k * c - n < 8 * k
    mask = np.zeros((4, 64), np.float32)
    mask[:, 16:] = 1.0
    targets = np.arange(256).reshape(4, 64) % 97
    layout = TokenChunks(mask, targets, 44)
    assert (layout.n_chunks, layout.chunk, layout.n_real) == (5, 40, 192)
    assert layout.idx.shape == (200,) and layout.valid.sum() == 192
    np.testing.assert_array_equal(layout.targets[:192], targets[:, 16:].reshape(-1))
    rows = np.arange(192 * 3, dtype=np.float32).reshape(192, 3)
    from mindspore import Tensor

    back = layout.real_rows_to_rows(Tensor(rows)).asnumpy().reshape(4, 64, 3)
    np.testing.assert_array_equal(back[:, 16:].reshape(192, 3), rows)
    assert not back[:, :16].any()


def test_no_chunk_when_tokens_fit_one_or_setting_is_off(tiny_dir):
    be = _backend(tiny_dir)
    _set_chunk(be, -1)      # automatic: 512 MiB / (20 x 4 bytes x 1,024) = 6,553 tokens a chunk
    assert be._head_chunk(4 * 32) == 0 and be._head_chunk(10 ** 6) == 6553
    _set_chunk(be, 0)
    assert be._head_chunk(10 ** 6) == 0
    _set_chunk(be, 64)
    assert be._head_chunk(64) == 0 and be._head_chunk(65) == 64


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["moe_aux_gspo", "lora"])
def test_chunked_rl_step_with_untied_head_moe_aux_and_lora(tiny_dir, tmp_path_factory, variant):
    # untied head (its own gradient accumulator), the MoE load-balancing loss through the
    # decoder backward, a sequence-level policy loss (GSPO: the loss is not a sum over tokens),
    # and LoRA (a frozen head; the reference is the policy with its adapters off)
    from mindrl.models.tiny import resolve_model_path

    if variant == "lora":
        be = _backend(tiny_dir, "model.lora.enabled=true", "model.lora.rank=4")
        rng = np.random.default_rng(1)
        for p in be.params:                 # adapters that change the output
            if "lora_B" in p.name:
                from mindrl.backends.mindspore.weights import write_param

                write_param(p, rng.normal(0, 0.05, p.shape).astype(np.float32))
        assert all("lora" in p.name for p in be.params)
    else:
        path = resolve_model_path("builtin:tiny-qwen3-moe", cache_dir=_cache(tmp_path_factory))
        be = _backend(path, "model.moe.aux_loss_coef=0.05", "algorithm.policy_loss=gspo",
                      "algorithm.loss_agg_mode=seq_mean_token_mean")
        assert not be.spec.tie_word_embeddings
    mbs, norm = _micro_batches(seed=2)
    _set_chunk(be, 0)
    want = _step(be, mbs, norm)
    ref_want = be.logprobs(mbs[1].tokens, temperature=1.0, reference=True)
    _set_chunk(be, 5)
    got = _step(be, mbs, norm)
    assert _chunked_keys(be)
    _assert_same(got, want)
    if variant != "lora":
        assert be._aux_value > 0        # the pre-pass's mini-batch value (moe/aux_loss)
    np.testing.assert_allclose(be.logprobs(mbs[1].tokens, temperature=1.0, reference=True),
                               ref_want, atol=1e-5, rtol=0)     # NumPy's GEMM: see above


@pytest.mark.slow
def test_a_1k_row_at_the_real_vocabulary_trains_in_bounded_memory(tmp_path_factory,
                                                                   head_memory_bench):
    # The RL gradient of one 1,024-token row at V = 151,936 through the compiled step. Full
    # logits: one (1024, V) float32 copy is 0.62 GB and the compiled step keeps ~15 of them
    # (measured +9.2 GB, the Benchmarks page). Chunked: one chunk's head work (~0.5 GB with the
    # automatic chunk), the decoder and the compiled graphs. The 8,192-token row (attention in
    # query blocks) is test_ms_long_rows.py's.
    out = head_memory_bench.measure(1024, -1, _cache(tmp_path_factory), backend="mindspore")
    print(f"1024-token row, V={out['vocab']}: peak RSS +{out['peak_delta'] / 1e9:.3f} GB")
    assert out["vocab"] == out["tokenizer"] == 151936 and out["tokens"] == 1024
    assert out["chunk"] == 44 and out["short_chunked"]            # automatic at V = 151,936
    assert out["short_grad_rel"] <= 1e-5, out
    assert out["finite"] and out["head_grad"] > 0
    assert out["peak_delta"] < 1.5e9, f"peak {out['peak_delta'] / 1e9:.2f} GB: {out}"
