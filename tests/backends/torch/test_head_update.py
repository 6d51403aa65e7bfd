"""The torch update's memory-bound parts at a large vocabulary, each against an independent
reference: the chunked head's fused log-probs (log-sum-exp and its gradient written out, one
weight-gradient GEMM), the tied embedding's sparse gradient, and the fused AdamW."""

import dataclasses

import numpy as np
import pytest
import torch


def _reference(hidden, weight, bias, targets, temperature, w):
    """float64 log p(target), entropy and the gradients of sum(w * logp) w.r.t. hidden,
    weight and bias (from the same input values)."""
    h, W, b = (t.detach().double().requires_grad_(True) for t in (hidden, weight, bias))
    z = (h @ W.t() + b) / temperature
    logp = torch.log_softmax(z, -1).gather(-1, targets[:, None]).squeeze(-1)
    p = torch.softmax(z, -1)
    ent = -(p * torch.log_softmax(z, -1)).sum(-1)
    (w * logp).sum().backward()
    return logp.detach(), ent.detach(), h.grad, W.grad, b.grad


def _fused(hidden, head, targets, temperature, w, chunk, fused, monkeypatch):
    from algorithms.ops import get_ops

    from mindrl.backends.torch import chunked_head

    monkeypatch.setattr(chunked_head, "FUSED_TARGET_LOGP", fused)
    h = hidden.detach().clone().requires_grad_(True)
    head.zero_grad(set_to_none=True)
    logp, ent, _ = chunked_head.token_stats(h, head, targets, temperature=temperature,
                                            chunk=chunk, ops=get_ops("torch"), entropy="no_grad")
    (w * logp).sum().backward()
    return logp.detach(), ent, h.grad, head.weight.grad.clone(), head.bias.grad.clone(), logp


def _rel(a, ref):
    return float((a.double() - ref).abs().max() / ref.abs().max())


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_fused_head_log_probs_and_gradients_equal_a_float64_reference(temperature, monkeypatch):
    # 40 tokens in chunks of 16, V = 300, every target id appearing several times: log-probs,
    # entropies and the gradients of hidden, weight and bias against float64 autograd, and
    # against the autograd log_softmax path the fused one replaces
    torch.manual_seed(0)
    head = torch.nn.Linear(12, 300)
    hidden = torch.randn(40, 12) * 2
    targets = torch.randint(0, 8, (40,))                 # 8 ids among 40 tokens: repeats
    w = torch.linspace(-1.0, 1.0, 40)
    ref = _reference(hidden, head.weight, head.bias, targets, temperature, w)
    got = _fused(hidden, head, targets, temperature, w, 16, True, monkeypatch)
    assert type(got[5].grad_fn).__name__ == "_TargetLogpBackward"     # the fused path ran
    old = _fused(hidden, head, targets, temperature, w, 16, False, monkeypatch)
    assert type(old[5].grad_fn).__name__ != "_TargetLogpBackward"
    np.testing.assert_allclose(got[0].numpy(), ref[0].numpy(), atol=2e-6, rtol=0)
    np.testing.assert_allclose(got[1].numpy(), ref[1].numpy(), atol=1e-5, rtol=0)
    for g, o, r in zip(got[2:5], old[2:5], ref[2:5]):
        assert float(r.abs().max()) > 1e-2
        assert _rel(g, r) < 1e-5 and _rel(g, o.double()) < 1e-5
    # no gradient (old / reference log-probs): the same numbers, chunk by chunk
    from mindrl.backends.torch import chunked_head

    monkeypatch.setattr(chunked_head, "FUSED_TARGET_LOGP", True)
    with torch.no_grad():
        logp, ent, _ = chunked_head.token_stats(hidden, head, targets,
                                                temperature=temperature, chunk=16, ops=None,
                                                entropy="no_grad")
    np.testing.assert_allclose(logp.numpy(), ref[0].numpy(), atol=2e-6, rtol=0)
    np.testing.assert_allclose(ent.numpy(), ref[1].numpy(), atol=1e-5, rtol=0)


