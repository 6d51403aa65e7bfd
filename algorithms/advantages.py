"""Advantage estimators: group-level math in NumPy float64, on the host.

Every estimator maps outcome rewards r (B,) of B rollouts, their prompt group ids (B,) and the
response mask m (B, T) to per-token advantages A (B, T), zero on padding. Chosen by name
(config ``algorithm.adv_estimator``) from :data:`ADV_ESTIMATORS`; call
:func:`compute_advantages`. For a group g with rewards r_1..r_N (N = group size):

* ``grpo``      A_i = (r_i - mean_g) / (std_g + eps), std with ddof ``std_ddof`` (1 = unbiased,
                as verl/TRL; 0 = population) and eps ``std_eps`` >= 0 (1e-6 = verl); a group
                whose rewards all agree gets 0, whatever eps (also eps = 0).
* ``dr_grpo``   A_i = r_i - mean_g (Dr. GRPO; pair it with ``seq_mean_token_sum_norm``).
* ``rloo``      A_i = r_i - mean_{j != i} r_j = N/(N-1) (r_i - mean_g).
* ``reinforce_pp``           token rewards -> discounted returns -> whitened over the batch.
* ``reinforce_pp_baseline``  as reinforce_pp on r_i - mean_g.
* ``passk``     the analytic Pass@k advantage (Chen et al. 2025, "Pass@k Training").
* ``gae``       PPO's GAE from the critic's per-token values (:mod:`algorithms.gae`).

A group of one carries no comparison, so every group estimator gives it advantage 0 (no
gradient from that sample). verl instead sets mean 0 / std 1 for a lone sample, which turns it
into an un-baselined REINFORCE term on a different scale from the rest of the batch; the
config rejects rollout.n < 2 for group estimators, so a lone sample only arises from filtering.
"""

from __future__ import annotations

import inspect
import math
from typing import Callable

import numpy as np

from mindrl.registry import Registry

ADV_ESTIMATORS: Registry[Callable[..., np.ndarray]] = Registry("advantage estimator")

#: Keyword parameters an estimator may take; the names match ``AlgorithmConfig`` fields
#: (``kl_coef`` is ``algorithm.kl.coef`` when ``algorithm.kl.in_reward`` is true).
ADV_PARAMS = ("std_eps", "std_ddof", "gamma", "passk_k", "kl_coef", "lam", "whiten_advantages")


def compute_advantages(estimator: str, *, rewards, group_index, response_mask,
                       token_kl=None, values=None, **params) -> np.ndarray:
    """Per-token advantages (B, T) float64 from the estimator registered as ``estimator``.

    rewards: (B,) outcome reward of each rollout. group_index: (B,) ints, rollouts of one
    prompt share a value. response_mask: (B, T) 1 on response tokens. token_kl: (B, T)
    per-token KL estimate to the reference, used only by the REINFORCE++ estimators with
    ``kl_coef > 0``. values: (B, T) the critic's per-token values, for estimators that
    declare a ``values`` argument (``gae``). ``params`` are config values (see :data:`ADV_PARAMS`); each estimator
    receives the ones it declares, an unknown name raises TypeError.
    """
    unknown = sorted(set(params) - set(ADV_PARAMS))
    if unknown:
        raise TypeError(f"unknown advantage parameter(s) {unknown}; valid: {list(ADV_PARAMS)}")
    fn = ADV_ESTIMATORS.get(estimator)
    rewards = np.asarray(rewards, dtype=np.float64).reshape(-1)
    mask = np.asarray(response_mask, dtype=np.float64)
    if mask.ndim != 2 or mask.shape[0] != rewards.shape[0]:
        raise ValueError(f"response_mask must be (B, T) with B={rewards.shape[0]}, "
                         f"got {mask.shape}")
    group_index = np.asarray(group_index).reshape(-1)
    if group_index.shape[0] != rewards.shape[0]:
        raise ValueError(f"group_index has {group_index.shape[0]} entries for "
                         f"{rewards.shape[0]} rewards")
    accepted = inspect.signature(fn).parameters
    kwargs = {k: v for k, v in params.items() if k in accepted}
    if "token_kl" in accepted:
        kwargs["token_kl"] = None if token_kl is None else np.asarray(token_kl, np.float64)
    if "values" in accepted:
        kwargs["values"] = None if values is None else np.asarray(values, np.float64)
    adv = fn(rewards, group_index, mask, **kwargs)
    return np.asarray(adv, dtype=np.float64) * mask


def advantage_params(cfg) -> dict:
    """The estimator keyword arguments from an ``AlgorithmConfig`` (duck-typed)."""
    kl = getattr(cfg, "kl", None)
    in_reward = bool(kl is not None and kl.in_reward)
    return dict(std_eps=cfg.std_eps, std_ddof=cfg.std_ddof, gamma=cfg.gamma,
                passk_k=cfg.passk_k, kl_coef=kl.coef if in_reward else 0.0,
                lam=getattr(cfg, "lam", 1.0),
                whiten_advantages=getattr(cfg, "whiten_advantages", True))


