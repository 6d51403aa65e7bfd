"""Run inside a subprocess with verl on sys.path (see test_verl.py); prints one JSON line.

``verl_checks.py PEER_DIR TOKENIZER_DIR MODE``; MODE is

- ``plugins``: loads mindrl the ways verl does: ``get_custom_reward_fn`` and
  ``load_reward_manager`` from ``verl.trainer.ppo.reward`` on an OmegaConf config, verl's legacy
  manager registry on a real ``DataProto``, and every ``mindrl_*`` advantage estimator through
  ``compute_advantage`` from ``verl.trainer.ppo.ray_trainer``, beside verl's own estimators on
  the same batch, with last-token rewards and with verl's KL-in-reward per-token rewards;
- ``reward_loop DATA_DIR``: verl's own reward loop (``RewardLoopManager.compute_rm_score`` on a
  local Ray instance, verl's naive manager calling ``compute_score``) on a batch that mixes
  GSM8K and MATH rows from the shared data files.
"""

import asyncio
import json
import os
import sys

sys.path.append(sys.argv[1])       # after site-packages: the venv's packages win
PEERS = sys.argv[1]


def _ray_worker_setup():
    """Ray workers start with the same environment but not the driver's sys.path."""
    import sys as _sys
    if PEERS not in _sys.path:
        _sys.path.append(PEERS)


def _dataproto(tok, texts, sources, truths, prompt_len=4, response_len=24):
    """A DataProto as verl's rollout makes it: prompts left-padded, responses right-padded."""
    import numpy as np
    import torch
    from verl import DataProto

    n, P, R = len(texts), prompt_len, response_len
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    prompts = torch.full((n, P), pad, dtype=torch.long)
    responses = torch.full((n, R), pad, dtype=torch.long)
    attn = torch.zeros((n, P + R), dtype=torch.long)
    q = tok.encode("q:", add_special_tokens=False)[:2] * 2
    for i, text in enumerate(texts):
        ids = tok.encode(text, add_special_tokens=False)[-R:]
        prompts[i, -2:] = torch.tensor(q[:2])
        attn[i, P - 2:P] = 1
        responses[i, :len(ids)] = torch.tensor(ids)
        attn[i, P:P + len(ids)] = 1
    data = DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "attention_mask": attn,
                 "input_ids": torch.cat([prompts, responses], 1)},
        non_tensors={"data_source": np.array(sources, dtype=object),
                     "reward_model": np.array([{"ground_truth": t} for t in truths], dtype=object)})
    return data, attn[:, P:].sum(-1).tolist()


def check_plugins(out, tok):
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn, load_reward_manager
    from verl.workers.reward_manager import get_reward_manager_cls

    # 1. custom_reward_function, loaded by verl's own loader from the installed package
    cfg = OmegaConf.create({"reward": {"custom_reward_function": {
        "path": "pkg://mindrl.integrations.verl", "name": "compute_score",
        "reward_kwargs": {"workers": 1, "timeout": 5.0}}}})
    fn = get_custom_reward_fn(cfg)
    out["custom"] = [
        fn(data_source="openai/gsm8k", solution_str="she pays 18 dollars", ground_truth="18",
           extra_info={}),
        fn(data_source="lighteval/MATH", solution_str="so \\boxed{\\frac{1}{2}}",
           ground_truth="0.5", extra_info={}),
        fn(data_source="lighteval/MATH", solution_str="so \\boxed{3}", ground_truth="4",
           extra_info={}),
        fn(data_source="countdown", solution_str="<answer>(100 - 93) * 30 / 10</answer>",
           ground_truth={"target": 21, "numbers": [30, 100, 93, 10]}, extra_info={}),
        fn(data_source="openai/gsm8k", solution_str="18", ground_truth="no number here",
           extra_info={}),                                    # unscorable label
    ]
    cfg2 = OmegaConf.create({"reward": {"custom_reward_function": {
        "path": "pkg://mindrl.integrations.verl", "name": "compute_score",
        "reward_kwargs": {"rewards": "accuracy:1,format:0.5", "workers": 1, "timeout": 1.0}}}})
    fn2 = get_custom_reward_fn(cfg2)
    good = "<think>\nok\n</think>\n<answer>\n7\n</answer>"
    out["custom_spec"] = fn2(data_source="x", solution_str=good, ground_truth="7", extra_info={})
    # a fixed spec on a GSM8K row, and a math answer the grader cannot finish in 1 s
    out["custom_spec_gsm8k"] = fn2(data_source="openai/gsm8k", solution_str=good,
                                   ground_truth="7", extra_info={})
    slow = "<think>\nok\n</think>\n<answer>\n\\boxed{9^{9^{9^{9}}}}\n</answer>"
    out["custom_spec_timeout"] = fn2(data_source="lighteval/MATH", solution_str=slow,
                                     ground_truth="3", extra_info={})

    # 2. a mixed-source DataProto batch through both managers
    data, lengths = _dataproto(
        tok, ["so \\boxed{2}", "the answer is \\boxed{5} ok", "she pays 18", "17"],
        ["math", "math", "openai/gsm8k", "openai/gsm8k"], ["2", "4", "#### 18", "18"])
    out["response_lengths"] = lengths

    legacy = get_reward_manager_cls("mindrl")(tokenizer=tok, num_examine=0)
    res = legacy(data, return_dict=True)
    out["legacy_rewards"] = res["reward_tensor"].tolist()
    out["legacy_extra"] = res["reward_extra_info"]
    os.environ["MINDRL_REWARDS"] = "accuracy:1,format:0.5"     # a fixed spec for every source
    try:
        out["legacy_extra_fixed"] = legacy(data, return_dict=True)["reward_extra_info"]
    finally:
        del os.environ["MINDRL_REWARDS"]

    mcfg = OmegaConf.create({"reward": {
        "custom_reward_function": {"path": None, "name": "compute_score"},
        "reward_manager": {"source": "importlib", "name": "MindrlRewardManager",
                           "module": {"path": "pkg://mindrl.integrations.verl"}}}})
    manager = load_reward_manager(mcfg, tok)
    out["manager_class"] = type(manager).__name__

    async def run_all():
        return await asyncio.gather(*[manager.run_single(data[i:i + 1]) for i in range(len(data))])

    singles = asyncio.run(run_all())
    out["loop_scores"] = [s["reward_score"] for s in singles]
    out["loop_extra"] = [s["reward_extra_info"] for s in singles]
    out["loop_rm_scores"] = manager.assemble_rm_scores(data, out["loop_scores"]).tolist()


