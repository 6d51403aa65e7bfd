"""The LM head in chunks (train.logprob_chunk_tokens): the same log-probs, entropies, exact
distillation KL and gradients as full-vocabulary logits, and an 8K-token row at the real
vocabulary (151,936) scored and back-propagated in bounded memory."""

import dataclasses
import os

import numpy as np
import pytest
import torch

from mindrl.types import pad_token_batch


def _backend(cfg):
    from mindrl.backends.base import build_backend

    return build_backend("torch", cfg)


def _set_chunk(be, n):
    be.cfg = dataclasses.replace(be.cfg, train=dataclasses.replace(be.cfg.train,
                                                                   logprob_chunk_tokens=n))


def _batch(seed=0, vocab=1000):
    rng = np.random.default_rng(seed)
    prompts = [rng.integers(5, vocab, n).tolist() for n in (3, 6, 2)]
    responses = [rng.integers(5, vocab, n).tolist() for n in (11, 4, 17)]
    return pad_token_batch(prompts, responses, pad_id=0)


def _score_and_grads(be, tokens, temperature, truncated):
    from mindrl.backends.torch import packing

    be.model.zero_grad(set_to_none=True)
    logp, ent = packing.score(be, be.model, tokens, temperature, "grad", truncated=truncated)
    mask = torch.from_numpy(tokens.response_mask)
    w = torch.linspace(-1.0, 1.0, logp.numel()).view_as(logp)   # weights of every token differ
    ((w * logp * mask).sum() + 0.3 * (w.flip(0) * ent * mask).sum()).backward()
    grads = torch.cat([p.grad.flatten() for p in be.params]).clone()
    return (logp * mask).detach(), (ent * mask).detach(), grads


@pytest.mark.parametrize("padding_free", [False, True])
@pytest.mark.parametrize("rollout", [{}, {"temperature": 0.7, "top_k": 40, "top_p": 0.9}])
def test_chunked_head_gives_the_full_logits_numbers_and_gradients(tiny_dir, make_cfg,
                                                                  padding_free, rollout):
    from mindrl.backends.torch import packing

    cfg = make_cfg(tiny_dir, train={"padding_free": padding_free}, rollout=rollout)
    be = _backend(cfg)
    tokens = packing.trim_tokens(_batch())
    temperature = rollout.get("temperature", 1.0)
    _set_chunk(be, 0)
    assert packing.head_chunk(be, be.model, 96) == (None, 0)          # off: full logits
    want = _score_and_grads(be, tokens, temperature, bool(rollout))
    _set_chunk(be, 5)                 # 32 scored tokens (packed) / 51 (padded): many chunks
    head, chunk = packing.head_chunk(be, be.model, 32)
    assert head is be.model.lm_head and chunk == 5
    got = _score_and_grads(be, tokens, temperature, bool(rollout))
    np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), atol=1e-6, rtol=0)
    np.testing.assert_allclose(got[1].numpy(), want[1].numpy(), atol=1e-5, rtol=0)
    scale = float(want[2].abs().max())
    assert scale > 1e-3
    np.testing.assert_allclose(got[2].numpy(), want[2].numpy(), atol=1e-5 * scale, rtol=0)
    # the no-grad pass (old / reference log-probs) too, rows back in place
    lp_c, ent_c = be.logprobs_and_entropy(tokens, temperature=temperature, micro_batch_size=2,
                                          truncated=bool(rollout))
    _set_chunk(be, 0)
    lp_f, ent_f = be.logprobs_and_entropy(tokens, temperature=temperature, micro_batch_size=2,
                                          truncated=bool(rollout))
    np.testing.assert_allclose(lp_c, lp_f, atol=1e-6, rtol=0)
    np.testing.assert_allclose(ent_c, ent_f, atol=1e-5, rtol=0)


