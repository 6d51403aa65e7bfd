"""mindrl inside verl (written and tested against verl 0.9.1).

Three entry points, each one line of verl configuration:

1. A custom reward function (verl's ``custom_reward_function`` convention,
   ``compute_score(data_source, solution_str, ground_truth, extra_info) -> float | dict``)::

       reward.custom_reward_function.path=pkg://mindrl.integrations.verl

   (``name`` defaults to ``compute_score``.) The rewards come from
   ``reward.custom_reward_function.reward_kwargs.rewards="accuracy:1,format:0.5"``, else from
   the sample's ``data_source`` (:data:`mindrl.integrations.common.DATA_SOURCE_REWARDS`: GSM8K,
   Countdown, K&K; the math grader for anything else). Each call is scored on this process's
   shared :class:`~mindrl.serve.service.ScoringService`, so verl's concurrent per-sample calls
   share one set of worker processes and every item has mindrl's hard timeout.

2. A reward manager that batches through mindrl's pool, registered as ``mindrl`` in verl's
   reward-loop registry and in its legacy registry::

       reward.reward_manager.source=importlib reward.reward_manager.module.path=pkg://mindrl.integrations.verl reward.reward_manager.name=MindrlRewardManager

   or, with ``VERL_USE_EXTERNAL_MODULES=mindrl.integrations.verl`` set, ``reward.reward_manager.name=mindrl``.
   Rewards: ``MINDRL_REWARDS`` (a spec) or the data-source table; workers and timeout:
   ``MINDRL_REWARD_WORKERS`` / ``MINDRL_REWARD_TIMEOUT``.

   Every sample's extra info (what verl stacks into ``reward_extra_info`` and averages into its
   metrics) has the same keys, whatever its data source, and no NaN (:func:`reward_info`):
   ``score`` (the weighted total), ``mindrl/unscored`` (how many of the sample's reward
   components gave no score: timed out, failed, unscorable label or a non-finite value; each
   counts :data:`UNSCORED_VALUE` = 0 in ``score``), and, when the spec is fixed for the run
   (``reward_kwargs.rewards`` or ``MINDRL_REWARDS``), ``mindrl/<reward>`` per component
   (:data:`UNSCORED_VALUE` when unscored). With the spec chosen by data source there are no
   per-component keys: their names would differ between the rows of a mixed batch (verl
   stacks the extras by the first sample's keys), and ``score`` already is that one reward.

3. mindrl's advantage estimators as verl ``adv_estimator`` names ``mindrl_grpo``,
   ``mindrl_dr_grpo``, ``mindrl_rloo``, ``mindrl_reinforce_pp``, ``mindrl_reinforce_pp_baseline``,
   ``mindrl_passk``, registered with verl's ``register_adv_est`` when this module is imported::

       VERL_USE_EXTERNAL_MODULES=mindrl.integrations.verl ... algorithm.adv_estimator=mindrl_rloo

   (verl imports that module in ``import verl``, in the driver and in every worker.) Groups are
   verl's ``uid``; ``gamma`` comes from verl's ``algorithm.gamma``; the other parameters are
   mindrl's defaults (std eps 1e-6, ddof 1, pass@k k=4) unless
   :func:`register_advantage_estimators` is called with others. verl's token-level rewards
   (B, T) hold the score on the last response token and, with ``algorithm.use_kl_in_reward``,
   ``-beta * KL_t`` on every token:

   * ``mindrl_reinforce_pp`` works on the token-level rewards x_t themselves, as verl's
     ``reinforce_plus_plus``: G_t = x_t + gamma G_{t+1} over response tokens (a masked token
     inside a response, such as a tool observation, gets G_t = 0 and passes G_{t+1} through),
     whitened over the batch's response tokens with mindrl's eps and ddof (verl: rsqrt(var +
     1e-8)); verl's returns are G.
   * the others take the outcome reward r_i = sum_t x_t (as verl's outcome estimators do).
     ``mindrl_reinforce_pp_baseline`` puts r_i - mean_g(r) on the last response token, then
     discounts and whitens as above: with gamma = 1 that is verl's
     ``reinforce_plus_plus_baseline`` (the centred sum on every response token). Their returns
     are the advantages, as verl's.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import os
from collections import defaultdict
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from mindrl.integrations.common import (columns_from_labels, parse_reward_spec,
                                        rewards_for_data_source, shared_service)

__all__ = ["compute_score", "reward_info", "MindrlRewardManager", "MindrlBatchRewardManager",
           "register_advantage_estimators", "ESTIMATORS", "UNSCORED_VALUE", "UNSCORED_KEY"]

ESTIMATORS = ("grpo", "dr_grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline", "passk")

#: What an unscored component (timed out, failed, unscorable, non-finite) counts in ``score``
#: and shows under its ``mindrl/<reward>`` key: the service's ``none_as``.
UNSCORED_VALUE = 0.0
#: Extra-info key: the number of the sample's components that gave no score.
UNSCORED_KEY = "mindrl/unscored"


def _spec_for(data_source: Optional[str], rewards: Any = None) -> Tuple[str, bool]:
    """(reward spec, fixed): fixed is False when the spec was chosen by ``data_source``."""
    if rewards:
        spec = rewards if isinstance(rewards, str) else ",".join(
            f"{e['name']}:{e.get('weight', 1.0)}" for e in parse_reward_spec(rewards))
        return spec, True
    env = os.environ.get("MINDRL_REWARDS")
    if env:
        return env, True
    return rewards_for_data_source(data_source), False


def _finite(v: Any) -> Optional[float]:
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def reward_info(result, i: int, per_component: bool) -> Dict[str, float]:
    """verl extra info of sample ``i`` of a :class:`~rewards.pool.RewardResult`: ``score``,
    :data:`UNSCORED_KEY` and (``per_component``) ``mindrl/<reward>``; every value finite.

    A component that is None or not finite counts :data:`UNSCORED_VALUE` in ``score`` and in
    its own key, and 1 in :data:`UNSCORED_KEY`.
    """
    comps = {k: _finite(vals[i]) for k, vals in result.components.items()}
    score = _finite(result.total[i])
    if score is None:        # a component returned inf / nan: rebuild the total without it
        score = float(sum(result.weights.get(k, 1.0) * (UNSCORED_VALUE if v is None else v)
                          for k, v in comps.items()))
    out = {"score": score}
    if per_component:
        for k, v in comps.items():
            out[f"mindrl/{k}"] = UNSCORED_VALUE if v is None else v
    out[UNSCORED_KEY] = float(sum(v is None for v in comps.values()))
    return out


def compute_score(data_source: Optional[str], solution_str: str, ground_truth: Any,
                  extra_info: Optional[dict] = None, rewards: Any = None,
                  workers: Optional[int] = None, timeout: Optional[float] = None,
                  **_: Any) -> Dict[str, float]:
    """verl's custom reward for one sample: :func:`reward_info`, the same keys for every
    ``data_source`` (``score``, ``mindrl/unscored``, and ``mindrl/<reward>`` when ``rewards``
    or ``MINDRL_REWARDS`` fixes the spec).

    ``rewards`` (a spec such as ``"accuracy:1,format:0.5"``), ``workers`` and ``timeout`` come
    from ``reward_kwargs``.
    """
    spec, fixed = _spec_for(data_source, rewards)
    svc = shared_service(spec, workers, timeout)
    res = svc.score([solution_str], **columns_from_labels([ground_truth]))
    return reward_info(res, 0, fixed)


def _decode_rows(data, tokenizer) -> tuple:
    """(response texts, valid response lengths) of a verl DataProto batch."""
    prompt_len = data.batch["prompts"].shape[-1]
    lengths = data.batch["attention_mask"][:, prompt_len:].sum(dim=-1).tolist()
    texts = [tokenizer.decode(data.batch["responses"][i][:n], skip_special_tokens=True)
             for i, n in enumerate(lengths)]
    return texts, lengths


def _ground_truths(non_tensor: Dict[str, Any], n: int) -> List[Any]:
    rm = non_tensor.get("reward_model")
    if rm is None:
        return [None] * n
    return [r.get("ground_truth") if isinstance(r, dict) else None for r in rm]


def _score_grouped(texts, truths, sources) -> List[Dict[str, float]]:
    """Score a batch, one service call per reward spec (data sources may differ)."""
    by_spec: Dict[Tuple[str, bool], List[int]] = defaultdict(list)
    for i, ds in enumerate(sources):
        by_spec[_spec_for(ds)].append(i)
    futures = []
    for (spec, fixed), idx in by_spec.items():
        cols = columns_from_labels([truths[i] for i in idx])
        futures.append((idx, fixed, shared_service(spec).submit([texts[i] for i in idx], **cols)))
    infos: List[Dict[str, float]] = [{} for _ in texts]
    for idx, fixed, fut in futures:
        res = fut.result()
        for j, i in enumerate(idx):
            infos[i] = reward_info(res, j, fixed)
    return infos


# ---------------------------------------------------------------- advantage estimators
def _reinforce_pp_on_token_rewards(x: np.ndarray, mask: np.ndarray, gamma: float,
                                   std_eps: float, std_ddof: int) -> Tuple[np.ndarray, np.ndarray]:
    """(advantages, returns) of REINFORCE++ on verl's token rewards x (B, T): mindrl's
    ``reinforce_pp`` with c_t = x_t (its returns skip masked tokens, as verl's)."""
    from algorithms.advantages import _discounted_returns, _whiten

    returns = _discounted_returns(x, mask, gamma)
    return _whiten(returns, mask, std_eps, std_ddof), returns


#: The estimator parameters a registration may fix (the KL is already in verl's token rewards).
_PARAMS = ("std_eps", "std_ddof", "gamma", "passk_k")


def register_advantage_estimators(prefix: str = "mindrl_", **params) -> List[str]:
    """Register mindrl's estimators in verl's ``ADV_ESTIMATOR_REGISTRY`` as ``prefix + name``.

    ``params`` (``std_eps``, ``std_ddof``, ``passk_k``, ``gamma``) are fixed for these
    registrations; ``gamma``, unless given, is verl's ``algorithm.gamma`` at call time. Each
    estimator takes verl's token-level rewards (see the module docstring for how). Idempotent
    for the same arguments. Returns the registered names.
    """
    import torch
    from verl.trainer.ppo import core_algos

    from algorithms.advantages import ADV_ESTIMATORS, compute_advantages

    bad = sorted(set(params) - set(_PARAMS))
    if bad:
        raise TypeError(f"register_advantage_estimators: unsupported parameter(s) {bad}; valid: "
                        f"{list(_PARAMS)} (verl puts the KL into token_level_rewards: "
                        f"algorithm.use_kl_in_reward)")
    rpp_defaults = {k: v.default for k, v in
                    inspect.signature(ADV_ESTIMATORS.get("reinforce_pp")).parameters.items()
                    if k in ("gamma", "std_eps", "std_ddof")}
    names = []
    for est in ESTIMATORS:
        name = prefix + est
        fn = core_algos.ADV_ESTIMATOR_REGISTRY.get(name)
        if fn is not None and getattr(fn, "_mindrl", None) == (est, params):
            names.append(name)
            continue

        def estimator(token_level_rewards, response_mask, config=None, index=None,
                      _est=est, **_unused):
            mask = response_mask.detach().to("cpu", torch.float64).numpy()
            x = token_level_rewards.detach().to("cpu", torch.float64).numpy()
            group = np.arange(len(x)) if index is None else np.asarray(index)
            kwargs = dict(params)
            gamma = getattr(config, "gamma", None) if config is not None else None
            if gamma is not None and "gamma" not in kwargs:
                kwargs["gamma"] = float(gamma)
            if _est == "reinforce_pp":
                adv, ret = _reinforce_pp_on_token_rewards(
                    x, mask, float(kwargs.get("gamma", rpp_defaults["gamma"])),
                    float(kwargs.get("std_eps", rpp_defaults["std_eps"])),
                    int(kwargs.get("std_ddof", rpp_defaults["std_ddof"])))
            else:
                adv = ret = compute_advantages(_est, rewards=x.sum(axis=1), group_index=group,
                                               response_mask=mask, **kwargs)
            like = dict(dtype=token_level_rewards.dtype, device=token_level_rewards.device)
            return torch.tensor(adv, **like), torch.tensor(ret, **like)

        estimator._mindrl = (est, params)
        estimator.__name__ = f"mindrl_{est}_advantage"
        core_algos.ADV_ESTIMATOR_REGISTRY.pop(name, None)
        core_algos.register_adv_est(name)(estimator)
        names.append(name)
    return names


# ---------------------------------------------------------------- verl classes (verl imported)
try:
    import torch
    from verl.experimental.reward_loop.reward_manager import register as _register_loop
    from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase
    from verl.workers.reward_manager import register as _register_legacy
    from verl.workers.reward_manager.abstract import AbstractRewardManager
except ImportError as _e:          # verl absent: compute_score still works
    _VERL_IMPORT_ERROR: Optional[ImportError] = _e
else:
    _VERL_IMPORT_ERROR = None

    @_register_loop("mindrl")
    class MindrlRewardManager(RewardManagerBase):
        """verl reward-loop manager: each sample's ``run_single`` is queued on the shared
        scoring service, so the concurrent samples of a chunk run together on mindrl's
        workers with per-item timeouts. verl's ``compute_score`` argument is ignored. The
        extra info is :func:`reward_info` (the same keys for every sample)."""

        def __init__(self, config, tokenizer, compute_score=None, reward_router_address=None,
                     reward_model_tokenizer=None, **kwargs):
            super().__init__(config, tokenizer, compute_score)

        async def run_single(self, data) -> dict:
            data = data[-1:]
            texts, _ = _decode_rows(data, self.tokenizer)
            nt = data.non_tensor_batch
            source = nt["data_source"][0] if "data_source" in nt else None
            truth = _ground_truths(nt, 1)[0]
            spec, fixed = _spec_for(source)
            fut = shared_service(spec).submit(texts, **columns_from_labels([truth]))
            info = reward_info(await asyncio.wrap_future(fut), 0, fixed)
            return {"reward_score": info["score"], "reward_extra_info": info}

    @_register_legacy("mindrl")
    class MindrlBatchRewardManager(AbstractRewardManager):
        """verl's batch reward-manager interface (``manager(data) -> token rewards``): the whole
        batch is decoded and scored in one call per reward spec through mindrl's pool; the
        reward sits on each response's last valid token, as in verl's managers."""

        def __init__(self, tokenizer, num_examine: int = 0, compute_score=None,
                     reward_fn_key: str = "data_source", **kwargs):
            self.tokenizer = tokenizer
            self.reward_fn_key = reward_fn_key

        def __call__(self, data, return_dict: bool = False):
            texts, lengths = _decode_rows(data, self.tokenizer)
            n = len(texts)
            nt = data.non_tensor_batch
            sources = list(nt[self.reward_fn_key]) if self.reward_fn_key in nt else [None] * n
            infos = _score_grouped(texts, _ground_truths(nt, n), sources)
            reward = torch.zeros_like(data.batch["responses"], dtype=torch.float32)
            for i, (info, length) in enumerate(zip(infos, lengths)):
                if length > 0:
                    reward[i, length - 1] = info["score"]
            if not return_dict:
                return reward
            keys = list(infos[0]) if infos else []
            return {"reward_tensor": reward,
                    "reward_extra_info": {k: [info[k] for info in infos] for k in keys}}

    register_advantage_estimators()
