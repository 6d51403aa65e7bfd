"""Building a rollout engine for evaluation, and running one chunk of prompts through it.

Kept apart from the runner so that Ray workers import only this (no matplotlib, no data).
"""

from __future__ import annotations

import importlib
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

ENGINE_MODULES = {"native": "mindrl.rollout.native_torch", "vllm": "mindrl.rollout.vllm_engine"}

SampleKey = Tuple[str, str, int]          # (benchmark, problem id, sample index)


@dataclass
class Chunk:
    """One ``engine.generate`` call: ``len(prompt_ids)`` prompts x ``m`` samples; ``keys`` are
    prompt-major, matching the engine's row order (row i * m + j)."""

    keys: List[SampleKey]
    prompt_ids: List[List[int]]
    m: int
    seed: Optional[int] = None
    shard: int = 0
    index: int = 0                        # position within its shard

    def __len__(self) -> int:
        return len(self.keys)


@dataclass
class EngineSpec:
    """What a worker needs to build its own engine (picklable)."""

    model_dir: str
    engine: str = "native"
    backend: str = "torch"
    dtype: str = "float32"
    device: str = "cpu"
    seed: int = 0
    threads: int = 1
    tensor_parallel_size: int = 1          # vLLM: devices the engine spans
    max_prompt_len: int = 256             # longest prompt in tokens (vLLM sizes its context)
    sampling: Dict[str, Any] = field(default_factory=dict)   # SamplingParams fields except n/seed
    tools: Dict[str, Any] = field(default_factory=dict)      # names, format, max_turns, timeout
    tool_hide: List[str] = field(default_factory=list)       # paths the tool sandbox hides

    def run_config(self):
        """The :class:`~mindrl.config.schema.RunConfig` the engine factories read."""
        from mindrl.config.schema import (DataConfig, ModelConfig, RolloutConfig,  # noqa: PLC0415
                                          RunConfig, TrainConfig)

        s = self.sampling
        return RunConfig(
            backend=self.backend, device=self.device,
            model=ModelConfig(path=self.model_dir, dtype=self.dtype),
            data=DataConfig(max_prompt_len=self.max_prompt_len),
            rollout=RolloutConfig(engine=self.engine, n=1, temperature=s.get("temperature", 1.0),
                                  top_p=s.get("top_p", 1.0), top_k=s.get("top_k", -1),
                                  min_p=s.get("min_p", 0.0),
                                  max_new_tokens=s.get("max_new_tokens", 128), seed=self.seed,
                                  tensor_parallel_size=self.tensor_parallel_size),
            train=TrainConfig(seed=self.seed, threads=self.threads))


def default_engine_factory(spec: EngineSpec):
    """Build the engine named by ``spec.engine`` from its registered factory.

    ``native`` + ``torch``: a standalone transformers model; ``native`` + ``mindspore``: the
    MindSpore backend's own sampler; ``vllm``: a vLLM engine (its context sized to the longest
    prompt plus ``max_new_tokens``).
    """
    from mindrl.rollout.base import ENGINES  # noqa: PLC0415

    module = ENGINE_MODULES.get(spec.engine)
    if module is None:
        raise ValueError(f"unknown engine '{spec.engine}'; valid: {', '.join(ENGINE_MODULES)}")
    importlib.import_module(module)
    make = ENGINES.get(spec.engine)
    cfg = spec.run_config()
    if spec.engine == "vllm":
        return make(cfg, model_path=spec.model_dir, spmd=False,
                    max_model_len=spec.max_prompt_len + cfg.rollout.max_new_tokens)
    if spec.backend == "mindspore":
        from mindrl.backends.base import build_backend  # noqa: PLC0415

        return make(cfg, backend=build_backend("mindspore", cfg, model_path=spec.model_dir))
    return make(cfg, model_path=spec.model_dir)


def chunk_seed(seed: int, key: SampleKey) -> int:
    """A per-chunk sampling seed that depends only on the run seed and the chunk's first sample,
    so that a chunk draws the same stream however the run is sharded or resumed."""
    return zlib.crc32(f"{seed}|{key[0]}|{key[1]}|{key[2]}".encode()) & 0x7FFFFFFF


def generate_chunk(engine, chunk: Chunk, spec: EngineSpec,
                   decode: Optional[Callable[[List[int]], str]] = None) -> List[Dict[str, Any]]:
    """Run one chunk; one dict per key: text, length (response tokens), finish reason."""
    from mindrl.types import SamplingParams  # noqa: PLC0415

    prompts, n = chunk.prompt_ids, chunk.m
    if spec.sampling.get("temperature", 1.0) <= 0 and n > 1:
        # Greedy: n copies of each prompt with n=1 (same rows, prompt-major); some engines
        # (vLLM) reject n > 1 under greedy decoding.
        prompts, n = [p for p in prompts for _ in range(n)], 1
    sp = SamplingParams(n=n, seed=chunk.seed, **spec.sampling)
    ro = _tool_loop(engine, spec).generate(engine, prompts, sp) if spec.tools else \
        engine.generate(prompts, sp)
    if len(ro) != len(chunk.keys):
        raise RuntimeError(f"engine returned {len(ro)} rollouts for {len(chunk.prompt_ids)} "
                           f"prompts x {chunk.m} samples")
    texts = ro.texts if ro.texts else [decode(list(r)) for r in ro.response_ids]
    return [{"text": t, "length": len(r), "finish_reason": f}
            for t, r, f in zip(texts, ro.response_ids, ro.finish_reasons)]


def _tool_loop(engine, spec: EngineSpec):
    """The multi-turn loop with tools (mindrl.tools.multi_turn), built once per engine."""
    loop = getattr(engine, "_mindrl_tool_loop", None)
    if loop is None:
        from mindrl.tools.multi_turn import make_tool_rollout  # noqa: PLC0415

        tok = getattr(engine, "tokenizer", None)
        if tok is None:
            from transformers import AutoTokenizer  # noqa: PLC0415

            tok = AutoTokenizer.from_pretrained(spec.model_dir, local_files_only=True)
        t = spec.tools
        names = [x.strip() for x in str(t["names"]).split(",") if x.strip()]
        loop = make_tool_rollout(tok, names, fmt=t["format"], max_turns=t["max_turns"],
                                 timeout_s=t["timeout"], hide_paths=spec.tool_hide,
                                 stop_token_ids=spec.sampling.get("stop_token_ids", ()))
        engine._mindrl_tool_loop = loop
    return loop
