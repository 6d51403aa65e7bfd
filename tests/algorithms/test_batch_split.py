"""Splitting a batch into micro-batches and ranks gives the full-batch loss and gradient.

The normalisers (global token count, number of sequences / pairs, max_len) are counted once on
the whole batch and passed to every micro-batch; the partial losses then sum to the full loss
and their gradients to the full gradient, for every aggregation mode. Micro-batches are also
trimmed to their own longest response, as a length-bucketing backend would.
"""

import numpy as np
import pytest

from algorithms import AGG_MODES, entropy_from_logits, get_ops, preference_loss, rl_loss
from mindrl.config.schema import AlgorithmConfig, KLConfig, PreferenceConfig

torch = pytest.importorskip("torch")

B, T, V = 8, 7, 5
RANKS, MICRO = 2, 2  # 2 ranks x 2 micro-batches of 2 rollouts


def make_batch(seed=0):
    rng = np.random.default_rng(seed)
    lengths = np.array([7, 1, 3, 6, 2, 5, 4, 2])
    mask = (np.arange(T)[None] < lengths[:, None]).astype(np.float64)
    old = rng.normal(-1.5, 0.4, (B, T))
    return dict(
        logits=rng.normal(0, 1.5, (B, T, V)), tokens=rng.integers(0, V, (B, T)),
        old_logp=old, ref_logp=old + rng.normal(0, 0.3, (B, T)),
        rollout_logp=old + rng.normal(0, 0.3, (B, T)),
        advantages=rng.normal(0, 1, (B, T)), response_mask=mask)


def loss_of(batch, logits, rows, cfg, **norms):
    ops = get_ops("torch")
    width = int(batch["response_mask"][rows].sum(axis=1).max())  # trim padding per micro-batch
    t = {k: torch.as_tensor(v[rows][:, :width]) for k, v in batch.items() if k != "logits"}
    lg = logits[rows][:, :width]
    logp = ops.token_logprobs(lg, t.pop("tokens"))
    loss, _ = rl_loss(ops, logp=logp, entropy=entropy_from_logits(ops, lg), cfg=cfg,
                      **t, **norms)
    return loss


@pytest.mark.parametrize("mode", AGG_MODES.names())
def test_micro_batches_and_ranks_sum_to_full_batch(mode):
    batch = make_batch()
    cfg = AlgorithmConfig(loss_agg_mode=mode, kl=KLConfig(coef=0.3, estimator="k3"),
                          entropy_coef=0.02, dual_clip_c=2.0, tis_cap=1.5)
    norms = dict(global_tokens=float(batch["response_mask"].sum()), global_seqs=B, max_len=T)

    full_logits = torch.tensor(batch["logits"], requires_grad=True)
    full = loss_of(batch, full_logits, np.arange(B), cfg, **norms)
    full.backward()

    logits = torch.tensor(batch["logits"], requires_grad=True)
    rank_rows = np.array_split(np.arange(B), RANKS)
    total, rank_grads = 0.0, []
    for rows in rank_rows:
        before = torch.zeros_like(logits) if logits.grad is None else logits.grad.clone()
        for micro in np.array_split(rows, len(rows) // MICRO):
            part = loss_of(batch, logits, micro, cfg, **norms)
            part.backward()  # gradient accumulation
            total = total + part.item()
        rank_grads.append(logits.grad - before)
    assert total == pytest.approx(full.item(), rel=1e-12)
    np.testing.assert_allclose(logits.grad.numpy(), full_logits.grad.numpy(), atol=1e-12)
    # DDP averages rank gradients: each rank scales its loss by the world size R
    averaged = sum(RANKS * g for g in rank_grads) / RANKS
    np.testing.assert_allclose(averaged.numpy(), full_logits.grad.numpy(), atol=1e-12)


def test_local_normalisers_would_differ():
    """The check above has teeth: per-micro-batch token means do not add up."""
    batch = make_batch()
    cfg = AlgorithmConfig(loss_agg_mode="token_mean")
    logits = torch.tensor(batch["logits"])
    full = loss_of(batch, logits, np.arange(B), cfg).item()
    parts = [loss_of(batch, logits, rows, cfg).item() for rows in np.array_split(np.arange(B), 4)]
    assert abs(np.mean(parts) - full) > 1e-3


def test_preference_pairs_split():
    rng = np.random.default_rng(1)
    n = 6
    mask = (np.arange(T)[None] < rng.integers(1, T + 1, n)[:, None]).astype(np.float64)
    data = dict(chosen_logp=rng.normal(-1, 0.5, (n, T)), rejected_logp=rng.normal(-1, 0.5, (n, T)),
                ref_chosen_logp=rng.normal(-1, 0.5, (n, T)),
                ref_rejected_logp=rng.normal(-1, 0.5, (n, T)))
    cfg = PreferenceConfig(loss="simpo", beta=2.0, gamma=0.5, pref_ftx=0.3)
    ops = get_ops("torch")

    def run(rows, leaf, **kw):
        t = {k: torch.as_tensor(v[rows]) for k, v in data.items() if k != "chosen_logp"}
        return preference_loss(ops, chosen_logp=leaf[rows], chosen_mask=torch.as_tensor(mask[rows]),
                               rejected_mask=torch.as_tensor(mask[rows]), cfg=cfg, **t, **kw)[0]

    full_leaf = torch.tensor(data["chosen_logp"], requires_grad=True)
    full = run(np.arange(n), full_leaf)
    full.backward()
    leaf = torch.tensor(data["chosen_logp"], requires_grad=True)
    total = 0.0
    for rows in np.array_split(np.arange(n), 3):
        part = run(rows, leaf, global_pairs=n)
        part.backward()
        total += part.item()
    assert total == pytest.approx(full.item(), rel=1e-12)
    np.testing.assert_allclose(leaf.grad.numpy(), full_leaf.grad.numpy(), atol=1e-12)
