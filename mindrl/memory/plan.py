"""The per-device memory plan of a run: how many bytes each part of training needs on one device,
from the model's ``config.json`` and the run's settings alone (nothing is loaded).

Notation: N parameters (:mod:`mindrl.memory.shapes`), b the bytes of ``model.dtype`` (4, or 2
for bf16 / fp16), W the devices a state is sharded over, t the tokens of one micro-batch (rows x
(prompt + response): RL rows at full length; SFT and preference rows as long as the data's
longest, :mod:`mindrl.memory.data_lengths`), r its response tokens + 1 per row (the LM head
sees only those), h hidden, q = heads x head_dim, k = kv_heads x head_dim, i intermediate,
V vocabulary.

Held for the whole run (per device):

- weights: N b / W (W = FSDP ranks, or tensor x pipeline parallel for mindformers); FSDP adds
  the all-gathered working set (the embedding, the head and two decoder layers in b).
- master weights: 4 N / W when b < 4 (float32 masters under bf16 compute); mindformers keeps
  float32 weights, so its weights are 4 N / W and it has no separate masters.
- optimizer state: AdamW's two moments, 8 N / W / S (float32 when there are masters, else
  2 b N), S = the optimizer-state sharding degree (mindformers.optimizer_shard: data parallel).
- MindSpore's flat float32 gradient accumulator, 4 N / W (a parameter, held between steps);
  4 N / S with ``train.shard_optimizer`` (each rank sums only its slice).
- reference (algorithm.kl.coef > 0, DPO) and teacher (algorithm.distill.teacher): N b / W each;
  critic (PPO): its own weights, masters and moments.
- rollout engine: vLLM on an accelerator reserves ``rollout.gpu_memory_utilization`` of the
  device for its weights and KV cache; vLLM on CPU holds N b plus its KV cache space (1 GiB, or
  VLLM_CPU_KVCACHE_SPACE).
- MindSpore's chunked RL head (``train.logprob_chunk_tokens``) where it runs each chunk's head
  again in the backward: the head weight's gradient summed over the chunks, V h b (a
  parameter, held between steps). Where it keeps the logits its weight gradient is one product
  handed to the decoder backward, V h b during it, no held buffer. On CPU with float32 weights
  the head runs in host memory (``backends/mindspore/host_head.py``): neither, and no
  embedding gradient temporaries; its gradients go into the accumulator in place.
- runtime: what the framework holds beyond tensors (:data:`RUNTIME_GB`; MindSpore on CPU: its
  compiled graphs and the memory pool they leave held, measured).
- a judge / reward model scoring in the trainer's process on its device (:func:`model_rewards`):
  its weights in its own dtype; a vLLM judge on an accelerator: its ``gpu_memory_utilization``
  share. On the host beside an accelerator run: a host part; in a Ray actor of its own or on
  another device: a note, not counted.

Working sets; the peak is the held parts plus the largest of them:

- fwd: activations + the LM head's forward, 5 float32 copies of V per head token for RL
  (logits, log-softmax and the entropy metric's three temporaries), 2 for SFT / preference.
- bwd (its start): activations + the log-softmax backward, 3 float32 copies of V per head
  token, + the head's weight gradient V h b (3 V h b when torch runs the head in chunks:
  autograd holds the chunks' sum so far, a chunk's gradient and their new sum; 1 on the fused
  log-prob path, whose one GEMM over all the kept rows writes it once; on CPU it writes into a
  held (V, h) buffer instead, and its float32 work runs in 2 MiB blocks of rows: the kept
  logits and one block in bwd, two blocks in fwd).
- bwd-end: the gradients (b N, plus 4 N float32 for masters; MindSpore: b N compute gradients
  and their 4 N flat copy; sharded: b N and two float32 buckets, reduced per micro-batch, so
  not held across micro-batches) + the embedding's dense gradient temporaries (2 V h b when tied to
  the head, else V h b; torch under gradient accumulation: V h b more, the new gradient beside
  the accumulated one; none for a tied embedding where torch's fused head writes the gradient:
  its sparse rows are added into it in place). MindSpore on CPU: + what its compiled decoder backward holds until it
  returns (:func:`ms_cpu_graph_bytes`: every kernel output, 9 x a layer's saved activations
  per token and layer, and 16 float32 copies of each layer's attention scores).
- step: the gradients + AdamW's temporaries (foreach on an accelerator: one moment-sized copy;
  single-tensor on CPU: two copies of the largest tensor).
- step, MindSpore sharded: the bucket-wise gather of the new weights, in b: one bucket, the
  pieces of parameters waiting for a later bucket and the parameter being written
  (:func:`mindrl.backends.shard_layout.gather_peak_values` on the model's tensor sizes).
- rollout (native engine): the KV cache of the rollout batch, rows x (prompt + response) x
  2 L k b, plus the sampling step's float32 logits.
- reward (a judge or reward model in process): a judge's KV cache, batch_size x
  (max_prompt_len + max_new_tokens) x 2 L k b, plus 2 float32 copies of a batch's logits; a
  reward model's forward, batch_size x max_len x (2 h + 3 i) b (one layer at a time).
With gradient accumulation (more than one micro-batch per optimizer step; SFT and preference:
a rank's rows of ``train.prompts_per_step`` above ``train.micro_batch_size``) the gradients
exist in fwd and bwd too; torch with float32 masters adds each backward's gradients into float32
ones and frees them, so only the 4 N float32 gradients are held then and in the step (on CPU
those 4 N are kept for the whole run: a fresh tensor's first write is page faults).

Activations per token and decoder layer, for transformers' Qwen2/Llama layers (saved for the
backward; RMSNorm keeps a float32 copy of its input and its normalised output in b)::

    norms  2 x (4h + 2bh)                     (b = 4: the input is its own float32 copy: 12h)
    attn   b (q + 2k' + 2q)                    q after RoPE, k and v (k' = q when GQA repeats
                                               them for a masked SDPA), SDPA's output, o_proj's
                                               input; Qwen3 adds (4 + b)(q + k) for q/k norms
    mlp    4 b i                               gate, SiLU, up, their product (MoE: top-k x that)

With recompute (model.gradient_checkpointing; mindformers.recompute) each layer keeps only its
input (b h per token) and one layer's activations exist at a time in the backward. The padded
layout adds a (rows, S, S) boolean attention mask. With a chunked head
(``train.logprob_chunk_tokens``, where the trainer has it; automatic on torch: 110 tokens at
V = 151,936) r becomes min(r, chunk). Torch keeps every chunk's log-softmax for the backward
when the micro-batch's rows x response tokens of it fit half the head's budget (the backend's
own test, :func:`mindrl.backends.chunking.recomputes_chunks`): the plain loss's fused log-prob
path keeps the logits in the model's dtype, 1 float32 copy of V per token in float32, 0.5 in
bfloat16 (at V = 151,936: up to 441 / 883 tokens); a differentiable entropy, the rollout's
truncation or a teacher's exact KL keep 8 (up to 110 tokens). MindSpore keeps each chunk's
float32 logits by the same test, 1 copy of V per token whatever the loss, counted over all the
tokens of its chunked step (a preference pair's rows stacked). fwd then adds them all, bwd all
but one chunk's.
mindformers: V / tensor-parallel per head token, on the last pipeline stage; the first stage
holds ``pipeline_stages`` micro-batches of activations (1F1B).

Host: the weight sync of backend=mindformers merges the slices to one float32 model per process
(4 N x processes per node); MindSpore hands vLLM numpy copies (N b per process).

The CPU figures are measured (bench/memory_plan.py, the Benchmarks page); the accelerator-only
terms (foreach AdamW, vLLM's share, CUDA / CANN runtimes, pipeline schedules) follow the
frameworks' documented behaviour and are not measured here.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from mindrl.memory.shapes import ModelShape
from mindrl.backends.attention_blocks import BLOCK_SCORES, LONG_ROWS, QUERY_BLOCK, query_block
from mindrl.backends.chunking import (HEAD_BLOCK_BYTES, MINDSPORE_KEPT_COPIES,
                                      recomputes_chunks, saved_copies)
from mindrl.backends.shard_layout import BUCKET_BYTES as SHARD_BUCKET_BYTES
from mindrl.backends.shard_layout import gather_peak_values

GB = 1e9
GIB = 2 ** 30
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
DEVICE_MEMORY_GB = {"ascend": 64.0, "cuda": 80.0}
DEVICE_NAMES = {"ascend": "Ascend 910B", "cuda": "H100 / A100 80 GB", "cpu": "this machine"}
HELD = "held"
# what the framework holds beyond tensors: on CPU the allocator's retained heap and the library
# pages a training step touches (measured: bench/memory_plan.py); on an accelerator the CUDA /
# CANN context, the collective buffers and the caching allocator's slack (stated, not measured)
# MindSpore on CPU holds more: its compiled graphs (the old-log-prob pass, the chunked head's
# forward and backward, the decoder backward, the AdamW slice) and the compiler's heap, and its
# memory pool never hands memory back to the system on CPU (``mindspore.runtime.empty_cache`` is
# Ascend-only), so what the step's graphs took on their first call stays held; the part that
# grows with the tokens (the decoder backward's kernel outputs) is its own term below, this is
# the rest: measured on Qwen2.5-0.5B's width with 2 layers as the measured peak minus the
# tensors the plan counts (bench/memory_plan.py --backend mindspore)
RUNTIME_GB = {"cpu": 0.4, "cuda": 2.0, "ascend": 3.0, ("mindspore", "cpu"): 0.5}
# MindSpore on CPU: a compiled graph keeps each kernel's output until the graph returns (no
# reuse of one output's memory for a later one inside the graph), so the decoder backward
# (which recomputes the forward) holds the outputs of every layer's forward and backward
# kernels at once, beside the gradients: per token and layer, this many times the activations
# a layer saves for the backward (:func:`layer_activation_bytes`); measured on Qwen2.5-0.5B's
# width (hidden 896, intermediate 4,864): 1.1 MB per token and layer from the fp32 case's 512
# tokens to fp32-long's 1,056, 117 kB saved (bench/memory_plan.py --backend mindspore)
MS_CPU_GRAPH_COPIES = 9
# and of the attention's float32 scores (rows, heads, queries, keys) per layer: the scores,
# their bias-added, softmax and cast copies and their gradients (measured: 16 at 1,000 tokens,
# 14 heads, the full kernel: bench/memory_plan.py's fp32-1k against fp32-long); the portable
# kernels' attention of a row longer than MS_LONG_ROWS runs in blocks of queries
# (mindrl.backends.attention_blocks: the kernel's own sizes), one block's scores at a time
MS_CPU_SCORE_COPIES = 16
MS_LONG_ROWS, MS_QUERY_BLOCK, MS_BLOCK_SCORES = LONG_ROWS, QUERY_BLOCK, BLOCK_SCORES
RUNTIME_NOTE = {"cpu": "measured on CPU (bench/memory_plan.py)",
                ("mindspore", "cpu"): "compiled graphs and the memory pool they keep, measured "
                "on CPU (bench/memory_plan.py --backend mindspore)",
                "cuda": "CUDA context, NCCL and cuBLAS workspaces, allocator slack (estimate)",
                "ascend": "CANN context, HCCL buffers, compiled graphs (estimate)"}


@dataclass(frozen=True)
class Part:
    """One line of the plan: bytes per device, the phase it belongs to, and the keys that
    shrink it."""

    name: str
    bytes: float
    phase: str = HELD               # held, or "|"-joined: fwd, bwd, bwd-end, step, rollout
    shrink: str = ""
    note: str = ""


@dataclass(frozen=True)
class ModelReward:
    """A model-based reward of an RL run (``judge``: a causal LM that generates a verdict;
    ``reward_model``: a sequence classifier), from its ``reward.functions`` params."""

    name: str                       # the reward's registered name: judge, reward_model
    model: str                      # params.model
    shape: Optional[ModelShape]     # None: the model's shape is unknown here
    dtype_bytes: int = 4
    engine: str = "native"          # native (transformers), vllm, classifier
    where: str = "device"           # device (the trainer's), host, remote
    rows: int = 16                  # params.batch_size: texts per call
    prompt_len: int = 2048          # judge params.max_prompt_len; reward_model params.max_len
    new_tokens: int = 0             # judge params.max_new_tokens
    share: float = 0.3              # judge params.gpu_memory_utilization (engine vllm)
    why: str = ""                   # where != device, or no shape: why it is not counted


@dataclass(frozen=True)
class Setup:
    """The settings a plan depends on (built from a RunConfig by :func:`setup_from_config`)."""

    backend: str = "torch"          # torch, mindspore, mindformers
    device: str = "cpu"
    job: str = "train"              # train (RL), sft, dpo, simpo, pref
    dtype_bytes: int = 4
    master_weights: bool = False    # float32 masters under bf16/fp16 compute
    world: int = 1                  # all devices of the run
    nproc: int = 1                  # processes per node
    fsdp: bool = False
    tp: int = 1                     # mindformers tensor parallel
    pp: int = 1                     # mindformers pipeline stages
    optimizer_shard: int = 1        # devices the optimizer state is split over (1 = replicated)
    recompute: bool = False
    rows: int = 1                   # sequences in one micro-batch (per device)
    prompt_len: int = 1
    response_len: int = 1
    padding_free: bool = False
    accumulation: bool = False      # more than one micro-batch per optimizer step
    entropy: bool = True            # the RL step computes the entropy metric from the logits
    head_chunk: int = 0             # LM head tokens at a time (0 = all at once)
    chunk_key: str = ""             # the key that sets head_chunk, where this version has one
    head_copies: Optional[float] = None  # torch: float32 copies of V a chunk keeps per scored
                                    # token for the backward (chunking.saved_copies; < 2: the
                                    # fused log-prob path, logits kept in the head's dtype;
                                    # None: the plain loss's, in dtype_bytes)
    trainable: Optional[int] = None  # LoRA: trainable parameters (None = all)
    reference: bool = False
    teacher: Optional[ModelShape] = None
    critic: bool = False
    engine: str = "native"          # rollout engine: native, vllm, none
    engine_share: float = 0.5
    rollout_tp: int = 1
    rollout_rows: int = 1           # sequences sampled at once per device (native engine)
    engine_copy: bool = False       # the native engine samples from a separate full copy
    kv_cache_gib: float = 1.0       # vLLM on CPU
    device_bytes: float = 0.0
    host_bytes: float = 0.0         # 0 = not checked
    lengths: str = ""               # where prompt_len / response_len come from (one line)
    rewards: Tuple[ModelReward, ...] = ()   # model-based rewards (RL)


@dataclass
class MemoryPlan:
    label: str
    shape: ModelShape
    setup: Setup
    layout: str
    parts: List[Part]
    host_parts: List[Part] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    blockers: List[str] = field(default_factory=list)   # what fails whatever the totals
    sharded_peak: float = 0.0       # MindSpore: the peak with train.shard_optimizer=true, when
                                    # only that fits (0 = not computed / does not help)

    # ------------------------------------------------------------------ totals
    def phase_total(self, phase: str) -> float:
        return sum(p.bytes for p in self.parts if phase in p.phase.split("|"))

    def peak_phase(self) -> str:
        phases = sorted({ph for p in self.parts for ph in p.phase.split("|") if ph != HELD})
        return max(phases, key=self.phase_total) if phases else HELD

    def peak(self) -> float:
        """Held parts plus the largest working set."""
        ph = self.peak_phase()
        return self.phase_total(HELD) + (self.phase_total(ph) if ph != HELD else 0.0)

    def counted(self) -> List[Part]:
        ph = self.peak_phase()
        return [p for p in self.parts if p.phase == HELD or ph in p.phase.split("|")]

    def largest(self) -> Part:
        return max(self.counted(), key=lambda p: p.bytes)

    def host_total(self) -> float:
        return sum(p.bytes for p in self.host_parts)

    def fits(self) -> bool:
        return not self.blockers and self.peak() <= self.setup.device_bytes and (
            not self.setup.host_bytes or self.host_total() <= self.setup.host_bytes)

    # ------------------------------------------------------------------ text
    def refusal(self) -> str:
        """One line: what does not fit, its largest part and the keys that shrink it."""
        big = self.largest()
        s = self.setup
        if self.blockers:
            return (f"memory plan: {self.label}: {self.blockers[0]}; see `mindrl plan`, or set "
                    "plan.check=false to start anyway")
        if self.peak() > s.device_bytes and self.sharded_peak:
            return (f"memory plan: {self.label} needs {_gb(self.peak())} per device, more than "
                    f"the {_gb(s.device_bytes)} of {s.device}; with the optimizer state and "
                    f"gradient sharded over the {s.world} ranks it needs "
                    f"{_gb(self.sharded_peak)}: set train.shard_optimizer=true (see `mindrl "
                    "plan`, or set plan.check=false to start anyway)")
        if self.peak() > s.device_bytes:
            return (f"memory plan: {self.label} needs {_gb(self.peak())} per device, more than "
                    f"the {_gb(s.device_bytes)} of {s.device} (plan.device_memory_gb); largest "
                    f"part: {big.name} {_gb(big.bytes)} (shrink: {big.shrink or 'a smaller model'}"
                    "); see `mindrl plan`, or set plan.check=false to start anyway")
        return (f"memory plan: {self.label} needs {_gb(self.host_total())} of host memory per "
                f"node, more than plan.host_memory_gb={s.host_bytes / GB:g}; see `mindrl plan`, "
                "or set plan.check=false to start anyway")

    def table(self) -> str:
        s = self.setup
        ph = self.peak_phase()
        lines = [f"{self.label}: {self.shape.name}, {self.shape.params() / 1e9:.3g}B parameters"
                 f" ({_model_text(self.shape)})",
                 f"  layout: {self.layout}",
                 *([f"  lengths: {s.lengths}"] if s.lengths else []),
                 f"  {'part':38s} {'GB':>8s}  {'phase':16s} shrink with"]
        for p in self.parts:
            mark = "" if p.phase == HELD or ph in p.phase.split("|") else " (not at peak)"
            lines.append(f"  {p.name:38s} {p.bytes / GB:8.2f}  {p.phase:16s} "
                         f"{p.shrink}{mark}")
        verdict = "fits" if self.peak() <= s.device_bytes and not self.blockers else \
            "DOES NOT FIT"
        lines.append(f"  {'peak per device':38s} {self.peak() / GB:8.2f}  (held + {ph}) of "
                     f"{s.device_bytes / GB:.0f} GB ({s.device}): {verdict}")
        if self.host_parts:
            lines.append("  host, per node:")
            for p in self.host_parts:
                lines.append(f"  {p.name:38s} {p.bytes / GB:8.2f}  {p.note}")
            if s.host_bytes:
                ok = "fits" if self.host_total() <= s.host_bytes else "DOES NOT FIT"
                lines.append(f"  {'host total':38s} {self.host_total() / GB:8.2f}  of "
                             f"{s.host_bytes / GB:.0f} GB: {ok}")
        lines += [f"  DOES NOT FIT: {b}" for b in self.blockers]
        if self.sharded_peak and self.peak() > s.device_bytes:
            lines.append(f"  fits with train.shard_optimizer=true: {self.sharded_peak / GB:.2f} "
                         f"GB per device (optimizer state and gradient sharded over "
                         f"{s.world} ranks)")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _gb(x: float) -> str:
    return f"{x / GB:.1f} GB"


def _model_text(m: ModelShape) -> str:
    moe = f", {m.experts} experts top-{m.experts_per_token}" if m.experts else ""
    return (f"hidden {m.hidden}, {m.layers} layers, {m.heads}/{m.kv_heads} heads, "
            f"intermediate {m.intermediate}, vocab {m.vocab}"
            f"{', tied' if m.tied else ''}{moe}")


# ---------------------------------------------------------------------- per-token formulas
def layer_activation_bytes(m: ModelShape, b: int, masked: bool) -> float:
    """Bytes saved for the backward per token in one decoder layer (module docstring)."""
    h, q, k = m.hidden, m.q_dim, m.kv_dim
    norms = 2 * (4 * h + (2 * b * h if b < 4 else 2 * 4 * h))
    kv_saved = q if masked and m.heads != m.kv_heads else k
    attn = b * (q + 2 * kv_saved + 2 * q) + 4 * m.heads      # + SDPA's log-sum-exp
    if m.qk_norm:
        attn += (4 + b) * (q + k)
    if m.experts and m.moe_layers:
        mlp_moe = m.experts_per_token * (4 * b * m.moe_intermediate + 2 * b * h) + 4 * m.experts
        share = m.moe_layers / m.layers
        mlp = share * mlp_moe + (1 - share) * 4 * b * m.intermediate
    else:
        mlp = 4 * b * m.intermediate
    return norms + attn + mlp


def ms_query_block(keys: int) -> int:
    """Queries per block of MindSpore's blocked attention on a row of ``keys`` slots (the
    kernel's :func:`mindrl.backends.attention_blocks.query_block` at its defaults)."""
    return query_block(QUERY_BLOCK, keys)


