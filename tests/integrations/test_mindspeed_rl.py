"""MindSpeed-RL rule verifiers from mindrl. MindSpeed-RL itself cannot be installed here (PyPI
`mindspeed-rl` is a placeholder whose setup.py raises; the project needs torch_npu on Ascend):
the verifier functions are called with its documented signature, and `register` is applied to a
module with the interface of `mindspeed_rl.models.rule_verifier` (`verifier(responses, data,
config)` over a local table), built here from that file's documented behaviour."""

import queue
import types

from mindrl.integrations.mindspeed_rl import clean_response, make_verifier, register

SEQ = ("<|im_start|>user\nhalf?<|im_end|>\n<|im_start|>assistant\n"
       "<think>\nok\n</think>\n<answer>\n\\boxed{\\frac{1}{2}}\n</answer><|im_end|>pad")


def test_clean_response_cuts_prompt_and_stop_words():
    want = "<think>\nok\n</think>\n<answer>\n\\boxed{\\frac{1}{2}}\n</answer>"
    assert clean_response(SEQ) == want


def test_verifier_signature_and_queue():
    fn = make_verifier("accuracy")
    q = queue.Queue()
    assert fn(q, [SEQ, "<|im_start|>assistant\n\\boxed{3}"], ["0.5", "4"]) == [1.0, 0.0]
    assert q.get_nowait() == [1.0, 0.0]
    assert make_verifier("format")(None, [SEQ, "x"]) == [1.0, 0.0]


def _standin_rule_verifier():
    """`verifier` as in MindSpeed-RL: a local name -> fn table, weighted sum, metrics."""
    def step(queue, sequences, *a, **k):
        return [0.25 for _ in sequences]

    def verifier(responses, data, config, **kwargs):
        table = {"step": step}
        rewards, metrics = [0.0] * len(responses), {}
        for idx, name in enumerate(config.verifier_function):
            if name not in table:
                continue
            scores = table[name](None, responses, data["labels"])
            metrics[f"grpo/{name}_rewards/mean"] = scores
            rewards = [r + s * config.verifier_weight[idx] for r, s in zip(rewards, scores)]
        return rewards, metrics

    return types.SimpleNamespace(verifier=verifier)


def test_register_mixes_mindrl_and_native_verifiers():
    mod = register(_standin_rule_verifier())
    assert register(mod) is mod                      # idempotent
    cfg = types.SimpleNamespace(verifier_function=["mindrl_accuracy", "step", "mindrl_format"],
                                verifier_weight=[1.0, 2.0, 0.5], verifier_parallel=1)
    rewards, metrics = mod.verifier([SEQ, "<|im_start|>assistant\nno"], {"labels": ["0.5", "1"]},
                                    cfg)
    # accuracy 1*1 + step 2*0.25 + format 0.5*1 ; second: 0 + 0.5 + 0
    assert rewards == [2.0, 0.5]
    assert metrics["grpo/mindrl_accuracy_rewards/mean"] == [1.0, 0.0]
    assert metrics["grpo/step_rewards/mean"] == [0.25, 0.25]