def test_fused_head_in_bfloat16_keeps_bf16_logits_and_matches_the_float32_path(monkeypatch):
    # bf16 head: the fused path keeps the (N, V) logits in bf16 and upcasts a chunk at a time;
    # its log-probs are the float32 path's (the same bf16 logits, the same float32 arithmetic:
    # within 1e-5) and its gradients within bf16 rounding (2^-8 relative, from rounding the
    # logits' gradient to bf16 as the autograd path does) of the float64 reference
    torch.manual_seed(1)
    head = torch.nn.Linear(16, 500).to(torch.bfloat16)
    hidden = (torch.randn(48, 16) * 2).to(torch.bfloat16)
    targets = torch.randint(0, 10, (48,))
    w = torch.linspace(-1.0, 1.0, 48)
    ref = _reference(hidden, head.weight, head.bias, targets, 1.0, w)
    got = _fused(hidden, head, targets, 1.0, w, 16, True, monkeypatch)
    old = _fused(hidden, head, targets, 1.0, w, 16, False, monkeypatch)
    assert type(got[5].grad_fn).__name__ == "_TargetLogpBackward"
    assert got[0].dtype == torch.float32 and got[3].dtype == torch.bfloat16
    np.testing.assert_allclose(got[0].numpy(), old[0].numpy(), atol=1e-5, rtol=0)
    for g, o, r in zip(got[2:5], old[2:5], ref[2:5]):
        assert _rel(g, r) < 2 ** -7 and _rel(o, r) < 2 ** -7


def _tied_grads(be, tokens):
    from mindrl.backends.torch import packing

    be.model.zero_grad(set_to_none=True)
    logp, _ = packing.score(be, be.model, tokens, 1.0, "no_grad")
    mask = torch.from_numpy(tokens.response_mask)
    w = torch.linspace(-1.0, 1.0, logp.numel()).view_as(logp)
    (w * logp * mask).sum().backward()


def test_tied_embedding_gradient_is_sparse_and_equals_embedding_plus_head(tiny_dir, make_cfg):
    # the tied weight's gradient = the input embedding's (rows of the tokens present, repeated
    # tokens summed) + the head's; reference: the same model untied into two parameters
    import copy

    from mindrl.backends.base import build_backend
    from mindrl.types import pad_token_batch

    be = build_backend("torch", make_cfg(tiny_dir))
    emb, head = be.model.get_input_embeddings(), be.model.get_output_embeddings()
    assert head.weight is emb.weight and emb.sparse          # tied, sparse backward
    prompts = [[7, 7, 9, 7], [9, 11, 7]]                     # 7 and 9 repeated in and across rows
    responses = [[7, 12, 7, 30], [9, 9, 5]]
    tokens = pad_token_batch(prompts, responses, pad_id=0)
    _tied_grads(be, tokens)
    got = emb.weight.grad
    assert got.layout == torch.strided                      # dense, as AdamW needs

    untied = copy.deepcopy(be.model)
    untied.get_output_embeddings().weight = torch.nn.Parameter(
        untied.get_input_embeddings().weight.detach().clone())
    untied.get_input_embeddings().sparse = False
    assert untied.get_output_embeddings().weight is not untied.get_input_embeddings().weight
    be_ref = copy.copy(be)
    be_ref.model = untied
    _tied_grads(be_ref, tokens)
    g_emb = untied.get_input_embeddings().weight.grad
    g_head = untied.get_output_embeddings().weight.grad
    for t in (7, 9):                          # the repeated tokens' rows carry real gradient
        assert float(g_emb[t].abs().max()) > 1e-3 * float(g_head.abs().max())
    assert float(g_emb[100].abs().max()) == 0.0              # absent token: no input gradient
    ref = g_emb + g_head
    assert _rel(got, ref.double()) < 1e-5


def test_micro_batch_gradient_equals_the_unfused_dense_path(tiny_dir, make_cfg, fixed_batch,
                                                            monkeypatch):
    # the RL loss's gradient through the backend with every change on (fused head, sparse tied
    # embedding) equals the one with them off (autograd log_softmax, dense embedding gradient)
    from mindrl.backends.base import build_backend
    from mindrl.backends.torch import chunked_head
    from mindrl.types import LossNormalizers

    mb = fixed_batch(seed=3, vocab=200)                      # repeated ids within the batch
    norm = LossNormalizers(global_tokens=float(mb.tokens.response_mask.sum()), global_seqs=8.0,
                           max_len=5.0)
    grads = {}
    for on in (True, False):
        monkeypatch.setattr(chunked_head, "FUSED_TARGET_LOGP", on)
        monkeypatch.setattr(chunked_head, "SPARSE_TIED_EMBEDDING", on)
        be = build_backend("torch", make_cfg(tiny_dir))
        be.cfg = dataclasses.replace(be.cfg, train=dataclasses.replace(
            be.cfg.train, logprob_chunk_tokens=4))           # the chunked head, many chunks
        assert be.model.get_input_embeddings().sparse == on
        be.model.zero_grad(set_to_none=True)
        loss, _ = be._micro_loss(mb, norm)
        loss.backward()
        grads[on] = torch.cat([p.grad.flatten() for p in be.params])
    assert float(grads[False].abs().max()) > 1e-4
    assert _rel(grads[True], grads[False].double()) < 1e-5


