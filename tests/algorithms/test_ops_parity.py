"""Every registered loss on all three ops implementations, on fresh random inputs.

For each case: the torch and mindspore (PyNative) forward values and metrics equal the float64
NumPy reference within 1e-5 (fp32), the torch and mindspore gradients agree within 1e-5, and the
torch gradient matches finite differences in float64 (so no stop_gradient sits where it should
not). Cases are generated from the registries: a newly registered policy loss, KL estimator,
aggregation mode or preference loss is covered without editing this file.
"""

from __future__ import annotations

import zlib
from typing import Callable, Dict, NamedTuple, Tuple

import numpy as np
import pytest

from algorithms import (AGG_MODES, KL_ESTIMATORS, POLICY_LOSSES, PREFERENCE_LOSSES, aggregate,
                        entropy_from_logits, get_ops, kl_penalty, preference_loss, rl_loss,
                        sft_nll)
from mindrl.config.schema import (AlgorithmConfig, KLConfig, PreferenceConfig,
                                  RolloutCorrectionConfig)

torch = pytest.importorskip("torch")
ms = pytest.importorskip("mindspore")

B, T, V = 4, 6, 11
TOL = dict(rtol=1e-5, atol=1e-5)


class Case(NamedTuple):
    diff: Tuple[str, ...]               # names of differentiable inputs
    make: Callable[[np.random.Generator], Dict[str, np.ndarray]]
    fn: Callable                        # fn(ops, **inputs) -> out | (out, metrics)


def _mask(rng, b=B, t=T):
    lengths = rng.integers(1, t + 1, size=b)
    lengths[0] = t
    return (np.arange(t)[None, :] < lengths[:, None]).astype(np.float64)


def _rl_inputs(rng):
    old = rng.normal(-1.5, 0.5, (B, T))
    return dict(logp=old + rng.normal(0, 0.35, (B, T)), old_logp=old,
                advantages=rng.normal(0, 1, (B, T)), response_mask=_mask(rng),
                rollout_logp=old + rng.normal(0, 0.6, (B, T)),
                ref_logp=old + rng.normal(0, 0.5, (B, T)))


POLICY_VARIANTS = {
    "plain": dict(clip_eps_low=0.2, clip_eps_high=0.28),
    "dual_tis": dict(clip_eps_low=0.2, clip_eps_high=0.2, dual_clip_c=1.5, tis_cap=1.3,
                     log_ratio_clamp=0.5),
    # loss-specific options with many selected tokens (covariance losses) and uneven gates
    "hyper": dict(clip_eps_low=0.3, clip_eps_high=0.1, tau_pos=2.0, tau_neg=0.5,
                  clip_cov_ratio=0.25, clip_cov_lb=-1.0, clip_cov_ub=1.0, kl_cov_ratio=0.3,
                  ppo_kl_coef=0.7),
}
#: Losses whose gradient is by design not the derivative of their value (a stop_gradient
#: inside: CISPO's detached weight, GSPO-token's sg(s_i) pi / sg(pi)); their gradients are
#: checked by hand in test_new_losses.py instead of by finite differences.
SURROGATE_LOSSES = ("cispo", "gspo_token")


def _policy_case(name, variant):
    kw = POLICY_VARIANTS[variant]

    def fn(ops, logp, old_logp, advantages, response_mask, rollout_logp, ref_logp):
        rl = rollout_logp if kw.get("tis_cap") else None
        return POLICY_LOSSES.get(name)(ops, logp, old_logp, advantages, response_mask,
                                       rollout_logp=rl, **kw)
    return Case(("logp",), _rl_inputs, fn)


def _kl_case(name, clipped):
    clips = dict(log_ratio_clip=0.6, value_clip=0.15) if clipped else {}

    def make(rng):
        ref = rng.normal(-1.5, 0.5, (B, T))
        return dict(logp=ref + rng.normal(0, 0.5, (B, T)), ref_logp=ref)
    return Case(("logp",), make, lambda ops, logp, ref_logp: kl_penalty(ops, logp, ref_logp,
                                                                         name, **clips))


def _agg_case(mode):
    def make(rng):
        return dict(loss=rng.normal(0, 1, (B, T)), mask=_mask(rng))
    return Case(("loss",), make, lambda ops, loss, mask: aggregate(
        ops, loss, mask, mode, global_tokens=37, global_seqs=9, max_len=8))