def test_chunked_exact_kl_to_a_teacher_equals_the_full_vocabulary_kl():
    from algorithms.distill import full_reverse_kl
    from algorithms.ops import get_ops

    from mindrl.backends.torch.chunked_head import token_stats

    torch.manual_seed(0)
    N, H, V = 23, 8, 50
    ops = get_ops("torch")
    head, t_head = torch.nn.Linear(H, V, bias=False), torch.nn.Linear(H, V, bias=False)
    t_head.requires_grad_(False)
    hidden = torch.randn(N, H, requires_grad=True)
    t_hidden = torch.randn(N, H)
    targets = torch.randint(0, V, (N,))
    w = torch.randn(N)

    def loss(logp, kl):
        return (w * logp).sum() + (w.flip(0) * kl).sum()

    z = head(hidden) / 0.8          # independent reference: whole logits, by hand
    lz = torch.log_softmax(z, -1)
    ref_logp = lz.gather(-1, targets[:, None])[:, 0]
    ref_kl = full_reverse_kl(ops, z, t_head(t_hidden) / 1.5)
    ref_kl_hand = (lz.exp() * (lz - torch.log_softmax(t_head(t_hidden) / 1.5, -1))).sum(-1)
    torch.testing.assert_close(ref_kl, ref_kl_hand)
    want = torch.autograd.grad(loss(ref_logp, ref_kl), [hidden, head.weight])
    logp, ent, kl = token_stats(hidden, head, targets, temperature=0.8, chunk=4, ops=ops,
                                teacher=(t_hidden, t_head, 1.5))
    assert ent is None
    torch.testing.assert_close(logp, ref_logp, atol=1e-6, rtol=0)
    torch.testing.assert_close(kl, ref_kl, atol=1e-6, rtol=0)
    got = torch.autograd.grad(loss(logp, kl), [hidden, head.weight])
    for g, r in zip(got, want):
        torch.testing.assert_close(g, r, atol=1e-5 * float(r.abs().max()), rtol=0)


def test_chunk_size_setting():
    from mindrl.backends.torch.chunked_head import chunk_tokens

    assert chunk_tokens(0, 151936) == 0 and chunk_tokens(64, 151936) == 64
    auto = chunk_tokens(-1, 151936)                  # 8 float32 (c, V) copies in 512 MB
    assert auto == 110 and 8 * 4 * auto * 151936 <= 512 * 2 ** 20
    assert chunk_tokens(-1, 1024) > 8192             # a small vocabulary: one chunk


@pytest.mark.slow
def test_an_8k_row_at_the_real_vocabulary_scores_and_backpropagates_under_1_5_gb(
        tmp_path, head_memory_bench):
    # full logits: 8192 x 151,936 float32 = 5 GB, log_softmax another 5 GB, their gradients
    # more (~15 GB); chunked, the head holds one chunk's worth at a time
    cache = os.environ.get("MINDRL_TEST_CACHE") or str(tmp_path / "cache")
    out = head_memory_bench.measure(8192, -1, cache)
    print(f"8192-token row, V={out['vocab']}: peak RSS +{out['peak_delta'] / 1e9:.3f} GB")
    assert out["vocab"] == out["tokenizer"] == 151936 and out["tokens"] == 8192
    think, one, close = out["tags"]                  # whole tags, among the last ids
    assert min(think, close) >= 151932 and one < 1024
    # the full path's log_softmax kernel is itself ~2e-5 off float64 at this vocabulary (its
    # sum of exponentials); the chunked head's log-sum-exp ~2e-6 (test_head_update.py)
    assert out["short_logp_diff"] <= 3e-5 and out["short_grad_rel"] <= 1e-5, out
    assert out["finite"] and out["head_grad"] > 0
    assert out["peak_delta"] < 1.5e9, f"peak {out['peak_delta'] / 1e9:.2f} GB: {out}"


@pytest.mark.parametrize("padding_free", [False, True])
def test_chunked_exact_distill_kl_through_the_backend(tiny_dir, padding_free):
    # algorithm.distill.estimator=full: the teacher's hidden states are chunked alongside the
    # student's; log-probs (truncated), entropies, the KL and the student's gradient unchanged
    from mindrl.backends.torch import packing
    from mindrl.config.loader import load_config

    cfg = load_config(None, [f"model.path={tiny_dir}", f"algorithm.distill.teacher={tiny_dir}",
                             "algorithm.distill.mode=loss", "algorithm.distill.estimator=full",
                             "algorithm.distill.teacher_temperature=0.7",
                             "rollout.temperature=0.9", "rollout.top_k=50",
                             f"train.padding_free={str(padding_free).lower()}"])
    be = _backend(cfg)
    with torch.no_grad():                       # a teacher that differs from the student
        for p in be.teacher.parameters():
            p.add_(0.05 * torch.randn_like(p))
    tokens = packing.trim_tokens(_batch(seed=3))
    mask = torch.from_numpy(tokens.response_mask)
    out = {}
    for n in (0, 4):
        _set_chunk(be, n)
        be.model.zero_grad(set_to_none=True)
        logp, ent, kl = packing.score_full_kl(be, tokens, 0.9, "grad")
        w = torch.linspace(-1.0, 1.0, logp.numel()).view_as(logp)
        ((w * logp + kl + 0.1 * ent) * mask).sum().backward()
        out[n] = [(x * mask).detach() for x in (logp, ent, kl)] + [
            torch.cat([p.grad.flatten() for p in be.params]).clone()]
    assert float(out[0][2].abs().max()) > 1e-3             # a real KL to compare
    for got, want, tol in zip(out[4], out[0], (1e-6, 1e-5, 1e-6)):
        if got.numel() > 1000:                              # the gradient
            tol = 1e-5 * float(want.abs().max())
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=tol, rtol=0)


