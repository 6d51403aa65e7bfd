"""Adaptive entropy control (Skywork-OR1): the controller against a hand-computed sequence, its
state round trip, the config checks, the loss term with a per-step coefficient, and the torch
backend using the coefficient it is handed (the MindSpore one: tests/backends/mindspore/
test_ms_entropy_control.py)."""

import numpy as np
import pytest

from algorithms.entropy_control import AdaptiveEntropyController
from algorithms.ops import get_ops
from algorithms.rl_loss import rl_loss
from mindrl.config.loader import load_config
from mindrl.types import LossNormalizers, TrainBatch, pad_token_batch


def test_controller_follows_the_hand_computed_sequence():
    # target 0.2, delta 1e-4, max 3e-4, start 0 (Skywork's rule: +delta below target, -delta
    # at or above it, clip to [0, max], the bonus on only while below target)
    c = AdaptiveEntropyController(target=0.2, delta=1e-4, max_coef=3e-4)
    assert c.coefficient == 0.0
    entropies = [0.10, 0.15, 0.19, 0.05, 0.20, 0.50, 0.50, 0.50, 0.10]
    values = [1e-4, 2e-4, 3e-4, 3e-4, 2e-4, 1e-4, 0.0, 0.0, 1e-4]
    coefs = [1e-4, 2e-4, 3e-4, 3e-4, 0.0, 0.0, 0.0, 0.0, 1e-4]
    got = [c.update(e) for e in entropies]
    assert got == pytest.approx(coefs, abs=1e-12)
    # the raw coefficient c_k, by hand, checked through a replay of the same inputs
    r = AdaptiveEntropyController(target=0.2, delta=1e-4, max_coef=3e-4)
    for e, v in zip(entropies, values):
        r.update(e)
        assert r.value == pytest.approx(v, abs=1e-12)


def test_controller_state_round_trip_resumes_exactly():
    a = AdaptiveEntropyController(target=0.3, delta=0.01, max_coef=0.05, init_coef=0.02)
    assert a.coefficient == 0.02                 # Skywork starts with the bonus enabled
    for e in (0.1, 0.4, 0.1):
        a.update(e)
    b = AdaptiveEntropyController(target=0.3, delta=0.01, max_coef=0.05)
    b.load_state_dict(a.state_dict())
    for e in (0.5, 0.2, 0.2, 0.9):
        assert b.update(e) == a.update(e)


def test_config_keys_and_checks():
    from mindrl.config.loader import ConfigError

    from mindrl.config.stages import load_stages

    cfg = load_stages("skywork_or1_7b")[0].cfg
    ec = cfg.algorithm.entropy_control
    assert (ec.enabled, ec.target, ec.delta, ec.max_coef) == (True, 0.2, 1e-4, 0.005)
    assert cfg.algorithm.entropy_coef == 0.0
    with pytest.raises(ConfigError, match="entropy_coef"):
        load_config(None, ["algorithm.entropy_control.enabled=true",
                           "algorithm.entropy_coef=0.1"])


def test_rl_loss_takes_the_step_coefficient():
    ops = get_ops("numpy")
    rng = np.random.default_rng(0)
    logp = rng.normal(-2, 0.3, (3, 4))
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], float)
    ent = rng.uniform(0.1, 2.0, (3, 4))
    cfg = load_config(None, ["algorithm.entropy_coef=0.0"]).algorithm
    kw = dict(logp=logp, old_logp=logp, advantages=rng.normal(size=(3, 4)), response_mask=mask,
              entropy=ent, cfg=cfg, global_tokens=float(mask.sum()))
    base, _ = rl_loss(ops, **kw)
    with_coef, _ = rl_loss(ops, entropy_coef=0.25, **kw)
    # token_mean: the bonus is 0.25 * sum(mask * H) / tokens
    assert with_coef == pytest.approx(base - 0.25 * (ent * mask).sum() / mask.sum(), rel=1e-12)


@pytest.mark.slow
def test_torch_backend_uses_the_coefficient_it_is_handed(tmp_path):
    import torch

    from mindrl.backends.torch.backend import TorchBackend
    from mindrl.models.tiny import resolve_model_path

    path = resolve_model_path("builtin:tiny", cache_dir=str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    prompts = [list(rng.integers(5, 1024, rng.integers(2, 8))) for _ in range(4)]
    resps = [list(rng.integers(5, 1024, rng.integers(2, 8))) for _ in range(4)]
    tb = pad_token_batch(prompts, resps, 0)
    adv = (rng.normal(size=tb.response_mask.shape) * tb.response_mask).astype(np.float32)
    mb = TrainBatch(tb, adv, None, None, None)

    def loss_and_grad(be, coef):
        norm = LossNormalizers(float(tb.response_mask.sum()), 4.0, 16.0, entropy_coef=coef)
        be.model.zero_grad()
        loss, metrics = be._micro_loss(mb, norm)
        loss.backward()
        g = torch.cat([p.grad.flatten() for p in be.model.parameters() if p.grad is not None])
        return float(loss), float(metrics["entropy"]), g.clone()

    common = [f"model.path={path}", "backend=torch", "rollout.max_new_tokens=16"]
    adaptive = TorchBackend(load_config(None, common + [
        "algorithm.entropy_control.enabled=true", "algorithm.entropy_control.max_coef=1.0"]))
    l0, h, g0 = loss_and_grad(adaptive, 0.0)
    l1, _, g1 = loss_and_grad(adaptive, 0.5)
    assert h > 0.1
    assert l1 == pytest.approx(l0 - 0.5 * h, rel=1e-5)     # token_mean over one micro-batch
    assert not torch.allclose(g0, g1)
    fixed = TorchBackend(load_config(None, common + ["algorithm.entropy_coef=0.5"]))
    lf, _, gf = loss_and_grad(fixed, None)                  # the config's constant 0.5
    assert lf == pytest.approx(l1, rel=1e-6)
    torch.testing.assert_close(gf, g1, rtol=1e-5, atol=1e-7)
