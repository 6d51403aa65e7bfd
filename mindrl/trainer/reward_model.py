"""``mindrl rm``: train a scalar reward model on preference pairs (Bradley-Terry).

    loss = mean over pairs of  -log sigmoid(r(prompt, chosen) - r(prompt, rejected))

r is a one-label ``AutoModelForSequenceClassification`` started from a causal LM (its decoder;
a fresh score head, transformers' initialisation under ``--seed``) or from an earlier reward
model. Pairs come in
any preference format :func:`mindrl.trainer.preference.load_pairs` reads (what
``mindrl data pairs`` writes, TRL's prompt/chosen/rejected). A seeded shuffle holds out
``held_out`` of them; the report gives the pairwise accuracy (r_c > r_r) on the held-out pairs
before and after training, and on the training pairs. The model, its tokenizer,
``mindrl_rm.json`` (text format, accuracies) and the report are written to ``out``; the reward
``reward_model`` reads that directory.

Backends: torch (transformers' classifier) and MindSpore (the decoder of
:mod:`mindrl.backends.mindspore.model` with the critic's scalar head, compiled); both start a
causal LM's head from the same seeded normal(0, 0.02) weights, take one AdamW step per batch
of pairs (chosen and rejected in one forward pass) and write the same Hugging Face files.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from pathlib import Path
from typing import Dict, List

log = logging.getLogger("mindrl.rm")

__all__ = ["train_reward_model", "pairwise_accuracy"]


def pairwise_accuracy(rm, rows: List[Dict]) -> float:
    """Share of pairs whose chosen response scores above the rejected one under ``rm`` (a
    backend's reward model: ``rm.scores(problems, responses)``); ties count as wrong."""
    if not rows:
        return float("nan")
    probs = [r["problem"] for r in rows]
    c = rm.scores(probs, [r["chosen"] for r in rows])
    r = rm.scores(probs, [r["rejected"] for r in rows])
    return float((c > r).mean())


def _split(rows: List[Dict], held_out: float, seed: int):
    idx = list(range(len(rows)))
    random.Random(seed).shuffle(idx)
    n_test = int(round(held_out * len(rows)))
    if held_out > 0 and len(rows) > 1:
        n_test = min(max(1, n_test), len(rows) - 1)
    test = [rows[i] for i in idx[:n_test]]
    train = [rows[i] for i in idx[n_test:]]
    return train, test


class TorchRewardModel:
    """The reward model on the torch backend: transformers' sequence classifier, AdamW."""

    def __init__(self, base: str, tok, chat: bool, max_len: int, lr: float,
                 weight_decay: float, seed: int, threads: int, device: str):
        import torch
        from transformers import AutoModelForSequenceClassification

        from mindrl.backends.critic_files import HEAD_WEIGHT, fresh_head

        torch.set_num_threads(max(1, threads))
        torch.manual_seed(seed)
        self.tok, self.chat, self.max_len, self.device = tok, chat, max_len, device
        self.model = AutoModelForSequenceClassification.from_pretrained(
            base, local_files_only=True, num_labels=1, dtype=torch.float32,
            pad_token_id=tok.pad_token_id).to(device)
        if not _is_reward_model(base):      # a causal LM: the head both backends start from
            head = fresh_head(self.model.config.hidden_size, HEAD_STD, seed)[HEAD_WEIGHT]
            with torch.no_grad():
                self.model.score.weight.copy_(torch.from_numpy(head))
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=weight_decay)

    def _texts(self, problems, responses):
        from rewards.reward_model import rm_text

        return [rm_text(self.tok, p, r, self.chat) for p, r in zip(problems, responses)]

    def scores(self, problems, responses):
        from rewards.reward_model import score_texts

        self.model.eval()
        return score_texts(self.model, self.tok, self._texts(problems, responses), 32,
                           self.max_len)

    def step(self, problems, chosen, rejected) -> float:
        import torch

        self.model.train()
        enc = self.tok(self._texts(problems, chosen) + self._texts(problems, rejected),
                       return_tensors="pt", padding=True, truncation=True,
                       max_length=self.max_len, add_special_tokens=False)
        r = self.model(input_ids=enc["input_ids"].to(self.device),
                       attention_mask=enc["attention_mask"].to(self.device)).logits[:, 0].float()
        n = len(chosen)
        loss = -torch.nn.functional.logsigmoid(r[:n] - r[n:]).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return float(loss.detach())

    def save(self, out: Path) -> None:
        self.model.config.architectures = [type(self.model).__name__]
        self.model.save_pretrained(out, safe_serialization=True)


HEAD_STD = 0.02     # std of a fresh score head (normal, seeded; bias-free as transformers')


def _is_reward_model(directory: str) -> bool:
    cfg = json.loads((Path(directory) / "config.json").read_text())
    return any(a.endswith("ForSequenceClassification") for a in cfg.get("architectures") or [])


