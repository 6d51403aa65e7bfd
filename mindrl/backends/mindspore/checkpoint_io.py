"""Checkpoint IO of the MindSpore backend: Hugging Face weights (safetensors, ``model.dtype``),
config and tokenizer; AdamW moments and counters (one file, or one slice per rank with
``train.shard_optimizer``, re-sliced on load for any number of ranks); each rank's sampler
RNG. Every state file is written under a temporary name and renamed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator, Tuple

import numpy as np

from mindrl.backends.mindspore import weights as W


class CheckpointIOMixin:
    """Weights and training state in and out (``save_pretrained``, ``save_state``, ...)."""

    def named_weights(self) -> Iterator[Tuple[str, np.ndarray]]:
        """(HF name, float32 array) per parameter; a tied model also yields ``lm_head.weight``
        (the embedding), as torch's ``state_dict()`` does. With LoRA: the base model's names,
        adapted weights merged (W + s * B A)."""
        named = W.named_arrays(self.model)
        if self.lora:
            from mindrl.backends.mindspore.lora import merged_arrays

            named = merged_arrays(self.model, self.lora)
        for name, arr in named:
            yield name, arr
            if name == "model.embed_tokens.weight" and self.spec.tie_word_embeddings:
                yield "lm_head.weight", arr

    def save_adapter(self, directory: str) -> None:
        """LoRA: the adapter alone (peft format, float32), by the calling rank: what a rollout
        engine that runs LoRA itself (vLLM, ``rollout.vllm_lora``) loads each sync."""
        from mindrl.backends.mindspore.lora import save_adapter

        save_adapter(self.model, str(directory), self.model_path, self.lora, "float32")

    def save_pretrained(self, directory: str) -> None:
        """HF weights (``model.dtype``), config.json, generation config and tokenizer; rank 0."""
        if self.rank != 0:
            return
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        if self.lora:                          # the adapter alone (peft format) + tokenizer
            from mindrl.backends.mindspore.lora import save_adapter

            save_adapter(self.model, str(d), self.model_path, self.lora, self.save_dtype)
            if self.tokenizer is not None:
                self.tokenizer.save_pretrained(str(d))
            return
        W.write_checkpoint(str(d), W.named_arrays(self.model), dtype=self.save_dtype)
        cfg = dict(self.hf_config)
        cfg["torch_dtype" if "torch_dtype" in cfg else "dtype"] = self.save_dtype
        (d / "config.json").write_text(json.dumps(cfg, indent=2))
        gen = Path(self.model_path) / "generation_config.json"
        if gen.is_file():
            (d / "generation_config.json").write_text(gen.read_text())
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(str(d))

    def load_pretrained(self, directory: str) -> None:
        """Load policy weights (resume); the reference keeps the original weights."""
        if self.lora:
            from mindrl.backends.mindspore.lora import load_adapter

            return load_adapter(self.model, directory, self.lora)
        # the trained parameters' float32 masters (accelerators, bf16/fp16) follow the files
        W.load_into(self.model, self.optimizer.set_masters(W.iter_checkpoint(directory)))

    load_pretrained_weights = load_pretrained

    def save_state(self, directory: str) -> None:
        """AdamW moments + counters (rank 0; identical on all ranks; with a sharded optimizer
        every rank writes its slice) and each rank's sampler RNG, each file written to a
        temporary name and renamed."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        shards = self.world if getattr(self.optimizer, "sharded", False) else 0
        if shards:                             # train.shard_optimizer: one file per slice
            from mindrl.backends.mindspore.sharded_optim import save_shard

            staged, self._staged_shards = getattr(self, "_staged_shards", None), None
            if staged is not None:             # rank 0 after stage_checkpoint: every slice
                for r, arrays in enumerate(staged):
                    save_shard(self.optimizer, str(d), r, arrays)
            else:                              # every rank calls save_state: its own slice
                save_shard(self.optimizer, str(d))
        if self.rank == 0:
            if not shards:
                W.write_safetensors(str(d / "ms_optimizer.safetensors"),
                                    self.optimizer.state_arrays(), "float32",
                                    metadata={"format": "mindrl-mindspore"})
            meta = {"optimizer_steps": self.optimizer_steps, "adam_step": self.optimizer.step,
                    "skipped_steps": self.skipped_steps, "optimizer_shards": shards}
            tmp = d / "ms_state.json.tmp"
            tmp.write_text(json.dumps(meta))
            os.replace(tmp, d / "ms_state.json")
        if getattr(self, "critic", None) is not None:
            self.critic.save_state(directory)
        rng = {"numpy_engine": self._engine.rng_state() if self._engine is not None else None}
        tmp = d / f"ms_rng_rank{self.rank}.json.tmp"
        tmp.write_text(json.dumps(rng))
        os.replace(tmp, d / f"ms_rng_rank{self.rank}.json")

    def stage_checkpoint(self) -> None:
        """With a sharded optimizer: gather every rank's slice to rank 0 (collective; the
        trainer calls it on every rank before rank 0 alone writes the checkpoint)."""
        if getattr(self.optimizer, "sharded", False):
            self._staged_shards = self.optimizer.gather_shards()
        if getattr(self, "critic", None) is not None:
            self.critic.stage_checkpoint()

    def load_state(self, directory: str) -> None:
        d = Path(directory)
        if (d / "model.safetensors").is_file() or (d / "model.safetensors.index.json").is_file():
            self.load_pretrained(directory)
        meta = json.loads((d / "ms_state.json").read_text())
        shards = int(meta.get("optimizer_shards", 0))   # 0: one replicated file
        if getattr(self.optimizer, "sharded", False):
            from mindrl.backends.mindspore.sharded_optim import load_sharded

            load_sharded(self.optimizer, str(d), meta["adam_step"], shards)
        elif shards:
            from mindrl.backends.mindspore.sharded_optim import replicated_arrays

            self.optimizer.load_state_arrays(
                replicated_arrays(self.optimizer.params, str(d), shards), meta["adam_step"])
        else:
            self.optimizer.load_state_arrays(
                W.read_safetensors(str(d / "ms_optimizer.safetensors")), meta["adam_step"])
        self.optimizer_steps = meta["optimizer_steps"]
        self.skipped_steps = meta["skipped_steps"]
        if getattr(self, "critic", None) is not None:
            self.critic.load_state(directory)
        rng_file = d / f"ms_rng_rank{self.rank}.json"
        if rng_file.is_file() and self._engine is not None:
            state = json.loads(rng_file.read_text()).get("numpy_engine")
            if state is not None:
                self._engine.set_rng_state(state)
