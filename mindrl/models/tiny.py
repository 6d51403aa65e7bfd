"""The embedded default model: a tiny Qwen2-architecture causal LM with an offline tokenizer
(and tiny Qwen3 / Llama 3 / Qwen3-MoE models, ``builtin:tiny-qwen3`` / ``builtin:tiny-llama``
/ ``builtin:tiny-qwen3-moe``).

Nothing is downloaded. :func:`build_tiny_model` trains a byte-level BPE with ``tokenizers`` on a
small generated corpus (digits, arithmetic, English math words, ``<think>``/``<answer>`` tags),
wraps it as a ``PreTrainedTokenizerFast`` with ChatML special tokens and a chat template, and
writes a randomly initialised ``Qwen2ForCausalLM`` next to it with ``save_pretrained``.

Two pitfalls shape the tokenizer (see ../shared/PLATFORM.md):
- transformers 5 may reload a Qwen2-type directory as ``Qwen2Tokenizer``, which rebuilds the
  pre-tokenizer from Qwen2's split regex; we train with exactly that regex (and NFC + byte-level)
  so both classes give the same ids. The regex also splits digits one by one, so every number
  is a sequence of single-digit tokens, which suits arithmetic.
- vLLM on CPU needs head_dim >= 32, so ``hidden / heads`` must be at least 32.

The build is deterministic given its arguments (the corpus is generated from ``seed``).
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import List, Optional, Union

# Model-directory checks live in mindrl.paths; re-exported here for older imports.
from mindrl.paths import (CKPT_COMPLETE, CKPT_MODEL, CKPT_ROOT, TOKENIZER_FILES,  # noqa: F401
                          WEIGHT_FILES, ModelPathError, check_model_dir, locate_model_dir)

BUILTIN_PREFIX = "builtin:"
BUILTINS = {
    # name: builder keyword arguments
    "tiny": dict(hidden=64, layers=2, heads=2, kv_heads=1, vocab=1024),
    "mini": dict(hidden=128, layers=4, heads=4, kv_heads=2, vocab=1024),  # the CPU demo's model
    "small": dict(hidden=256, layers=4, heads=4, kv_heads=2, vocab=1024),
    # the other decoder families, at the tiny size (head_dim 32: vLLM's CPU attention)
    "tiny-qwen3": dict(hidden=64, layers=2, heads=2, kv_heads=1, vocab=1024, family="qwen3"),
    "tiny-llama": dict(hidden=64, layers=2, heads=2, kv_heads=1, vocab=1024, family="llama",
                       tie_word_embeddings=False),
    "tiny-qwen3-moe": dict(hidden=64, layers=2, heads=2, kv_heads=1, vocab=1024,
                           family="qwen3_moe", tie_word_embeddings=False),
    # Qwen2/2.5/3's real vocabulary size (151,936) on the tiny body: the LM head's memory at
    # real sizes, in seconds. The tokenizer's first 1,024 ids are the tiny BPE; the rest are
    # synthetic tokens that no text encodes to (see build_tiny_model's trained_vocab).
    "tiny-vocab152k": dict(hidden=64, layers=2, heads=2, kv_heads=1, vocab=151936,
                           trained_vocab=1024, max_positions=32768),
    # a one-layer judge with hand-set weights whose verdicts are known (mindrl.models.tiny_judge)
    "tiny-judge": dict(builder="tiny_judge"),
}

# family -> (transformers config / model class names, extra config fields). Llama gets Llama
# 3.1's RoPE scaling (theta 500000, llama3 factor 8) with an original context of 64 tokens, so
# the scaling changes the frequencies a tiny model uses; Qwen3 gets its q/k norms by class.
FAMILIES = {
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(use_sliding_window=False)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(use_sliding_window=False,
                                                      attention_bias=False)),
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(
        attention_bias=False, mlp_bias=False,
        rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0,
                             low_freq_factor=1.0, high_freq_factor=4.0,
                             original_max_position_embeddings=64))),
    # Qwen3-MoE: 4 experts, top-2 with renormalised weights, every layer sparse (Qwen3-30B-A3B's
    # layout at 1/32 of its experts)
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", dict(
        use_sliding_window=False, attention_bias=False, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=64, norm_topk_prob=True, decoder_sparse_step=1,
        mlp_only_layers=[], output_router_logits=False)),
}
# A freshly initialised router (std 0.02) is nearly tied between experts, so rounding alone
# would flip its top-k between two implementations; the tiny MoE's routers are scaled up so
# that routes are decided (as in a trained model) and implementations can be compared.
ROUTER_SCALE = 10.0



def builtin_names() -> List[str]:
    return sorted(BUILTINS)


# Qwen2's pre-tokenizer split (transformers/models/qwen2/tokenization_qwen2.py): keep identical.
QWEN2_SPLIT_REGEX = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
                     r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TAG_TOKENS = ["<think>", "</think>", "<answer>", "</answer>"]
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

_WORDS = (
    "what is the sum difference product quotient of and plus minus times divided by equals "
    "answer question solve compute calculate find number numbers total each how many much "
    "more less than left remain remaining has have had buys sells gives gets apples books "
    "pens coins dollars cents hours minutes days weeks students friends box boxes bag bags "
    "first second third then so therefore because step let us think final result is are "
    "a an the in on at to from with for per half double twice square root even odd digit "
    "digits add subtract multiply divide equation value x y n count target make using "
    "Alice Bob Carol Tom Mary John user assistant system you helpful reasoning process "
    "put your in tags please show work check verify correct wrong yes no zero one two three "
    "four five six seven eight nine ten eleven twelve hundred thousand million fraction "
    "percent ratio average mean sum area perimeter length width height speed distance time "
    "price cost profit money bought sold spent saved earned paid costs ticket tickets train "
    "car cars trip miles kilometers pounds grams liters cups cookies candies marbles eggs "
    "cakes pizza slices class school teacher week month year age older younger than every "
    "remainder multiple factor prime greater smaller largest smallest between both together "
    "again another some all none only after before during if then when where which who why "
    "not can will would should could must may might does did do was were be been being it "
    "its this that these those he she they we his her their our"
).split()


def _corpus(seed: int, lines: int = 4000) -> List[str]:
    """A generated corpus: arithmetic, word problems, tagged chain-of-thought, chat turns."""
    rng = random.Random(seed)
    out: List[str] = []
    ops = ["+", "-", "*", "/", "="]
    for i in range(lines):
        a, b = rng.randint(0, 9999), rng.randint(0, 999)
        op = rng.choice(ops[:4])
        c = {"+": a + b, "-": a - b, "*": a * b, "/": a // max(b, 1)}[op]
        kind = i % 6
        if kind == 0:
            out.append(f"{a} {op} {b} = {c}")
        elif kind == 1:
            out.append(f"{a}{op}{b}={c}\n")
        elif kind == 2:
            words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 14)))
            out.append(f"{words.capitalize()} {a}?")
        elif kind == 3:
            out.append(f"<think>{a} {op} {b} is {c}, so the answer is {c}.</think> "
                       f"<answer>{c}</answer>")
        elif kind == 4:
            out.append(f"<|im_start|>user\nWhat is {a} {op} {b}?<|im_end|>\n"
                       f"<|im_start|>assistant\n<think>{a}{op}{b}={c}</think>"
                       f"<answer>{c}</answer><|im_end|>")
        else:
            name = rng.choice(["Alice", "Bob", "Carol", "Tom", "Mary", "John"])
            out.append(f"{name} has {a} apples and gets {b} more. How many apples does "
                       f"{name} have? The total is {a + b}. (({a}+{b})*2)^2, 3.5%, $7, #1: x_1.")
    out.extend(_WORDS)
    out.extend(["0123456789", " ".join("0123456789"), "+-*/=()<>[]{}.,:;!?%$#^&|_'\"\\~`@"])
    return out


def _train_tokenizer(vocab: int, seed: int, trained_vocab: Optional[int] = None):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trained = min(vocab, trained_vocab or vocab)
    trainer = trainers.BpeTrainer(
        vocab_size=trained - len(TAG_TOKENS), min_frequency=1, show_progress=False,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_corpus(seed), trainer=trainer)
    if trained < vocab:
        tok = _pad_vocab(tok, vocab - len(TAG_TOKENS))
    # The tags are whole tokens (as in reasoning models' tokenizers) but not special: they
    # survive decode(skip_special_tokens=True), which reward functions read.
    from tokenizers import AddedToken

    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAG_TOKENS])
    return tok


def _pad_vocab(tok, size: int):
    """``tok`` (a trained BPE) with synthetic entries appended to its vocabulary up to ``size``
    ids: strings of byte-level characters with no merge that builds them, so no text encodes
    to them (the ids exist for the model's head and for sampling only)."""
    from tokenizers import Tokenizer, pre_tokenizers

    spec = json.loads(tok.to_str())
    table = spec["model"]["vocab"]
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    n = len(table)
    i = 0
    while n < size:
        a, b = divmod(i, len(alphabet))
        piece = "\u0100\u0100" + alphabet[a % len(alphabet)] + alphabet[b] + str(a)
        i += 1
        if piece not in table:
            table[piece] = n
            n += 1
    return Tokenizer.from_str(json.dumps(spec))


def build_tiny_model(directory: Union[str, os.PathLike], *, hidden: int = 64, layers: int = 2,
                     heads: int = 2, kv_heads: int = 1, vocab: int = 1024,
                     intermediate: Optional[int] = None, max_positions: int = 2048,
                     tie_word_embeddings: bool = True, seed: int = 0, family: str = "qwen2",
                     config_overrides: Optional[dict] = None,
                     trained_vocab: Optional[int] = None) -> str:
    """Write a tokenizer and a randomly initialised model of ``family`` (qwen2, qwen3, llama,
    qwen3_moe;
    see :data:`FAMILIES`) to ``directory``; returns it. ``config_overrides`` replace fields of
    the transformers config (e.g. ``rope_parameters``, ``attention_bias``).

    ``vocab`` is the tokenizer size including special and tag tokens (the model's vocab_size
    equals it exactly, so no sampled id is outside the tokenizer). ``trained_vocab``: train
    the BPE to this size only and fill the vocabulary up to ``vocab`` with synthetic tokens
    that no text encodes to (a real-sized head without training a real-sized BPE).
    """
    if hidden % heads or hidden // heads < 32:
        raise ValueError(f"hidden/heads = {hidden}/{heads} must be an integer >= 32 "
                         "(vLLM's CPU attention needs head_dim >= 32)")
    if heads % kv_heads:
        raise ValueError(f"heads={heads} must be a multiple of kv_heads={kv_heads}")
    if family not in FAMILIES:
        raise ValueError(f"family '{family}' is not one of {', '.join(sorted(FAMILIES))}")
    import torch
    import transformers
    from transformers import GenerationConfig, PreTrainedTokenizerFast

    config_name, model_name, family_fields = FAMILIES[family]

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    raw = _train_tokenizer(vocab, seed, trained_vocab)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        unk_token=None, bos_token=None, additional_special_tokens=["<|im_start|>"],
        model_max_length=max_positions, padding_side="left", clean_up_tokenization_spaces=False)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(directory)

    ids = {t: raw.token_to_id(t) for t in SPECIAL_TOKENS}
    fields = dict(
        vocab_size=raw.get_vocab_size(), hidden_size=hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads,
        intermediate_size=intermediate or 4 * hidden, max_position_embeddings=max_positions,
        rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=tie_word_embeddings,
        bos_token_id=None, eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
        head_dim=hidden // heads, torch_dtype="float32")
    fields.update(family_fields)
    fields.update(config_overrides or {})
    if "rope_parameters" in fields:
        fields.pop("rope_theta")
    config = getattr(transformers, config_name)(**fields)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = getattr(transformers, model_name)(config).to(torch.float32)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("mlp.gate.weight"):
                    p.mul_(ROUTER_SCALE)
    model.generation_config = GenerationConfig(
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]], pad_token_id=ids["<|endoftext|>"],
        bos_token_id=None, do_sample=True, temperature=1.0, top_p=1.0, top_k=0)
    model.save_pretrained(directory, safe_serialization=True)
    (directory / "mindrl_tiny.json").write_text(json.dumps(dict(
        hidden=hidden, layers=layers, heads=heads, kv_heads=kv_heads, vocab=vocab, seed=seed,
        tie_word_embeddings=tie_word_embeddings, family=family,
        **({"trained_vocab": trained_vocab} if trained_vocab else {})), indent=1))
    return str(directory)


