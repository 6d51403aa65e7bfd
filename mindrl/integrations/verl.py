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

3. mindrl's advantage estimators as verl ``adv_estimator`` names ``mindrl_grpo``,
   ``mindrl_dr_grpo``, ``mindrl_rloo``, ``mindrl_reinforce_pp``, ``mindrl_reinforce_pp_baseline``,
   ``mindrl_passk``, registered with verl's ``register_adv_est`` when this module is imported::

       VERL_USE_EXTERNAL_MODULES=mindrl.integrations.verl ... algorithm.adv_estimator=mindrl_rloo

   (verl imports that module in ``import verl``, in the driver and in every worker.) The outcome
   reward of a response is the sum of its token-level rewards, its group is verl's ``uid``;
   ``gamma`` comes from verl's ``algorithm.gamma``; the other parameters are mindrl's defaults
   (std eps 1e-6, ddof 1, pass@k k=4) unless :func:`register_advantage_estimators` is called
   with others. verl's returns are set equal to the advantages, as verl does for GRPO.
"""

from __future__ import annotations

import asyncio
import os
from collections import defaultdict
from typing import Any, Dict, List, Optional

import numpy as np

from mindrl.integrations.common import (columns_from_labels, parse_reward_spec,
                                        rewards_for_data_source, shared_service)

__all__ = ["compute_score", "MindrlRewardManager", "MindrlBatchRewardManager",
           "register_advantage_estimators", "ESTIMATORS"]

ESTIMATORS = ("grpo", "dr_grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline", "passk")


def _spec_for(data_source: Optional[str], rewards: Any = None) -> str:
    if rewards:
        return rewards if isinstance(rewards, str) else ",".join(
            f"{e['name']}:{e.get('weight', 1.0)}" for e in parse_reward_spec(rewards))
    env = os.environ.get("MINDRL_REWARDS")
    return env or rewards_for_data_source(data_source)


def _info(result, i: int) -> Dict[str, float]:
    out = {"score": float(result.total[i])}
    for key, vals in result.components.items():
        out[f"mindrl/{key}"] = float("nan") if vals[i] is None else float(vals[i])
    return out


def compute_score(data_source: Optional[str], solution_str: str, ground_truth: Any,
                  extra_info: Optional[dict] = None, rewards: Any = None,
                  workers: Optional[int] = None, timeout: Optional[float] = None,
                  **_: Any) -> Dict[str, float]:
    """verl's custom reward: ``{"score": total, "mindrl/<reward>": component}`` for one sample.

    ``rewards`` (a spec such as ``"accuracy:1,format:0.5"``), ``workers`` and ``timeout`` come
    from ``reward_kwargs``; a component that timed out or failed is NaN in the info and counts
    as 0 in the score.
    """
    svc = shared_service(_spec_for(data_source, rewards), workers, timeout)
    res = svc.score([solution_str], **columns_from_labels([ground_truth]))
    return _info(res, 0)


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
    by_spec: Dict[str, List[int]] = defaultdict(list)
    for i, ds in enumerate(sources):
        by_spec[_spec_for(ds)].append(i)
    futures = []
    for spec, idx in by_spec.items():
        cols = columns_from_labels([truths[i] for i in idx])
        futures.append((idx, shared_service(spec).submit([texts[i] for i in idx], **cols)))
    infos: List[Dict[str, float]] = [{} for _ in texts]
    for idx, fut in futures:
        res = fut.result()
        for j, i in enumerate(idx):
            infos[i] = _info(res, j)
    return infos


def register_advantage_estimators(prefix: str = "mindrl_", **params) -> List[str]:
    """Register mindrl's estimators in verl's ``ADV_ESTIMATOR_REGISTRY`` as ``prefix + name``.

    ``params`` (``std_eps``, ``std_ddof``, ``passk_k``, ...) are fixed for these registrations;
    ``gamma`` is taken from verl's algorithm config at call time. Idempotent for the same
    arguments. Returns the registered names.
    """
    import torch
    from verl.trainer.ppo import core_algos

    from algorithms.advantages import ADV_PARAMS, compute_advantages

    unknown = sorted(set(params) - set(ADV_PARAMS))
    if unknown:
        raise TypeError(f"unknown advantage parameter(s) {unknown}; valid: {list(ADV_PARAMS)}")
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
            rewards = token_level_rewards.detach().to("cpu", torch.float64).sum(-1).numpy()
            group = np.arange(len(rewards)) if index is None else np.asarray(index)
            kwargs = dict(params)
            gamma = getattr(config, "gamma", None) if config is not None else None
            if gamma is not None and "gamma" not in kwargs:
                kwargs["gamma"] = float(gamma)
            adv = compute_advantages(_est, rewards=rewards, group_index=group,
                                     response_mask=mask, **kwargs)
            out = torch.as_tensor(adv, dtype=token_level_rewards.dtype,
                                  device=token_level_rewards.device)
            return out, out.clone()

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
        workers with per-item timeouts. verl's ``compute_score`` argument is ignored."""

        def __init__(self, config, tokenizer, compute_score=None, reward_router_address=None,
                     reward_model_tokenizer=None, **kwargs):
            super().__init__(config, tokenizer, compute_score)

        async def run_single(self, data) -> dict:
            data = data[-1:]
            texts, _ = _decode_rows(data, self.tokenizer)
            nt = data.non_tensor_batch
            source = nt["data_source"][0] if "data_source" in nt else None
            truth = _ground_truths(nt, 1)[0]
            fut = shared_service(_spec_for(source)).submit(texts, **columns_from_labels([truth]))
            res = await asyncio.wrap_future(fut)
            score = float(res.total[0])
            # verl stacks the extra info of a batch by the first sample's keys: keep them fixed
            return {"reward_score": score, "reward_extra_info": {"score": score}}

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
            extra: Dict[str, list] = defaultdict(list)
            for info in infos:
                for k, v in info.items():
                    extra[k].append(v)
            return {"reward_tensor": reward, "reward_extra_info": dict(extra)}

    register_advantage_estimators()
