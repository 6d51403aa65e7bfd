"""The exact reverse KL to the teacher over the whole vocabulary (``algorithm.distill.estimator
= full``): its value and gradient against a hand computation on a small vocabulary with ragged
masks, the config checks, and a 2-step torch run (padded and padding-free) whose loss term is
recomputed from both models' full logits."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from algorithms import get_ops, rl_loss
from algorithms.distill import full_reverse_kl
from mindrl.config.loader import load_config
from mindrl.errors import ConfigError

# 2 rollouts x 3 positions x a vocabulary of 3; ragged: 3 and 1 response tokens
MASK = np.array([[1, 1, 1], [1, 0, 0]], np.float64)
S_LOGITS = np.array([[[0.0, 1.0, -1.0], [2.0, 0.0, 0.0], [0.5, 0.5, 0.5]],
                     [[-1.0, 3.0, 0.0], [9.0, -9.0, 0.0], [0.0, 0.0, 7.0]]])
T_LOGITS = np.array([[[1.0, 0.0, 0.0], [0.0, 0.0, 2.0], [0.5, 0.5, 0.5]],
                     [[0.0, 0.0, 0.0], [0.0, 9.0, 0.0], [5.0, 0.0, 0.0]]])


def _softmax(row):
    e = [math.exp(x) for x in row]
    return [x / sum(e) for x in e]


def _hand_kl(s_row, t_row):
    p, q = _softmax(s_row), _softmax(t_row)
    return sum(pi * (math.log(pi) - math.log(qi)) for pi, qi in zip(p, q))


def _hand_grad(s_row, t_row):
    """d KL(p || q) / d z_j = p_j (log p_j - log q_j - KL) for p = softmax(z)."""
    p, q, kl = _softmax(s_row), _softmax(t_row), _hand_kl(s_row, t_row)
    return [pj * (math.log(pj) - math.log(qj) - kl) for pj, qj in zip(p, q)]


def test_full_reverse_kl_by_hand():
    want = [[_hand_kl(S_LOGITS[b, t], T_LOGITS[b, t]) for t in range(3)] for b in range(2)]
    # spot values: equal rows -> 0; a sharp student on the teacher's unlikely token -> large
    assert want[0][2] == pytest.approx(0.0, abs=1e-15)
    assert 8.9 < want[1][1] < 9.1                    # ~ 9 nats: log(1) - log(e^-9)
    for name in ("numpy", "torch"):
        ops = get_ops(name)
        got = ops.to_numpy(full_reverse_kl(ops, ops.asarray(S_LOGITS, None if name == "numpy"
                                                            else ops.torch.float64),
                                           ops.asarray(T_LOGITS, None if name == "numpy"
                                                       else ops.torch.float64)))
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _cfg(*extra):
    return load_config(None, ["algorithm.distill.teacher=builtin:mini",
                              "algorithm.distill.mode=loss", "algorithm.policy_loss=vanilla_pg",
                              "algorithm.distill.estimator=full", *extra]).algorithm


@pytest.mark.parametrize("agg", ["token_mean", "seq_mean_token_mean"])
def test_full_kl_loss_value_and_gradient_by_hand(agg):
    """Zero task advantage: the loss is coef * agg(KL_t) and its gradient w.r.t. the student's
    logits is coef * w_t * p_j (log p_j - log q_j - KL_t) (w_t the aggregation weight of the
    position, 0 at padding); no gradient reaches the teacher's logits."""
    import torch

    ops = get_ops("torch")
    cfg = _cfg("algorithm.distill.coef=0.5", f"algorithm.loss_agg_mode={agg}")
    w = ([[1 / 4] * 3, [1 / 4, 0, 0]] if agg == "token_mean"
         else [[1 / 3 / 2] * 3, [1 / 2, 0, 0]])
    kl = [[_hand_kl(S_LOGITS[b, t], T_LOGITS[b, t]) for t in range(3)] for b in range(2)]
    want_val = 0.5 * sum(w[b][t] * kl[b][t] for b in range(2) for t in range(3))
    want_g = [[[0.5 * w[b][t] * g for g in _hand_grad(S_LOGITS[b, t], T_LOGITS[b, t])]
               for t in range(3)] for b in range(2)]
    z = torch.tensor(S_LOGITS, requires_grad=True)
    zt = torch.tensor(T_LOGITS, requires_grad=True)
    logp = torch.log_softmax(z, -1)[..., 0]         # some sampled-token log-prob (adv is 0)
    loss, m = rl_loss(ops, logp=logp, old_logp=logp.detach(), advantages=np.zeros_like(MASK),
                      response_mask=MASK, cfg=cfg, teacher_kl=full_reverse_kl(ops, z, zt))
    loss.backward()
    assert float(loss.detach()) == pytest.approx(want_val, rel=1e-12)
    assert float(m["distill_kl"]) == pytest.approx((kl[0][0] + kl[0][1] + kl[0][2]
                                                    + kl[1][0]) / 4, rel=1e-12)
    np.testing.assert_allclose(z.grad.numpy(), want_g, rtol=1e-10, atol=1e-14)
    assert z.grad[1, 1:].abs().max() == 0            # padding: no gradient
    assert zt.grad is None