# --- helpers --------------------------------------------------------------------------------
def _groups(group_index: np.ndarray):
    """(inverse ids (B,), group sizes (G,)) for arbitrary hashable-as-array labels."""
    _, inverse, counts = np.unique(group_index, return_inverse=True, return_counts=True)
    return inverse.reshape(-1), counts


def _group_mean(r: np.ndarray, inv: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """mean of each sample's group, (B,)."""
    return (np.bincount(inv, weights=r, minlength=len(counts)) / counts)[inv]


def _group_std(r: np.ndarray, inv: np.ndarray, counts: np.ndarray, ddof: int) -> np.ndarray:
    """std of each sample's group with ``ddof``, (B,); 0 for groups of size <= ddof."""
    mean = _group_mean(r, inv, counts)
    ss = np.bincount(inv, weights=(r - mean) ** 2, minlength=len(counts))
    denom = np.maximum(counts - ddof, 1)
    return np.sqrt(ss / denom)[inv]


def _group_is_constant(r: np.ndarray, inv: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """True for each sample whose group's rewards are all equal, (B,). Tested on max == min, not
    on std == 0: the float mean of equal values can differ from them by an ulp (3 x 0.1), which
    leaves a centred reward and a std of ~1e-17 whose ratio is +-1, not 0."""
    lo = np.full(len(counts), np.inf)
    hi = np.full(len(counts), -np.inf)
    np.minimum.at(lo, inv, r)
    np.maximum.at(hi, inv, r)
    return (lo == hi)[inv]


def _broadcast(a: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return a[:, None] * mask


def _whiten(x: np.ndarray, mask: np.ndarray, eps: float, ddof: int) -> np.ndarray:
    """(x - mean) / (std + eps) over the valid tokens of the whole batch (masked); 0 when every
    valid token has the same value (std 0, whatever eps)."""
    n = mask.sum()
    valid = x[mask > 0]
    if n == 0 or valid.min() == valid.max():
        return np.zeros_like(x)
    mean = (x * mask).sum() / n
    var = (((x - mean) ** 2) * mask).sum() / max(n - ddof, 1)
    return (x - mean) / (np.sqrt(var) + eps) * mask


# --- estimators ----------------------------------------------------------------------------
@ADV_ESTIMATORS.register("grpo")
def grpo(rewards, group_index, mask, *, std_eps: float = 1e-6, std_ddof: int = 1):
    """GRPO (Shao et al. 2024): A_i = (r_i - mean_g) / (std_g + eps), same for every token.

    ``std_ddof`` 1 (unbiased, verl and TRL) or 0 (population); ``std_eps`` 1e-6 (verl; TRL uses
    1e-4, OpenRLHF 1e-9; 0 is allowed). A group whose rewards all agree gets 0, whatever eps. A
    group of one gets 0 (verl: r / (1 + eps)).
    """
    inv, counts = _groups(group_index)
    centred = rewards - _group_mean(rewards, inv, counts)
    std = _group_std(rewards, inv, counts, std_ddof)
    flat = (counts[inv] < 2) | _group_is_constant(rewards, inv, counts)
    adv = np.zeros_like(rewards)
    adv[~flat] = centred[~flat] / (std[~flat] + std_eps)
    return _broadcast(adv, mask)


@ADV_ESTIMATORS.register("dr_grpo")
def dr_grpo(rewards, group_index, mask):
    """Dr. GRPO (Liu et al. 2025): A_i = r_i - mean_g, no std division; group of one -> 0.

    The paper also drops the 1/|o_i| length normaliser: use loss_agg_mode
    ``seq_mean_token_sum_norm`` (a constant, the maximum response length).
    """
    inv, counts = _groups(group_index)
    return _broadcast(rewards - _group_mean(rewards, inv, counts), mask)


@ADV_ESTIMATORS.register("rloo")
def rloo(rewards, group_index, mask):
    """RLOO (Ahmadian et al. 2024): A_i = r_i - (1/(N-1)) sum_{j != i} r_j.

    Equal to N/(N-1) (r_i - mean_g). A group of one has no other sample to form the baseline:
    it gets 0.
    """
    inv, counts = _groups(group_index)
    n = counts[inv].astype(np.float64)
    total = np.bincount(inv, weights=rewards, minlength=len(counts))[inv]
    loo_mean = (total - rewards) / np.maximum(n - 1, 1)
    adv = np.where(n > 1, rewards - loo_mean, 0.0)
    return _broadcast(adv, mask)


def _discounted_returns(token_rewards: np.ndarray, mask: np.ndarray, gamma: float) -> np.ndarray:
    """G_t = c_t + gamma G_(next valid token), walking right to left over (B, T). A masked token
    inside a response (a tool output of a multi-turn rollout) gets 0 and passes the running
    return through unchanged, so the earlier turns are credited with the outcome; the holes
    count no discount step (as GAE and verl's REINFORCE++)."""
    returns = np.zeros_like(token_rewards)
    running = np.zeros(token_rewards.shape[0])
    for t in range(token_rewards.shape[1] - 1, -1, -1):
        valid = mask[:, t] > 0
        running = np.where(valid, token_rewards[:, t] + gamma * running, running)
        returns[:, t] = running * valid
    return returns


def _last_token_index(mask: np.ndarray) -> np.ndarray:
    """Column of the last valid token of each row (0 for an empty row)."""
    t = mask.shape[1]
    rev_first = np.argmax(mask[:, ::-1] > 0, axis=1)
    return t - 1 - rev_first


def _reinforce_pp_core(outcome, mask, token_kl, kl_coef, gamma, std_eps, std_ddof):
    token_rewards = np.zeros_like(mask)
    rows = np.nonzero(mask.sum(axis=1) > 0)[0]
    token_rewards[rows, _last_token_index(mask)[rows]] = outcome[rows]
    if token_kl is not None and kl_coef:
        token_rewards = token_rewards - kl_coef * token_kl * mask
    returns = _discounted_returns(token_rewards, mask, gamma)
    return _whiten(returns, mask, std_eps, std_ddof)


@ADV_ESTIMATORS.register("reinforce_pp")
def reinforce_pp(rewards, group_index, mask, token_kl=None, *, gamma: float = 1.0,
                 kl_coef: float = 0.0, std_eps: float = 1e-6, std_ddof: int = 1):
    """REINFORCE++ (Hu 2025): whitened discounted returns of token-level rewards.

    c_t = r * [t = last response token] - kl_coef * kl_t ;  G_t = sum_{s>=t} gamma^(s-t) c_s ;
    A = (G - mean(G)) / (std(G) + eps), mean and std over all valid tokens of the batch; 0 when
    every valid G is equal (whatever eps).
    kl_t is the per-token KL estimate passed in (``algorithm.kl.estimator``; the paper uses k1).
    Departure: the whitening eps and ddof are the GRPO options (OpenRLHF: ddof 1, eps 1e-8;
    verl: rsqrt(var + 1e-8)). Ignores groups.
    """
    return _reinforce_pp_core(rewards, mask, token_kl, kl_coef, gamma, std_eps, std_ddof)


@ADV_ESTIMATORS.register("reinforce_pp_baseline")
def reinforce_pp_baseline(rewards, group_index, mask, token_kl=None, *, gamma: float = 1.0,
                          kl_coef: float = 0.0, std_eps: float = 1e-6, std_ddof: int = 1):
    """REINFORCE++-baseline: reinforce_pp on r_i - mean_g (group-mean baseline first).

    With gamma = 1 and no KL this is verl's ``reinforce_plus_plus_baseline`` (centred reward
    broadcast to tokens, then batch whitening). A group of one has centred reward 0.
    """
    inv, counts = _groups(group_index)
    centred = rewards - _group_mean(rewards, inv, counts)
    return _reinforce_pp_core(centred, mask, token_kl, kl_coef, gamma, std_eps, std_ddof)


def passk_group_advantages(n: int, n_neg: int, k: int):
    """(A_pos, A_neg, R, sigma) of the analytic Pass@k advantage for one group.

    R = 1 - C(n_neg, k) / C(n, k) is the expected pass@k of a random k-subset; sigma =
    sqrt(R (1 - R)); A_pos = (1 - R) / sigma; A_neg = (1 - R - C(n_neg-1, k-1) / C(n-1, k-1))
    / sigma. sigma = 0 (every subset passes, or none does) gives 0 for both.
    """
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= group size, got k={k}, n={n}")
    r_mean = 1.0 - math.comb(n_neg, k) / math.comb(n, k)
    sigma = math.sqrt(max(r_mean * (1.0 - r_mean), 0.0))
    if sigma == 0.0:
        return 0.0, 0.0, r_mean, 0.0
    a_pos = (1.0 - r_mean) / sigma
    frac_all_neg = math.comb(n_neg - 1, k - 1) / math.comb(n - 1, k - 1) if n_neg >= 1 else 0.0
    a_neg = (1.0 - r_mean - frac_all_neg) / sigma
    return a_pos, a_neg, r_mean, sigma


@ADV_ESTIMATORS.register("passk")
def passk(rewards, group_index, mask, *, passk_k: int = 4):
    """Analytic Pass@k advantage (Chen et al. 2025, "Pass@k Training ...").

    A rollout is correct when its reward > 0.5 (binary 0/1 rewards expected). In a group of N
    with N_neg wrong: R = 1 - C(N_neg, k)/C(N, k), sigma = sqrt(R(1-R)),
    A_pos = (1-R)/sigma, A_neg = (1 - R - C(N_neg-1, k-1)/C(N-1, k-1))/sigma, 0 when sigma = 0.
    It equals the group-normalised pass@k reward of the k-subsets averaged over the subsets
    that contain the rollout. k = 1 reduces to GRPO with ddof 0 and eps 0. Raises when k > N.
    """
    inv, counts = _groups(group_index)
    correct = rewards > 0.5
    adv = np.zeros_like(rewards)
    for g, n in enumerate(counts):
        members = inv == g
        n_neg = int((~correct[members]).sum())
        a_pos, a_neg, _, _ = passk_group_advantages(int(n), n_neg, passk_k)
        adv[members] = np.where(correct[members], a_pos, a_neg)
    return _broadcast(adv, mask)
