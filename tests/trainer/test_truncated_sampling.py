"""Truncated sampling (rollout.top_p / top_k / min_p): the engines report log-probs of the
distribution they sampled from, and the trainer scores the policy under the same masks, so the
rollout-vs-trainer gap stays at float noise. Scored untruncated, as before, the same rollouts
show a gap far above rollout.logprob_gap_warn."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from algorithms.truncation import Truncation, keep_mask, truncated_token_logp
from mindrl.config.loader import load_config

BASE = [
    "model.path=builtin:tiny", "model.chat_template=none",
    "data.train_file=arithmetic:digits=2,ops=+", "data.max_val_samples=16",
    "rollout.n=4", "rollout.max_new_tokens=8", "train.prompts_per_step=4",
    "train.micro_batch_size=8", "train.lr=1e-3", "reward.num_workers=0",
    "reward.functions=[{name: arithmetic}]", "logging.tensorboard=false",
    "logging.progress_bar=false", "logging.plot=false", "checkpoint.save_final=false",
]
# the seed log's settings
SEED = ["rollout.top_p=0.9", "rollout.top_k=50", "rollout.min_p=0.01"]
BOUND = 2e-4         # the usual rollout-vs-trainer bound of the fp32 loop tests


def test_keep_mask_by_hand():
    # p = [0.5, 0.25, 0.15, 0.07, 0.03]: top_p=0.8 keeps the 3 tokens whose predecessors hold
    # 0, 0.5, 0.75 < 0.8; min_p=0.1 then drops p < 0.05 first; top_k=2 keeps two
    p = np.array([0.5, 0.25, 0.15, 0.07, 0.03])
    z = np.log(p)
    assert keep_mask(z, Truncation(top_p=0.8)).tolist() == [1, 1, 1, 0, 0]
    assert keep_mask(z, Truncation(min_p=0.1)).tolist() == [1, 1, 1, 1, 0]
    assert keep_mask(z, Truncation(top_k=2)).tolist() == [1, 1, 0, 0, 0]
    # min-p first: 0.97 renormalised; 0.5/0.97 + 0.25/0.97 = 0.773 < 0.78 -> 3 kept
    assert keep_mask(z, Truncation(top_p=0.78, min_p=0.1)).tolist() == [1, 1, 1, 0, 0]
    # q(target) = p / kept mass; a cut target is normalised over the kept set plus itself
    t = Truncation(top_p=0.8)
    got = truncated_token_logp(np.stack([z, z]), np.array([1, 4]), t)
    assert got[0] == pytest.approx(math.log(0.25 / 0.9))
    assert got[1] == pytest.approx(math.log(0.03 / 0.93))


@pytest.mark.parametrize("trunc", [Truncation(-1, 0.9, 0.0), Truncation(50, 1.0, 0.0),
                                   Truncation(-1, 1.0, 0.05), Truncation(50, 0.9, 0.01)])
def test_torch_and_mindspore_masks_match_numpy(trunc, tmp_path, monkeypatch):
    import torch

    from mindrl.backends.mindspore.truncation import truncated_logits_and_logp
    from mindrl.backends.torch.truncation import truncated_logits

    rng = np.random.default_rng(0)
    z = rng.normal(0, 2.0, (3, 5, 300)).astype(np.float32)
    targets = rng.integers(0, 300, (3, 5))
    ref = truncated_token_logp(z, targets, trunc)
    tz = truncated_logits(torch.from_numpy(z), trunc, torch.from_numpy(targets))
    got = torch.gather(torch.log_softmax(tz, -1), -1,
                       torch.from_numpy(targets)[..., None])[..., 0].numpy()
    np.testing.assert_allclose(got, ref, atol=1e-5)
    import mindspore as ms

    monkeypatch.chdir(tmp_path)           # a failed compile writes its IR here

    def fn(a, b):
        return truncated_logits_and_logp(a, b, trunc)

    _, ms_logp = ms.jit(fn)(ms.Tensor(z), ms.Tensor(targets.astype(np.int32)))
    np.testing.assert_allclose(ms_logp.asnumpy(), ref, atol=1e-5)
    # the kept sets themselves, and that some targets were cut (the kept-target rule ran)
    keep = keep_mask(z, trunc)
    assert ((tz.numpy() > -1e8) == (keep | (np.arange(300) == targets[..., None]))).all()
    assert not np.take_along_axis(keep, targets[..., None], -1).all()


@pytest.mark.slow
def test_masks_match_vllm_sampler():
    """vLLM's own top-k/top-p (its CPU path) and min-p keep the same tokens."""
    import torch
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch

    rng = np.random.default_rng(1)
    z = torch.from_numpy(rng.normal(0, 2.0, (16, 300)).astype(np.float32))
    for k, p in ((50, 0.9), (None, 0.8), (20, None)):
        got = apply_top_k_top_p_pytorch(
            z.clone(), None if k is None else torch.full((16,), k),
            None if p is None else torch.full((16,), p)) > float("-inf")
        ref = keep_mask(z.numpy(), Truncation(k or -1, p or 1.0, 0.0))
        assert (got.numpy() == ref).all(), (k, p)


def _rows(d):
    return [json.loads(x) for x in (Path(d) / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("backend,engine", [("torch", "native"), ("mindspore", "native"),
                                            ("torch", "vllm")])
def test_truncated_run_gap_within_bound(tmp_path, backend, engine):
    from mindrl.trainer.rl import RLTrainer
    from mindrl.types import pad_token_batch

    cfg = load_config(None, BASE + SEED + [f"logging.output_dir={tmp_path}",
                                           f"backend={backend}", f"rollout.engine={engine}",
                                           "train.steps=2", "train.recompute_old_logp=true"])
    tr = RLTrainer(cfg)
    tr.fit()
    m = _rows(tmp_path)
    assert len(m) == 2
    for r in m:
        assert r["rollout/logprob_gap_mean"] < BOUND, r["rollout/logprob_gap_mean"]
    # the same rollouts scored as before (untruncated): far off
    from mindrl.types import SamplingParams

    prompts = [[5, 6, 7, 8], [9, 10, 11]]
    ro = tr.engine.generate(prompts, SamplingParams.from_config(cfg.rollout, seed=3))
    tb = pad_token_batch(ro.prompt_ids, ro.response_ids, 0)
    roll = np.zeros(tb.response_mask.shape, np.float32)
    for i, lp in enumerate(ro.logprobs):
        roll[i, :len(lp)] = lp
    mask = tb.response_mask
    gaps = {}
    for truncated in (True, False):
        lp = tr.backend.logprobs(tb, temperature=1.0, truncated=truncated)
        gaps[truncated] = float((np.abs(lp - roll) * mask).sum() / mask.sum())
    tr.close()
    print(f"{backend}/{engine}: gap truncated {gaps[True]:.2e}, untruncated {gaps[False]:.3f}")
    assert gaps[True] < BOUND
    assert gaps[False] > cfg.rollout.logprob_gap_warn