def test_config_checks():
    cfg = load_config(None, []).algorithm.distill
    assert cfg.estimator == "sampled"
    with pytest.raises(ConfigError, match="algorithm.distill.estimator=full.*mode=loss"):
        load_config(None, ["algorithm.distill.teacher=builtin:mini",
                           "algorithm.distill.estimator=full"])
    for backend in ("torch", "mindspore"):
        assert load_config(None, ["algorithm.distill.teacher=builtin:mini", f"backend={backend}",
                                  "algorithm.distill.mode=loss",
                                  "algorithm.distill.estimator=full"]
                           ).algorithm.distill.estimator == "full"
    with pytest.raises(ConfigError, match="algorithm.distill.estimator"):
        load_config(None, ["algorithm.distill.estimator=forward"])


BASE = [
    "model.path=builtin:tiny", "model.chat_template=none",
    "data.train_file=arithmetic:digits=2,ops=+", "data.max_val_samples=16",
    "rollout.n=4", "rollout.max_new_tokens=4", "train.prompts_per_step=4",
    "train.micro_batch_size=8", "train.lr=1e-3", "reward.num_workers=0", "train.steps=2",
    "reward.functions=[{name: arithmetic}]", "logging.tensorboard=false",
    "logging.progress_bar=false", "logging.plot=false", "checkpoint.save_final=false",
    "algorithm.distill.teacher=builtin:mini", "algorithm.distill.mode=loss",
    "algorithm.distill.estimator=full", "algorithm.distill.task_weight=0",
    "algorithm.distill.coef=0.5", "algorithm.distill.teacher_temperature=0.7",
]


def _reference_term(backend, mb, coef, t_temp):
    """coef x the token mean of the exact KL, from plain full-sequence forwards of both
    models (no trimming, no packing, no logits_to_keep)."""
    import torch

    ids = torch.from_numpy(mb.tokens.input_ids)
    att = torch.from_numpy(mb.tokens.attention_mask)
    pos = torch.from_numpy(mb.tokens.position_ids)
    P, T = mb.tokens.prompt_len, mb.tokens.response_len
    with torch.no_grad():
        zs = backend.model(input_ids=ids, attention_mask=att, position_ids=pos).logits
        zt = backend.teacher(input_ids=ids, attention_mask=att, position_ids=pos).logits
    zs = zs[:, P - 1:P + T - 1].double() / backend.cfg.rollout.temperature
    zt = zt[:, P - 1:P + T - 1].double() / t_temp
    ls, lt = torch.log_softmax(zs, -1), torch.log_softmax(zt, -1)
    kl = (ls.exp() * (ls - lt)).sum(-1).numpy()
    m = mb.tokens.response_mask
    return coef * float((kl * m).sum() / m.sum())


@pytest.mark.slow
@pytest.mark.parametrize("padding_free", [False, True])
def test_torch_full_kl_term_and_two_steps(tmp_path, padding_free):
    """The backend's loss term (task weight 0, so the whole loss) equals coef x the token-mean
    exact KL recomputed from both models' plain forwards; then a 2-step run logs distill_kl
    and moves the weights."""
    from mindrl.trainer.rl import RLTrainer
    from mindrl.types import LossNormalizers, TokenBatch, TrainBatch

    cfg = load_config(None, BASE + [f"logging.output_dir={tmp_path}",
                                    f"train.padding_free={str(padding_free).lower()}"])
    tr = RLTrainer(cfg)
    be = tr.backend
    # a hand-made micro-batch: left-padded prompts, ragged right-padded responses
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 200, size=(3, 7)).astype(np.int64)
    att = np.array([[0, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 0, 0]],
                   np.int64)
    tb = TokenBatch(ids, att, att[:, 4:].astype(np.float32), 4)
    mb = TrainBatch(tb, np.zeros((3, 3), np.float32), None, None, None)
    toks = float(tb.response_mask.sum())
    loss, metrics = be._micro_loss(mb, LossNormalizers(global_tokens=toks, global_seqs=3,
                                                       max_len=3))
    assert float(loss.detach()) == pytest.approx(_reference_term(be, mb, 0.5, 0.7), rel=1e-4)
    assert float(metrics["distill_kl"]) == pytest.approx(float(loss.detach()) / 0.5, rel=1e-6)
    before = {k: v.copy() for k, v in be.named_weights()}
    last = tr.fit()
    after = dict(be.named_weights())
    tr.close()
    rows = [json.loads(x) for x in (Path(tmp_path) / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert "time/teacher_logprobs" not in rows[0]    # no separate teacher pass
    assert 0 < last["distill_kl"] < 5 and np.isfinite(last["grad_norm"])
    assert any(not np.allclose(before[k], after[k]) for k in before), "no parameter moved"
