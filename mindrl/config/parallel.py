"""The device and batch arithmetic of a tensor/pipeline-parallel layout (``backend=mindformers``).

Pure numbers, no framework: :meth:`mindrl.config.schema.MindRLConfig.check` runs it at config
load (with an empty model config), and the mindformers backend runs it again once the model's
head and layer counts are known. Errors name the config keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from mindrl.errors import ConfigError


# ---------------------------------------------------------------------------- parallel layout
@dataclass(frozen=True)
class ParallelLayout:
    """How ``world`` devices split one training step: dp x tp x pp; rollout blocks of ``k``."""

    world: int
    dp: int
    tp: int
    pp: int
    micro_batches: int
    rollout_tp: int

    @property
    def blocks(self) -> int:
        """Rollout data-parallel groups (each a vLLM tensor-parallel group of rollout_tp ranks)."""
        return self.world // self.rollout_tp


def parallel_layout(world: int, hf_config: Mapping, *, tp: int, pp: int, micro_batches: int,
                    rollout_tp: int, global_rollouts: int) -> ParallelLayout:
    """Check that the model and the batch split as asked; errors name the config keys.
    ``hf_config`` may be empty (config-load time, before the model directory is read): then
    only the device and batch arithmetic is checked."""
    errors = []
    heads = int(hf_config.get("num_attention_heads", 0))
    kv = int(hf_config.get("num_key_value_heads", heads))
    layers = int(hf_config.get("num_hidden_layers", 0))
    vocab = int(hf_config.get("vocab_size", 0))
    if tp < 1 or pp < 1 or micro_batches < 1 or rollout_tp < 1:
        errors.append("mindformers.tensor_parallel, pipeline_stages, micro_batch_num and "
                      "rollout.tensor_parallel_size must be >= 1")
    elif world % (tp * pp):
        errors.append(f"{world} devices (distributed.nproc x nnodes) are not a multiple of "
                      f"mindformers.tensor_parallel x pipeline_stages = {tp} x {pp}")
    else:
        if heads % tp or kv % tp:
            errors.append(f"mindformers.tensor_parallel={tp} must divide the attention heads "
                          f"({heads}) and the key/value heads ({kv}) of the model")
        if vocab and vocab % tp:
            errors.append(f"mindformers.tensor_parallel={tp} does not divide vocab_size={vocab} "
                          "(the output layer would not be sharded)")
        if layers and layers < pp:
            errors.append(f"mindformers.pipeline_stages={pp} exceeds the model's {layers} layers")
        if pp > 1 and micro_batches < pp:
            errors.append(f"mindformers.micro_batch_num={micro_batches} < pipeline_stages={pp} "
                          "leaves pipeline stages idle; use at least one micro-batch per stage")
        if world % rollout_tp:
            errors.append(f"rollout.tensor_parallel_size={rollout_tp} must divide the "
                          f"{world} devices")
        dp = world // (tp * pp)
        if global_rollouts % (dp * micro_batches):
            errors.append(f"{global_rollouts} rollouts per optimizer step (train.mini_batch_size, "
                          "or train.prompts_per_step x rollout.n) must split into "
                          f"data_parallel ({dp}) x mindformers.micro_batch_num ({micro_batches}) "
                          "equal parts")
    if errors:
        raise ConfigError("mindformers layout:\n  - " + "\n  - ".join(errors))
    return ParallelLayout(world=world, dp=world // (tp * pp), tp=tp, pp=pp,
                          micro_batches=micro_batches, rollout_tp=rollout_tp)