@pytest.mark.parametrize("variant", ["lora", "moe_aux", "grad_ckpt"])
def test_chunked_head_rl_loss_and_gradient_equal_full_logits(tiny_dir, fixed_batch,
                                                             tmp_path_factory, variant):
    # the RL update through the chunked head, with the decoder features that share its forward:
    # LoRA adapters (peft wraps the model), the MoE load-balancing loss (computed by the
    # causal LM's forward, which still runs), gradient checkpointing of the decoder layers
    from mindrl.config.loader import load_config
    from mindrl.models.tiny import resolve_model_path
    from mindrl.types import LossNormalizers

    path = tiny_dir
    over = {"lora": ["model.lora.enabled=true", "model.lora.rank=4"],
            "moe_aux": ["model.moe.aux_loss_coef=0.05"],
            "grad_ckpt": ["model.gradient_checkpointing=true"]}[variant]
    if variant == "moe_aux":
        cache = os.environ.get("MINDRL_TEST_CACHE") or str(
            tmp_path_factory.getbasetemp() / "cache")
        path = resolve_model_path("builtin:tiny-qwen3-moe", cache_dir=cache)
    cfg = load_config(None, [f"model.path={path}", "algorithm.entropy_coef=0.01", *over])
    be = _backend(cfg)
    if variant == "lora":                       # adapters that change the output
        with torch.no_grad():
            for n, p in be.model.named_parameters():
                if "lora_B" in n:
                    p.normal_(0, 0.05)
    from mindrl.backends.torch import packing

    _set_chunk(be, 3)
    assert packing.head_chunk(be, be.model, 40)[1] == 3          # the chunked path is taken
    mb = fixed_batch(seed=4)
    mb.old_logp = None
    norm = LossNormalizers(global_tokens=float(mb.tokens.response_mask.sum()), global_seqs=8.0,
                           max_len=5.0)
    out = {}
    for n in (0, 3):
        _set_chunk(be, n)
        be.model.zero_grad(set_to_none=True)
        loss, metrics = be._micro_loss(mb, norm)
        loss.backward()
        out[n] = (float(loss.detach()), torch.cat([p.grad.flatten() for p in be.params]).clone(),
                  float(metrics["moe/aux_loss"]) if "moe/aux_loss" in metrics else None)
    assert out[3][0] == pytest.approx(out[0][0], abs=1e-6)
    assert out[3][2] == out[0][2] and (variant != "moe_aux" or out[0][2] > 0)
    scale = float(out[0][1].abs().max())
    assert scale > 1e-4
    np.testing.assert_allclose(out[3][1].numpy(), out[0][1].numpy(), atol=1e-5 * scale, rtol=0)


