"""On-policy distillation on the MindSpore backend against torch: the teacher's log-probs (its
own architecture, scored at the teacher temperature) and the gradient of the RL loss with the
distillation term (``algorithm.distill.mode=loss``; zero task advantage, so the gradient is the
term's alone), on- and off-policy, accumulated over two micro-batches, equal the torch
reference (``rl_loss`` with torch ops on the same weights)."""

import dataclasses

import numpy as np
import pytest
import torch

from algorithms.ops import get_ops
from algorithms.rl_loss import rl_loss
from mindrl.backends.mindspore import MindSporeBackend
from mindrl.types import LossNormalizers
from ms_helpers import ms_config, random_batch


def _torch_logp(model, tb, temperature):
    P = tb.prompt_len
    logits = model(input_ids=torch.tensor(tb.input_ids),
                   attention_mask=torch.tensor(tb.attention_mask),
                   position_ids=torch.tensor(tb.position_ids)).logits[:, P - 1:-1] / temperature
    return torch.gather(torch.log_softmax(logits, -1), -1,
                        torch.tensor(tb.input_ids[:, P:]).unsqueeze(-1)).squeeze(-1)


@pytest.mark.slow
@pytest.mark.parametrize("on_policy", [True, False])
def test_teacher_logprobs_and_distill_gradient_match_torch(hf_untied, hf_tied, on_policy):
    student_dir, _ = hf_untied
    teacher_dir, teacher_hf = hf_tied
    cfg = ms_config("algorithm.distill.mode=loss", f"algorithm.distill.teacher={teacher_dir}",
                    "algorithm.distill.coef=0.7", "algorithm.distill.teacher_temperature=0.9",
                    "algorithm.policy_loss=ppo_clip", "rollout.temperature=1.0")
    rng = np.random.default_rng(3)
    batch = random_batch(rng, 8)
    tb = batch.tokens
    be = MindSporeBackend(cfg, model_path=student_dir)
    got_t = be.logprobs(tb, temperature=0.9, teacher=True, micro_batch_size=4)
    with torch.no_grad():
        want_t = (_torch_logp(teacher_hf.float(), tb, 0.9).numpy() * tb.response_mask)
    np.testing.assert_allclose(got_t, want_t, rtol=1e-5, atol=1e-5)

    student = type(teacher_hf).from_pretrained(student_dir).float()
    old = None
    if not on_policy:
        with torch.no_grad():
            lp = _torch_logp(student, tb, 1.0).numpy()
        old = ((lp + rng.normal(0, 0.3, lp.shape)) * tb.response_mask).astype(np.float32)
    # zero task advantage: the whole gradient is the distillation term's
    batch = dataclasses.replace(batch, old_logp=old, teacher_logp=want_t.astype(np.float32),
                                advantages=np.zeros_like(batch.advantages))
    norm = LossNormalizers(float(tb.response_mask.sum()), float(len(batch)), 16.0)
    grads = be.gradients([batch.rows(np.arange(0, 4)), batch.rows(np.arange(4, 8))], norm)

    logp = _torch_logp(student, tb, 1.0)
    t = torch.tensor
    loss, m = rl_loss(get_ops("torch"), logp=logp,
                      old_logp=logp.detach() if old is None else t(old),
                      advantages=t(batch.advantages), response_mask=t(tb.response_mask),
                      teacher_logp=t(batch.teacher_logp), cfg=cfg.algorithm,
                      global_tokens=norm.global_tokens, global_seqs=norm.global_seqs,
                      max_len=norm.max_len)
    loss.backward()
    assert float(m["distill_kl"]) != 0.0         # two different random models
    assert max(np.abs(p.grad.numpy()).max() for p in student.parameters()) > 1e-5
    for name, p in student.named_parameters():
        ref = p.grad.numpy()
        err = np.abs(grads[name] - ref).max() / max(np.abs(ref).max(), 1e-8)
        assert err < 1e-4, f"{name}: relative gradient error {err:.2e}"
