"""The tool-use demo task (rewards/tool_demo.py), the shaping reward tool_call_format
(rewards/tool_calls.py) and the SFT encoding of tool traces, against hand-computed values.

The generator's tool traces are run in the real sandbox: the code the teacher writes must
print what the trace's output block says, and that must be the gold product."""

import doctest
import importlib
import random
import re

import pytest

from mindrl.data.io import DataError
from mindrl.tools.formats import render_output, split_trace
from mindrl.trainer.prompts import build_streams, tool_mult_options
from rewards import resolve_reward
from rewards.tool_calls import ToolCallFormat, call_verdicts
from rewards.tool_demo import head_guess, make_tool_mult, tool_final_answer

TRACE = re.compile(r"```python\n(print\((\d+)\*(\d+)\))\n```\n```output\n(\d+)\n```\n(\d+)")


@pytest.mark.parametrize("mod", ["rewards.tool_demo", "rewards.tool_calls",
                                 "mindrl.tools.formats"])
def test_doctests(mod):
    assert doctest.testmod(importlib.import_module(mod)).failed == 0


def test_tool_traces_run_in_the_sandbox_and_give_the_gold_answer():
    from mindrl.tools.sandbox import Sandbox, SandboxLimits

    rng = random.Random(7)
    rows = [make_tool_mult(rng, digits=3, call=0.3) for _ in range(200)]
    calls = [r for r in rows if r["teacher_calls"]]
    assert 40 <= len(calls) <= 80                  # 30% of 200 (binomial sd 6.5)
    box = Sandbox(SandboxLimits(timeout_s=10, memory_mb=512))
    for r in calls[:6]:                            # each call is ~0.1 s: a few are enough
        m = TRACE.fullmatch(r["teacher"])
        assert m, r["teacher"]
        a, b = (int(x) for x in r["problem"].rstrip("=").split("*"))
        assert (int(m[2]), int(m[3])) == (a, b) and 100 <= a <= 999 and 100 <= b <= 999
        res = box.run(m[1])
        assert res.verdict == "ok" and res.output.strip() == m[4] == r["answer"] == str(a * b)
        assert m[5] == r["answer"]
        assert tool_final_answer([r["teacher"]], answer=[r["answer"]]) == [1.0]
    for r in calls:
        m = TRACE.fullmatch(r["teacher"])
        assert m[4] == m[5] == r["answer"] == str(int(m[2]) * int(m[3]))


def test_guesses_from_the_head_are_wrong_and_start_like_the_product():
    rng = random.Random(3)
    rows = [make_tool_mult(rng, digits=3, call=0.3) for _ in range(500)]
    heads = [r for r in rows if not r["teacher_calls"]]
    assert heads
    for r in heads:
        guess = r["teacher"][1:]
        assert r["teacher"][0] == "~" and guess.isdigit() and guess != r["answer"]
        assert guess[:2] == r["answer"][:2] and len(guess) == len(r["answer"])
        assert tool_final_answer([r["teacher"]], answer=[r["answer"]]) == [0.0]
    # a guess that happens to hit the product is changed (last digit + 1)
    class Fixed(random.Random):
        def randrange(self, n):
            return 0
    assert head_guess(Fixed(), 12000) == 12001 and head_guess(Fixed(), 12345) == 12000
    assert make_tool_mult(random.Random(1), call=1.0)["teacher_calls"]
    assert not make_tool_mult(random.Random(1), call=0.0)["teacher_calls"]


def test_final_answer_reads_after_the_output():
    gold = ["56088"] * 6
    call = "```python\nprint(123*456)\n```\n```output\n56088\n```\n"
    texts = ["56088", call + "56088", call, call + "56000", "56088 then 7", "```python\n56088"]
    assert tool_final_answer(texts, answer=gold) == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]


def test_generator_spec_and_its_errors():
    assert tool_mult_options({}) == {"digits": 3, "call": 0.3, "offset": 0}
    assert tool_mult_options({"digits": "4", "call": "0.5"})["digits"] == 4
    for bad, word in [({"call": "2"}, "call=2"), ({"digits": "x"}, "not an integer"),
                      ({"calls": "0.3"}, "unknown option")]:
        with pytest.raises(DataError, match=word):
            tool_mult_options(bad)
    from mindrl.config.schema import DataConfig

    train, val = build_streams(DataConfig(train_file="tool_mult:digits=2,call=0.5",
                                          max_val_samples=16), seed=0)
    assert len(val) == 16 and all(re.fullmatch(r"\d\d\*\d\d=", r["problem"]) for r in val)
    held = {r["problem"] for r in val}
    assert not held & {r["problem"] for r in train.take(64)}


# ---------------------------------------------------------------- tool_call_format
OK = "```python\nprint(2*3)\n```\n```output\n6\n```\n"
SYNTAX = ("```python\nprint(2*\n```\n```output\n  File \"<string>\", line 1\nSyntaxError: '(' "
          "was never closed\n```\n")
