"""Typed containers passed between the rollout engines, the rewards, the algorithms and the
backends. Everything here is NumPy or plain Python: no framework import.

Shapes: B = rollouts (prompts x n), P = padded prompt length, T = padded response length.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np


@dataclass(frozen=True)
class SamplingParams:
    """How a rollout engine samples. Temperature 0 means greedy."""

    n: int = 1                      # samples per prompt
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1                 # -1 = off
    min_p: float = 0.0
    max_new_tokens: int = 128
    seed: Optional[int] = None
    stop_token_ids: tuple = ()      # besides the tokenizer's EOS

    @classmethod
    def from_config(cls, rollout_cfg, stop_token_ids=(), **overrides) -> "SamplingParams":
        kw = dict(n=rollout_cfg.n, temperature=rollout_cfg.temperature, top_p=rollout_cfg.top_p,
                  top_k=rollout_cfg.top_k, min_p=rollout_cfg.min_p,
                  max_new_tokens=rollout_cfg.max_new_tokens, seed=rollout_cfg.seed,
                  stop_token_ids=tuple(stop_token_ids))
        kw.update(overrides)
        return cls(**kw)


@dataclass
class Rollouts:
    """What an engine returns for ``len(prompt_ids)`` prompts x ``n`` samples, prompt-major:
    sample j of prompt i is row ``i * n + j``."""

    prompt_ids: List[List[int]]          # (B,) prompt token ids of each row
    response_ids: List[List[int]]        # (B,) sampled token ids, EOS included when it stopped
    logprobs: List[np.ndarray]           # (B,) float32 (len(response),): engine log p of each token
    finish_reasons: List[str]            # (B,) "stop" (EOS / stop token) or "length"
    group_index: np.ndarray              # (B,) int: which prompt each row came from
    texts: List[str] = field(default_factory=list)  # (B,) decoded responses (special tokens off)
    # (B,) float32 (len(response),): 1 = sampled token, 0 = tool output (multi-turn rollouts
    # with tools, mindrl.tools.multi_turn); empty = every response token is trained on
    loss_masks: List[np.ndarray] = field(default_factory=list)
    # (B,) int16 (len(prompt) + len(response) - 1, num_hidden_layers, k): a mixture-of-experts
    # model's expert choices for the tokens the sampler fed (routing replay); empty = none
    routed_experts: List[np.ndarray] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.response_ids)

    @property
    def response_lengths(self) -> np.ndarray:
        return np.array([len(r) for r in self.response_ids], dtype=np.int64)

    def select(self, rows) -> "Rollouts":
        rows = list(rows)
        return Rollouts(
            prompt_ids=[self.prompt_ids[i] for i in rows],
            response_ids=[self.response_ids[i] for i in rows],
            logprobs=[self.logprobs[i] for i in rows],
            finish_reasons=[self.finish_reasons[i] for i in rows],
            group_index=self.group_index[rows],
            texts=[self.texts[i] for i in rows] if self.texts else [],
            loss_masks=[self.loss_masks[i] for i in rows] if self.loss_masks else [],
            routed_experts=[self.routed_experts[i] for i in rows] if self.routed_experts else [],
        )

    @staticmethod
    def concat(parts: List["Rollouts"]) -> "Rollouts":
        offset, groups = 0, []
        for p in parts:
            groups.append(p.group_index + offset)
            offset += int(p.group_index.max()) + 1 if len(p) else 0
        return Rollouts(
            prompt_ids=[x for p in parts for x in p.prompt_ids],
            response_ids=[x for p in parts for x in p.response_ids],
            logprobs=[x for p in parts for x in p.logprobs],
            finish_reasons=[x for p in parts for x in p.finish_reasons],
            group_index=np.concatenate(groups) if groups else np.zeros(0, np.int64),
            texts=[x for p in parts for x in p.texts],
            loss_masks=[x for p in parts for x in p.loss_masks]
            if all(p.loss_masks or not len(p) for p in parts) else [],
            routed_experts=[x for p in parts for x in p.routed_experts]
            if all(p.routed_experts or not len(p) for p in parts) else [],
        )


@dataclass
class TokenBatch:
    """Padded prompt+response tokens, the layout both backends score and train on.

    Prompts are LEFT-padded to P and responses RIGHT-padded to T, so the logits that predict
    response token t sit at position P - 1 + t for every row.
    """

    input_ids: np.ndarray                # (B, P+T) int64
    attention_mask: np.ndarray           # (B, P+T) int64, 1 = real token
    response_mask: np.ndarray            # (B, T) float32, 1 = response token that is trained on
    prompt_len: int                      # P
    # (B, P+T, num_hidden_layers, k) int16: expert indices a mixture-of-experts forward replays
    # (-1 = route natively); None = no replay (mindrl.backends.torch.moe_replay)
    routing: Optional[np.ndarray] = None

    @property
    def response_len(self) -> int:       # T
        return self.input_ids.shape[1] - self.prompt_len

    @property
    def position_ids(self) -> np.ndarray:  # (B, P+T) int64: 0 at each row's first real token
        return np.clip(np.cumsum(self.attention_mask, axis=1) - 1, 0, None).astype(np.int64)

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def rows(self, idx) -> "TokenBatch":
        return TokenBatch(self.input_ids[idx], self.attention_mask[idx], self.response_mask[idx],
                          self.prompt_len,
                          None if self.routing is None else self.routing[idx])


@dataclass
class TrainBatch:
    """A :class:`TokenBatch` plus everything the RL loss needs, per token."""

    tokens: TokenBatch
    advantages: np.ndarray               # (B, T) float32
    old_logp: Optional[np.ndarray]       # (B, T) float32 log pi_old(a|s), trainer-computed;
    #                                      None = strictly on-policy (detached current logp)
    ref_logp: Optional[np.ndarray] = None      # (B, T) log pi_ref(a|s) (KL on)
    rollout_logp: Optional[np.ndarray] = None  # (B, T) engine log-probs (TIS correction)
    teacher_logp: Optional[np.ndarray] = None  # (B, T) log pi_teacher(a|s) (distillation loss)
    cov_picked: Optional[np.ndarray] = None    # (B, T) 1 = token a covariance loss (clip_cov,
    #                                            kl_cov) picked over the whole mini-batch

    def __len__(self) -> int:
        return len(self.tokens)

    def rows(self, idx) -> "TrainBatch":
        pick = (lambda a: None if a is None else a[idx])
        return TrainBatch(self.tokens.rows(idx), self.advantages[idx], pick(self.old_logp),
                          pick(self.ref_logp), pick(self.rollout_logp),
                          teacher_logp=pick(self.teacher_logp),
                          cov_picked=pick(self.cov_picked))


@dataclass
class LossNormalizers:
    """Global counts the aggregation divides by, so that micro-batches and ranks sum to the
    full-batch loss (see algorithms.aggregation)."""

    global_tokens: float                 # response tokens in the whole mini-batch, all ranks
    global_seqs: float                   # rollouts in the whole mini-batch, all ranks
    max_len: float                       # Dr. GRPO constant (rollout.max_new_tokens)
    entropy_coef: Optional[float] = None  # this step's entropy-bonus coefficient when adaptive
    #                                       entropy control sets it (None: algorithm.entropy_coef)

    def divisor(self, mode: str) -> float:
        """The number ``algorithms.aggregation`` divides the summed loss by in ``mode`` (for
        compiled steps that run the loss with unit normalisers and scale by its reciprocal)."""
        seqs, length = max(self.global_seqs, 1.0), max(self.max_len, 1.0)
        table = {"token_mean": max(self.global_tokens, 1.0), "seq_mean_token_sum": seqs,
                 "seq_mean_token_mean": seqs, "seq_mean_token_sum_norm": seqs * length}
        if mode not in table:
            raise ValueError(f"no normaliser known for loss_agg_mode '{mode}'; known: "
                             + ", ".join(sorted(table)))
        return table[mode]


def pad_token_batch(prompt_ids: List[List[int]], response_ids: List[List[int]], pad_id: int,
                    prompt_len: Optional[int] = None,
                    response_len: Optional[int] = None) -> TokenBatch:
    """Build a :class:`TokenBatch`; lengths default to the longest row (callers may pass bucket
    sizes so that compiled backends see few distinct shapes)."""
    P = max(len(p) for p in prompt_ids) if prompt_len is None else prompt_len
    T = max(max((len(r) for r in response_ids), default=1), 1) if response_len is None \
        else response_len
    B = len(prompt_ids)
    ids = np.full((B, P + T), pad_id, dtype=np.int64)
    att = np.zeros((B, P + T), dtype=np.int64)
    rmask = np.zeros((B, T), dtype=np.float32)
    for i, (p, r) in enumerate(zip(prompt_ids, response_ids)):
        if len(p) > P or len(r) > T:
            raise ValueError(f"row {i}: prompt {len(p)} / response {len(r)} tokens exceed the "
                             f"padded lengths {P} / {T}")
        ids[i, P - len(p):P] = p
        att[i, P - len(p):P] = 1
        ids[i, P:P + len(r)] = r
        att[i, P:P + len(r)] = 1
        rmask[i, :len(r)] = 1.0
    return TokenBatch(ids, att, rmask, P)


def bucket(length: int, buckets: List[int]) -> int:
    """The smallest bucket >= length (the largest bucket if none is)."""
    for b in sorted(buckets):
        if length <= b:
            return b
    raise ValueError(f"length {length} exceeds the largest bucket {max(buckets)}")


Metrics = Dict[str, float]


@dataclass
class ValueBatch:
    """A :class:`TokenBatch` plus what the critic's loss needs (PPO with GAE), per token."""

    tokens: TokenBatch
    old_values: np.ndarray               # (B, T) float32 V_old(s_t): the critic at rollout time
    returns: np.ndarray                  # (B, T) float32 R_t = A_t + V_old(s_t): the targets

    def __len__(self) -> int:
        return len(self.tokens)

    def rows(self, idx) -> "ValueBatch":
        return ValueBatch(self.tokens.rows(idx), self.old_values[idx], self.returns[idx])
