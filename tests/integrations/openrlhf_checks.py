"""Run in a subprocess with OpenRLHF on sys.path (see test_openrlhf.py): OpenRLHF's own remote
reward client, ``SingleTurnAgentExecutor`` from ``openrlhf.utils.agent``, against a running
``mindrl serve-rewards`` (argv[2], a URL) and against mindrl's reward-function file; prints one
@@RESULT JSON line."""

import asyncio
import json
import sys

sys.path.append(sys.argv[1])       # after site-packages: the venv's torch/transformers win


def main():
    import openrlhf
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    import mindrl.integrations.openrlhf_reward as reward_file

    url = sys.argv[2]
    prompt = "<|im_start|>user\nhalf?<|im_end|>\n<|im_start|>assistant\n"
    good = "<think>\nok\n</think>\n<answer>\n\\frac{1}{2}\n</answer>"
    queries = [prompt + good + "<|im_end|>", prompt + "\\boxed{3}<|im_end|>"]
    prompts, labels = [prompt, prompt], ["0.5", "4"]

    http_exec = SingleTurnAgentExecutor(remote_rm_url=url)
    http_out = asyncio.run(http_exec._fetch_rewards_via_http(queries, prompts, labels))
    file_exec = SingleTurnAgentExecutor(remote_rm_url=reward_file.__file__)
    file_out = asyncio.run(file_exec._fetch_rewards_via_func(queries, prompts, labels))
    files = [{k: (v.tolist() if hasattr(v, "tolist") else {kk: vv.tolist() for kk, vv in v.items()})
              for k, v in r.items()} for r in file_out]
    print("@@RESULT " + json.dumps({"openrlhf": getattr(openrlhf, "__version__", None),
                                    "http": http_out, "file": files}))


if __name__ == "__main__":
    main()