RAISES = ("```python\nprint(1/0)\n```\n```output\nTraceback (most recent call last):\n  File "
          "\"<string>\", line 1, in <module>\nZeroDivisionError: division by zero\n```\n")
TIMEOUT = "```python\nwhile True: pass\n```\n```output\nTimeoutError: 5 s\n```\n"
UNCLOSED = "```python\nprint(2*3)"
NOT_RUN = "```python\nprint(2*3)\n```"           # the last turn's call, left as text


def test_tool_call_format_tir_by_hand():
    r = ToolCallFormat(good=1.0, bad=-1.0, no_call=0.0)
    texts = ["6", OK + "6", SYNTAX, RAISES, TIMEOUT, UNCLOSED, NOT_RUN, OK + RAISES + OK + "6",
             OK + UNCLOSED]
    # mean over calls: (1 - 1 + 1) / 3 and (1 - 1) / 2
    assert r(texts) == [0.0, 1.0, -1.0, -1.0, -1.0, -1.0, -1.0, pytest.approx(1 / 3), 0.0]
    assert call_verdicts(OK + RAISES + OK) == [True, False, True]
    # defaults: 1 for good calls, 0 for bad ones and for no call; params through the registry
    assert resolve_reward("tool_call_format")(["6", OK, RAISES]) == [0.0, 1.0, 0.0]
    shaped = resolve_reward("tool_call_format", {"good": 0.2, "bad": -0.1, "no_call": -0.3})
    assert shaped(["6", OK, RAISES]) == [-0.3, 0.2, -0.1]


def test_tool_call_format_chat_by_hand():
    good = ('<tool_call>\n{"name": "python", "arguments": {"code": "print(6)"}}\n</tool_call>'
            + render_output("6", "chat") + "6")
    bad_json = '<tool_call>{"name": python}</tool_call>' + render_output("6", "chat")
    errored = ('<tool_call>{"name": "nope", "arguments": {}}</tool_call><|im_end|>'
               + render_output("Error: unknown tool 'nope'; available: python", "chat",
                               after_eos=True))
    r = ToolCallFormat(format="chat", bad=-1.0)
    assert r([good, bad_json, errored, "6"]) == [1.0, -1.0, -1.0, 0.0]
    with pytest.raises(ValueError, match="unknown format"):
        ToolCallFormat(format="json")


# ---------------------------------------------------------------- SFT: tool output masked
def test_split_trace_pieces():
    assert split_trace("42", "tir") == [("42", True)]
    assert split_trace(OK + "6", "tir") == [("```python\nprint(2*3)\n```", True),
                                            ("\n```output\n6\n```\n", False), ("6", True)]
    assert split_trace(NOT_RUN, "tir") == [(NOT_RUN, True)]
    chat = ('<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call><|im_end|>'
            + render_output("1", "chat", after_eos=True) + "1")
    pieces = split_trace(chat, "chat")
    assert [t for _, t in pieces] == [True, False, True]
    assert pieces[0][0].endswith("</tool_call><|im_end|>") and pieces[2][0] == "1"
    assert "".join(p for p, _ in pieces) == chat


@pytest.mark.parametrize("tools", [True, False])
def test_sft_masks_tool_output_like_the_rollout(tmp_path, tiny_dir, tools):
    """SFT on a tool trace: the ids are the call's, the output block's and the answer's, each
    encoded alone (as the rollout loop builds them), and only the output block is masked."""
    from mindrl.config.loader import load_config
    from mindrl.trainer.sft import SFTTrainer

    cfg = load_config("sft_tool_demo", [
        f"model.path={tiny_dir}", f"logging.output_dir={tmp_path}", f"tools.enabled={tools}",
        "logging.tensorboard=false", "logging.progress_bar=false", "data.max_val_samples=4"])
    tr = SFTTrainer(cfg)
    try:
        row = {"problem": "123*456=", "teacher": "```python\nprint(123*456)\n```\n```output\n"
               "56088\n```\n56088", "answer": "56088"}
        tokens = tr.build_batch([row, {"problem": "11*12=", "teacher": "130", "answer": "132"}])
        enc = lambda s: tr.tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
        call, out, ans = (enc("```python\nprint(123*456)\n```"), enc("\n```output\n56088\n```\n"),
                          enc("56088"))
        P = tokens.prompt_len
        resp = tokens.input_ids[0, P:P + int(tokens.attention_mask[0, P:].sum())].tolist()
        mask = tokens.response_mask[0, :len(resp)].tolist()
        if tools:
            assert resp == call + out + ans + [tr.eos_id]
            assert mask == [1.0] * len(call) + [0.0] * len(out) + [1.0] * (len(ans) + 1)
        else:                                  # tools off: the text as one piece, all trained
            assert resp == enc(row["teacher"]) + [tr.eos_id] and set(mask) == {1.0}
        n = len(enc("130")) + 1
        assert tokens.response_mask[1].tolist() == [1.0] * n + [0.0] * (
            tokens.response_mask.shape[1] - n)
    finally:
        tr.close()
