"""The chunked LM head in host memory (mindrl/backends/mindspore/host_head.py): its scores and
their gradient equal a float64 torch autograd reference under truncation, and the RL step's
loss, metrics and every parameter's gradient equal the compiled MindSpore chunks' (tied and
untied heads, truncation, masking, logits kept or recomputed), with the head's gradient
written into the optimizer's accumulator in place."""

import dataclasses

import numpy as np
import pytest

from ms_helpers import VOCAB, ms_config


def _torch_reference(z, tgt, trunc, g_lp, g_ent):
    """float64 autograd: log q(target) under the truncation mask (the NumPy float64 reference
    mask of algorithms.truncation, target always kept), the cut distribution's entropy, and the
    gradient of sum(logp g_lp + entropy g_ent) w.r.t. z."""
    import torch

    from algorithms.truncation import keep_mask, truncated_token_logp

    zt = torch.tensor(z, dtype=torch.float64, requires_grad=True)
    keep = torch.tensor(keep_mask(z, trunc) if trunc is not None else np.ones(z.shape, bool))
    r = torch.arange(z.shape[0])
    t = torch.tensor(tgt)
    keep_t = keep.clone()
    keep_t[r, t] = True
    logq = zt[r, t] - torch.logsumexp(zt.masked_fill(~keep_t, float("-inf")), -1)
    p = torch.softmax(zt.masked_fill(~keep, float("-inf")), -1)
    ent = -(p * torch.log(p.clamp_min(1e-300))).sum(-1)
    (logq * torch.tensor(g_lp, dtype=torch.float64)
     + ent * torch.tensor(g_ent, dtype=torch.float64)).sum().backward()
    if trunc is not None:                         # the torch reference agrees with NumPy's
        np.testing.assert_allclose(logq.detach().numpy(),
                                   truncated_token_logp(z.astype(np.float64), tgt, trunc),
                                   atol=1e-9)
    return logq.detach().numpy(), ent.detach().numpy(), zt.grad.numpy()


@pytest.mark.parametrize("trunc_kw", [None, dict(top_k=20), dict(top_p=0.8),
                                      dict(top_k=50, top_p=0.9, min_p=0.02)])
def test_host_scores_and_gradient_equal_float64_autograd(trunc_kw):
    from algorithms.truncation import Truncation
    from mindrl.backends.mindspore import host_head as hh

    rng = np.random.default_rng(0)
    c, V, H = 12, 257, 16
    trunc = Truncation(**trunc_kw) if trunc_kw else None
    h = rng.standard_normal((c, H)).astype(np.float32)
    w = rng.standard_normal((V, H)).astype(np.float32) * 0.5
    inv_temp = 1.0 / 0.7
    z = hh.head_logits(h, w, inv_temp)
    z0 = z.copy()
    tgt = rng.integers(0, V, c)
    if trunc is not None:             # some targets outside the kept set (their own term)
        tgt[:4] = np.argsort(z0[:4], -1)[:, 0]
    g_lp = rng.standard_normal(c).astype(np.float32)
    g_ent = rng.standard_normal(c).astype(np.float32)
    want_lp, want_ent, want_dz = _torch_reference(z0, tgt, trunc, g_lp, g_ent)
    stats = hh.RowStats(c)
    lp, ent = hh.scores_in_place(z, tgt, trunc, True, stats, 0)
    np.testing.assert_allclose(lp, want_lp, atol=2e-5, rtol=1e-5)
    np.testing.assert_allclose(ent, want_ent, atol=2e-5, rtol=1e-5)
    if trunc is not None:                         # the cut targets' own term is exercised
        from algorithms.truncation import keep_mask

        assert not keep_mask(z0, trunc)[np.arange(4), tgt[:4]].any()
    dz = hh.grad_in_place(z, tgt, g_lp, g_ent, stats, 0, inv_temp)
    assert dz is z                                           # written over the logits
    want = want_dz * inv_temp                                # through the temperature
    np.testing.assert_allclose(dz, want, atol=1e-6 * float(np.abs(want).max()), rtol=0)
    # the weight's gradient added in blocks of vocabulary rows equals dz^T h
    acc = np.ones((V, H), np.float32)
    old_block = hh.VOCAB_BLOCK
    try:
        hh.VOCAB_BLOCK = 100
        hh.add_weight_grad(acc, dz, h)
    finally:
        hh.VOCAB_BLOCK = old_block
    np.testing.assert_allclose(acc - 1.0, want.T @ h.astype(np.float64), atol=2e-5, rtol=1e-4)


def _backend(directory, *over):
    from mindrl.backends.mindspore import MindSporeBackend

    cfg = ms_config("rollout.max_new_tokens=32", "algorithm.entropy_coef=0.01",
                    "algorithm.kl.coef=0.05", "rollout.temperature=0.8", "rollout.top_k=60",
                    "rollout.top_p=0.9", *over)
    return MindSporeBackend(cfg, model_path=directory, with_reference=True)


def _set_chunk(be, n):
    be.cfg = dataclasses.replace(be.cfg, train=dataclasses.replace(be.cfg.train,
                                                                   logprob_chunk_tokens=n))


def _micro_batches(seed):
    from mindrl.types import LossNormalizers, TrainBatch, pad_token_batch

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(2):
        prompts = [rng.integers(3, VOCAB, rng.integers(2, 9)).tolist() for _ in range(4)]
        resps = [rng.integers(3, VOCAB, rng.integers(1, 30)).tolist() for _ in range(4)]
        tb = pad_token_batch(prompts, resps, 0)
        m = tb.response_mask
        adv = (rng.normal(size=m.shape) * m).astype(np.float32)
        old = ((rng.normal(size=m.shape) * 0.2 - 5.5) * m).astype(np.float32)
        ref = ((rng.normal(size=m.shape) * 0.2 - 5.5) * m).astype(np.float32)
        out.append(TrainBatch(tb, adv, old, ref, None))
    norm = LossNormalizers(float(sum(mb.tokens.response_mask.sum() for mb in out)), 8.0, 32.0)
    return out, norm