def ms_cpu_graph_bytes(m: ModelShape, b: int, rows: int, seq: int, masked: bool = True) -> float:
    """What MindSpore's compiled decoder backward holds on CPU until it returns, for ``rows``
    rows of ``seq`` tokens: every layer's kernel outputs, :data:`MS_CPU_GRAPH_COPIES` times the
    activations a layer saves per token, and :data:`MS_CPU_SCORE_COPIES` float32 copies of its
    attention scores (rows x heads x queries x keys; past :data:`MS_LONG_ROWS` one block of
    :func:`ms_query_block` queries)."""
    queries = seq if seq <= MS_LONG_ROWS else ms_query_block(seq)
    scores = rows * m.heads * queries * seq * 4 * MS_CPU_SCORE_COPIES
    per_token = MS_CPU_GRAPH_COPIES * layer_activation_bytes(m, b, masked)
    return m.layers * (rows * seq * per_token + scores)


def head_bytes_per_token(m: ModelShape, entropy: bool, vocab_split: int = 1) -> float:
    copies = 5 if entropy else 2
    return copies * 4 * m.vocab / vocab_split


def tensor_sizes(m: ModelShape) -> List[int]:
    """The model's parameter tensors in the order a decoder lists them (embedding, each
    layer's attention, MLP and norms, the final norm, the head); they sum to ``m.params()``."""
    h, q, k = m.hidden, m.q_dim, m.kv_dim
    attn = [h * q, h * k, h * k, q * h]
    attn.append(m.attention_params() - sum(attn))                 # biases, q/k norms
    dense = [h * m.intermediate] * 3
    moe = [h * m.experts] + [h * m.moe_intermediate] * (3 * m.experts)
    if m.shared_expert_intermediate:
        moe += [h * m.shared_expert_intermediate] * 3 + [h]
    out = [m.embedding_params()]
    for layer in range(m.layers):
        mlp = moe if layer >= m.layers - m.moe_layers else dense
        out += attn + mlp + [h, h]
    out.append(h)
    if m.head_params():
        out.append(m.head_params())
    return [x for x in out if x]


