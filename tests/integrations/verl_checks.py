"""Run inside a subprocess with verl on sys.path (see test_verl.py); prints one JSON line.

Loads mindrl the ways verl does: ``get_custom_reward_fn`` and ``load_reward_manager`` from
``verl.trainer.ppo.reward`` on an OmegaConf config, verl's legacy manager registry on a real
``DataProto``, and ``compute_advantage`` from ``verl.trainer.ppo.ray_trainer``.
"""

import asyncio
import json
import sys

sys.path.append(sys.argv[1])       # after site-packages: the venv's packages win


def main():
    # heavy imports here, not at module level: reward workers re-import __main__
    import numpy as np
    import torch
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer

    import verl  # imports mindrl.integrations.verl (VERL_USE_EXTERNAL_MODULES)
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.trainer.ppo.reward import get_custom_reward_fn, load_reward_manager
    from verl.workers.reward_manager import get_reward_manager_cls

    out = {"verl": verl.__version__}

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
    ]
    cfg2 = OmegaConf.create({"reward": {"custom_reward_function": {
        "path": "pkg://mindrl.integrations.verl", "name": "compute_score",
        "reward_kwargs": {"rewards": "accuracy:1,format:0.5", "workers": 1}}}})
    good = "<think>\nok\n</think>\n<answer>\n7\n</answer>"
    out["custom_spec"] = get_custom_reward_fn(cfg2)(data_source="x", solution_str=good,
                                                    ground_truth="7", extra_info={})

    # 2. a DataProto batch: prompts left-padded, responses right-padded, as verl's rollout
    #    makes them
    tok = AutoTokenizer.from_pretrained(sys.argv[2])
    responses_text = ["so \\boxed{2}", "the answer is \\boxed{5} ok", "she pays 18", "17"]
    truths = ["2", "4", "#### 18", "18"]
    sources = ["math", "math", "openai/gsm8k", "openai/gsm8k"]
    P, R = 4, 24
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    prompts = torch.full((4, P), pad, dtype=torch.long)
    responses = torch.full((4, R), pad, dtype=torch.long)
    attn = torch.zeros((4, P + R), dtype=torch.long)
    for i, text in enumerate(responses_text):
        ids = tok.encode(text, add_special_tokens=False)[:R]
        prompts[i, -2:] = torch.tensor(tok.encode("q:", add_special_tokens=False)[:2] * 2)[:2]
        attn[i, P - 2:P] = 1
        responses[i, :len(ids)] = torch.tensor(ids)
        attn[i, P:P + len(ids)] = 1
    data = DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "attention_mask": attn,
                 "input_ids": torch.cat([prompts, responses], 1)},
        non_tensors={"data_source": np.array(sources, dtype=object),
                     "reward_model": np.array([{"ground_truth": t} for t in truths], dtype=object)})
    out["response_lengths"] = attn[:, P:].sum(-1).tolist()

    legacy = get_reward_manager_cls("mindrl")(tokenizer=tok, num_examine=0)
    res = legacy(data, return_dict=True)
    out["legacy_rewards"] = res["reward_tensor"].tolist()

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
    out["loop_rm_scores"] = manager.assemble_rm_scores(data, out["loop_scores"]).tolist()

    # 3. advantage estimators through verl's compute_advantage dispatch
    T = 3
    rewards = torch.zeros((6, T))
    outcome = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1], [1, 1, 0], [1, 1, 1]],
                        dtype=torch.float32)
    for i, r in enumerate(outcome):
        last = int(mask[i].sum()) - 1
        rewards[i, last] = r
    uid = np.array(["a", "a", "a", "a", "b", "b"], dtype=object)
    adv = {}
    for name in ("mindrl_rloo", "mindrl_grpo", "mindrl_dr_grpo"):
        d = DataProto.from_dict(tensors={"token_level_rewards": rewards.clone(),
                                         "response_mask": mask.clone()},
                                non_tensors={"uid": uid})
        d = compute_advantage(d, adv_estimator=name, config=OmegaConf.create({"gamma": 1.0}))
        adv[name] = d.batch["advantages"].tolist()
    out["advantages"] = adv
    print("@@RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