def _step(be, mbs, norm):
    from mindrl.backends.mindspore.weights import write_param

    sums = be._accumulate("rl", *be._prepare("rl", mbs, norm))[0]
    grads = {p.name: g.copy() for p, g in zip(be.params, be.optimizer.grad_arrays())}
    be.optimizer.zero_grad()
    write_param(be._loss_acc, np.zeros(1, np.float32))
    return sums, grads


def _assert_same(got, want, variant):
    (s_got, g_got), (s_want, g_want) = got, want
    assert set(s_got) == set(s_want) and "entropy" in s_want
    for k, v in s_want.items():
        assert s_got[k] == pytest.approx(v, rel=2e-5, abs=1e-6), (variant, k)
    assert set(g_got) == set(g_want)
    for name, g in g_want.items():
        scale = float(np.abs(g).max())
        assert scale > 0, name
        err = float(np.abs(g_got[name] - g).max())
        assert err <= 2e-5 * scale, f"{variant} {name}: {err:.3g} vs scale {scale:.3g}"


@pytest.mark.slow
@pytest.mark.parametrize("tied", [True, False])
def test_host_head_rl_step_equals_compiled_chunks(hf_tied, hf_untied, tied, monkeypatch):
    import mindrl.backends.mindspore.chunked_head as ch
    import mindrl.backends.mindspore.host_head as hh
    from mindrl.backends.mindspore.optim import _host_array

    be = _backend((hf_tied if tied else hf_untied)[0])
    assert be.spec.tie_word_embeddings == tied
    mbs, norm = _micro_batches(seed=4 if tied else 5)
    tokens = mbs[0].tokens
    _set_chunk(be, 5)
    monkeypatch.setattr(hh, "HOST_HEAD", False)
    want = _step(be, mbs, norm)
    want_lp = [be.logprobs(tokens, temperature=0.8, micro_batch_size=4, **kw)
               for kw in ({}, {"truncated": True})]
    be._train_fns.clear()
    be._chunk_cache.clear()
    monkeypatch.setattr(hh, "HOST_HEAD", True)
    calls = {"grad": 0}
    grad_in_place = hh.grad_in_place

    def counted(*a, **k):
        calls["grad"] += 1
        return grad_in_place(*a, **k)

    monkeypatch.setattr(hh, "grad_in_place", counted)
    acc_before = _host_array(be.optimizer.grad_flat)
    got = _step(be, mbs, norm)
    assert calls["grad"] > 4 and be._head_kept
    acc_after = _host_array(be.optimizer.grad_flat)
    assert acc_after.ctypes.data == acc_before.ctypes.data      # the same memory throughout
    assert getattr(be, "_head_acc", None) is None               # no (V, H) MindSpore tensor
    _assert_same(got, want, "kept")
    # over the budget: every chunk's head again in the backward
    monkeypatch.setattr(ch, "MINDSPORE_KEPT_COPIES", 10 ** 6)
    got = _step(be, mbs, norm)
    assert not be._head_kept
    _assert_same(got, want, "recomputed")
    for kw, lp in zip(({}, {"truncated": True}), want_lp):
        np.testing.assert_allclose(be.logprobs(tokens, temperature=0.8, micro_batch_size=4,
                                               **kw), lp, atol=1e-5, rtol=0, err_msg=str(kw))
        assert np.abs(lp).max() > 1.0


@pytest.mark.slow
def test_host_head_adds_into_the_accumulator_in_place(hf_untied):
    # what is in the accumulator stays: the host head adds its gradient to it (a second
    # micro-batch's gradient is the sum), in the accumulator's own memory
    import mindrl.backends.mindspore.host_head as hh
    from mindrl.backends.mindspore.optim import _host_array

    be = _backend(hf_untied[0])
    _set_chunk(be, 5)
    mbs, norm = _micro_batches(seed=6)
    one = _step(be, mbs[:1], norm)[1]
    opt = be.optimizer
    acc = _host_array(opt.grad_flat)
    acc[:] = 0.5
    head = hh.host_array(be.model.lm_head.weight)       # the weight's own memory, every call
    assert head is not None
    assert head.ctypes.data == hh.host_array(be.model.lm_head.weight).ctypes.data
    be._accumulate("rl", *be._prepare("rl", mbs[:1], norm))
    again = {p.name: g.copy() for p, g in zip(be.params, opt.grad_arrays())}
    assert _host_array(opt.grad_flat).ctypes.data == acc.ctypes.data
    for name, g in one.items():
        np.testing.assert_allclose(again[name] - 0.5, g, atol=1e-6 + 1e-5 * np.abs(g).max(),
                                   err_msg=name)
    assert np.abs(one["lm_head.weight"]).max() > 0


def test_numpy_blas_threads_follow_train_threads(monkeypatch):
    # threadpoolctl is not in the environment: OpenBLAS's own setter in NumPy's library
    import mindrl.backends.mindspore.backend as backend
    import mindrl.backends.mindspore.host_head as hh

    assert hh.limit_host_blas(2) != "unchanged"
    assert hh.host_blas_threads() == 2
    assert hh.limit_host_blas(1) != "unchanged"
    assert hh.host_blas_threads() == 1
    seen = []
    monkeypatch.setattr(hh, "limit_host_blas", lambda n: seen.append(n) or "openblas")
    monkeypatch.setattr(backend, "_THREADS_SET", False)
    backend._configure_threads(1, on_cpu=True)
    assert seen == [1]
