"""The distillation wiring, checked by what it must do rather than by its formula: the teacher's
log-probs the trainer computes are a plain forward of the teacher on each unpadded rollout, and
gradient steps on the exact reverse KL alone (``estimator: full``, task weight 0) lower that KL
on the batch they are taken on, step after step (a flipped sign, a teacher that is the student,
or KL taken at shifted positions would not)."""

import numpy as np
import pytest

from mindrl.config.loader import load_config

BASE = [
    "model.path=builtin:tiny", "model.chat_template=none",
    "data.train_file=arithmetic:digits=2,ops=+", "data.max_val_samples=16",
    "rollout.n=4", "rollout.max_new_tokens=4", "train.prompts_per_step=4",
    "train.micro_batch_size=16", "train.lr=1e-3", "train.warmup_steps=0",
    "reward.num_workers=0", "reward.functions=[{name: arithmetic}]",
    "logging.tensorboard=false", "logging.progress_bar=false", "logging.plot=false",
    "checkpoint.save_final=false", "algorithm.distill.teacher=builtin:mini",
    "algorithm.distill.mode=loss", "algorithm.distill.estimator=full",
    "algorithm.distill.task_weight=0", "algorithm.distill.teacher_temperature=0.3",
]


def _rollout_batch(tr):
    """One step's rollouts of the trainer's student as a (tokens, engine log-probs) pair."""
    from mindrl.types import pad_token_batch

    _, ro, _, _ = tr.collect()
    P = max(len(p) for p in ro.prompt_ids)
    T = max(1, int(ro.response_lengths.max()))
    tokens = pad_token_batch(ro.prompt_ids, ro.response_ids, tr.pad_id, P, T)
    return ro, tokens


@pytest.mark.parametrize("padding_free", [False, True])
def test_teacher_logprobs_are_a_plain_forward_and_kl_steps_descend(tmp_path, padding_free):
    import torch

    from mindrl.trainer.rl import RLTrainer
    from mindrl.types import LossNormalizers, TrainBatch

    torch.manual_seed(0)
    tr = RLTrainer(load_config(None, BASE + [f"logging.output_dir={tmp_path}",
                                             f"train.padding_free={str(padding_free).lower()}"]))
    be = tr.backend
    ro, tokens = _rollout_batch(tr)
    mask = tokens.response_mask

    # the teacher's log-probs of the sampled tokens at temperature 0.3, as the trainer scores
    # them, against the teacher run alone on each row's real ids (no padding, no positions)
    got = be.logprobs(tokens, temperature=0.3, teacher=True, micro_batch_size=16)
    for i in range(len(ro)):
        p, r = list(ro.prompt_ids[i]), list(ro.response_ids[i])
        with torch.no_grad():
            z = be.teacher(torch.tensor([p + r])).logits[0, len(p) - 1:len(p) + len(r) - 1]
        want = torch.log_softmax(z.double() / 0.3, -1)[torch.arange(len(r)), torch.tensor(r)]
        np.testing.assert_allclose(got[i, :len(r)], want.numpy(), atol=2e-5)
        assert not got[i, len(r):].any()
    # and the student's are not the teacher's (two different models)
    student = be.logprobs(tokens, temperature=1.0, micro_batch_size=16)
    assert np.abs((student - got) * mask).max() > 0.1

    # gradient steps on that one batch: the exact KL (the loss; distill_kl is its value before
    # each update) falls at every step
    batch = TrainBatch(tokens, np.zeros_like(mask), None, None, None)
    norm = LossNormalizers(global_tokens=float(mask.sum()), global_seqs=float(len(mask)),
                           max_len=4.0)
    kl = [float(be.train_step([batch], norm)["distill_kl"]) for _ in range(6)]
    tr.close()
    assert kl[0] > 0.1, kl                   # a sharpened teacher: far from the student
    assert all(b < a for a, b in zip(kl, kl[1:])), kl
    assert kl[-1] < 0.8 * kl[0], kl
