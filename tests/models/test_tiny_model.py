"""The embedded tiny model: reloads with transformers, the tokenizer round-trips (same ids
through ``tokenizers``, AutoTokenizer and Qwen2Tokenizer), digits are single tokens, the build
is deterministic, and model directories are checked before anything heavy starts."""

import json
from pathlib import Path

import pytest

TEXT = ("<|im_start|>user\nWhat is 1234 * 56?<|im_end|>\n<|im_start|>assistant\n"
        "<think>1234 * 56 = 69104</think> <answer>69104</answer><|im_end|>")


def test_reload_and_token_ids_round_trip(tiny_dir):
    import tokenizers
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.models.qwen2.tokenization_qwen2 import Qwen2Tokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dir, local_files_only=True)
    ids = tok(TEXT)["input_ids"]
    assert ids == tokenizers.Tokenizer.from_file(f"{tiny_dir}/tokenizer.json").encode(TEXT).ids
    assert ids == Qwen2Tokenizer.from_pretrained(tiny_dir)(TEXT)["input_ids"]
    assert tok.decode(ids) == TEXT
    pieces = [tok.decode([i]) for i in ids]
    for tag in ("<think>", "</think>", "<answer>", "</answer>", "<|im_start|>", "<|im_end|>"):
        assert tag in pieces
    assert [p for p in pieces if p.isdigit()] == list("1234" "56" "1234" "56" "69104" "69104")
    assert "<answer>69104</answer>" in tok.decode(ids, skip_special_tokens=True)
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    chat = tok.apply_chat_template([{"role": "user", "content": "2+2?"}],
                                   add_generation_prompt=True, tokenize=False)
    assert chat == "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"

    cfg = AutoConfig.from_pretrained(tiny_dir)
    assert cfg.model_type == "qwen2" and cfg.vocab_size == len(tok)
    assert 1000 <= len(tok) <= 2000
    assert cfg.hidden_size // cfg.num_attention_heads >= 32      # vLLM CPU attention
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, local_files_only=True)
    assert sum(p.numel() for p in model.parameters()) < 1_000_000


def test_build_is_deterministic(tiny_dir, tmp_path):
    from safetensors.numpy import load_file

    from mindrl.models import build_tiny_model

    other = build_tiny_model(tmp_path / "again")
    for name in ("tokenizer.json", "config.json"):
        assert Path(tiny_dir, name).read_text() == Path(other, name).read_text()
    a, b = load_file(f"{tiny_dir}/model.safetensors"), load_file(f"{other}/model.safetensors")
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
    meta = json.loads(Path(tiny_dir, "mindrl_tiny.json").read_text())
    assert meta["hidden"] == 64 and meta["layers"] == 2


def test_resolve_and_check_model_dir(tiny_dir, tmp_path):
    from mindrl.models import check_model_dir, resolve_model_path

    assert resolve_model_path("/some/dir") == "/some/dir"
    check_model_dir(tiny_dir)
    with pytest.raises(ValueError, match="builtin:tiny"):
        resolve_model_path("builtin:huge", cache_dir=str(tmp_path))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        check_model_dir(str(tmp_path / "nope"))
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"config\.json; weights"):
        check_model_dir(str(tmp_path))
    with pytest.raises(ValueError, match="head_dim >= 32"):
        from mindrl.models import build_tiny_model

        build_tiny_model(tmp_path / "bad", hidden=64, heads=4)
