"""On-policy distillation (algorithms.distill, algorithm.distill.*): the per-token advantage and
loss against hand-computed numbers on ragged masks, the teacher checks at load, and a 2-step
run on both backends in each mode."""

import json
from pathlib import Path

import numpy as np
import pytest

from algorithms import get_ops, rl_loss
from algorithms.distill import distill_advantages, reverse_kl_k1
from mindrl.config.loader import load_config
from mindrl.errors import ConfigError

# two rollouts, ragged: 3 and 1 response tokens
MASK = np.array([[1, 1, 1], [1, 0, 0]], np.float64)
STUDENT = np.array([[-0.5, -1.0, -2.0], [-0.1, -9.0, -9.0]])
TEACHER = np.array([[-1.5, -0.25, -2.0], [-3.1, -1.0, -1.0]])
TASK = np.array([[0.5, 0.5, 0.5], [-2.0, -2.0, -2.0]])


def test_reverse_kl_and_advantage_by_hand():
    # k1 = s - q on valid tokens: [1.0, -0.75, 0.0], [3.0]; padding 0
    assert reverse_kl_k1(STUDENT, TEACHER, MASK).tolist() == [[1.0, -0.75, 0.0],
                                                              [3.0, 0.0, 0.0]]
    # A = 0.5 * task - 2 * k1
    adv = distill_advantages(TASK, MASK, task_weight=0.5, coef=2.0, student_logp=STUDENT,
                             teacher_logp=TEACHER)
    assert adv.tolist() == [[0.25 - 2.0, 0.25 + 1.5, 0.25], [-1.0 - 6.0, 0.0, 0.0]]
    # pure distillation; and the loss mode (no teacher here): only the task part, scaled
    pure = distill_advantages(TASK, MASK, task_weight=0.0, coef=1.0, student_logp=STUDENT,
                              teacher_logp=TEACHER)
    assert pure.tolist() == [[-1.0, 0.75, 0.0], [-3.0, 0.0, 0.0]]
    assert distill_advantages(TASK, MASK, task_weight=2.0).tolist() == [[1.0, 1.0, 1.0],
                                                                         [-4.0, 0.0, 0.0]]


def _cfg(*extra):
    return load_config(None, ["algorithm.distill.teacher=builtin:mini",
                              "algorithm.distill.mode=loss", "algorithm.policy_loss=vanilla_pg",
                              *extra]).algorithm


@pytest.mark.parametrize("agg", ["token_mean", "seq_mean_token_mean"])
def test_distill_loss_value_and_gradient_by_hand(agg):
    """Loss mode, strictly on-policy (old = sg(logp)), zero task advantage: the loss is
    coef * agg(k1) in value and its gradient w.r.t. logp is coef * k1 / normaliser per token
    (the score-function gradient of the reverse KL); off-policy, each token's term is
    r * k1 with r = exp(logp - old) and gradient r * k1 / normaliser."""
    torch = pytest.importorskip("torch")
    ops = get_ops("torch")
    cfg = _cfg("algorithm.distill.coef=0.5", f"algorithm.loss_agg_mode={agg}")
    k1 = [[1.0, -0.75, 0.0], [3.0]]
    if agg == "token_mean":
        want_val, want_g = 0.5 * (1.0 - 0.75 + 3.0) / 4, [[0.5 * k / 4 for k in r] for r in k1]
    else:   # per-sequence token mean, then mean over the 2 sequences
        want_val = 0.5 * ((1.0 - 0.75) / 3 + 3.0) / 2
        want_g = [[0.5 * k / 3 / 2 for k in k1[0]], [0.5 * 3.0 / 1 / 2]]
    logp = torch.tensor(STUDENT, requires_grad=True)
    loss, m = rl_loss(ops, logp=logp, old_logp=logp.detach(), advantages=np.zeros_like(MASK),
                      response_mask=MASK, teacher_logp=TEACHER, cfg=cfg)
    loss.backward()
    assert float(loss.detach()) == pytest.approx(want_val)
    assert float(m["distill_kl"]) == pytest.approx((1.0 - 0.75 + 3.0) / 4)
    g = logp.grad.numpy()
    assert g[0].tolist() == pytest.approx(want_g[0])
    assert g[1].tolist() == pytest.approx(want_g[1] + [0.0, 0.0])
    # off-policy: old = logp - 0.2 on every token -> r = exp(0.2)
    logp = torch.tensor(STUDENT, requires_grad=True)
    loss, _ = rl_loss(ops, logp=logp, old_logp=STUDENT - 0.2, advantages=np.zeros_like(MASK),
                      response_mask=MASK, teacher_logp=TEACHER, cfg=cfg)
    loss.backward()
    r = np.exp(0.2)
    assert float(loss.detach()) == pytest.approx(r * want_val)
    assert logp.grad.numpy()[0].tolist() == pytest.approx([r * x for x in want_g[0]])


def test_distill_loss_adds_to_the_policy_loss():
    """With a task advantage the loss is pg + coef * distill (numpy reference ops)."""
    ops = get_ops("numpy")
    cfg = _cfg("algorithm.distill.coef=0.5")
    base, _ = rl_loss(ops, logp=STUDENT, old_logp=STUDENT, advantages=TASK, response_mask=MASK,
                      cfg=cfg)
    both, m = rl_loss(ops, logp=STUDENT, old_logp=STUDENT, advantages=TASK, response_mask=MASK,
                      cfg=cfg, teacher_logp=TEACHER)
    assert float(base) == pytest.approx(-(0.5 * 3 - 2.0) / 4)       # vanilla pg: -mean(A)
    assert float(both - base) == pytest.approx(0.5 * (1.0 - 0.75 + 3.0) / 4)
    assert "distill_kl" in m


