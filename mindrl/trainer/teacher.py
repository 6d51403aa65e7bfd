"""The teacher of on-policy distillation (``algorithm.distill.teacher``), checked before any
model loads: the path must name a model directory (a Hugging Face directory, a run or
checkpoint step folder, ``builtin:NAME``), and the teacher must read the student's token ids as
the same tokens (the teacher scores the student's sampled ids). The math is in
:mod:`algorithms.distill`."""

from __future__ import annotations

import json
from pathlib import Path

from mindrl.errors import ConfigError

KEY = "algorithm.distill.teacher"


def _vocab_size(directory: str) -> int:
    cfg = json.loads((Path(directory) / "config.json").read_text())
    cfg = cfg.get("text_config", cfg)
    return int(cfg.get("vocab_size", 0))


def _token_map(directory: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(directory, local_files_only=True).get_vocab()


def check_teacher(teacher: str, student_dir: str) -> str:
    """The teacher's Hugging Face directory (``teacher`` resolved as ``model.path`` is); raises
    :class:`ConfigError` naming ``algorithm.distill.teacher`` when it is no model directory,
    when its tokenizer maps a token to another id than the student's, or when its embedding
    is smaller than the student's (the student could sample ids the teacher has no row for)."""
    from mindrl.models.tiny import check_model_dir, resolve_model_path
    from mindrl.paths import ModelPathError

    try:
        path = resolve_model_path(teacher)
        check_model_dir(path, key=KEY)
    except ModelPathError as e:
        raise ConfigError(str(e)) from None
    s_map, t_map = _token_map(student_dir), _token_map(path)
    if s_map != t_map:
        diff = sorted((set(s_map.items()) ^ set(t_map.items())), key=lambda kv: kv[1])
        example = ", ".join(f"{tok!r}={i}" for tok, i in diff[:3])
        raise ConfigError(f"{KEY}={teacher!r}: its tokenizer differs from the student's "
                          f"(model.path; {len(s_map)} vs {len(t_map)} tokens; differing "
                          f"entries such as {example}): the teacher must score the student's "
                          "token ids as the same tokens")
    s_vocab, t_vocab = _vocab_size(student_dir), _vocab_size(path)
    if t_vocab < s_vocab:
        raise ConfigError(f"{KEY}={teacher!r}: the teacher's vocab_size {t_vocab} is smaller "
                          f"than the student's {s_vocab} (config.json)")
    return path
