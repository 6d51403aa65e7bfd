"""MindSporeBackend.sft_step: gradient and AdamW-update parity with the torch backend's
sft_step on the same weights, real learning, micro-batch invariance, one compile per bucket."""

import numpy as np
import pytest

from mindrl.backends.mindspore import MindSporeBackend
from mindrl.types import LossNormalizers
from ms_helpers import ms_config, random_batch

# lr 1e-3: where a gradient is ~0, Adam's m / sqrt(v) turns float noise into a sign flip of a
# whole lr-sized step; at 1e-3 the worst element after 3 steps is 1.4e-5 off (1.4e-4 at 1e-2).
SFT_OVERRIDES = ("train.lr=1e-3", "train.weight_decay=0.1", "train.grad_clip=0.5",
                 "train.warmup_steps=2", "train.lr_schedule=cosine", "train.steps=4")


def _tokens(rng, B, **kw):
    return random_batch(rng, B, **kw).tokens


def _norm(tokens, max_len=16.0):
    return LossNormalizers(float(tokens.response_mask.sum()), float(len(tokens)), max_len)


def _rows(tokens, size):
    return [tokens.rows(slice(s, s + size)) for s in range(0, len(tokens), size)]


@pytest.mark.slow
def test_sft_gradients_and_updates_match_torch_backend(tiny_dir):
    from mindrl.backends.torch.backend import TorchBackend

    cfg = ms_config(f"model.path={tiny_dir}", *SFT_OVERRIDES)
    rng = np.random.default_rng(0)
    batches = [_tokens(rng, 8) for _ in range(3)]
    ms_be = MindSporeBackend(cfg, model_path=tiny_dir)
    th_be = TorchBackend(cfg)
    before = dict(ms_be.named_weights())

    # the gradient of one step (2 micro-batches), against the torch backend's own SFT loss
    norm = _norm(batches[0])
    got = ms_be.gradients(_rows(batches[0], 4), norm, kind="sft")
    th_be.model.zero_grad()
    for tb in _rows(batches[0], 4):
        th_be._sft_micro_loss(tb, norm)[0].backward()
    ref = {n: p.grad.numpy().copy() for n, p in th_be.model.named_parameters()}
    th_be.model.zero_grad()
    assert set(got) == set(ref)
    for name, g in got.items():
        err = np.abs(g - ref[name]).max() / max(np.abs(ref[name]).max(), 1e-8)
        assert err < 1e-4, f"{name}: relative gradient error {err:.2e}"

    # three optimizer steps (clipping binds, warm-up then cosine): same metrics, same weights
    for tb in batches:
        norm = _norm(tb)
        a = ms_be.sft_step(_rows(tb, 4), norm)
        b = th_be.sft_step(_rows(tb, 4), norm)
        assert set(b) <= set(a), set(b) - set(a)
        for k in ("loss", "nll", "grad_norm", "lr", "update_skipped", "response_tokens"):
            assert a[k] == pytest.approx(b[k], rel=1e-4, abs=1e-6), k
        assert a["loss"] == pytest.approx(a["nll"], rel=1e-5)   # token mean over the batch
        assert a["grad_norm"] > 0.5                              # the clip is active
    after = dict(ms_be.named_weights())
    ref = th_be.model.state_dict()
    for name, arr in after.items():
        assert np.abs(arr - before[name]).max() > 1e-4, f"{name} did not move"
        np.testing.assert_allclose(arr, ref[name].numpy(), atol=1e-4, err_msg=name)
    assert ms_be.optimizer_steps == th_be.optimizer_steps == 3


@pytest.mark.slow
def test_sft_learns_a_fixed_batch(hf_tied):
    directory, _ = hf_tied
    be = MindSporeBackend(ms_config("train.lr=3e-3", "train.warmup_steps=0"),
                          model_path=directory)
    tokens = _tokens(np.random.default_rng(1), 8)
    before = dict(be.named_weights())
    losses = [be.sft_step(_rows(tokens, 4), _norm(tokens))["loss"] for _ in range(6)]
    assert all(np.isfinite(losses))
    assert losses[-1] < losses[0] - 0.3, losses
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    after = dict(be.named_weights())
    moved = [k for k in after if np.abs(after[k] - before[k]).max() > 1e-5]
    assert len(moved) == len(after), "every parameter must change (PLATFORM.md: silent no-ops)"
    # the reported loss is the mean NLL of the weights before the step (a fresh scoring)
    lp = be.logprobs(tokens, temperature=1.0)
    nll = -(lp * tokens.response_mask).sum() / tokens.response_mask.sum()
    assert be.sft_step([tokens], _norm(tokens))["loss"] == pytest.approx(nll, rel=1e-4)


@pytest.mark.slow
def test_sft_micro_batches_equal_one_batch(hf_tied):
    directory, _ = hf_tied
    cfg = ms_config("train.lr=1e-2", "train.grad_clip=0.5", "train.micro_batch_size=2")
    tokens = _tokens(np.random.default_rng(2), 6)
    norm = _norm(tokens)
    whole = MindSporeBackend(cfg, model_path=directory)
    parts = MindSporeBackend(cfg, model_path=directory)
    g_whole = whole.gradients([tokens], norm, kind="sft")
    g_parts = parts.gradients(_rows(tokens, 2), norm, kind="sft")
    for k in g_whole:
        np.testing.assert_allclose(g_parts[k], g_whole[k], rtol=1e-4, atol=1e-7, err_msg=k)
    for _ in range(2):
        a = whole.sft_step([tokens], norm)
        b = parts.sft_step(_rows(tokens, 2), norm)
        for k in ("loss", "nll", "grad_norm", "response_tokens"):
            assert b[k] == pytest.approx(a[k], rel=1e-4), k
    wa, wb = dict(whole.named_weights()), dict(parts.named_weights())
    for k in wa:
        np.testing.assert_allclose(wb[k], wa[k], atol=1e-5, err_msg=k)


@pytest.mark.slow
def test_sft_compiles_once_per_bucket_and_shares_the_optimizer(hf_tied):
    directory, _ = hf_tied
    be = MindSporeBackend(ms_config("train.lr=1e-3"), model_path=directory,
                          prompt_buckets=[16], response_buckets=[8, 16])
    rng = np.random.default_rng(3)
    n_buckets = 1 * 2
    for step in range(12):
        tokens = _tokens(rng, 8, max_prompt=int(rng.integers(3, 15)),
                         max_resp=int(rng.integers(2, 16)))
        out = be.sft_step(_rows(tokens, 4), _norm(tokens))
        assert out["update_skipped"] == 0.0 and np.isfinite(out["loss"])
    assert 1 <= be.compile_counts["sft_step"] <= n_buckets
    assert be.compile_counts["sft_accumulate_step"] <= n_buckets
    assert be.compile_count == 0                 # no RL train-step graph was built
    batch = random_batch(rng, 8)                 # RL after SFT: same AdamW state and counters
    be.train_step([batch], _norm(batch.tokens))
    assert be.optimizer_steps == 13 and be.optimizer.step == 13