def _head_products(hidden, head, targets, chunk, budget, monkeypatch):
    """log-probs, gradients and the number of (c, V) head products (forward-shape matmuls) of
    one token_stats forward + backward under a head budget of ``budget`` bytes."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from mindrl.backends.torch import chunked_head

    monkeypatch.setattr(chunked_head, "HEAD_BUDGET_BYTES", budget)
    V = head.out_features
    count = []

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default) and \
                    out.dim() == 2 and out.shape[1] == V:
                count.append(tuple(out.shape))
            return out

    h = hidden.clone().requires_grad_(True)
    head.zero_grad(set_to_none=True)
    with Count():
        logp, _, _ = chunked_head.token_stats(h, head, targets, temperature=1.0, chunk=chunk,
                                              ops=None, entropy=None)
        (logp * torch.linspace(-1, 1, logp.numel())).sum().backward()
    return logp.detach(), h.grad.clone(), head.weight.grad.clone(), len(count)


def test_the_head_is_recomputed_only_when_its_saved_logits_exceed_the_budget(monkeypatch):
    # 40 tokens in chunks of 16 (3 chunks), V = 300: what the fused log-prob path keeps without
    # recompute is the float32 logits, 40 x 300 x 4 B = 48,000 bytes, allowed up to half the
    # budget. Under a budget of 96,000 the logits are kept and the head's forward is one (N, V)
    # product over all chunks; under a smaller one each of the 3 chunks' forward is redone in
    # the backward (6). Log-probs and gradients equal the full (unchunked) head's
    # either way.
    torch.manual_seed(0)
    head = torch.nn.Linear(12, 300, bias=False)
    hidden, targets = torch.randn(40, 12), torch.randint(0, 300, (40,))
    ref = _head_products(hidden, head, targets, 0, 10 ** 9, monkeypatch)
    fits = _head_products(hidden, head, targets, 16, 96_000, monkeypatch)
    over = _head_products(hidden, head, targets, 16, 95_998, monkeypatch)
    assert ref[3] == 1 and fits[3] == 1 and over[3] == 6
    for got in (fits, over):
        for a, b in zip(got[:3], ref[:3]):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("dtype,tokens", [(torch.float32, 441), (torch.float32, 442),
                                          (torch.bfloat16, 883), (torch.bfloat16, 884)])
def test_the_memory_plan_keeps_the_log_softmax_exactly_when_the_head_does(dtype, tokens,
                                                                          monkeypatch):
    # At V = 151,936 and the automatic chunk (110 tokens) the plain loss's fused path keeps the
    # (N, V) logits in the head's dtype: 1 float32 copy of V per token in float32, half of one
    # in bfloat16, within half of 512 MiB up to 268,435,456 / (151,936 x 4) = 441.7 tokens in
    # float32 and 883.4 in bfloat16 (the 2-copy rule stopped at 220). Kept, the head's forward
    # is one (N, V) product; one token more, each chunk's is redone in the backward (2 per
    # chunk). The plan of one row of that many response tokens (SFT) in that dtype makes the
    # same call, and counts the kept logits by hand with the float32 blocks they are worked
    # in, and the head's weight gradient once, in kept memory (one GEMM over all rows) where
    # kept, 3 times (the chunks' sum so far, a chunk's and their new sum) where not.
    from mindrl.backends.chunking import HEAD_BLOCK_BYTES, HEAD_BUDGET_BYTES, chunk_tokens
    from mindrl.memory.plan import Setup, plan_memory
    from mindrl.memory.shapes import known_shape

    V = 151_936
    b = torch.empty(0, dtype=dtype).element_size()
    chunk = chunk_tokens(-1, V)
    torch.manual_seed(0)
    head = torch.nn.Linear(2, V, bias=False).to(dtype)
    hidden, targets = torch.randn(tokens, 2, dtype=dtype), torch.randint(0, V, (tokens,))
    products = _head_products(hidden, head, targets, chunk, HEAD_BUDGET_BYTES, monkeypatch)[3]
    chunks = -(-tokens // chunk)
    assert products == {441: 1, 442: 2 * chunks, 883: 1, 884: 2 * chunks}[tokens]
    keeps = products == 1

    m = known_shape("Qwen2.5-0.5B")
    s = Setup(backend="torch", job="sft", rows=1, prompt_len=16, response_len=tokens,
              head_chunk=chunk, engine="none", device_bytes=100e9, dtype_bytes=b)
    parts = {p.name: p for p in plan_memory(m, s).parts}
    kept = tokens * V * b if keeps else 0
    name = f"log-prob head ({chunk} tokens x {V}{f', {tokens} kept' if keeps else ''})"
    if keeps:
        # kept: the logits, worked a block of rows at a time (two float32 blocks forward, one
        # backward, where the logits become their gradient in place); the (V, H) weight
        # gradient is written into memory kept from step to step (on CPU)
        assert parts[name].bytes == kept + 2 * HEAD_BLOCK_BYTES
        assert parts["log-prob head in the backward"].bytes == kept + HEAD_BLOCK_BYTES
        assert parts["head's weight gradient (kept)"].bytes == V * m.hidden * b
        assert parts["head's weight gradient (kept)"].phase == "held"
    else:
        assert parts[name].bytes == chunk * 2 * 4 * V
        grad = 3 * V * m.hidden * b               # the tied head's weight gradient, 3 times
        assert parts["log-prob head in the backward"].bytes == chunk * 3 * 4 * V + grad
        assert "head's weight gradient (kept)" not in parts