def default_cache_dir() -> str:
    return os.environ.get("MINDRL_CACHE", os.path.join(os.path.expanduser("~"), ".cache",
                                                        "mindrl"))


def resolve_model_path(path: str, cache_dir: Optional[str] = None) -> str:
    """Map ``builtin:<name>`` (tiny, mini, small, tiny-qwen3, tiny-llama,
    tiny-qwen3-moe, tiny-vocab152k, tiny-judge) to a built directory
    under ``cache_dir`` (built on first use, atomically); a checkpoint step folder or a run
    folder to the Hugging Face directory inside it (:func:`locate_model_dir`); any other path
    is returned unchanged."""
    if not path.startswith(BUILTIN_PREFIX):
        return locate_model_dir(path)
    name = path[len(BUILTIN_PREFIX):]
    if name not in BUILTINS:
        raise ModelPathError(f"unknown built-in model '{path}'; valid: "
                             + ", ".join(BUILTIN_PREFIX + n for n in builtin_names()))
    target = Path(cache_dir or default_cache_dir()) / name
    if (target / "mindrl_tiny.json").is_file():
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{name}.tmp{os.getpid()}"
    if BUILTINS[name].get("builder") == "tiny_judge":
        from mindrl.models.tiny_judge import build_tiny_judge

        build_tiny_judge(tmp, tokenizer_dir=resolve_model_path("builtin:tiny", cache_dir))
    else:
        build_tiny_model(tmp, **BUILTINS[name])
    try:
        os.replace(tmp, target)          # atomic; a concurrent builder may have won
    except OSError:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return str(target)
