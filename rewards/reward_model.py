"""A scalar reward model: a Hugging Face ``AutoModelForSequenceClassification`` with one label,
trained on preference pairs with the Bradley-Terry loss (``mindrl rm``), scoring completions.

    text_i  = the problem and completion i as one chat (user: problem, assistant: completion)
              when the tokenizer has a chat template, else problem + "\\n" + completion
    score_i = r(text_i)               the head's output at the last token (``transform: none``)
            | sigmoid(r(text_i))      ``transform: sigmoid``: in (0, 1)

Bradley-Terry: P(chosen > rejected) = sigmoid(r_c - r_r); training minimises
-log sigmoid(r_c - r_r) over the pairs (:mod:`mindrl.trainer.reward_model`), so only score
differences carry meaning: under GRPO's group normalisation the scale does not matter either.

Completions are scored ``batch_size`` at a time, in the process that calls the reward (the
trainer's, between rollout and update; a reward worker's under the reward server and the
framework plugins, which loads its own copy on first use). A text over ``max_len`` tokens keeps
its end. A forward pass has no time limit of its own (its cost is bounded by ``max_len`` and
``batch_size``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List, Optional, Sequence

from rewards.judge import ModelScores
from rewards.registry import REWARDS

__all__ = ["RewardModel", "rm_text", "RM_INFO"]

RM_INFO = "mindrl_rm.json"          # written by `mindrl rm`: how texts were built, accuracy


def rm_text(tokenizer, problem: str, completion: str, chat: bool) -> str:
    """The text a reward model reads for (problem, completion), at training and at scoring."""
    if chat:
        msgs = [{"role": "user", "content": problem},
                {"role": "assistant", "content": completion}]
        return tokenizer.apply_chat_template(msgs, tokenize=False)
    return f"{problem}\n{completion}"


@REWARDS.register("reward_model")
class RewardModel:
    """A sequence-classification model's score as a reward (module docstring).

    Args:
      model: directory of a reward model (``mindrl rm`` writes one; any Hugging Face
        ``AutoModelForSequenceClassification`` with ``num_labels: 1`` works).
      transform: ``none`` (the raw score) or ``sigmoid``.
      batch_size: texts per forward pass.
      max_len: longest text in tokens (longer ones keep their end).
      device / dtype: where and how the model runs (torch device string; float32, bfloat16).
      chat: ``auto`` (as the model was trained: its ``mindrl_rm.json``, else the tokenizer's
        chat template when it has one), ``true`` or ``false``.
      problem_column: the column with the prompt.
    """

    batch_level = True
    runs_in_process = True

    def __init__(self, model: str, transform: str = "none", batch_size: int = 16,
                 max_len: int = 1024, device: str = "cpu", dtype: str = "float32",
                 chat: Any = "auto", problem_column: str = "problem"):
        if not model:
            raise ValueError("reward_model: params.model is required (a directory `mindrl rm` "
                             "wrote, or any sequence-classification model with one label)")
        if transform not in ("none", "sigmoid"):
            raise ValueError(f"reward_model: params.transform='{transform}' is not one of "
                             "none, sigmoid")
        if int(batch_size) < 1 or int(max_len) < 2:
            raise ValueError("reward_model: params.batch_size must be >= 1 and params.max_len "
                             ">= 2")
        if str(chat).lower() not in ("auto", "true", "false"):
            raise ValueError(f"reward_model: params.chat={chat!r} must be auto, true or false")
        self.model, self.transform = str(model), transform
        self.batch_size, self.max_len = int(batch_size), int(max_len)
        self.device, self.dtype, self.chat = device, dtype, str(chat).lower()
        self.problem_column = problem_column
        self.last_counts: dict = {}
        self._loaded = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_loaded"] = None
        return state

    def check(self) -> None:
        """Fail now, naming ``params.model``, when the directory holds no one-label
        sequence-classification model."""
        from mindrl.models.tiny import check_model_dir, resolve_model_path

        try:
            path = resolve_model_path(self.model)
            check_model_dir(path)
        except Exception as e:
            raise type(e)(f"reward_model: params.model={self.model}: {e}") from None
        cfg = json.loads((Path(path) / "config.json").read_text())
        archs = cfg.get("architectures") or []
        if not any(a.endswith("ForSequenceClassification") for a in archs) or \
                int(cfg.get("num_labels", len(cfg.get("id2label") or {}) or 2)) != 1:
            from mindrl.paths import ModelPathError

            raise ModelPathError(f"reward_model: params.model={self.model} is not a reward model "
                                 f"(architectures {archs}; a one-label "
                                 "...ForSequenceClassification is needed): train one with "
                                 "`mindrl rm PAIRS --model BASE --out DIR`")

    def load(self) -> None:
        """Load the model now (a reward worker calls this before its first item)."""
        self._load()

    def close(self) -> None:
        self._loaded = None

    def _load(self):
        if self._loaded is None:
            import torch
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            from mindrl.models.tiny import resolve_model_path

            self.check()
            path = resolve_model_path(self.model)
            tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
            tok.truncation_side = "left"
            dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16,
                     "float16": torch.float16}[self.dtype]
            model = AutoModelForSequenceClassification.from_pretrained(
                path, local_files_only=True, dtype=dtype).to(self.device).eval()
            info = Path(path) / RM_INFO
            if self.chat == "auto":
                chat = json.loads(info.read_text()).get("chat") if info.is_file() else None
                chat = bool(getattr(tok, "chat_template", None)) if chat is None else chat
            else:
                chat = self.chat == "true"
            self._loaded = (tok, model, bool(chat))
        return self._loaded

    def __call__(self, completions: Sequence[str], **columns) -> List[Optional[float]]:
        return self.score_batch(completions, **columns).scores

    def score_batch(self, completions: Sequence[str], **columns) -> ModelScores:
        tok, model, chat = self._load()
        probs = columns.get(self.problem_column) or [""] * len(completions)
        texts = [rm_text(tok, str(p), str(c), chat) for p, c in zip(probs, completions)]
        scores = [float(s) for s in score_texts(model, tok, texts, self.batch_size,
                                                self.max_len)]
        if self.transform == "sigmoid":
            import math

            scores = [1.0 / (1.0 + math.exp(-s)) for s in scores]
        self.last_counts = {"scored": len(scores)}
        return ModelScores(scores, [], dict(self.last_counts))


def score_texts(model, tokenizer, texts: Sequence[str], batch_size: int, max_len: int):
    """(N,) float32 NumPy scores of ``texts`` under a one-label sequence classifier (its
    output at each text's last token), ``batch_size`` at a time."""
    import numpy as np
    import torch

    dev = next(model.parameters()).device
    out = []
    with torch.no_grad():
        for s in range(0, len(texts), batch_size):
            enc = tokenizer(list(texts[s:s + batch_size]), return_tensors="pt", padding=True,
                            truncation=True, max_length=max_len, add_special_tokens=False)
            logits = model(input_ids=enc["input_ids"].to(dev),
                           attention_mask=enc["attention_mask"].to(dev)).logits
            out.append(logits[:, 0].float().cpu().numpy())
    return np.concatenate(out) if out else np.zeros(0, np.float32)
