"""Chat templates: exact strings, the tokenizer's own template, errors."""

import pytest

from mindrl.data import TEMPLATES, render_prompt


def test_qwen25_math_cot_exact():
    assert render_prompt("What is 1+1?", "qwen25-math-cot") == (
        "<|im_start|>system\nPlease reason step by step, and put your final answer within "
        "\\boxed{}.<|im_end|>\n<|im_start|>user\nWhat is 1+1?<|im_end|>\n<|im_start|>assistant\n")


def test_qwen25_chat_and_system_override():
    p = render_prompt("Q", "qwen25-chat")
    assert p.startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a "
                        "helpful assistant.<|im_end|>\n<|im_start|>user\nQ\nPlease reason step")
    assert p.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert render_prompt("Q", "qwen25-chat", system_prompt="S").startswith(
        "<|im_start|>system\nS<|im_end|>")


def test_r1_think_and_none():
    p = render_prompt("Q?", "r1-think")
    assert p.startswith("A conversation between User and Assistant.")
    assert "<think> </think> and <answer> </answer>" in p
    assert p.endswith("User: Q? Assistant: <think>")
    assert render_prompt("Q?", "none") == "Q?"


class _Tok:
    chat_template = "x"

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        assert not tokenize and add_generation_prompt
        return "|".join(f"{m['role']}:{m['content']}" for m in messages) + "|assistant:"


def test_model_template_uses_tokenizer():
    assert render_prompt("Q", "model", _Tok(), system_prompt="S") == "system:S|user:Q|assistant:"
    with pytest.raises(ValueError, match="needs a tokenizer"):
        render_prompt("Q", "model")
    assert render_prompt("Q", "model-boxed", _Tok()) == (
        "user:Q\nPlease reason step by step, and put your final answer within \\boxed{}."
        "|assistant:")


def test_model_template_on_tiny_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert render_prompt("Q", "model", tok) == \
        "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"


def test_unknown_template_lists_names():
    assert set(TEMPLATES.names()) >= {"qwen25-math-cot", "qwen25-chat", "r1-think", "none",
                                      "model"}
    with pytest.raises(KeyError, match="valid names: .*qwen25-math-cot"):
        render_prompt("Q", "qwen25-math")
