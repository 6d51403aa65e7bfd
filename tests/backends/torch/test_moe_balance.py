"""The MoE load-balancing loss (``model.moe.aux_loss_coef``) is a statistic of the whole
mini-batch: its value is transformers' ``load_balancing_loss_func`` of one forward over every
row, its gradient is coef x that function's gradient, and neither depends on how the rows are
cut into micro-batches or packed."""

import dataclasses

import numpy as np
import pytest
import torch

from mindrl.types import LossNormalizers, TrainBatch, pad_token_batch

COEF = 0.5


def _batch(seed=0, vocab=1000):
    """Eight rows, prompts of 2-7 tokens, responses of 1-20 (the mix padding sees)."""
    rng = np.random.default_rng(seed)
    lengths = [1, 20, 3, 9, 2, 14, 5, 1]
    prompts = [rng.integers(5, vocab, rng.integers(2, 8)).tolist() for _ in lengths]
    tokens = pad_token_batch(prompts, [rng.integers(5, vocab, n).tolist() for n in lengths], 0)
    adv = rng.normal(size=(len(lengths), 1)).astype(np.float32) * tokens.response_mask
    return TrainBatch(tokens, adv, None)


@pytest.fixture(scope="module")
def moe_backend(tiny_dir):
    from pathlib import Path

    from mindrl.backends.base import build_backend
    from mindrl.config.loader import load_config
    from mindrl.models.tiny import resolve_model_path

    path = resolve_model_path("builtin:tiny-qwen3-moe", cache_dir=str(Path(tiny_dir).parent))
    cfg = load_config(None, [f"model.path={path}", f"model.moe.aux_loss_coef={COEF}",
                             "train.threads=1", "train.logprob_chunk_tokens=0"])
    return build_backend("torch", cfg)


def _flat(grads):
    return np.concatenate([grads[k].ravel() for k in sorted(grads)])


def _transformers_aux(be, batch):
    """transformers' own load-balancing loss of ONE forward over the whole batch (real tokens
    by the attention mask, native top-k) and its gradient (flat, parameter-name order)."""
    tb = batch.tokens
    be.model.zero_grad(set_to_none=True)
    out = be.model(input_ids=torch.from_numpy(tb.input_ids),
                   attention_mask=torch.from_numpy(tb.attention_mask),
                   position_ids=torch.from_numpy(tb.position_ids), use_cache=False,
                   output_router_logits=True)
    out.aux_loss.backward()
    grads = {n: p.grad.numpy().copy() if p.grad is not None else np.zeros(tuple(p.shape),
                                                                             np.float32)
             for n, p in be.model.named_parameters()}
    be.model.zero_grad(set_to_none=True)
    return float(out.aux_loss), grads


def _with(be, **train):
    be.cfg = dataclasses.replace(be.cfg, train=dataclasses.replace(be.cfg.train, **train))


def test_aux_loss_gradient_is_the_mini_batch_one_for_any_micro_batch_cut(moe_backend):
    be = moe_backend
    batch = _batch()
    norm = LossNormalizers(float(batch.tokens.response_mask.sum()), 8.0, 20.0)
    cuts = [np.arange(0, 3), np.arange(3, 6), np.arange(6, 8)]
    three = [batch.rows(c) for c in cuts]
    _with(be, padding_free=False)
    one = be.gradients([batch], norm)
    keys = sorted(one)
    want = _flat(one)
    scale = float(np.abs(want).max())
    assert scale > 1e-4
    for layout in ("padded", "packed"):
        _with(be, padding_free=layout == "packed")
        got = _flat(be.gradients(three, norm))
        np.testing.assert_allclose(got, want, atol=1e-5 * scale, rtol=0, err_msg=layout)
    _with(be, padding_free=False)

    # and it is coef x the gradient of transformers' loss over the whole batch: the RL part
    # (same cut, coefficient 0) taken away leaves it
    aux, ref = _transformers_aux(be, batch)
    cfg = be.cfg
    be.cfg = dataclasses.replace(cfg, model=dataclasses.replace(
        cfg.model, moe=dataclasses.replace(cfg.model.moe, aux_loss_coef=0.0)))
    try:
        plain = be.gradients(three, norm)
    finally:
        be.cfg = cfg
    diff = want - _flat({k: plain.get(k, np.zeros_like(one[k])) for k in keys})
    ref = _flat({k: ref[k] for k in keys}) * COEF
    assert np.abs(ref).max() > 1e-4           # the routers get a real gradient from it
    np.testing.assert_allclose(diff, ref, atol=1e-5 * float(np.abs(ref).max()), rtol=0)