def _pref_inputs(rng):
    c_ref, r_ref = rng.normal(-1.5, 0.5, (B, T)), rng.normal(-1.5, 0.5, (B, T))
    return dict(chosen_logp=c_ref + rng.normal(0, 0.3, (B, T)), chosen_mask=_mask(rng),
                rejected_logp=r_ref + rng.normal(0, 0.3, (B, T)), rejected_mask=_mask(rng),
                ref_chosen_logp=c_ref, ref_rejected_logp=r_ref)


def _pref_case(name):
    cfg = PreferenceConfig(loss=name, beta=0.5, label_smoothing=0.1, gamma=0.3, pref_ftx=0.4)
    return Case(("chosen_logp", "rejected_logp"), _pref_inputs,
                lambda ops, **kw: preference_loss(ops, cfg=cfg, global_pairs=7, **kw))


def _logits(rng):
    return dict(logits=rng.normal(0, 2.0, (B, T, V)), tokens=rng.integers(0, V, (B, T)))


def _rl_loss_case(mode, **extra):
    cfg = AlgorithmConfig(kl=KLConfig(coef=0.2, estimator="k3", log_ratio_clip=1.0),
                          entropy_coef=0.05, dual_clip_c=2.0, loss_agg_mode=mode,
                          **{"tis_cap": 1.5, **extra})

    def make(rng):
        d = _rl_inputs(rng)
        d.update(logits=rng.normal(0, 2.0, (B, T, V)))
        return d

    def fn(ops, logits, **kw):
        return rl_loss(ops, entropy=entropy_from_logits(ops, logits), cfg=cfg,
                       global_tokens=30, global_seqs=6, max_len=T, **kw)
    return Case(("logp", "logits"), make, fn)


CASES: Dict[str, Case] = {}
for _name in POLICY_LOSSES:
    for _variant in POLICY_VARIANTS:
        CASES[f"policy:{_name}:{_variant}"] = _policy_case(_name, _variant)
for _name in KL_ESTIMATORS:
    CASES[f"kl:{_name}"] = _kl_case(_name, False)
    CASES[f"kl:{_name}:clipped"] = _kl_case(_name, True)
for _name in AGG_MODES:
    CASES[f"agg:{_name}"] = _agg_case(_name)
for _name in PREFERENCE_LOSSES:
    CASES[f"pref:{_name}"] = _pref_case(_name)
CASES["sft_nll"] = Case(("logp",), lambda rng: dict(logp=rng.normal(-2, 1, (B, T)),
                                                    mask=_mask(rng)),
                        lambda ops, logp, mask: sft_nll(ops, logp, mask, global_tokens=19))
CASES["entropy"] = Case(("logits",), _logits,
                        lambda ops, logits, tokens: entropy_from_logits(ops, logits))
CASES["token_logprobs"] = Case(("logits",), _logits,
                               lambda ops, logits, tokens: ops.token_logprobs(logits, tokens))
CASES["logsumexp"] = Case(("logits",), _logits, lambda ops, logits, tokens: ops.logsumexp(logits))
CASES["rl_loss:token_mean"] = _rl_loss_case("token_mean")
CASES["rl_loss:seq_mean_token_mean"] = _rl_loss_case("seq_mean_token_mean")
CASES["rl_loss:corrected"] = _rl_loss_case(
    "token_mean", tis_cap=0.0, policy_loss="sapo",
    rollout_correction=RolloutCorrectionConfig(
        rollout_is="sequence", rollout_is_threshold="0.3_3", rollout_rs="token_k1,seq_max_k3",
        rollout_rs_threshold="0.4_2.5,0.5", off_policy_seq_mask_kl=0.1))


# --- running one case on one backend ----------------------------------------------------------
def _split(result):
    return result if isinstance(result, tuple) else (result, {})


def _to_torch(a, dtype, requires_grad):
    if a.dtype.kind in "iu":
        return torch.as_tensor(a, dtype=torch.int64)
    return torch.tensor(a, dtype=dtype, requires_grad=requires_grad)