# ---------------------------------------------------------------------- the plan
def plan_memory(m: ModelShape, s: Setup, label: str = "the run") -> MemoryPlan:
    """The :class:`MemoryPlan` of model ``m`` under settings ``s`` (module docstring)."""
    b, N = s.dtype_bytes, m.params()
    parts: List[Part] = []
    host: List[Part] = []
    notes: List[str] = []
    blockers: List[str] = []
    mf = s.backend == "mindformers"
    dp = max(1, s.world // (s.tp * s.pp)) if mf else s.world
    if mf:
        # the worst pipeline stage: its share of the layers plus the embedding or the head
        stage_layers = -(-m.layers // s.pp)
        per_layer = m.decoder_params() / m.layers
        edge = max(m.embedding_params(), m.head_params() or 0)
        if s.pp == 1:
            edge = m.embedding_params() + m.head_params()
        n_dev = (stage_layers * per_layer + edge + m.hidden) / s.tp
        split = s.tp
        layout = (f"mindformers: tensor parallel {s.tp} x pipeline {s.pp} x data parallel {dp} "
                  f"= {s.world} devices")
    else:
        split = s.world if s.fsdp else 1
        n_dev = N / split
        layout = (f"{s.backend}: " + (f"FSDP over {s.world} devices" if s.fsdp else
                                      f"data parallel x {s.world}" if s.world > 1 else
                                      "one device"))
    trainable = N if s.trainable is None else s.trainable
    t_dev = n_dev if s.trainable is None else trainable / split
    master = s.master_weights and b < 4
    shard = max(1, s.optimizer_shard)
    ms_sharded = s.backend == "mindspore" and shard > 1
    wkeys = ("train.fsdp=true" if s.backend == "torch" else
             "mindformers.tensor_parallel / pipeline_stages" if mf else
             "backend=mindformers (tensor / pipeline parallel)")

    # ---- held
    if mf:
        parts.append(Part("weights (float32)", 4 * n_dev, HELD,
                          "mindformers.tensor_parallel / pipeline_stages"))
    else:
        parts.append(Part(f"weights ({'bf16/fp16' if b == 2 else 'float32'})", b * n_dev, HELD,
                          wkeys))
    if master and not mf:
        parts.append(Part("master weights (float32)", 4 * t_dev / shard, HELD,
                          wkeys if s.backend != "mindspore" or shard > 1 else
                          "train.shard_optimizer=true (msrun ranks), or backend=mindformers"))
    moment_bytes = 8 if (master or mf) else 2 * b
    okeys = ("mindformers.optimizer_shard=true (over data parallel)" if mf else
             "train.fsdp=true" if s.backend == "torch" else
             "more msrun ranks, or backend=mindformers" if shard > 1 else
             "train.shard_optimizer=true (msrun ranks), or backend=mindformers")
    if s.trainable is not None:
        okeys = "model.lora.rank"
    parts.append(Part("optimizer state (AdamW moments)", moment_bytes * t_dev / shard, HELD,
                      okeys))
    if s.backend == "mindspore":
        parts.append(Part("gradient accumulator (float32)", 4 * t_dev / shard, HELD,
                          "backend=mindformers (tensor / pipeline parallel)" if ms_sharded else
                          "train.shard_optimizer=true (msrun ranks), or backend=mindformers"))
    if s.fsdp and not mf and s.world > 1:
        gathered = (m.embedding_params() + m.head_params()
                    + 2 * m.decoder_params() / m.layers) * b
        parts.append(Part("FSDP gathered working set", gathered, HELD,
                          "(embedding, head and two layers unsharded)"))
    frozen_split = split
    if s.reference:
        parts.append(Part("reference model", b * (n_dev if mf else N / frozen_split), HELD,
                          "algorithm.kl.coef=0 (no reference), model.lora.enabled=true"))
    if s.teacher is not None:
        parts.append(Part("teacher model", b * s.teacher.params() / frozen_split, HELD,
                          "a smaller algorithm.distill.teacher"))
    if s.critic:
        cn = (N + m.hidden) / frozen_split
        if ms_sharded:                       # the critic's optimizer is sharded as the policy's
            cbytes = cn * (b + ((4 if master else 0) + moment_bytes) / shard)
            ckeys = "more msrun ranks"
        else:
            cbytes = cn * (b + (4 if master else 0) + moment_bytes)
            ckeys = ("train.shard_optimizer=true (msrun ranks)" if s.backend == "mindspore"
                     else "more devices (the critic is not sharded)")
        parts.append(Part("critic (weights, masters, moments)", cbytes, HELD, ckeys))

    # ---- rollout engine
    if s.engine == "vllm":
        if s.device == "cpu":
            parts.append(Part("rollout engine (vLLM weights + KV)",
                              b * N + s.kv_cache_gib * GIB, HELD,
                              "VLLM_CPU_KVCACHE_SPACE"))
        else:
            share = s.engine_share * s.device_bytes
            parts.append(Part("rollout engine (vLLM share)", share, HELD,
                              "rollout.gpu_memory_utilization"))
            kv_tok = m.kv_bytes_per_token(b) / s.rollout_tp
            room = share - b * N / s.rollout_tp
            seq = s.prompt_len + s.response_len
            if room <= 0:
                blockers.append(f"rollout.gpu_memory_utilization={s.engine_share:g}: the vLLM "
                             f"share ({_gb(share)}) does not hold the weights "
                             f"({_gb(b * N / s.rollout_tp)} per device): vLLM will not start")
            else:
                seqs = room / (kv_tok * seq)
                notes.append(f"vLLM KV cache: about {_gb(room)} after the weights holds "
                             f"{seqs:.0f} sequences of {seq} tokens at once "
                             f"({kv_tok / 1024:.0f} KiB per token per device)")
    elif s.engine == "native":
        kv = s.rollout_rows * (s.prompt_len + s.response_len) * m.kv_bytes_per_token(b)
        logits = s.rollout_rows * m.vocab * 4 * 3
        parts.append(Part("rollout KV cache + sampling logits", kv + logits, "rollout",
                          "rollout.engine=vllm, train.prompts_per_step, rollout.max_new_tokens"))
        if s.engine_copy:
            parts.append(Part("sampler's own weights copy", b * N, HELD,
                              "rollout.engine=vllm"))

    # ---- update working set
    tokens = s.rows * (s.prompt_len + s.response_len)
    head_tokens = s.rows * (s.response_len + 1)
    chunked = 0 < s.head_chunk < head_tokens          # the head runs in more than one chunk
    if chunked:
        head_tokens = s.head_chunk
    # torch keeps every chunk's logits / log-softmax for the backward when they fit half the
    # head's budget
    # (the backend's own test, chunking.recomputes_chunks, on its rows x response tokens): then
    # the forward ends holding them all, and the backward's second chunk (where the head's
    # gradient sum reaches 3 copies) still holds all but the first chunk's
    # MindSpore keeps the chunks' float32 logits (one copy per token, whatever the loss) by the
    # same test on all the tokens of its chunked step (a preference pair's two rows stacked)
    scored = s.rows * s.response_len
    pairs = 2 if s.job in ("dpo", "simpo", "pref") else 1
    if s.backend == "mindspore":
        copies, decided = float(MINDSPORE_KEPT_COPIES), scored * pairs
    else:
        copies = s.head_copies if s.head_copies is not None else \
            saved_copies(False, False, False, b)
        decided = scored
    kept = chunked and s.backend in ("torch", "mindspore") and not recomputes_chunks(
        decided, s.head_chunk, m.vocab, copies)
    kept_bytes = scored * 4 * m.vocab * copies if kept else 0.0
    # MindSpore on CPU with float32 weights runs its chunked head in host memory with NumPy
    # (backends/mindspore/host_head.py; not with a teacher's exact KL, counted here as the
    # compiled chunks): the head's and the embedding rows' gradients go into the held
    # accumulator in place, the decoder backward differentiates w.r.t. the embeddings, so no
    # (V, h) gradient, buffer or embedding temporary exists and the compiled backward's
    # gradients leave out the (V, h) tables
    ms_host_head = (s.backend == "mindspore" and s.device == "cpu" and b == 4 and chunked
                    and not ms_sharded and not mf and s.teacher is None)
    host_tables = (m.vocab * m.hidden * (1 if m.tied else 2) * 4
                   if ms_host_head and s.trainable is None else 0.0)
    # kept by the fused log-prob path (copies < 2), one GEMM over all rows, whose backward
    # writes the head's weight gradient itself (chunked_head.GRAD_INTO_BUFFER): on CPU into a
    # (V, H) buffer held from step to step, the tied embedding's rows added into it in place
    fused = kept and copies < 2
    own_grad = fused and s.backend == "torch" and not s.fsdp and s.trainable is None
    kept_head_grad = m.vocab * m.hidden * b if own_grad and s.device == "cpu" else 0.0
    masked = not s.padding_free
    if mf:
        tokens_dev = tokens / s.tp           # sequence parallel splits the saved activations
        stage_layers = -(-m.layers // s.pp)
        in_flight = s.pp                     # 1F1B: the first stage holds pp micro-batches
        if s.recompute:
            act = in_flight * tokens_dev * stage_layers * b * m.hidden \
                + tokens * layer_activation_bytes(m, b, False) / s.tp
        else:
            act = in_flight * tokens * stage_layers * layer_activation_bytes(m, b, False) / s.tp
        head = head_tokens * head_bytes_per_token(m, s.job == "train", s.tp)
    else:
        per_layer = layer_activation_bytes(m, b, masked)
        final = 4 * m.hidden + 2 * b * m.hidden
        if s.recompute:
            act = tokens * (m.layers * b * m.hidden + per_layer + final)
        else:
            act = tokens * (m.layers * per_layer + final)
        if masked:
            act += s.rows * (s.prompt_len + s.response_len) ** 2
        head = head_tokens * head_bytes_per_token(m, s.job == "train" and s.entropy)
    # torch's fused path works over its kept logits a block of rows at a time: two float32
    # blocks in the forward (the upcast and its exponentials), one in the backward
    blocked = fused and s.backend == "torch"
    if blocked:
        head = 2 * HEAD_BLOCK_BYTES
    act *= pairs
    head_fwd = (head + kept_bytes) * pairs
    # the backward of log-softmax holds its output, the incoming gradient and the gradient it
    # returns: 3 float32 copies of the head's logits (measured on CPU; in chunks, of a chunk's)
    head_bwd = head_tokens * 3 * 4 * m.vocab / (s.tp if mf else 1) * pairs
    if kept:
        head_bwd += kept_bytes * pairs - s.head_chunk * 4 * m.vocab * copies
    if blocked:                          # the kept logits turned into their gradient in place
        head_bwd = (kept_bytes + HEAD_BLOCK_BYTES) * pairs
    gb = 4 if mf else b                  # bytes of the gradients the backward writes
    if mf:
        gkeys = "mindformers.tensor_parallel / pipeline_stages"
        grads = 4 * n_dev
    elif ms_sharded:
        # each micro-batch's compute gradients, reduced bucket by bucket into the slice: one
        # float32 bucket and its reduced copy on top (no full float32 copy)
        gkeys = wkeys
        grads = b * t_dev + 2 * min(SHARD_BUCKET_BYTES, 4 * t_dev)
    elif s.backend == "mindspore":
        gkeys = wkeys
        grads = (b + 4) * t_dev if b < 4 else 4 * t_dev - host_tables   # + their flat copy
    else:
        gkeys = wkeys
        grads = (b + 4) * t_dev if master else b * t_dev
    # gradient accumulation: the earlier micro-batches' gradients exist during the next ones
    accum = "fwd|bwd|" if s.accumulation and not ms_sharded else ""
    if master and s.backend == "torch":
        # after each backward the low-precision gradients are added into the float32 ones and
        # freed: only those (4 N) are held through the next micro-batch and the step
        # (on CPU the float32 ones are kept from step to step, MasterWeights.accumulate: held
        # below, so the backward's end adds the low-precision gradients alone)
        parts.append(Part("gradients", (b * t_dev - kept_head_grad) if s.device == "cpu"
                          else grads, "bwd-end", gkeys))
        parts.append(Part("float32 gradients (accumulated, stepped)", 4 * t_dev,
                          HELD if s.device == "cpu" else accum + "step", gkeys))
    else:
        parts.append(Part("gradients", grads - kept_head_grad,
                          accum + ("bwd-end" if ms_sharded else "bwd-end|step"), gkeys))
    length_key = "rollout.max_new_tokens" if s.job == "train" else "data.max_response_len"
    akeys = ("mindformers.recompute=true, mindformers.micro_batch_num" if mf else
             "model.gradient_checkpointing=true, train.micro_batch_size, "
             f"train.max_tokens_per_micro_batch, train.padding_free, {length_key}"
             if not s.recompute else
             "train.micro_batch_size, train.max_tokens_per_micro_batch, " + length_key)
    parts.append(Part("activations" + (" (recompute)" if s.recompute else ""), act,
                      "fwd|bwd", akeys))
    if s.backend == "mindspore" and s.device == "cpu":
        graph = pairs * ms_cpu_graph_bytes(m, b, s.rows, s.prompt_len + s.response_len, masked)
        parts.append(Part("compiled backward's kernel outputs", graph, "bwd-end",
                          "train.micro_batch_size, train.max_tokens_per_micro_batch, "
                          + length_key, "MindSpore on CPU: every kernel output of the decoder "
                          "backward (and its recomputed forward) is held until it returns"))
    hkeys = ", ".join(k for k in (s.chunk_key, "train.micro_batch_size") if k) if not mf else \
        "mindformers.tensor_parallel, mindformers.micro_batch_num"
    kept_text = f", {scored} kept" if kept else ""
    parts.append(Part(f"log-prob head ({head_tokens} tokens x {m.vocab}{kept_text})", head_fwd,
                      "fwd", hkeys))
    trainable_head = s.trainable is None
    # FSDP computes a unit's gradients unsharded, then reduce-scatters them: full size here.
    # In chunks (torch), autograd sums the chunks' weight gradients: the sum so far, a chunk's
    # and their new sum exist at once (3 copies, measured on CPU)
    head_grad = m.vocab * m.hidden * gb / (s.tp if mf else 1) if trainable_head else 0.0
    # kept by the fused log-prob path (copies < 2), one GEMM over all rows: 1 copy (measured),
    # none on CPU, where it is written into the held buffer
    head_grad *= 3 if chunked and s.backend == "torch" and not fused else 0 if kept_head_grad \
        else 1
    bwd_note = ("the kept logits, turned into their gradient a float32 block of rows at a "
                "time" + ("" if kept_head_grad else ", and the head's weight gradient")
                ) if blocked else (
        "3 float32 copies of the logits (of a chunk) and the head's weight gradient (3 copies "
        "when chunked, 1 on the fused path)" + ("; the log-softmax the chunks kept" if kept
                                                else ""))
    parts.append(Part("log-prob head in the backward", head_bwd + head_grad, "bwd", hkeys,
                      bwd_note))
    if kept_head_grad:
        parts.append(Part("head's weight gradient (kept)", kept_head_grad, HELD, hkeys,
                          "the (V, H) gradient the fused log-prob path writes into, kept from "
                          "step to step (its share of the gradients)"))
    if trainable_head and not mf:
        # the embedding's dense gradient; tied to the head, it is added to the head's gradient
        # through one more temporary; under gradient accumulation (torch) the new gradient is
        # summed into the one accumulated so far: one more (measured on CPU). The torch
        # backend (not FSDP) makes a tied embedding's backward sparse
        # (chunked_head.sparse_tied_embedding): only its tokens' rows, added into the head's
        # gradient out of place (autograd sums a dense and a sparse gradient into a new one):
        # one (V, H) copy. Where the head's backward writes its gradient itself (own_grad) the
        # rows are added into it in place, and later micro-batches add into the gradient in
        # place: no temporary
        sparse = m.tied and s.backend == "torch" and not s.fsdp
        emb = ((1 if sparse else 2 if m.tied else 1)
               + (1 if s.accumulation and s.backend == "torch" else 0)) * m.vocab * m.hidden * gb
        if (sparse and own_grad) or ms_host_head:
            emb = 0.0
        if emb:
            parts.append(Part("embedding gradient temporaries", emb, "bwd-end", gkeys))
    if ms_host_head:
        pass                # the head's weight gradient added into the accumulator in place
    elif s.backend == "mindspore" and chunked and trainable_head and not mf and not kept:
        # the chunked step (RL, SFT, preference) that recomputes its chunks adds each chunk's
        # head-weight gradient into one (V, h) buffer that the decoder backward then adds to
        # the head's (or the embedding's) gradient; the buffer is a parameter of the step, held
        # between steps
        parts.append(Part("chunked head's gradient accumulator", m.vocab * m.hidden * b, HELD,
                          "", "the head's weight gradient summed over the chunks"))
    elif s.backend == "mindspore" and chunked and trainable_head and not mf:
        # with the logits kept the weight gradient is one product over all the scored rows, an
        # input of the decoder backward: alive through it, freed after (bench/memory_plan.py's
        # fp32 / fp32-recompute cases measured 6.31 / 6.49 GB, 0.39 / 0.40 GB under the runs
        # that held the buffer)
        parts.append(Part("chunked head's weight gradient", m.vocab * m.hidden * b, "bwd-end",
                          "", "the kept logits' weight gradient, one product"))
    # optimizer step temporaries (after the backward: activations are gone by then)
    if s.backend == "torch" and not s.fsdp and s.device in ("cpu", "cuda"):
        # torch's fused AdamW (mindrl.backends.torch.optim.fused_adamw: plain tensors on CPU
        # or CUDA) updates in place: no temporaries (measured on CPU at a 151,936 x 896 tied
        # head: +0.00 of the tensor, where the single-tensor loop held 2 copies)
        temp = 0.0
    else:
        temp = t_dev * moment_bytes / 2 / shard              # foreach AdamW: one moment copy
    parts.append(Part("optimizer step temporaries", temp, "step", okeys))
    if ms_sharded and trainable_head:
        # the new weights gathered bucket by bucket: a bucket, the pieces of parameters that
        # wait for a later bucket, the parameter written (shard_layout.gather_peak_values)
        held = gather_peak_values(tensor_sizes(m), shard, SHARD_BUCKET_BYTES)
        parts.append(Part("bucket gathers of the new weights", b * held, "step", okeys,
                          f"buckets of {SHARD_BUCKET_BYTES / 4 / 2 ** 20:g} Mi float32 values"))
    runtime = RUNTIME_GB.get((s.backend, s.device), RUNTIME_GB.get(s.device, 0.0)) * GB
    if runtime:
        parts.append(Part("runtime (allocator, kernels, context)", runtime, HELD, "",
                          RUNTIME_NOTE.get((s.backend, s.device), RUNTIME_NOTE[s.device])))

    # ---- model-based rewards (judge, reward model)
    for rw in s.rewards:
        _reward_parts(rw, s, parts, host, notes, blockers)

    # ---- host
    if mf and s.engine == "vllm":
        host.append(Part("weight sync: merged float32 model", 4 * N * s.nproc, HELD, "",
                         f"4 B x {N / 1e9:.3g}B x {s.nproc} processes"))
    elif s.backend == "mindspore" and s.engine == "vllm":
        host.append(Part("weight sync: numpy copy", b * N * s.nproc, HELD, "",
                         f"{b} B x {N / 1e9:.3g}B x {s.nproc} processes"))
    label_full = label
    return MemoryPlan(label_full, m, s, layout, parts, host, notes, blockers)


def _reward_parts(rw: ModelReward, s: Setup, parts: List[Part], host: List[Part],
                  notes: List[str], blockers: List[str]) -> None:
    """The parts of one model-based reward: its weights are held (loaded on first use, kept);
    what it uses while scoring (between rollout and update) is the ``reward`` working set: a
    judge's KV cache of ``batch_size`` x (``max_prompt_len`` + ``max_new_tokens``) tokens and
    two float32 copies of the logits of a batch; a classifier's forward, one layer at a time
    (residual stream, normed input, gate, up and their product: (2 h + 3 i) b per token). A
    vLLM judge on an accelerator reserves ``gpu_memory_utilization`` of the device instead."""
    key = f"reward {rw.name}"
    label = rw.name.replace("_", " ")
    if rw.where == "remote" or rw.shape is None:
        notes.append(f"reward {rw.name} ({rw.model}) {rw.why}: not counted here")
        return
    m, jb = rw.shape, rw.dtype_bytes
    weights = jb * m.params()
    if rw.engine == "vllm" and s.device != "cpu":
        share = rw.share * s.device_bytes
        parts.append(Part(f"{label} (vLLM share)", share, HELD,
                          f"{key} params.gpu_memory_utilization"))
        if share <= weights:
            blockers.append(f"{key} params.gpu_memory_utilization={rw.share:g}: the judge's "
                            f"vLLM share ({_gb(share)}) does not hold its weights "
                            f"({_gb(weights)})")
        return
    if rw.engine == "vllm":
        held = weights + s.kv_cache_gib * GIB
        work = 0.0
        hkeys = "VLLM_CPU_KVCACHE_SPACE, a smaller judge model"
    else:
        held = weights
        hkeys = f"{key} params.dtype, a smaller model"
        if rw.engine == "classifier":
            work = rw.rows * rw.prompt_len * jb * (2 * m.hidden + 3 * m.intermediate)
        else:
            work = (rw.rows * (rw.prompt_len + rw.new_tokens) * m.kv_bytes_per_token(jb)
                    + 2 * rw.rows * m.vocab * 4)
    if rw.where == "host":
        host.append(Part(f"{label} on the host", held + work, HELD, "",
                         f"{rw.model}: its weights and the working set of one call"))
        return
    parts.append(Part(f"{label} weights" + (" + KV" if rw.engine == "vllm" else ""), held,
                      HELD, hkeys, rw.model))
    if work:
        what = "forward" if rw.engine == "classifier" else "KV cache + logits"
        parts.append(Part(f"{label} {what}", work, "reward",
                          f"{key} params.batch_size, params."
                          + ("max_len" if rw.engine == "classifier" else "max_prompt_len")))


# ---------------------------------------------------------------------- from a RunConfig
def _opt_attr(obj, name: str, default):
    return getattr(obj, name, default)


def system_memory_bytes() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0.0


def device_memory_bytes(cfg) -> float:
    gb = cfg.plan.device_memory_gb
    if gb:
        return gb * GB
    if cfg.device == "cpu":
        return system_memory_bytes()
    return DEVICE_MEMORY_GB[cfg.device] * GB


def auto_chunk(vocab: int) -> int:
    """The head chunk when ``train.logprob_chunk_tokens`` is -1 (automatic), as the torch
    backend picks it (:func:`mindrl.backends.chunking.chunk_tokens`, plain Python): 110 tokens
    at a vocabulary of 151,936."""
    from mindrl.backends.chunking import chunk_tokens

    return chunk_tokens(-1, vocab)


def setup_from_config(cfg, job: str, shape: ModelShape,
                      teacher: Optional[ModelShape] = None, data=None) -> Setup:
    """The :class:`Setup` of one stage (``job``: train, sft, dpo, simpo, pref); SFT and
    preference rows are as long as ``data`` (a :class:`~mindrl.memory.data_lengths.DataLengths`)
    measured them, else the worst row (``data.max_prompt_len + data.max_response_len``)."""
    t, r, d = cfg.train, cfg.rollout, cfg.distributed
    b = DTYPE_BYTES[cfg.model.dtype]
    world = d.nproc * d.nnodes
    mf = cfg.backend == "mindformers"
    tp = cfg.mindformers.tensor_parallel if mf else 1
    pp = cfg.mindformers.pipeline_stages if mf else 1
    batch = t.prompts_per_step * r.n
    prompt = cfg.data.max_prompt_len
    if job in ("sft", "dpo", "simpo", "pref"):
        resp = int(_opt_attr(cfg.data, "max_response_len", r.max_new_tokens))
        from mindrl.memory.data_lengths import worst_row_text

        lengths = data.text(prompt, resp) if data is not None else worst_row_text(prompt, resp)
        if data is not None and data.rows:
            prompt, resp = data.prompt, min(resp, data.response)
    else:
        resp = r.max_new_tokens
        lengths = (f"prompt {prompt} (data.max_prompt_len) + response {resp} "
                   "(rollout.max_new_tokens) tokens")
    rl = job == "train"
    dp_size = max(1, world // (tp * pp))
    if mf:
        dp = dp_size
        rows = max(1, (t.mini_batch_size or batch) // (dp * cfg.mindformers.micro_batch_num))
        shard = dp if cfg.mindformers.optimizer_shard else 1
    else:
        rows = t.micro_batch_size
        shard = 1
        for key in ("optimizer_shard", "shard_optimizer", "shard_optimizer_state"):
            v = _opt_attr(t, key, None)
            if v:
                shard = world if v is True else int(v)
                break
    seq = prompt + resp
    if t.max_tokens_per_micro_batch:
        rows = max(1, min(rows, t.max_tokens_per_micro_batch // seq))
    # RL: rollouts per optimizer step over the micro-batches of all ranks; SFT and preference:
    # a rank's rows (pairs) of train.prompts_per_step, cut into train.micro_batch_size
    per_step = t.mini_batch_size or batch
    if rl:
        accumulation = per_step > rows * (dp_size if mf else world)
    elif mf:
        accumulation = True              # mindformers' micro_batch_num pipeline micro-batches
    else:
        accumulation = max(1, t.prompts_per_step // max(1, world)) > max(1, t.micro_batch_size)
    chunk = int(_opt_attr(t, "logprob_chunk_tokens", 0))
    if chunk == -1 and cfg.backend == "mindspore":
        from mindrl.backends.chunking import MINDSPORE_LIVE_COPIES, chunk_tokens

        chunk = chunk_tokens(-1, shape.vocab, live_copies=MINDSPORE_LIVE_COPIES)
    elif chunk == -1:
        chunk = auto_chunk(shape.vocab) if cfg.backend == "torch" else 0
    master_key = _opt_attr(t, "master_weights", None)
    master = b < 4 if master_key is None else bool(master_key) and b < 4
    lora = cfg.model.lora
    trainable = shape.lora_params(lora.rank, lora.target_modules) if lora.enabled else None
    ref = (rl and cfg.algorithm.kl.coef > 0) or job in ("dpo", "pref") and \
        cfg.preference.loss != "simpo"
    ref = ref and not lora.enabled
    engine = r.engine if rl else "none"
    per_rank_prompts = max(1, t.prompts_per_step // max(1, world))
    return Setup(
        backend=cfg.backend, device=cfg.device, job=job, dtype_bytes=b, master_weights=master,
        world=world, nproc=d.nproc, fsdp=bool(t.fsdp) and world > 1, tp=tp, pp=pp,
        optimizer_shard=shard,
        recompute=bool(cfg.mindformers.recompute if mf else cfg.model.gradient_checkpointing),
        rows=rows, prompt_len=prompt, response_len=resp,
        accumulation=accumulation,
        padding_free=bool(t.padding_free), entropy=rl, head_chunk=max(0, chunk),
        head_copies=_head_copies(cfg, b) if rl else saved_copies(False, False, False, b),
        chunk_key="train.logprob_chunk_tokens" if hasattr(t, "logprob_chunk_tokens") else "",
        trainable=trainable, reference=ref, teacher=teacher if rl else None,
        rewards=model_rewards(cfg) if rl else (),
        critic=rl and cfg.algorithm.adv_estimator == "gae", engine=engine,
        engine_share=r.gpu_memory_utilization, rollout_tp=r.tensor_parallel_size,
        rollout_rows=per_rank_prompts * r.n,
        engine_copy=rl and engine == "native" and (bool(t.fsdp) and world > 1
                                                   or r.async_ahead == 1),
        kv_cache_gib=float(os.environ.get("VLLM_CPU_KVCACHE_SPACE", 0) or 1.0),
        device_bytes=device_memory_bytes(cfg),
        host_bytes=cfg.plan.host_memory_gb * GB, lengths=lengths)


def _head_copies(cfg, dtype_bytes: int) -> float:
    """What the torch chunked head keeps per token in the RL update (``token_stats``'s
    arguments there): the fused log-prob path keeps the logits in the model's dtype; a
    differentiable entropy (algorithm.entropy_coef, entropy_control), the rollout's top-k /
    min-p / top-p, or the exact KL to a teacher keep more."""
    from algorithms.truncation import Truncation

    a = cfg.algorithm
    return saved_copies(bool(a.entropy_coef or a.entropy_control.enabled),
                        Truncation.from_rollout(cfg.rollout) is not None,
                        bool(a.distill.teacher) and a.distill.estimator == "full", dtype_bytes)


_REWARD_ENGINES = {"judge": "native", "reward_model": "classifier"}
_TORCH_DEVICES = {"cpu": "cpu", "cuda": "cuda", "npu": "ascend"}


def model_rewards(cfg) -> Tuple[ModelReward, ...]:
    """The model-based rewards (``judge``, ``reward_model``) of ``cfg.reward.functions``, with
    their params over the rewards' own defaults."""
    import inspect

    out = []
    for fn in cfg.reward.functions:
        if fn.name not in _REWARD_ENGINES:
            continue
        if fn.name == "judge":
            from rewards.judge import Judge as cls
        else:
            from rewards.reward_model import RewardModel as cls
        p = {k: v.default for k, v in inspect.signature(cls.__init__).parameters.items()
             if v.default is not inspect.Parameter.empty}
        p.update(fn.params or {})
        model = str(p.get("model", ""))
        engine = p.get("engine", "native") if fn.name == "judge" else "classifier"
        shape, why = _reward_shape(model)
        dev = str(p.get("device", "cpu")).split(":")[0]
        where = "device"
        if p.get("placement") == "actor":
            where, why = "remote", "runs in a Ray actor of its own (params.placement=actor)"
        elif engine != "vllm" and _TORCH_DEVICES.get(dev) != cfg.device:
            if dev == "cpu":
                where = "host"
            else:
                where, why = "remote", f"runs on params.device={p.get('device')}, not on " \
                    f"the run's device ({cfg.device})"
        out.append(ModelReward(
            name=fn.name, model=model, shape=shape,
            dtype_bytes=DTYPE_BYTES.get(str(p.get("dtype")), 4),
            engine=engine, where=where, rows=int(p.get("batch_size", 16)),
            prompt_len=int(p.get("max_prompt_len", p.get("max_len", 0)) or 0),
            new_tokens=int(p.get("max_new_tokens", 0)) if fn.name == "judge" else 0,
            share=float(p.get("gpu_memory_utilization", 0.3)), why=why))
    return tuple(out)


def _reward_shape(path: str) -> Tuple[Optional[ModelShape], str]:
    """(the shape of a reward's model, '') or (None, why not): a built-in model built by its
    own builder is read from its built directory."""
    from mindrl.errors import ConfigError
    from mindrl.memory.shapes import shape_from_path
    from mindrl.models.tiny import BUILTIN_PREFIX, BUILTINS

    try:
        name = path[len(BUILTIN_PREFIX):] if path.startswith(BUILTIN_PREFIX) else ""
        if name in BUILTINS and "builder" in BUILTINS[name]:
            from mindrl.models.tiny import resolve_model_path

            path = resolve_model_path(path)
        shape = shape_from_path(path) or _recipe_run_shape(path)
    except (ConfigError, OSError, ValueError) as e:
        return None, f"has no shape here ({str(e).splitlines()[0] if str(e) else e!r})"
    if shape is None:
        return None, "has no config.json here and is not a known model name"
    return shape, ""


def model_shape(cfg, path: Optional[str] = None, key: str = "model.path") -> ModelShape:
    """The shape of the model a run trains (``plan.model_config`` first), or of ``path``;
    a run or checkpoint folder of a shipped recipe that has not run yet resolves to that
    recipe's model. Raises ConfigError naming the keys when nothing describes it."""
    from mindrl.errors import ConfigError
    from mindrl.memory.shapes import shape_from_path

    if path is None and cfg.plan.model_config:
        shape = shape_from_path(cfg.plan.model_config)
        if shape is None:
            raise ConfigError(f"plan.model_config={cfg.plan.model_config!r} is no config.json, "
                              "model directory or known model name")
        return shape
    path = path if path is not None else cfg.model.path
    shape = shape_from_path(path) or _recipe_run_shape(path)
    if shape is None:
        raise ConfigError(f"{key}={path!r}: no config.json there and not a known model name; "
                          "set plan.model_config to the model's config.json (or a known name "
                          "such as Qwen2.5-7B)")
    return shape


def _recipe_run_shape(path: str, depth: int = 0) -> Optional[ModelShape]:
    """A path inside a shipped recipe's run directory (``runs/sft_tiny_demo/checkpoints/...``):
    the shape of that recipe's first model."""
    from pathlib import PurePath

    from mindrl.memory.shapes import shape_from_path

    if depth > 3:
        return None
    parts = PurePath(path).parts
    for out, model in _recipe_runs():
        if out and parts[:len(out)] == out:
            return shape_from_path(model) or _recipe_run_shape(model, depth + 1)
    return None


@functools.lru_cache(maxsize=1)
def _recipe_runs() -> Tuple[Tuple[Tuple[str, ...], str], ...]:
    """(run directory parts, model.path) of every shipped recipe's first stage."""
    from pathlib import PurePath

    from mindrl.config.loader import REPO_CONFIGS
    from mindrl.config.stages import load_stages

    out = []
    for recipe in sorted(REPO_CONFIGS.glob("*.yaml")):
        try:
            first = load_stages(recipe.stem, ())[0].cfg
        except Exception:                         # a broken recipe is its own test's business
            continue
        out.append((PurePath(first.logging.output_dir).parts, first.model.path))
    return tuple(out)


def job_of(recipe: Optional[str]) -> str:
    """The job a recipe without stages runs: sft / dpo / simpo by its name, else train."""
    from pathlib import Path

    name = Path(str(recipe or "")).stem
    for prefix in ("sft", "dpo", "simpo"):
        if name.startswith(prefix + "_"):
            return prefix
    return "train"


def plan_stages(stages, run: Optional[str] = None, recipe: Optional[str] = None
                ) -> List[MemoryPlan]:
    """One plan per stage of a loaded recipe, each for ``run`` (default: the stage's own job;
    a recipe without stages: :func:`job_of` its name); a later stage's model (the previous
    stage's checkpoint) has the first stage's shape."""
    plans = []
    first_shape = None
    for st in stages:
        cfg = st.cfg
        if first_shape is None or cfg.plan.model_config:
            shape = model_shape(cfg)
        else:
            shape = first_shape
        first_shape = first_shape or shape
        teacher = None
        if cfg.algorithm.distill.teacher:
            teacher = model_shape(cfg, cfg.algorithm.distill.teacher,
                                  "algorithm.distill.teacher")
        job = run or (st.run if st.name else job_of(recipe) if recipe else st.run)
        data = None
        if job in ("sft", "dpo", "simpo", "pref"):
            from mindrl.memory.data_lengths import measure_data

            data = measure_data(cfg, job)
        setup = setup_from_config(cfg, job, shape, teacher, data)
        plan = plan_memory(shape, setup, st.label if st.name else "the run")
        if (setup.backend == "mindspore" and setup.world > 1 and setup.optimizer_shard == 1
                and not plan.fits()):
            import dataclasses

            sharded = plan_memory(shape, dataclasses.replace(setup,
                                                             optimizer_shard=setup.world))
            if sharded.fits():
                plan.sharded_peak = sharded.peak()
        plans.append(plan)
    return plans


def check_fits(stages) -> List[MemoryPlan]:
    """Refuse (ConfigError, one line) when a stage's plan exceeds its device and plan.check is
    on; the model shape unknown = nothing to check (the model load says what is missing)."""
    from mindrl.errors import ConfigError

    todo = [st for st in stages if st.cfg.plan.check]
    if not todo:
        return []
    try:
        plans = plan_stages(stages)
    except ConfigError:
        return []
    for st, plan in zip(stages, plans):
        if st.cfg.plan.check and not plan.fits():
            raise ConfigError(plan.refusal())
    return plans