def test_aux_loss_value_equals_an_independent_formula(moe_backend):
    """The metric: E x sum_e f_e P_e over the whole mini-batch, checked against NumPy from
    the routers' logits of one forward, and against transformers' function."""
    be = moe_backend
    _with(be, padding_free=False)
    batch = _batch(seed=3)
    tb = batch.tokens
    with torch.no_grad():
        out = be.model(input_ids=torch.from_numpy(tb.input_ids),
                       attention_mask=torch.from_numpy(tb.attention_mask),
                       position_ids=torch.from_numpy(tb.position_ids), use_cache=False,
                       output_router_logits=True)
    w = tb.attention_mask.reshape(-1).astype(np.float64)
    E, k = 4, 2
    counts, probs, rows = np.zeros(E), np.zeros(E), 0.0
    for z in out.router_logits:
        z = z.double().numpy()
        p = np.exp(z - z.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        for n in range(len(w)):
            for e in np.argsort(-p[n])[:k]:
                counts[e] += w[n]
        probs += (p * w[:, None]).sum(0)
        rows += w.sum()
    want = E * float(np.sum(counts / rows * probs / rows))
    assert 2.0 < want < 4.0         # k when balanced, up to E when every token picks the same
    assert float(out.aux_loss) == pytest.approx(want, abs=1e-6)
    norm = LossNormalizers(float(tb.response_mask.sum()), 8.0, 20.0)
    saved = {n: p.detach().clone() for n, p in be.model.named_parameters()}
    try:
        got = be.train_step([batch.rows(np.arange(0, 5)), batch.rows(np.arange(5, 8))], norm)
    finally:
        with torch.no_grad():
            for n, p in be.model.named_parameters():
                p.copy_(saved[n])
    assert got["moe/aux_loss"] == pytest.approx(want, abs=1e-5)


@pytest.mark.slow
def test_aux_loss_over_two_torchrun_ranks_equals_one_process(moe_ddp_run):
    """Data parallel: the expert shares are the mini-batch's over all ranks (the pre-pass
    all-reduces them), so 2 torchrun ranks (gloo) on halves of the mini-batch give the
    1-process gradient of the whole of it, padded or packed, and the same ``moe/aux_loss``
    and step metrics."""
    import importlib.util
    import json
    from pathlib import Path

    here = Path(__file__).resolve().parent
    spec = importlib.util.spec_from_file_location("moe_ddp_worker", here / "moe_ddp_worker.py")
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    out, cache = moe_ddp_run        # moe_ddp_worker.py under the one torchrun of conftest.py
    meta = json.loads(Path(str(out) + ".json").read_text())
    both = np.load(str(out) + ".npy")

    grads, _, ref_metrics, _ = worker.run(cache)
    keys = sorted(grads)
    assert meta["keys"] == keys
    want = _flat(grads).astype(np.float64)
    router = [k for k in keys if k.endswith("mlp.gate.weight")]
    assert router and max(float(np.abs(grads[k]).max()) for k in router) > 1e-4
    scale = float(np.abs(want).max())
    for layout, got in zip(("padded", "packed"), both):
        np.testing.assert_allclose(got, want, atol=1e-5 * scale, rtol=0, err_msg=layout)
        at = 0
        for k in keys:            # the routers' gradient (mostly the aux term's) on its own
            n = grads[k].size
            if k in router:
                g, w = got[at:at + n], want[at:at + n]
                assert np.linalg.norm(g - w) <= 1e-5 * np.linalg.norm(w), (layout, k)
            at += n
    metrics = meta["metrics"]
    assert 2.0 < ref_metrics["moe/aux_loss"] < 4.0
    assert metrics["moe/aux_loss"] == pytest.approx(ref_metrics["moe/aux_loss"], rel=1e-6)
    for key in ("loss", "grad_norm"):
        assert metrics[key] == pytest.approx(ref_metrics[key], rel=1e-5), key


def test_a_micro_batch_with_its_responses_masked_out_counts_in_both_layouts(moe_backend):
    """Rows whose responses are all left out of the loss (response_mask 0: an overlong filter,
    a tool output) are still forwarded, so their routers are in the mini-batch's statistic:
    packed as padded, even when a whole micro-batch has no scored token."""
    be = moe_backend
    batch = _batch(seed=5)
    batch.tokens.response_mask[6:] = 0
    batch.advantages[6:] = 0
    norm = LossNormalizers(float(batch.tokens.response_mask.sum()), 8.0, 20.0)
    cuts = [batch.rows(np.arange(0, 6)), batch.rows(np.arange(6, 8))]
    _with(be, padding_free=False)
    want = _flat(be.gradients([batch], norm))
    scale = float(np.abs(want).max())
    try:
        for layout in ("padded", "packed"):
            _with(be, padding_free=layout == "packed")
            got = _flat(be.gradients(cuts, norm))
            np.testing.assert_allclose(got, want, atol=1e-5 * scale, rtol=0, err_msg=layout)
    finally:
        _with(be, padding_free=False)