# ---------------------------------------------------------------- advantage estimators
#: verl's own estimator for each mindrl estimator: (verl name, compute_advantage kwargs, the
#: gammas at which they compute the same thing). None: verl has no such estimator.
VERL_REFERENCE = {
    "grpo": ("grpo", {"norm_adv_by_std_in_grpo": True}, (1.0, 0.9)),
    "dr_grpo": ("grpo", {"norm_adv_by_std_in_grpo": False}, (1.0, 0.9)),
    "rloo": ("rloo", {}, (1.0, 0.9)),
    "reinforce_pp": ("reinforce_plus_plus", {}, (1.0, 0.9)),
    "reinforce_pp_baseline": ("reinforce_plus_plus_baseline", {}, (1.0,)),  # verl: no gamma
    "passk": None,
}
GAMMAS = (1.0, 0.9)


def advantage_batch():
    """14 rollouts in 3 groups (the last all right), T = 6; one multi-turn row whose mask has a
    hole (a tool observation). (uid, outcome scores, response mask, old and ref log-probs)."""
    import numpy as np
    import torch

    uid = np.array(["a"] * 6 + ["b"] * 4 + ["c"] * 4, dtype=object)
    outcome = [1, 0, 0, 0, 0, 0,  1, 1, 0, 1,  1, 1, 1, 1]
    lengths = [6, 3, 5, 1, 4, 6,  2, 6, 5, 3,  4, 6, 2, 5]
    n = len(outcome)
    mask = torch.zeros((n, 6))
    for i, length in enumerate(lengths):
        mask[i, :length] = 1
    mask[0, 2:4] = 0                      # multi-turn: tokens 2-3 are an observation
    gen = torch.Generator().manual_seed(0)
    old = -torch.rand((n, 6), generator=gen) * 2
    ref = old + torch.randn((n, 6), generator=gen) * 0.5
    return uid, outcome, mask, old, ref


