"""The PPO critic on both backends: value-loss gradients of the MindSpore critic (compiled
step) against the torch critic on builtin:tiny, the same starting weights on both, and its
state file read by the other backend."""

import dataclasses

import numpy as np
import pytest

from mindrl.config.loader import load_config
from mindrl.types import LossNormalizers, ValueBatch, pad_token_batch


def _cfg(backend, tiny_dir, *extra):
    return load_config(None, [f"backend={backend}", f"model.path={tiny_dir}",
                              "algorithm.adv_estimator=gae", "rollout.max_new_tokens=16",
                              "data.max_prompt_len=16", "train.micro_batch_size=4",
                              "critic.cliprange_value=0.2", *extra])


def _batch(rng, B=8, vocab=1024):
    prompts = [list(rng.integers(5, vocab, rng.integers(2, 10))) for _ in range(B)]
    resps = [list(rng.integers(5, vocab, rng.integers(1, 13))) for _ in range(B)]
    return pad_token_batch(prompts, resps, 0)


@pytest.mark.slow
@pytest.mark.parametrize("agg", ["token_mean", "seq_mean_token_mean"])
def test_value_loss_gradients_match_torch(tiny_dir, agg):
    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.backends.torch.backend import TorchBackend

    rng = np.random.default_rng(0)
    tb = _batch(rng)
    m = tb.response_mask
    tt = TorchBackend(_cfg("torch", tiny_dir, f"critic.loss_agg_mode={agg}"))
    ms_be = MindSporeBackend(_cfg("mindspore", tiny_dir, f"critic.loss_agg_mode={agg}"))
    v_t = tt.critic.values(tb, micro_batch_size=4)
    v_m = ms_be.critic.values(tb, micro_batch_size=4)
    np.testing.assert_allclose(v_m, v_t, atol=1e-4)          # same start: same values
    assert np.abs(v_t).max() > 1e-3                          # and not trivially zero
    # old values near the current ones, so the clip (0.2) binds on some tokens and not others
    old = ((v_t + rng.normal(0, 0.3, m.shape)) * m).astype(np.float32)
    ret = (rng.normal(0, 1, m.shape) * m).astype(np.float32)
    vb = ValueBatch(tb, old, ret)
    micro = [vb.rows(slice(0, 4)), vb.rows(slice(4, 8))]
    norm = LossNormalizers(float(m.sum()), 8.0, 16.0)
    g_t = tt.critic.gradients(micro, norm)
    g_m = ms_be.critic.gradients(micro, norm)
    assert set(g_m) == set(g_t)
    assert np.abs(g_t["score.weight"]).max() > 0
    for name, ref in g_t.items():
        scale = max(np.abs(ref).max(), 1e-8)
        err = np.abs(g_m[name] - ref).max() / scale
        assert err < 1e-4, f"{name}: relative gradient error {err:.2e}"
    # one optimizer step on each backend: same metrics, same weights after
    out_t = tt.critic.step(micro, norm)
    out_m = ms_be.critic.step(micro, norm)
    for k in ("loss", "vf_clipfrac", "vpred_mean", "grad_norm"):
        assert out_m[k] == pytest.approx(out_t[k], rel=1e-4, abs=1e-6), k
    assert 0 < out_t["vf_clipfrac"] < 1
    a_t, a_m = tt.critic.arrays(), ms_be.critic.arrays()
    for k in a_t:
        np.testing.assert_allclose(a_m[k], a_t[k], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_critic_state_is_read_by_the_other_backend(tiny_dir, tmp_path):
    """critic.model_path = a state directory written by the torch critic: the MindSpore critic
    starts from those weights (values equal), not from the policy's."""
    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.backends.torch.backend import TorchBackend

    rng = np.random.default_rng(1)
    tb = _batch(rng)
    tt = TorchBackend(_cfg("torch", tiny_dir, "critic.lr=1e-2"))
    m = tb.response_mask
    vb = ValueBatch(tb, np.zeros_like(m), (m * 3.0).astype(np.float32))
    tt.critic.step([vb], LossNormalizers(float(m.sum()), 8.0, 16.0))
    tt.save_state(str(tmp_path / "state"))
    want = tt.critic.values(tb)
    ms_be = MindSporeBackend(_cfg("mindspore", tiny_dir, f"critic.model_path={tmp_path}/state"))
    np.testing.assert_allclose(ms_be.critic.values(tb), want, atol=1e-4)
    fresh = MindSporeBackend(_cfg("mindspore", tiny_dir))
    assert np.abs(fresh.critic.values(tb) - want).max() > 1e-2
