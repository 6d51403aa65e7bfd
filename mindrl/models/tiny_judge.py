"""``builtin:tiny-judge``: a one-layer Qwen2 causal LM with hand-set weights whose verdicts are
known exactly, for testing judge rewards and running judge recipes on CPU.

Its prompt is :data:`TEMPLATE` (``Reference: {reference} # Answer: {completion} Verdict:``).
The last position attends uniformly to the "marked" tokens of the prompt: digits, ``?``, ``!``
and the ``#`` of the template. With p the share of each marked token among them, its greedy
output is, checked in this order::

    "!" share > 0.2   ->  "!" again and again, never an end token (a judge that never ends)
    "?" share > 0.2   ->  " check" <|im_end|>      (no verdict: unparseable)
    a digit's share > 0.58 -> " correct" <|im_end|>
    otherwise         ->  " wrong" <|im_end|>

So for a one-digit reference and a completion without ``?`` / ``!``, the verdict is " correct"
exactly when the reference digit is more than 58% of the digits of the reference, the ``#``
and the completion: a completion whose digits are all the reference digit (at least one of
them) is correct, one with another digit as often or no digit at all is wrong. The rules hold
away from the thresholds (the MLP turns them into steep SiLU steps); tests keep their inputs
there.

How (hidden 64, 2 heads of 32, one key/value head, untied head, RoPE theta 1e9 so the
attention is positional-free): every embedding is a constant 10 on dim 63 plus 1 on one
feature dim (a digit d on dim d, ``?`` 10, ``!`` 11, ``#`` 12, the verdict words 13, any
other token 14), so every token has the same norm. Head 0's query is a bias, its key is large
on marked tokens only, its value copies the marked features; ``o_proj`` writes the shares p to
dims 20-32. The MLP's units fire when a share passes its threshold (gate = G (p - t), up =
constant) and write to dims 40-42; the head reads those, the constant (" wrong") and dim 13
(an end token right after a verdict word).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Union

TEMPLATE = "Reference: {reference} # Answer: {completion} Verdict:"
VERDICTS = {"wrong": 0.0, "correct": 1.0}

_C, _DIGIT, _Q, _BANG, _HASH, _SAID, _OTHER = 63, 0, 10, 11, 12, 13, 14
_P = 20          # dims 20..32: the shares of marked features 0..12
_EQ, _QF, _BF = 40, 41, 42


def build_tiny_judge(directory: Union[str, os.PathLike],
                     tokenizer_dir: Union[str, os.PathLike]) -> str:
    """Write the judge (the tokenizer in ``tokenizer_dir``, ``builtin:tiny``'s, and hand-set
    weights) to ``directory``."""
    import torch
    import transformers
    from transformers import AutoTokenizer, GenerationConfig

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    tok.save_pretrained(directory)
    V, H = len(tok), 64
    eos, pad = tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")
    words = {}
    for w in ("correct", "wrong", "check"):
        ids = tok(" " + w, add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            raise RuntimeError(f"tiny-judge: ' {w}' is not one token of the tiny tokenizer")
        words[w] = ids[0]
    bang = tok("!", add_special_tokens=False)["input_ids"]
    cfg = transformers.Qwen2Config(
        vocab_size=V, hidden_size=H, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, head_dim=32, intermediate_size=64, max_position_embeddings=2048,
        rope_theta=1e9, rms_norm_eps=1e-6, tie_word_embeddings=False, bos_token_id=None,
        eos_token_id=eos, pad_token_id=pad, use_sliding_window=False, torch_dtype="float32")
    model = transformers.Qwen2ForCausalLM(cfg).to(torch.float32)
    sd = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    emb = sd["model.embed_tokens.weight"]
    emb[:, _C] = 10.0
    for i in range(V):
        text = tok.decode([i]).strip()
        if len(text) == 1 and text.isdigit():
            emb[i, _DIGIT + int(text)] = 1.0
        elif text in ("?", "!", "#"):
            emb[i, {"?": _Q, "!": _BANG, "#": _HASH}[text]] = 1.0
        elif i in words.values():
            emb[i, _SAID] = 1.0
        else:
            emb[i, _OTHER] = 1.0
    rms = (101.0 / H) ** 0.5                         # every embedding's RMS
    for ln in ("model.layers.0.input_layernorm.weight",
               "model.layers.0.post_attention_layernorm.weight", "model.norm.weight"):
        sd[ln].fill_(1.0)
    a = "model.layers.0.self_attn."
    marked = list(range(13))                          # digits, ?, !, #
    sd[a + "q_proj.bias"][15] = 1.0                   # head 0, a slowly rotating RoPE dim
    sd[a + "k_proj.weight"][15, marked] = 40.0 * 32 ** 0.5 * rms    # score 40 on marked tokens
    for j in marked:
        sd[a + "v_proj.weight"][j, j] = rms           # value: the marked feature, one-hot
        sd[a + "o_proj.weight"][_P + j, j] = 1.0      # head 0 -> shares on dims 20..32
    m = "model.layers.0.mlp."
    G, c_n = 200.0, 10.0 / rms                        # slope; the constant after the norm
    units = [(_P + d, 0.58, _EQ) for d in range(10)] + [(_P + _Q, 0.2, _QF),
                                                        (_P + _BANG, 0.2, _BF)]
    for u, (src, thr, dst) in enumerate(units):
        sd[m + "gate_proj.weight"][u, src] = G
        sd[m + "gate_proj.weight"][u, _C] = -G * thr / 10.0      # G (share - thr) / rms
        sd[m + "up_proj.weight"][u, _C] = 1.0 / c_n               # ~1
        sd[m + "down_proj.weight"][dst, u] = 1.0
    head = sd["lm_head.weight"]
    head[words["wrong"], _C] = 1.0
    head[words["correct"], _EQ] = 3.0
    head[words["check"], _QF] = 6.0
    for b in bang:
        head[b, _BF] = 12.0
    head[eos, _SAID] = 2000.0
    model.load_state_dict(sd)
    model.generation_config = GenerationConfig(eos_token_id=[eos], pad_token_id=pad,
                                               bos_token_id=None, do_sample=False)
    model.save_pretrained(directory, safe_serialization=True)
    (directory / "mindrl_tiny.json").write_text(json.dumps({"builder": "tiny_judge",
                                                            "template": TEMPLATE}, indent=1))
    return str(directory)