def run_torch(case, inputs, weights, dtype=torch.float32):
    ops = get_ops("torch")
    t = {k: _to_torch(v, dtype, k in case.diff) for k, v in inputs.items()}
    out, metrics = _split(case.fn(ops, **t))
    for k, v in metrics.items():
        assert not v.requires_grad, f"metric {k} carries a gradient"
    (out * torch.as_tensor(weights, dtype=dtype)).sum().backward()
    grads = [t[k].grad.numpy() for k in case.diff]
    return out.detach().numpy(), {k: v.item() for k, v in metrics.items()}, grads


def run_mindspore(case, inputs, weights):
    ops = get_ops("mindspore")
    t = {k: ms.Tensor(v.astype(np.int32 if v.dtype.kind in "iu" else np.float32))
         for k, v in inputs.items()}
    out, metrics = _split(case.fn(ops, **t))
    w = ms.Tensor(np.asarray(weights, dtype=np.float32))

    def scalar(*diff):
        kw = dict(t, **dict(zip(case.diff, diff)))
        return (_split(case.fn(ops, **kw))[0] * w).sum()

    grads = ms.grad(scalar, grad_position=tuple(range(len(case.diff))))(
        *[t[k] for k in case.diff])
    grads = grads if isinstance(grads, tuple) else (grads,)
    return (out.asnumpy(), {k: float(v.asnumpy()) for k, v in metrics.items()},
            [g.asnumpy() for g in grads])


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_backends_agree(case_id):
    case = CASES[case_id]
    rng = np.random.default_rng(zlib.crc32(case_id.encode()))
    inputs = case.make(rng)
    ref_out, ref_metrics = _split(case.fn(get_ops("numpy"), **inputs))
    ref_out = np.asarray(ref_out, dtype=np.float64)
    assert ref_out.dtype == np.float64 and np.all(np.isfinite(ref_out))
    weights = rng.normal(0, 1, ref_out.shape)

    t_out, t_metrics, t_grads = run_torch(case, inputs, weights)
    m_out, m_metrics, m_grads = run_mindspore(case, inputs, weights)
    np.testing.assert_allclose(t_out, ref_out, **TOL, err_msg="torch forward")
    np.testing.assert_allclose(m_out, ref_out, **TOL, err_msg="mindspore forward")
    assert set(t_metrics) == set(m_metrics) == set(ref_metrics)
    for k, v in ref_metrics.items():
        assert t_metrics[k] == pytest.approx(float(v), rel=1e-5, abs=1e-5), f"torch metric {k}"
        assert m_metrics[k] == pytest.approx(float(v), rel=1e-5, abs=1e-5), f"mindspore metric {k}"
    for name, tg, mg in zip(case.diff, t_grads, m_grads):
        assert np.any(tg != 0), f"no gradient reaches {name}"
        np.testing.assert_allclose(mg, tg, **TOL, err_msg=f"gradient wrt {name}")


@pytest.mark.parametrize("case_id", sorted(c for c in CASES
                                            if c.split(":")[1:2] not in [[n] for n in
                                                                         SURROGATE_LOSSES]))
def test_torch_gradient_matches_finite_differences(case_id):
    """float64 autograd vs central differences of the numpy-equivalent torch forward."""
    case = CASES[case_id]
    rng = np.random.default_rng(zlib.crc32(case_id.encode()) + 1)
    inputs = case.make(rng)
    weights = rng.normal(0, 1, np.shape(_split(case.fn(get_ops("numpy"), **inputs))[0]))
    _, _, grads = run_torch(case, inputs, weights, dtype=torch.float64)
    ops, eps = get_ops("torch"), 1e-6

    def value(kw):
        t = {k: (torch.as_tensor(v, dtype=torch.int64) if v.dtype.kind in "iu"
                 else torch.as_tensor(v, dtype=torch.float64)) for k, v in kw.items()}
        return float((_split(case.fn(ops, **t))[0] * torch.as_tensor(weights)).sum())

    for name, g in zip(case.diff, grads):
        flat = inputs[name].reshape(-1)
        for i in rng.choice(flat.size, size=min(6, flat.size), replace=False):
            up, down = flat.copy(), flat.copy()
            up[i] += eps
            down[i] -= eps
            num = (value({**inputs, name: up.reshape(inputs[name].shape)})
                   - value({**inputs, name: down.reshape(inputs[name].shape)})) / (2 * eps)
            assert num == pytest.approx(g.reshape(-1)[i], rel=1e-4, abs=1e-6), (name, i)