def test_adamw_is_fused_on_cpu_and_steps_as_the_reference(make_cfg, tiny_dir):
    # torch's fused AdamW kernel against one hand-computed AdamW step (bias-corrected moments,
    # decoupled weight decay)
    from mindrl.backends.torch.optim import make_adamw

    cfg = make_cfg(tiny_dir, train={"lr": 1e-2, "weight_decay": 0.1, "warmup_steps": 0})
    torch.manual_seed(0)
    p = torch.randn(64, 32)
    p0 = p.clone()
    g = torch.randn(64, 32)
    opt, _ = make_adamw([p], cfg, 1e-2, 0.1)
    assert opt.defaults["fused"] is True
    p.grad = g
    opt.step()
    b1, b2 = cfg.train.betas
    m, v = (1 - b1) * g.double(), (1 - b2) * g.double() ** 2
    want = p0.double() * (1 - 1e-2 * 0.1) - 1e-2 * (m / (1 - b1)) / (
        (v / (1 - b2)).sqrt() + cfg.train.adam_eps)
    assert _rel(p, want) < 1e-6


def _fresh_outputs(fn, shape):
    """The aten ops that return a tensor of ``shape`` in memory of its own (not an in-place or
    ``out=`` op, not a view of an input) while ``fn`` runs."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    def ptrs(xs):
        return {x.untyped_storage().data_ptr() for x in xs
                if isinstance(x, torch.Tensor) and x.layout == torch.strided}

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if isinstance(out, torch.Tensor) and tuple(out.shape) == shape \
                    and out.layout == torch.strided and not func._schema.is_mutable \
                    and out.untyped_storage().data_ptr() not in ptrs(
                        list(args) + list(kwargs.values())):
                seen.append(str(func))
            return out

    with Watch():
        fn()
    return seen


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_head_weight_gradient_is_written_into_kept_memory(dtype, tiny_dir, make_cfg, fixed_batch,
                                                          monkeypatch):
    # the tied (V, H) weight's gradient: the head's weight-gradient GEMM writes into a buffer
    # kept from backward to backward and the embedding's sparse rows are added into it in place:
    # a micro-batch's backward makes no new (V, H) tensor. The gradients equal the path that
    # returns a fresh product to autograd (chunk-wide element-wise passes) bit for bit; summed
    # over two micro-batches (float32: no masters, the second GEMM adds into the gradient)
    # within 1e-6
    from mindrl.backends.base import build_backend
    from mindrl.backends.torch import chunked_head
    from mindrl.types import LossNormalizers

    mb = fixed_batch(seed=3, vocab=200)                      # repeated ids within the batch
    norm = LossNormalizers(global_tokens=float(mb.tokens.response_mask.sum()), global_seqs=8.0,
                           max_len=5.0)
    be = build_backend("torch", make_cfg(tiny_dir, model={"dtype": dtype}))
    be.cfg = dataclasses.replace(be.cfg, train=dataclasses.replace(
        be.cfg.train, logprob_chunk_tokens=8))
    W = be.model.get_output_embeddings().weight
    assert W is be.model.get_input_embeddings().weight and W.dtype == getattr(torch, dtype)
    V = W.shape[0]
    # blocks of 3 rows for the element-wise passes (chunks of 8 rows)
    monkeypatch.setattr(chunked_head, "BLOCK_BYTES", 3 * 4 * V)

    def backward():
        loss, _ = be._micro_loss(mb, norm)
        loss.backward()

    def grads(on, micro_batches=1):
        monkeypatch.setattr(chunked_head, "GRAD_INTO_BUFFER", on)
        monkeypatch.setattr(chunked_head, "BLOCK_BYTES", 3 * 4 * V if on else 0)
        be.model.zero_grad(set_to_none=True)
        for _ in range(micro_batches):
            backward()
        return [p.grad.clone() for p in be.params]

    backward()                                              # the buffer exists from here on
    kept = W.grad.data_ptr()
    be.masters.accumulate()
    be.model.zero_grad(set_to_none=True)
    assert _fresh_outputs(backward, tuple(W.shape)) == []
    assert W.grad.data_ptr() == kept and W.grad.layout == torch.strided
    new, old = grads(True), grads(False)
    assert float(old[0].abs().max()) > 0 and len(new) == len(old)
    for n, o in zip(new, old):
        assert n.dtype == o.dtype and torch.equal(n, o)
    if dtype == "float32":
        new, old = grads(True, 2), grads(False, 2)
        assert all(_rel(n, o.double()) < 1e-6 for n, o in zip(new, old))