def check_advantages(out):
    import torch
    from verl import DataProto
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.ray_trainer import apply_kl_penalty, compute_advantage

    from mindrl.integrations.verl import ESTIMATORS

    uid, outcome, mask, old, ref = advantage_batch()
    scores = torch.zeros_like(mask)
    for i, r in enumerate(outcome):
        scores[i, int(mask[i].nonzero().max())] = float(r)
    base = DataProto.from_dict(
        tensors={"token_level_scores": scores, "response_mask": mask, "old_log_probs": old,
                 "ref_log_prob": ref}, non_tensors={"uid": uid})
    # last-token rewards (no KL), and verl's KL-in-reward token rewards (beta 0.1, k1)
    kinds = {"last": scores.clone()}
    with_kl, _ = apply_kl_penalty(base, core_algos.FixedKLController(0.1), kl_penalty="kl")
    kinds["token"] = with_kl.batch["token_level_rewards"].clone()

    def run(name, rewards, gamma, **kw):
        d = DataProto.from_dict(tensors={"token_level_rewards": rewards.clone(),
                                         "response_mask": mask.clone()},
                                non_tensors={"uid": uid})
        d = compute_advantage(d, adv_estimator=name, gamma=gamma,
                              config=AlgoConfig(gamma=gamma), **kw)
        return d.batch["advantages"].tolist(), d.batch["returns"].tolist()

    from mindrl.integrations.verl import register_advantage_estimators
    try:
        register_advantage_estimators(prefix="x_", kl_coef=0.1)
    except TypeError as e:
        out["kl_coef_rejected"] = str(e)
    out["registered"] = sorted(n for n in core_algos.ADV_ESTIMATOR_REGISTRY
                               if n.startswith("mindrl_"))
    out["adv_mask"] = mask.tolist()
    out["adv_uid"] = uid.tolist()
    out["adv_rewards"] = {k: v.tolist() for k, v in kinds.items()}
    adv, verl_adv, verl_ret = {}, {}, {}
    for est in ESTIMATORS:
        for kind, rewards in kinds.items():
            for gamma in GAMMAS:
                key = f"{est}/{kind}/{gamma}"
                adv[key], ret = run("mindrl_" + est, rewards, gamma)
                if est == "reinforce_pp":
                    out.setdefault("mindrl_returns", {})[key] = ret
                refdef = VERL_REFERENCE[est]
                if refdef is not None and gamma in refdef[2]:
                    verl_adv[key], verl_ret[key] = run(refdef[0], rewards, gamma, **refdef[1])
    out["advantages"] = adv
    out["verl_advantages"] = verl_adv
    out["verl_returns"] = {k: v for k, v in verl_ret.items() if k.startswith("reinforce_pp/")}


def check_reward_loop(out, tok_dir, data_dir):
    import math
    import re
    from pathlib import Path

    import ray
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager

    def rows(name, n):
        with open(Path(data_dir) / "train" / name) as f:
            return [json.loads(next(f)) for _ in range(n)]

    gsm8k, math_rows = rows("gsm8k_train.openai.jsonl", 2), rows(
        "simplelr_qwen_level3to5_train.simplerl_pr57.jsonl", 3)
    # verl's examples/data_preprocess/gsm8k.py: data_source openai/gsm8k, the number after ####
    gsm_truth = [re.search(r"#### (\-?[0-9\.\,]+)", r["answer"]).group(1).replace(",", "")
                 for r in gsm8k]
    texts = [f"so \\boxed{{{math_rows[0]['reward_model']['ground_truth']}}}",   # right
             gsm8k[0]["answer"].split("####")[0] + f"So {gsm_truth[0]} in all.",  # right
             "so \\boxed{1000}",                                               # wrong
             f"she earned {int(gsm_truth[1]) + 1} dollars",                    # wrong
             "so \\boxed{9^{9^{9^{9}}}}"]              # the grader cannot finish: timed out
    sources = [math_rows[0]["data_source"], "openai/gsm8k", math_rows[1]["data_source"],
               "openai/gsm8k", math_rows[2]["data_source"]]
    truths = [math_rows[0]["reward_model"]["ground_truth"], gsm_truth[0],
              math_rows[1]["reward_model"]["ground_truth"], gsm_truth[1],
              math_rows[2]["reward_model"]["ground_truth"]]
    tok = AutoTokenizer.from_pretrained(tok_dir)
    data, lengths = _dataproto(tok, texts, sources, truths, response_len=96)
    out["sources"] = sources
    out["response_lengths"] = lengths

    cfg = OmegaConf.load(Path(PEERS) / "verl/trainer/config/_generated_ppo_trainer.yaml")
    cfg.actor_rollout_ref.model.path = tok_dir
    cfg.reward.num_workers = 1
    cfg.reward.custom_reward_function.path = "pkg://mindrl.integrations.verl"
    cfg.reward.custom_reward_function.reward_kwargs = {"workers": 1, "timeout": 1.0}
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False,
             runtime_env={"worker_process_setup_hook": _ray_worker_setup})
    try:
        result = RewardLoopManager(cfg).compute_rm_score(data)
    finally:
        ray.shutdown()
    out["rm_scores"] = result.batch["rm_scores"].tolist()
    out["extra_keys"] = result.meta_info["reward_extra_keys"]
    out["extra"] = {k: [float(x) for x in v] for k, v in result.non_tensor_batch.items()}
    out["extra_finite"] = all(math.isfinite(x) for v in out["extra"].values() for x in v)


def main():
    # heavy imports here, not at module level: reward workers re-import __main__
    from transformers import AutoTokenizer

    import verl  # imports mindrl.integrations.verl (VERL_USE_EXTERNAL_MODULES)

    out = {"verl": verl.__version__}
    mode = sys.argv[3]
    if mode == "plugins":
        check_plugins(out, AutoTokenizer.from_pretrained(sys.argv[2]))
        check_advantages(out)
    elif mode == "reward_loop":
        check_reward_loop(out, sys.argv[2], sys.argv[4])
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print("@@RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