def test_registries_are_covered():
    """Guard: the generators above produce a case for every registered name."""
    ids = " ".join(CASES)
    for reg, prefix in ((POLICY_LOSSES, "policy"), (KL_ESTIMATORS, "kl"), (AGG_MODES, "agg"),
                        (PREFERENCE_LOSSES, "pref")):
        for name in reg:
            assert f"{prefix}:{name}" in ids


def test_bool_int_masks_and_numpy_constants_accepted():
    inputs = _rl_inputs(np.random.default_rng(3))
    ref, _ = rl_loss(get_ops("numpy"), cfg=AlgorithmConfig(), **inputs)
    for name in ("torch", "mindspore"):
        ops = get_ops(name)
        t = {k: ops.asarray(v) for k, v in inputs.items()}
        for dtype in (bool, np.int32):
            mask = inputs["response_mask"].astype(dtype)
            t["response_mask"] = (torch.as_tensor(mask) if name == "torch" else ms.Tensor(mask))
            t["advantages"] = inputs["advantages"]  # NumPy float64 constants are cast to logp's
            loss, _ = rl_loss(ops, cfg=AlgorithmConfig(), **t)
            assert float(ops.to_numpy(loss)) == pytest.approx(float(ref), rel=1e-5, abs=1e-5)


# --- MindSpore graph mode ----------------------------------------------------------------------
def test_mindspore_graph_mode_matches_pynative():
    """The same math compiles under mindspore.jit: AST capture for the registered functions
    resolved outside the graph, bytecode capture for the composite (its registry lookup
    uses try/except, which AST capture does not parse)."""
    ops = get_ops("mindspore")
    rng = np.random.default_rng(5)
    inputs = {k: ms.Tensor(v.astype(np.float32)) for k, v in _rl_inputs(rng).items()}
    logits = ms.Tensor(rng.normal(0, 2.0, (B, T, V)).astype(np.float32))
    tokens = ms.Tensor(rng.integers(0, V, (B, T)).astype(np.int32))
    policy, k3, agg = POLICY_LOSSES.get("ppo_clip"), KL_ESTIMATORS.get("k3"), \
        AGG_MODES.get("seq_mean_token_mean")
    mask, old, adv, ref = (inputs[k] for k in ("response_mask", "old_logp", "advantages",
                                               "ref_logp"))

    def parts(lg):
        logp = ops.token_logprobs(lg, tokens)
        pg, _ = policy(ops, logp, old, adv, mask, clip_eps_low=0.2, clip_eps_high=0.28,
                       dual_clip_c=3.0)
        per_token = pg + 0.1 * k3(ops, logp - ref) - 0.01 * entropy_from_logits(ops, lg)
        return agg(ops, per_token, mask, global_tokens=20.0, global_seqs=4.0, max_len=6.0)

    cfg = AlgorithmConfig(kl=KLConfig(coef=0.1), entropy_coef=0.01, tis_cap=2.0)

    def composite(lg):
        logp = ops.token_logprobs(lg, tokens)
        loss, _ = rl_loss(ops, logp=logp, old_logp=old, advantages=adv, response_mask=mask,
                          ref_logp=ref, rollout_logp=inputs["rollout_logp"],
                          entropy=entropy_from_logits(ops, lg), cfg=cfg, global_tokens=20)
        return loss

    for fn, mode in ((parts, "ast"), (composite, "bytecode")):
        eager_v, eager_g = ms.value_and_grad(fn)(logits)
        graph_v, graph_g = ms.jit(ms.value_and_grad(fn), capture_mode=mode)(logits)
        assert float(graph_v.asnumpy()) == pytest.approx(float(eager_v.asnumpy()), rel=1e-5)
        np.testing.assert_allclose(graph_g.asnumpy(), eager_g.asnumpy(), **TOL)


@pytest.fixture(autouse=True)
def _run_in_tmp(tmp_path, monkeypatch):
    """MindSpore writes rank_0/om/*.ir into the working directory when a compile fails."""
    monkeypatch.chdir(tmp_path)