def train_reward_model(pairs: str, model: str, out: str, *, epochs: int = 2, lr: float = 1e-4,
                       batch_size: int = 16, held_out: float = 0.1, seed: int = 0,
                       max_len: int = 512, weight_decay: float = 0.0, chat: str = "auto",
                       max_pairs: int = 0, threads: int = 1, device: str = "cpu",
                       backend: str = "torch") -> Dict:
    """Train on the pairs in ``pairs``, starting from ``model``; write to ``out``; returns the
    report (also ``out/rm_report.json``)."""
    from mindrl.errors import ConfigError

    if backend not in ("torch", "mindspore"):
        raise ConfigError(f"mindrl rm --backend {backend}: one of torch, mindspore")
    for name, v, ok in (("--epochs", epochs, epochs >= 1), ("--lr", lr, lr > 0),
                        ("--batch-size", batch_size, batch_size >= 1),
                        ("--held-out", held_out, 0 <= held_out < 1),
                        ("--max-len", max_len, max_len >= 2)):
        if not ok:
            raise ConfigError(f"mindrl rm {name} {v} is out of range")
    from transformers import AutoTokenizer

    from mindrl.models.tiny import check_model_dir, resolve_model_path
    from mindrl.trainer.preference import load_pairs
    from rewards.reward_model import RM_INFO

    t0 = time.perf_counter()
    rows = load_pairs(pairs, max_pairs)
    train, test = _split(rows, held_out, seed)
    base = resolve_model_path(model)
    check_model_dir(base)
    tok = AutoTokenizer.from_pretrained(base, local_files_only=True)
    tok.truncation_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    use_chat = bool(getattr(tok, "chat_template", None)) if chat == "auto" else chat == "true"
    if backend == "mindspore":
        if _is_reward_model(base):
            raise ConfigError("mindrl rm --backend mindspore starts from a causal LM; continue "
                              "a reward model with --backend torch")
        from mindrl.backends.mindspore.reward_model import MindSporeRewardModel

        rm = MindSporeRewardModel(base, tok, use_chat, max_len, lr, weight_decay, seed,
                                  threads, device, batch_size, head_std=HEAD_STD)
    else:
        rm = TorchRewardModel(base, tok, use_chat, max_len, lr, weight_decay, seed, threads,
                              device)
    acc_before = pairwise_accuracy(rm, test)
    rng = random.Random(seed + 1)
    losses: List[float] = []
    for epoch in range(epochs):
        order = list(range(len(train)))
        rng.shuffle(order)
        for s in range(0, len(order), batch_size):
            batch = [train[i] for i in order[s:s + batch_size]]
            losses.append(rm.step([r["problem"] for r in batch], [r["chosen"] for r in batch],
                                  [r["rejected"] for r in batch]))
        per_epoch = max(1, math.ceil(len(train) / batch_size))
        log.info("rm epoch %d/%d: loss %.4f", epoch + 1, epochs,
                 sum(losses[-per_epoch:]) / per_epoch)
    report = {
        "pairs": len(rows), "train_pairs": len(train), "held_out_pairs": len(test),
        "held_out_accuracy_before": acc_before,
        "held_out_accuracy": pairwise_accuracy(rm, test),
        "train_accuracy": pairwise_accuracy(rm, train),
        "final_loss": losses[-1] if losses else float("nan"), "steps": len(losses),
        "epochs": epochs, "lr": lr, "batch_size": batch_size, "seed": seed,
        "base": model, "chat": use_chat, "backend": backend,
        "seconds": round(time.perf_counter() - t0, 2)}
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    rm.save(out_dir)
    tok.save_pretrained(out_dir)
    (out_dir / RM_INFO).write_text(json.dumps({"chat": use_chat, "max_len": max_len,
                                               "base": model}, indent=1))
    (out_dir / "rm_report.json").write_text(json.dumps(report, indent=1))
    return report


def rm_command(args) -> int:
    """The ``mindrl rm`` subcommand."""
    report = train_reward_model(
        args.pairs, args.model, args.out, epochs=args.epochs, lr=args.lr,
        batch_size=args.batch_size, held_out=args.held_out, seed=args.seed,
        max_len=args.max_len, chat=args.chat, max_pairs=args.max_pairs, threads=args.threads,
        device=args.device, backend=args.backend)
    print(f"reward model: {report['train_pairs']} training pairs, {report['steps']} steps, "
          f"{report['seconds']} s -> {args.out}")
    print(f"pairwise accuracy: held-out {report['held_out_accuracy']:.3f} "
          f"({report['held_out_pairs']} pairs; {report['held_out_accuracy_before']:.3f} "
          f"before training), train {report['train_accuracy']:.3f}")
    return 0


def add_rm_parser(sub) -> None:
    """``mindrl rm PAIRS --model BASE --out DIR``."""
    from mindrl.command import DefaultsHelpFormatter

    p = sub.add_parser("rm", formatter_class=DefaultsHelpFormatter,
                       help="train a scalar reward model (Bradley-Terry) on preference pairs "
                            "and report its held-out pairwise accuracy")
    p.add_argument("pairs", help="preference pairs (what `mindrl data pairs` writes, or "
                                 "prompt/chosen/rejected rows)")
    p.add_argument("--model", default="builtin:tiny",
                   help="base: a causal LM (a fresh score head is added) or a reward model")
    p.add_argument("--out", required=True, help="directory to write the reward model to")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--batch-size", type=int, default=16, help="pairs per optimizer step")
    p.add_argument("--held-out", type=float, default=0.1,
                   help="share of the pairs held out to measure pairwise accuracy")
    p.add_argument("--max-len", type=int, default=512,
                   help="longest text in tokens (longer ones keep their end)")
    p.add_argument("--max-pairs", type=int, default=0, help="read at most this many (0 = all)")
    p.add_argument("--chat", default="auto", choices=["auto", "true", "false"],
                   help="render prompt and response with the tokenizer's chat template")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1, npu)")
    p.add_argument("--backend", default="torch", choices=["torch", "mindspore"],
                   help="training backend (the model is written in Hugging Face format either "
                        "way; mindspore starts from a causal LM)")
    p.set_defaults(func=rm_command)