def test_advantage_and_loss_modes_make_the_same_on_policy_update():
    """Strictly on-policy (ratio 1, so ppo_clip does not bind), the advantage mode's gradient
    (policy loss on w*A - c*k1) equals the loss mode's (policy loss on w*A plus the term)."""
    torch = pytest.importorskip("torch")
    ops = get_ops("torch")
    grads = []
    for mode in ("advantage", "loss"):
        cfg = load_config(None, ["algorithm.distill.teacher=builtin:mini",
                                 f"algorithm.distill.mode={mode}", "algorithm.distill.coef=0.3",
                                 "algorithm.distill.task_weight=0.5"]).algorithm
        d = cfg.distill
        adv = distill_advantages(TASK, MASK, task_weight=d.task_weight, coef=d.coef,
                                 student_logp=STUDENT,
                                 teacher_logp=TEACHER if mode == "advantage" else None)
        logp = torch.tensor(STUDENT, requires_grad=True)
        loss, _ = rl_loss(ops, logp=logp, old_logp=logp.detach(), advantages=adv,
                          response_mask=MASK, cfg=cfg,
                          teacher_logp=TEACHER if mode == "loss" else None)
        loss.backward()
        grads.append(logp.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12, atol=1e-12)
    assert np.abs(grads[0]).max() > 0.05


# ----------------------------------------------------------------------------- config checks
def test_keys_documented_and_value_checks():
    from mindrl.config.loader import load_config as load

    with pytest.raises(ConfigError) as e:
        load(None, ["algorithm.distill.coef=-1", "algorithm.distill.teacher_temperature=0"])
    assert "algorithm.distill.coef" in str(e.value)
    assert "algorithm.distill.teacher_temperature" in str(e.value)
    with pytest.raises(ConfigError, match="mode"):
        load(None, ["algorithm.distill.mode=forward"])


@pytest.mark.slow
def test_teacher_path_and_tokenizer_checked_before_any_model_loads(tmp_path):
    from mindrl.models.tiny import build_tiny_model, resolve_model_path
    from mindrl.trainer.teacher import check_teacher

    student = resolve_model_path("builtin:tiny")
    with pytest.raises(ConfigError, match="algorithm.distill.teacher.*does not exist"):
        check_teacher(str(tmp_path / "nope"), student)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="algorithm.distill.teacher.*lacks: config.json"):
        check_teacher(str(tmp_path / "empty"), student)
    # a teacher with another tokenizer (other vocabulary size: other merges and ids)
    other = tmp_path / "other"
    build_tiny_model(other, hidden=32, layers=1, heads=1, kv_heads=1, vocab=700)
    with pytest.raises(ConfigError, match="algorithm.distill.teacher.*tokenizer differs"):
        check_teacher(str(other), student)
    # the same tokenizer, another architecture: accepted (a run folder resolves too)
    assert check_teacher("builtin:mini", student) == resolve_model_path("builtin:mini")


def test_trainer_refuses_a_missing_teacher_before_loading(tmp_path):
    from mindrl.trainer.rl import RLTrainer

    cfg = load_config(None, BASE + [f"logging.output_dir={tmp_path}",
                                    f"algorithm.distill.teacher={tmp_path}/teacher"])
    with pytest.raises(ConfigError, match="algorithm.distill.teacher"):
        RLTrainer(cfg)


# ----------------------------------------------------------------------------- 2-step smoke
BASE = [
    "model.path=builtin:tiny", "model.chat_template=none",
    "data.train_file=arithmetic:digits=2,ops=+", "data.max_val_samples=16",
    "rollout.n=4", "rollout.max_new_tokens=4", "train.prompts_per_step=4",
    "train.micro_batch_size=8", "train.lr=1e-3", "reward.num_workers=0", "train.steps=2",
    "reward.functions=[{name: arithmetic}]", "logging.tensorboard=false",
    "logging.progress_bar=false", "logging.plot=false", "checkpoint.save_final=false",
]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "mindspore"])
@pytest.mark.parametrize("mode", ["advantage", "loss"])
def test_two_steps_with_a_teacher(tmp_path, backend, mode):
    from mindrl.trainer.rl import RLTrainer

    cfg = load_config(None, BASE + [
        f"backend={backend}", f"logging.output_dir={tmp_path}", "algorithm.kl.coef=0.01",
        "algorithm.distill.teacher=builtin:mini", f"algorithm.distill.mode={mode}",
        "algorithm.distill.task_weight=0", "algorithm.distill.teacher_temperature=0.7"])
    tr = RLTrainer(cfg)
    before = {k: v.copy() for k, v in tr.backend.named_weights()}
    last = tr.fit()
    after = dict(tr.backend.named_weights())
    tr.close()
    rows = [json.loads(x) for x in (Path(tmp_path) / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:   # two random (near-uniform) models: a small, nonzero KL
        assert 0 < abs(r["distill/reverse_kl"]) < 1 and "time/teacher_logprobs" in r
    assert np.isfinite(last["loss"]) and np.isfinite(last["grad_norm"])
    if mode == "loss":
        assert "distill_kl" in last
    else:   # pure distillation: the advantage is -k1, not the (all-zero on a random model) task
        assert last["advantage/std"] > 0
    assert any(not np.allclose(before[k], after[k]) for k in before), "no parameter moved"
