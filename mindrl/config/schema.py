"""The typed configuration of a mindrl run.

Every option has a default and a help string (``metadata["help"]``); ``mindrl config show``
prints them. Sections are frozen dataclasses; :mod:`mindrl.config.loader` builds them from YAML
recipes and dotted overrides and runs :meth:`RunConfig.check` before any work starts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from mindrl.config.parallel import parallel_layout
from mindrl.errors import ConfigError  # noqa: F401  (re-exported: mindrl.config.schema.ConfigError)


def opt(default: Any, help: str, choices: Optional[List[Any]] = None) -> Any:  # noqa: A002
    """A dataclass field with a default, a help string and optional allowed values."""
    meta = {"help": help}
    if choices is not None:
        meta["choices"] = list(choices)
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    return field(default=default, metadata=meta)


def section(cls: type, help: str) -> Any:  # noqa: A002
    return field(default_factory=cls, metadata={"help": help})




GROUP_ESTIMATORS = ("grpo", "dr_grpo", "rloo", "reinforce_pp_baseline", "passk", "gdpo")


LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class LoraConfig:
    """LoRA adapters on the policy (peft on torch, LoRA cells on MindSpore); the names of
    peft's ``LoraConfig`` are given in each help."""

    enabled: bool = opt(False, "Train LoRA adapters instead of the full model: only the "
                        "adapters are optimised and checkpointed, the reference policy is the "
                        "base model with adapters off (no second copy).")
    rank: int = opt(8, "Adapter rank r (peft: r).")
    alpha: float = opt(16.0, "Scale numerator: the update is (alpha / rank) * B A "
                       "(peft: lora_alpha).")
    dropout: float = opt(0.0, "Dropout on the adapter's input in training (peft: "
                         "lora_dropout); off when scoring and sampling.")
    target_modules: List[str] = opt(list(LORA_TARGETS), "Linear layers that get an adapter "
                                    "(peft: target_modules), from: " + ", ".join(LORA_TARGETS)
                                    + ".")


@dataclass(frozen=True)
class MoEConfig:
    """Mixture-of-experts models (Qwen3-MoE, Qwen2-MoE): routing replay."""

    routing_replay: str = opt("none", "Routing replay (mindrl.backends.torch.moe_replay): "
                              "forwards reuse recorded expert choices instead of their own top-k "
                              "(routing weights recomputed from the current router, so it keeps "
                              "its gradient). none; rollout (R3: the rollout engine records each "
                              "token's experts; old log-probs and updates replay them); old (R2: "
                              "the old-log-prob pass records, every update replays). Padded (not "
                              "padding_free) batches; rollout needs rollout.engine=native.",
                              ["none", "rollout", "old"])
    aux_loss_coef: float = opt(0.0, "Add the auxiliary load-balancing loss of the MoE layers "
                               "(transformers' load_balancing_loss_func: num_experts x sum_e "
                               "f_e P_e over real tokens and MoE layers, from the routers' "
                               "native top-k) times this coefficient to the RL loss; f and P "
                               "are shares of the whole mini-batch (all micro-batches and "
                               "ranks, counted in a no-grad pre-pass: one more forward per "
                               "micro-batch), so the gradient does not depend on the "
                               "micro-batch size or packing; 0 = off (verl's and TRL's RL "
                               "default). Metric moe/aux_loss.")


@dataclass(frozen=True)
class ModelConfig:
    path: str = opt("builtin:tiny", "Hugging Face model directory, or 'builtin:tiny' for the "
                    "offline tiny Qwen2-architecture model that mindrl builds itself.")
    dtype: str = opt("float32", "Compute dtype of training and rollout, and the dtype the "
                     "model directory is saved in; bfloat16/float16 train float32 master weights "
                     "(4 more bytes per trained parameter).",
                     ["float32", "bfloat16", "float16"])
    gradient_checkpointing: bool = opt(False, "Recompute each decoder layer's activations in "
                                       "backward to save memory (torch: transformers' "
                                       "gradient checkpointing; mindspore: Cell.recompute on "
                                       "every layer; mindformers: use mindformers.recompute).")
    trust_remote_code: bool = opt(False, "Allow model code from the model directory.")
    chat_template: str = opt("model", "Chat template: 'model' (the tokenizer's own), "
                             "'qwen25-math-cot', 'qwen25-chat', 'r1-think' or 'none'.")
    lora: LoraConfig = section(LoraConfig, "LoRA adapters (parameter-efficient RL).")
    moe: MoEConfig = section(MoEConfig, "Mixture-of-experts models: routing replay.")


@dataclass(frozen=True)
class ResampleConfig:
    n: int = opt(8, "Samples per training problem when the previous stage's model rates them.")
    lo: float = opt(0.0, "Keep problems whose pass rate is above this (exclusive).")
    hi: float = opt(1.0, "Keep problems whose pass rate is below this (exclusive): 0 < p < 1 "
                    "by default, the problems the model solves sometimes but not always.")
    keep_unsolved: bool = opt(False, "Also keep the problems no sample solved (pass rate 0): "
                              "with hi=1 only the always-solved problems are dropped, the "
                              "drop-all-correct rule of the seed log's data preparation.")
    temperature: float = opt(1.0, "Sampling temperature of the rating run.")
    max_new_tokens: int = opt(0, "Response limit of the rating run (0 = rollout.max_new_tokens).")


@dataclass(frozen=True)
class DataConfig:
    train_file: str = opt("", "Training prompts: a JSONL/parquet path, a built-in name "
                          "('gsm8k', 'gsm8k_test', 'math_l3to5', 'countdown', 'kk') or a generator "
                          "('countdown:gen', 'kk:gen').")
    val_file: str = opt("", "Held-out prompts for validation (same forms as train_file).")
    val_split: float = opt(0.0, "With data.val_file empty: hold out this share of the training "
                           "file's (or built-in set's) rows (a fixed, seeded choice; at least 1 row, at most "
                           "data.max_val_samples) for validation and train on the rest "
                           "(0 = no validation set).")
    data_dir: str = opt("", "Directory holding the built-in data files (eval/, train/, tasks/); "
                        "'' = $MINDRL_DATA_DIR, else the user cache that `mindrl data fetch` "
                        "fills (~/.cache/mindrl/data).")
    format: str = opt("auto", "Data format: auto (detected from the columns and printed), "
                      "verl, orz, pairwise, preference, messages, sharegpt, prompt_completion, "
                      "columns (see mindrl.data.formats); for SFT also traces and reasoning, "
                      "and messages / sharegpt train on whole conversations with the loss on "
                      "assistant turns (see mindrl.data.conversations).",
                      ["auto", "verl", "orz", "pairwise", "preference", "messages", "sharegpt",
                       "prompt_completion", "columns", "traces", "reasoning"])
    prompt_field: str = opt("", "Field path of the problem text, e.g. 'question', "
                            "'prompt' (chat messages: the user turn), 'extra_info.question' "
                            "('' = the format's default).")
    answer_field: str = opt("", "Field path of the gold answer, e.g. "
                            "'reward_model.ground_truth', '[1].ground_truth.value'; a list "
                            "is any-of ('' = the format's default).")
    id_field: str = opt("", "Field path(s) of the problem id; several comma-separated are "
                        "joined with '-' (e.g. 'year,contest,number'; '' = the format's "
                        "default).")
    system_prompt: str = opt("", "System prompt prepended by the chat template ('' = none, or "
                             "the data's own system turn).")
    templated_prompts: str = opt("auto", "Prompts already in a chat format are used as-is: "
                                 "auto (when they carry a chat marker such as <|im_start|>), "
                                 "always, never.", ["auto", "always", "never"])
    max_prompt_len: int = opt(256, "Prompts longer than this many tokens are dropped (logged).")
    max_response_len: int = opt(16384, "SFT and DPO/SimPO: responses (targets, chosen and "
                                "rejected, with their end-of-turn token) longer than this many "
                                "tokens are cut to it; the rows cut are counted before training "
                                "(count and longest) and in the run summary.")
    max_truncated_share: float = opt(0.05, "SFT and DPO/SimPO: stop before training when "
                                     "more than this share of the checked rows "
                                     "(data.preflight_rows) have a response longer than "
                                     "data.max_response_len (0 = any cut stops; 1 = cut and go "
                                     "on).")
    max_train_samples: int = opt(0, "Use at most this many training rows (0 = all).")
    max_val_samples: int = opt(64, "Use at most this many validation rows (0 = all).")
    response_field: str = opt("", "SFT: field path of the target response ('' = the format's "
                              "default: completion / response / solution / answer).")
    chosen_field: str = opt("", "DPO/SimPO: field path of the preferred response ('' = "
                            "'chosen'; chat messages: the last assistant turn).")
    rejected_field: str = opt("", "DPO/SimPO: field path of the dispreferred response ('' = "
                              "'rejected').")
    preflight_rows: int = opt(64, "Rows checked before the model loads (gold answers "
                              "scorable by the rewards).")
    preflight_max_unscorable: float = opt(0.1, "Stop before training when more than this "
                                          "share of the checked rows cannot be scored, or "
                                          "(RL) cannot earn a reward's maximum with the gold "
                                          "answer written as an ideal completion.")
    step_max_unscorable: float = opt(0.5, "RL: stop when a reward is None (unscorable) for "
                                     "more than this share of a step's rollouts.")
    shuffle: bool = opt(True, "Shuffle the training prompts each epoch (seeded).")
    from_stage: str = opt("", "Multi-stage recipes, a stage after the first: 'eval+filter' "
                          "rates this stage's train_file with the previous stage's final model "
                          "(data.resample.n samples each) and trains on the problems whose pass "
                          "rate lies in (data.resample.lo, data.resample.hi); '' = train_file "
                          "as it is.", ["", "eval+filter"])
    resample: ResampleConfig = section(ResampleConfig, "data.from_stage=eval+filter: how the "
                                       "previous stage's model rates the problems.")
    trace_select: str = opt("first_correct", "SFT format 'traces': which trace of a list "
                            "column to train on: the first marked correct "
                            "(correctness_math_verify; rows with none are dropped), or the "
                            "first.", ["first_correct", "first"])


@dataclass(frozen=True)
class RolloutConfig:
    engine: str = opt("native", "Rollout engine: 'native' (the backend's sampler) or 'vllm'.",
                      ["native", "vllm"])
    n: int = opt(8, "Samples per prompt (the group size).")
    temperature: float = opt(1.0, "Sampling temperature; the trainer divides logits by the same "
                             "value so both score the same distribution.")
    top_p: float = opt(1.0, "Nucleus sampling mass (1.0 = off).")
    top_k: int = opt(-1, "Top-k sampling (-1 = off).")
    min_p: float = opt(0.0, "Min-p sampling (0 = off).")
    max_new_tokens: int = opt(128, "Maximum response length in tokens.")
    seed: int = opt(0, "Sampling seed.")
    batch_invariant: bool = opt(False, "Sample each prompt's group in its own call, seeded by "
                                "(seed, step, global prompt index), so the rollouts do not depend "
                                "on how prompts are split across ranks (reproducible data-parallel "
                                "runs; slower on small models).")
    native_packed_weights: bool = opt(True, "engine=native, torch backend on CPU: the decode "
                                      "steps multiply by linear weights packed once per "
                                      "generate call in oneDNN's blocked layout (faster at "
                                      "decode batch sizes; the packed copies hold as much "
                                      "memory as the linear weights until the call returns).")
    gpu_memory_utilization: float = opt(0.5, "vLLM: fraction of accelerator memory to use.")
    vllm_lora: str = opt("auto", "vLLM with model.lora.enabled: how the engine follows the "
                         "policy. 'adapter': vLLM runs the base model with LoRA on and gets "
                         "only the adapter each sync (a LoRARequest, written to "
                         "<run>/rollout_adapter/); 'merged': it gets the full merged weights "
                         "W + s*B*A each sync; 'auto': merged on device=cpu (vLLM's CPU LoRA "
                         "kernels slow the rollout more than the smaller sync saves: see the "
                         "Benchmarks page, LoRA), elsewhere adapter when this vLLM supports "
                         "LoRA and rank <= 512, else merged. rollout.mode=async_ray: merged "
                         "(each worker merges the pushed adapters; adapter is refused).",
                         ["auto", "adapter", "merged"])
    tensor_parallel_size: int = opt(1, "vLLM: devices per engine (tensor parallel, vLLM's "
                                    "external_launcher SPMD mode; the group's ranks get the same "
                                    "prompts). > 1 needs backend=mindformers.")
    ascend_plugin: str = opt("auto", "vLLM platform plugin on Ascend (device=ascend): "
                             "vllm-ascend, vllm-mindspore, or auto (by backend). Untested on "
                             "hardware.", ["auto", "vllm-ascend", "vllm-mindspore"])
    max_turns: int = opt(4, "With tools.enabled: model turns per sample (at most max_turns - 1 "
                         "tool calls are run); max_new_tokens bounds all turns plus tool "
                         "outputs together.")
    logprob_gap_warn: float = opt(0.05, "Warn when the mean |rollout - trainer| log-prob gap of "
                                  "sampled tokens exceeds this many nats.")
    async_ahead: int = opt(0, "1 = sample the next step's batch in a background thread while "
                           "this step updates (off-policy by one update, rollout/staleness = 1; "
                           "torch backend, native engine, one process). Unless "
                           "algorithm.rollout_correction.rollout_is or algorithm.tis_cap is set, "
                           "it turns on token-level truncated IS against the engine's log-probs "
                           "(rollout_is=token at rollout_is_threshold). 0 = off.", [0, 1])
    async_sampler: str = opt("process", "With async_ahead: where the next batch is sampled. "
                             "process: a child process with its own copy of the weights in "
                             "shared memory (no GIL shared with training; device=cpu; it is "
                             "spawned, so a Python script that trains must start under `if "
                             "__name__ == '__main__':`); thread: a background thread over a "
                             "private copy of the model.",
                             ["process", "thread"])
    mode: str = opt("sync", "Where rollouts run. sync: in the trainer's process (or one step "
                    "ahead with async_ahead=1); async_ray: rollout.workers Ray actors, each with "
                    "its own engine, sample and score groups into a bounded queue while the "
                    "trainer updates; a step takes its batch as soon as enough groups are ready "
                    "(mindrl.trainer.async_ray; backend torch or mindspore, engine native or vllm, "
                    "device=cpu, one trainer process). Unless algorithm.rollout_correction.rollout_is or "
                    "algorithm.tis_cap is set, it turns on token-level truncated IS against the "
                    "workers' log-probs.", ["sync", "async_ray"])
    workers: int = opt(2, "mode=async_ray: rollout worker actors (each holds a full copy of the "
                       "model and samples one group at a time).")
    max_staleness: int = opt(1, "mode=async_ray: the most policy updates a sample may lag "
                             "behind the update it trains (k). A group is not started if it "
                             "could only be trained on more than k updates later, and a "
                             "finished group older than k is dropped (counted in "
                             "rollout/dropped_groups). 0 = on-policy through the workers.")
    queue_size: int = opt(0, "mode=async_ray: the most groups (prompts x n samples) in flight or "
                          "waiting in the queue; 0 = (max_staleness + 1) x "
                          "train.prompts_per_step. At least train.prompts_per_step.")
    max_restarts: int = opt(3, "mode=async_ray: restarts of a rollout worker whose process died "
                            "(its groups are re-issued to the workers alive); -1 = no limit.")
    worker_devices: List[int] = opt([], "mode=async_ray with device=cuda or ascend: the "
                                    "accelerators the rollout workers run on (ids as nvidia-smi "
                                    "/ npu-smi number them); worker i gets "
                                    "worker_devices[i % len]; the trainer keeps the device it "
                                    "was started on (a worker on the same one shares its "
                                    "memory). Empty with device=cpu.")
    partial_rollouts: bool = opt(False, "mode=async_ray: a generation in flight when the "
                                 "trainer publishes new weights stops at the next token "
                                 "boundary, loads them and continues its tokens under them "
                                 "(each token keeps the behaviour log-prob of the policy that "
                                 "sampled it; rollout/token_staleness, rollout/resumes). The "
                                 "staleness bound and drops still count from the version a "
                                 "group started with.")
    partial_check_tokens: int = opt(8, "partial_rollouts: decode steps between a worker's "
                                    "checks for newer weights (rollout.engine=vllm: the length "
                                    "of the segments it generates between checks).")


@dataclass(frozen=True)
class KLConfig:
    coef: float = opt(0.0, "KL coefficient beta (0 = no reference model).")
    estimator: str = opt("k3", "KL estimator: k1, k2, k3 (low variance).", ["k1", "k2", "k3"])
    in_reward: bool = opt(False, "Fold the per-token KL penalty into the reward (REINFORCE++) "
                          "instead of adding it to the loss.")
    log_ratio_clip: float = opt(0.0, "Clamp log(pi/pi_ref) to [-c, c] before the estimator "
                                "(0 = off).")
    value_clip: float = opt(0.0, "Clamp the per-token KL estimate to [-c, c] (0 = off).")


@dataclass(frozen=True)
class DynamicSamplingConfig:
    enabled: bool = opt(False, "Drop groups whose rewards all agree (no signal) and refill "
                        "from the data stream (DAPO).")
    max_refill_batches: int = opt(3, "Extra rollout batches allowed per step to refill.")


@dataclass(frozen=True)
class EntropyControlConfig:
    """Adaptive entropy control (Skywork-OR1; algorithms/entropy_control.py)."""

    enabled: bool = opt(False, "Adapt the entropy bonus coefficient every step (Skywork-OR1): "
                        "+delta while the measured entropy is below target, -delta otherwise, "
                        "clipped to [0, max_coef], applied only while the entropy is below "
                        "target; algorithm.entropy_coef is the starting coefficient.")
    target: float = opt(0.2, "Target token entropy in nats (Skywork-OR1 scripts: 0.2).")
    delta: float = opt(1.0e-4, "Per-step change of the coefficient (Skywork-OR1 7b_8k.sh: "
                       "1e-4).")
    max_coef: float = opt(0.005, "Upper bound of the coefficient (Skywork-OR1 7b_8k.sh: "
                          "0.005); the lower bound is 0.")


@dataclass(frozen=True)
class RolloutCorrectionConfig:
    """Rollout-vs-trainer corrections (algorithms.is_correction); keys as verl's
    algorithm.rollout_correction."""

    rollout_is: Optional[str] = opt(None, "Importance weights pi_old/pi_rollout on the policy "
                                    "loss: null (off), token, or sequence (product over the "
                                    "sequence's tokens).", [None, "token", "sequence"])
    rollout_is_threshold: Any = opt(2.0, "rollout_is bound: a number u truncates the weight "
                                    "at u (TIS); a string 'l_u' zeroes weights outside [l, u] "
                                    "(IcePop two-sided mask).")
    rollout_rs: Optional[str] = opt(None, "Rejection (comma-separated, all must pass): "
                                    "token_k1 (masked IS per token), seq_sum_k1 (per "
                                    "sequence), seq_mean_k1 (geometric-mean sequence mask), "
                                    "token|seq_sum|seq_mean_k2|k3, seq_max_k2|k3; null = off.")
    rollout_rs_threshold: Any = opt(None, "rollout_rs bounds, one shared or one per option, "
                                    "comma-separated: 'l_u' or u (then l = 1/u) on "
                                    "pi_rollout/pi_old for *_k1; an upper bound for k2/k3.")
    off_policy_seq_mask_kl: float = opt(0.0, "Off-policy sequence masking (DeepSeek-V3.2): "
                                        "drop the negative-advantage tokens of a sequence whose "
                                        "mean log(pi_rollout/pi_theta) exceeds this (0 = off).")


@dataclass(frozen=True)
class DistillConfig:
    """On-policy distillation (algorithms.distill): the teacher scores the student's rollouts."""

    teacher: str = opt("", "On-policy distillation: the teacher model that scores the student's "
                       "own rollouts (a Hugging Face directory, a run or checkpoint step folder, "
                       "or builtin:NAME; its tokenizer must be the student's). '' = off.")
    mode: str = opt("advantage", "advantage: per-token advantage -coef * k1 (k1 = log pi_student "
                    "- log pi_teacher on the sampled token, the reverse-KL estimate), added to "
                    "task_weight x the task advantage; loss: coef x the reverse KL (k1, "
                    "score-function gradient) as an extra loss term.", ["advantage", "loss"])
    coef: float = opt(1.0, "Weight of the reverse KL to the teacher (advantage or loss term).")
    task_weight: float = opt(1.0, "Weight of the task-reward advantage beside the distillation "
                             "signal (0 = pure distillation).")
    teacher_temperature: float = opt(1.0, "The teacher's log-probs are of logits / this (> 0).")
    estimator: str = opt("sampled", "The reverse KL to the teacher: sampled (k1 = log pi_student "
                         "- log pi_teacher of the sampled token, one sample per position); full "
                         "(the exact KL over the whole vocabulary at every response position, "
                         "from both models' logits in the training micro-batch, gradient "
                         "through the student's distribution: no sampling variance; needs "
                         "mode=loss; backend torch or mindspore).", ["sampled", "full"])


@dataclass(frozen=True)
class AlgorithmConfig:
    adv_estimator: str = opt("grpo", "Advantage estimator: grpo, dr_grpo, rloo, reinforce_pp, "
                             "reinforce_pp_baseline, passk, gdpo (each reward component "
                             "normalised in its group before the weighted sum), gae (PPO with "
                             "a critic: see critic.*).")
    std_eps: float = opt(1e-6, "GRPO (and REINFORCE++ whitening): epsilon added to the std, "
                         ">= 0. A group (batch) whose values all agree gets advantage 0 "
                         "whatever eps, so 0 is allowed.")
    std_ddof: int = opt(1, "GRPO: ddof of the group std (1 = unbiased, as verl and TRL).",
                        [0, 1])
    gamma: float = opt(1.0, "REINFORCE++ and gae: discount of token-level returns (verl "
                       "algorithm.gamma; Open-Reasoner-Zero uses 1).")
    lam: float = opt(1.0, "gae: the GAE lambda in [0, 1] (verl algorithm.lam; "
                     "Open-Reasoner-Zero uses 1).")
    whiten_advantages: bool = opt(True, "gae: whiten the advantages over the batch's response "
                                  "tokens (mean 0, std 1; std_eps, std_ddof), as verl does.")
    passk_k: int = opt(4, "passk: k of the Pass@k objective (k <= rollout.n).")
    policy_loss: str = opt("ppo_clip", "Policy loss: ppo_clip (verl vanilla), vanilla_pg, gspo, "
                           "gspo_token (verl gspo), cispo, sapo, clip_cov, kl_cov, gmpo (verl "
                           "geo_mean), gpg.")
    clip_eps_low: float = opt(0.2, "PPO clip: ratio lower bound is 1 - eps_low.")
    clip_eps_high: float = opt(0.2, "PPO clip: ratio upper bound is 1 + eps_high "
                               "(clip-higher: DAPO uses 0.28).")
    dual_clip_c: float = opt(0.0, "Dual-clip constant c > 1 for negative advantages (0 = off).")
    log_ratio_clamp: float = opt(20.0, "Clamp logp - old_logp before exp for stability.")
    tis_cap: float = opt(0.0, "Truncated importance sampling against the rollout engine's own "
                         "log-probs, capped at this ratio (0 = off).")
    tau_pos: float = opt(1.0, "sapo: gate temperature for tokens with positive advantage "
                         "(verl actor.tau_pos).")
    tau_neg: float = opt(1.05, "sapo: gate temperature for tokens with advantage <= 0 "
                         "(verl actor.tau_neg).")
    clip_cov_ratio: float = opt(0.0002, "clip_cov: share of the mini-batch's tokens whose "
                                "gradient is removed (verl policy_loss.clip_cov_ratio).")
    clip_cov_lb: float = opt(1.0, "clip_cov: lower covariance bound of the eligible band.")
    clip_cov_ub: float = opt(5.0, "clip_cov: upper covariance bound of the eligible band.")
    kl_cov_ratio: float = opt(0.0002, "kl_cov: share of the mini-batch's tokens (largest "
                              "covariance) that get the KL penalty.")
    ppo_kl_coef: float = opt(1.0, "kl_cov: coefficient of |logp - old_logp| on those tokens.")
    rollout_correction: RolloutCorrectionConfig = section(
        RolloutCorrectionConfig, "Rollout-vs-trainer corrections: sequence/token IS, IcePop, "
        "masked IS, geometric-mean mask, off-policy sequence masking.")
    kl: KLConfig = section(KLConfig, "KL to the reference policy.")
    entropy_coef: float = opt(0.0, "Entropy bonus coefficient (with entropy_control.enabled: "
                              "the controller's starting coefficient).")
    entropy_control: EntropyControlConfig = section(
        EntropyControlConfig, "Adaptive entropy control (Skywork-OR1).")
    loss_agg_mode: str = opt("token_mean", "Loss aggregation: token_mean, seq_mean_token_sum, "
                             "seq_mean_token_mean, seq_mean_token_sum_norm (Dr. GRPO).")
    dynamic_sampling: DynamicSamplingConfig = section(DynamicSamplingConfig,
                                                      "Dynamic sampling of groups.")
    distill: DistillConfig = section(DistillConfig, "On-policy distillation from a teacher "
                                     "model (reverse KL on the student's rollouts).")


@dataclass(frozen=True)
class CriticConfig:
    model_path: str = opt("", "gae: the critic's starting weights: '' = the policy's "
                          "(model.path) with a fresh value head; a mindrl checkpoint directory "
                          "(its critic: state/critic/critic.safetensors) or that file; or a "
                          "Hugging Face causal LM of the policy's architecture (its decoder, a "
                          "fresh head).")
    lr: float = opt(5e-6, "gae: the critic's peak learning rate (its own AdamW; betas, eps, "
                    "warm-up and schedule as train.*).")
    weight_decay: float = opt(0.0, "gae: the critic's AdamW weight decay.")
    grad_clip: float = opt(1.0, "gae: clip the critic's global gradient norm (0 = off).")
    cliprange_value: float = opt(0.5, "gae: value-loss clipping: the new value may move at "
                                 "most this far from the rollout-time value before the loss "
                                 "stops pulling (verl critic.cliprange_value; 0 = off).")
    loss_agg_mode: str = opt("token_mean", "gae: aggregation of the value loss (as "
                             "algorithm.loss_agg_mode).")
    warmup_steps: int = opt(0, "gae: the first N steps train only the critic; the policy is "
                            "not updated (verl trainer.critic_warmup).")
    head_init_std: float = opt(0.02, "gae: std of the fresh value head's weights (normal, "
                               "seeded by train.seed; bias 0), as a transformers "
                               "token-classification head.")


@dataclass(frozen=True)
class RewardFunctionConfig:
    name: str = opt("accuracy", "Registered reward name or dotted import path 'pkg.mod:fn'.")
    weight: float = opt(1.0, "Weight of this component in the summed reward.")
    params: Dict[str, Any] = opt({}, "Keyword arguments for a parameterised reward.")


@dataclass(frozen=True)
class RewardConfig:
    functions: List[RewardFunctionConfig] = opt(
        [RewardFunctionConfig()], "Reward components, summed with their weights.")
    num_workers: int = opt(2, "Scoring worker processes (0 = score in this process: fastest "
                           "for cheap rewards such as the demo's; the timeout still holds, by a "
                           "SIGALRM timer in the main thread, and from any other thread one "
                           "worker process is used instead).")
    overlap_groups: bool = opt(False, "Score each group as soon as all of its samples have "
                               "stopped, while generation goes on for the others (native "
                               "engines, torch and mindspore; with rollout.batch_invariant, any "
                               "engine: each group is scored while the next one samples). The "
                               "samples are unchanged. Scoring then runs in a background thread "
                               "(with num_workers=0: in one worker process). Refused with "
                               "rollout.engine=vllm or tools unless batch_invariant, and with "
                               "overlap_chunks > 1.")
    overlap_chunks: int = opt(0, "Score while generating: split each rollout batch into this "
                              "many chunks of whole groups; a background thread generates them "
                              "one after another while this thread scores the finished ones "
                              "(0 or 1 = generate all, then score). Samples are drawn with a "
                              "per-chunk seed, so they differ from an unsplit batch's.")
    timeout: float = opt(5.0, "Per-item time limit in seconds, in every mode; a timeout scores "
                         "None (counted in reward/timeouts).")
    none_as: float = opt(0.0, "Value used in the summed reward for an unscorable item.")


@dataclass(frozen=True)
class TrainConfig:
    steps: int = opt(20, "Number of RL steps (rollout + update).")
    prompts_per_step: int = opt(8, "Prompts per rollout batch (each sampled rollout.n times).")
    mini_batch_size: int = opt(0, "Rollouts per optimizer step (0 = the whole batch: strict "
                               "on-policy).")
    micro_batch_size: int = opt(8, "Rollouts per forward/backward (gradient accumulation). "
                                "RL on backend=torch, unless train.padding_free: rows are "
                                "sorted by length (longest first) before they are cut, so "
                                "each micro-batch is padded only to its own longest row; loss "
                                "normalisers stay global, and clip_cov / kl_cov pick their "
                                "tokens over the whole mini-batch, so the gradient is the "
                                "in-order one up to float summation order (the MoE "
                                "load-balancing loss too: model.moe.aux_loss_coef).")
    ppo_epochs: int = opt(1, "Passes over each rollout batch.")
    lr: float = opt(1e-6, "Peak learning rate (AdamW).")
    weight_decay: float = opt(0.0, "AdamW weight decay.")
    betas: List[float] = opt([0.9, 0.999], "AdamW betas.")
    adam_eps: float = opt(1e-8, "AdamW epsilon.")
    warmup_steps: int = opt(0, "Linear warm-up steps.")
    lr_schedule: str = opt("constant", "Schedule after warm-up.", ["constant", "cosine"])
    min_lr_ratio: float = opt(0.0, "Cosine schedule floor as a fraction of lr.")
    grad_clip: float = opt(1.0, "Clip the global gradient norm (0 = off).")
    seed: int = opt(0, "Seed for data order, initialisation and sampling.")
    threads: int = opt(1, "CPU threads per process (torch, MindSpore's kernels and NumPy's "
                       "BLAS, which runs MindSpore's LM head on CPU).")
    fsdp: bool = opt(False, "backend=torch under torchrun: shard parameters, gradients and "
                     "AdamW state over the ranks (FSDP2 fully_shard per decoder layer) instead "
                     "of a full replica per rank. A native rollout engine then keeps its own "
                     "full copy, synced every step; rollout.engine=vllm needs no copy.")
    shard_optimizer: bool = opt(False, "backend=mindspore under msrun: each data-parallel rank "
                                "keeps only its 1/world slice of the float32 AdamW state "
                                "(moments, and master weights of a bf16/fp16 model) and of the "
                                "float32 gradient accumulator instead of full copies; each "
                                "micro-batch's gradient is reduce-scattered into the slices in "
                                "256 MiB buckets (all-reduced on CPU), each rank updates its "
                                "slice, and the ranks all-gather the new weights bucket by "
                                "bucket. Same update as the replicated optimizer; checkpoints "
                                "hold one optimizer slice per rank and resume on any number of "
                                "ranks. The PPO critic's optimizer is sharded the same way.")
    recompute_old_logp: bool = opt(True, "Score rollouts with the trainer before the update "
                                   "(old log-probs, and the rollout-vs-trainer gap). When off, "
                                   "with one epoch and one mini-batch, the update uses the "
                                   "detached current log-probs and the gap is measured in the "
                                   "update's forward.")
    padding_free: bool = opt(False, "RL on backend=torch (refused on the other backends and "
                             "by SFT / DPO jobs): pack the rows of a micro-batch into one "
                             "row with per-sequence position ids, each sequence attending "
                             "within itself, so no compute goes to padding (same log-probs as "
                             "the padded layout). Off: each micro-batch (rows of similar "
                             "length, see train.micro_batch_size) is trimmed to its own "
                             "longest row.")
    max_tokens_per_micro_batch: int = opt(0, "Cut micro-batches by a token budget instead of "
                                          "train.micro_batch_size: rows sorted by length are "
                                          "grouped while their prompt+response tokens (padded "
                                          "to the group's longest row unless "
                                          "train.padding_free) fit the budget; a longer row "
                                          "gets a micro-batch of its own. backend=mindspore "
                                          "counts the compiled shape (prompt bucket + response "
                                          "bucket) and pads each micro-batch to its own. Loss "
                                          "normalisers stay global (0 = off).")
    logprob_chunk_tokens: int = opt(-1, "backend=torch and backend=mindspore (a count is "
                                    "refused on mindformers): compute log-probs, entropies "
                                    "and the exact distillation KL from the final hidden "
                                    "states a chunk of this many tokens at a time, so the LM "
                                    "head holds O(chunk x vocabulary) floats instead of "
                                    "full-vocabulary logits for every token (same numbers; "
                                    "torch recomputes a chunk in the backward unless all "
                                    "chunks' log-softmax fits half the head's budget). Both "
                                    "backends chunk the RL update, the log-prob passes, SFT "
                                    "and DPO / IPO / SimPO. -1 = automatic (about 512 MB of "
                                    "head work per chunk: 110 tokens on torch, 44 on "
                                    "MindSpore at a 151,936 vocabulary), 0 = off (full "
                                    "logits).")


# Keys that may differ from a checkpoint's config on resume without checkpoint.allow_changes:
# they change how long a run goes on, how it is logged, validated, saved or launched, or how
# many threads and workers share the same work; not what a step computes.
RESUMABLE_KEYS = ("train.steps", "train.threads", "logging.*", "checkpoint.*", "validation.*",
                  "reward.num_workers", "rollout.gpu_memory_utilization",
                  "distributed.launcher", "distributed.master_addr", "distributed.master_port",
                  "distributed.ray_*", "plan.*")


@dataclass(frozen=True)
class CheckpointConfig:
    every: int = opt(0, "Save every k steps (0 = only at the end).")
    keep_last: int = opt(2, "Keep the newest N checkpoints.")
    resume: bool = opt(True, "Resume from the newest complete checkpoint in the run directory.")
    save_final: bool = opt(True, "Save a checkpoint after the last step.")
    stop_grace_s: float = opt(120.0, "After SIGTERM/SIGINT the run finishes its step, saves a "
                              "checkpoint and exits; when the step has not ended this many "
                              "seconds after the signal, it exits without one (0 = wait for "
                              "the step however long). A second signal always exits at once.")
    allow_changes: List[str] = opt([], "Resume: config keys that may differ from the "
                                   "checkpoint's stored config (dotted keys, sections or globs, "
                                   "e.g. [train.lr, algorithm]; '[\"*\"]' = any). Without them "
                                   "a changed key stops the run, listing 'key: old -> new'. "
                                   "Always allowed: " + ", ".join(RESUMABLE_KEYS) + ".")


@dataclass(frozen=True)
class ValidationConfig:
    every: int = opt(0, "Validate every m steps (0 = off).")
    n: int = opt(1, "Samples per validation prompt.")
    temperature: float = opt(0.0, "Validation temperature (0 = greedy).")
    reward: str = opt("", "Reward that decides correctness ('' = the first of reward.functions).")
    correct_threshold: float = opt(1.0, "A sample is correct when that reward is >= this.")
    before_training: bool = opt(False, "Also validate the starting model (logged as step 0).")


@dataclass(frozen=True)
class LoggingConfig:
    output_dir: str = opt("runs/grpo", "Run directory: config, metrics.jsonl, checkpoints, plots.")
    tensorboard: bool = opt(True, "Also write TensorBoard scalars.")
    progress_bar: bool = opt(True, "Show a console progress bar.")
    verbose: bool = opt(False, "Show the frameworks' own log lines (MindSpore's [WARNING]/[INFO] "
                        "lines; GLOG_v=1). Off: errors only (GLOG_v=3), unless GLOG_v is set.")
    plot: bool = opt(True, "Draw reward/accuracy/length/KL curves to PNG at the end.")
    save_rollouts: int = opt(0, "Save the rollouts of step 1 and of every N-th step to "
                             "rollouts/step_NNNNNN.jsonl (prompt, response and its token ids, "
                             "rewards per function, advantage, rollout log-probs), for "
                             "`mindrl show-rollouts` and `mindrl analyze logprob-quantiles` "
                             "(0 = off).")
    profile: bool = opt(False, "Per-phase step time in metrics.jsonl: time/rollout "
                        "(generation), time/reward (scoring), time/old_logprobs, "
                        "time/ref_logprobs, time/advantages, time/train_fwd_bwd, "
                        "time/optimizer, time/batching, time/weight_sync, time/logging, "
                        "time/checkpoint, time/other; and profile/overhead_fraction (the share "
                        "of the step outside model forward/backward and generation). Drawn in "
                        "curves.png (see mindrl/trainer/profile.py).")
    save_rollouts_max_mb: float = opt(256.0, "Stop saving rollouts (with a warning) once the "
                                      "rollouts/ directory would exceed this many MB.")


@dataclass(frozen=True)
class DistributedConfig:
    launcher: str = opt("none", "How workers are started: none (one process, or the backend's "
                        "launcher when nproc > 1 or nnodes > 1), torchrun, msrun, or ray (a Ray "
                        "driver runs the backend's launcher on each of nnodes cluster nodes).",
                        ["none", "torchrun", "msrun", "ray"])
    nproc: int = opt(1, "Worker processes per node (one per accelerator).")
    nnodes: int = opt(1, "Number of nodes (env NNODES overrides; NODE_RANK gives this node's "
                      "rank for torchrun/msrun started on every node by hand or a scheduler).")
    master_addr: str = opt("127.0.0.1", "Rendezvous address (env MASTER_ADDR overrides; Ray "
                           "uses node 0's address).")
    master_port: int = opt(29500, "Rendezvous port (env MASTER_PORT overrides; 0 with "
                           "launcher=ray picks a free port on node 0).")
    ray_address: str = opt("auto", "launcher=ray: the cluster to join: 'auto' (the one `ray "
                           "start` made on this node), host:port, or 'local' (a one-machine Ray).")
    ray_resource: str = opt("auto", "launcher=ray: accelerator resource each node bundle asks "
                            "nproc of: auto (NPU on ascend, GPU on cuda, none on cpu), or a "
                            "resource name ('' = CPU only).")
    ray_placement_timeout_s: float = opt(120.0, "launcher=ray: give up (naming the cluster's "
                                         "resources) when the nodes cannot be placed in time.")


@dataclass(frozen=True)
class PreferenceConfig:
    loss: str = opt("dpo", "Preference loss: dpo, ipo, simpo.", ["dpo", "ipo", "simpo"])
    beta: float = opt(0.1, "Inverse temperature beta.")
    label_smoothing: float = opt(0.0, "DPO: label smoothing (conservative DPO).")
    gamma: float = opt(0.5, "SimPO: target reward margin gamma (the gamma/beta ratio is the "
                       "margin in log-prob units).")
    pref_ftx: float = opt(0.0, "Weight of the SFT term added to the preference loss.")
    sft_term: str = opt("mean_token", "Form of that SFT term on the chosen response: mean_token "
                        "(-sum_t log pi / |y_w|, per-token NLL) or sum (-sum_t log pi, the "
                        "sequence NLL; grows with the response length).", ["mean_token", "sum"])


@dataclass(frozen=True)
class MindformersConfig:
    tensor_parallel: int = opt(1, "backend=mindformers: tensor (model) parallel size; divides "
                               "the attention and key/value heads and the vocabulary.")
    pipeline_stages: int = opt(1, "backend=mindformers: pipeline stages.")
    micro_batch_num: int = opt(1, "backend=mindformers: micro-batches per step (>= "
                               "pipeline_stages keeps every stage busy).")
    sequence_parallel: bool = opt(True, "backend=mindformers: shard norms/dropout activations "
                                  "over the tensor-parallel group.")
    vocab_emb_dp: bool = opt(False, "backend=mindformers: replicate the embedding over data "
                             "parallel instead of sharding the vocabulary (no effect with "
                             "pipeline_stages > 1).")
    recompute: bool = opt(True, "backend=mindformers: recompute every layer's activations in "
                          "backward.")
    optimizer_shard: bool = opt(True, "backend=mindformers: shard AdamW state over data "
                                "parallel (MindSpore parallel optimizer).")
    use_flash_attention: bool = opt(True, "backend=mindformers: FlashAttentionScore kernel.")
    seq_length: int = opt(0, "backend=mindformers: padded sequence length of the compiled "
                          "graph (0 = data.max_prompt_len + rollout.max_new_tokens).")
    stage_layer_offset: List[int] = opt([], "backend=mindformers: per-stage layer offsets "
                                        "(mindformers 'offset'; [] = even split).")
    extra_model_config: Dict[str, Any] = opt({}, "backend=mindformers: extra LlamaConfig "
                                             "keys, applied last.")


def _check_losses(a: AlgorithmConfig, r: RolloutConfig) -> List[str]:
    """Checks of the policy-loss options and the rollout corrections."""
    from algorithms.is_correction import parse_is_threshold, parse_rs

    errors = []
    for key in ("tau_pos", "tau_neg"):
        if getattr(a, key) <= 0:
            errors.append(f"algorithm.{key}={getattr(a, key)} must be > 0")
    for key in ("clip_cov_ratio", "kl_cov_ratio"):
        if not 0 < getattr(a, key) <= 1:
            errors.append(f"algorithm.{key}={getattr(a, key)} must be in (0, 1]")
    if a.clip_cov_lb >= a.clip_cov_ub:
        errors.append(f"algorithm.clip_cov_lb={a.clip_cov_lb} must be < "
                      f"algorithm.clip_cov_ub={a.clip_cov_ub}")
    if a.ppo_kl_coef < 0:
        errors.append(f"algorithm.ppo_kl_coef={a.ppo_kl_coef} must be >= 0")
    ec = a.entropy_control
    if ec.enabled:
        if ec.delta < 0 or ec.max_coef < 0:
            errors.append(f"algorithm.entropy_control: delta={ec.delta} and "
                          f"max_coef={ec.max_coef} must be >= 0")
        if not 0 <= a.entropy_coef <= ec.max_coef:
            errors.append(f"algorithm.entropy_coef={a.entropy_coef} (the starting coefficient "
                          f"of entropy_control) must be in [0, entropy_control.max_coef="
                          f"{ec.max_coef}]")
    rc = a.rollout_correction
    if rc.rollout_is:
        try:
            parse_is_threshold(rc.rollout_is_threshold)
        except ValueError as e:
            errors.append(f"algorithm.rollout_correction.rollout_is_threshold="
                          f"{rc.rollout_is_threshold!r}: {e}")
        if a.tis_cap:
            errors.append("algorithm.tis_cap and algorithm.rollout_correction.rollout_is both "
                          "weight the loss: keep one (tis_cap=c is rollout_is=token with "
                          "rollout_is_threshold=c)")
    if rc.rollout_rs:
        try:
            parse_rs(rc.rollout_rs, rc.rollout_rs_threshold)
        except ValueError as e:
            errors.append(f"algorithm.rollout_correction.rollout_rs={rc.rollout_rs!r}, "
                          f"rollout_rs_threshold={rc.rollout_rs_threshold!r}: {e}")
    if rc.off_policy_seq_mask_kl < 0:
        errors.append(f"algorithm.rollout_correction.off_policy_seq_mask_kl="
                      f"{rc.off_policy_seq_mask_kl} must be >= 0 (0 = off)")
    return errors


def _check_async(cfg) -> List[str]:
    """Combinations ``rollout.async_ahead`` does not run with (mindrl.trainer.async_rollout)."""
    if not cfg.rollout.async_ahead:
        return []
    key = f"rollout.async_ahead={cfg.rollout.async_ahead}"
    errors = []
    if cfg.backend != "torch":
        errors.append(f"{key} needs backend=torch (got backend={cfg.backend})")
    if cfg.rollout.engine != "native":
        errors.append(f"{key} needs rollout.engine=native (got {cfg.rollout.engine})")
    if cfg.tools.enabled:
        errors.append(f"{key} does not run multi-turn tool rollouts: set tools.enabled=false")
    if cfg.algorithm.dynamic_sampling.enabled:
        errors.append(f"{key} samples a batch before the previous one is scored; "
                      "algorithm.dynamic_sampling.enabled=true refills from scores: turn one off")
    if cfg.rollout.batch_invariant:
        errors.append(f"{key} with rollout.batch_invariant=true is not supported")
    if cfg.reward.overlap_groups or cfg.reward.overlap_chunks > 1:
        errors.append(f"{key} with reward.overlap_groups or reward.overlap_chunks > 1 is not "
                      "supported (scoring runs in the training thread)")
    if cfg.rollout.async_sampler == "process" and cfg.device != "cpu":
        errors.append(f"{key}: rollout.async_sampler=process shares CPU memory with its child; "
                      f"on device={cfg.device} use rollout.async_sampler=thread")
    if cfg.train.fsdp or cfg.distributed.nproc * cfg.distributed.nnodes > 1:
        errors.append(f"{key} runs in one process: distributed.nproc and distributed.nnodes "
                      "must be 1, train.fsdp false")
    return errors


def _check_honoured(cfg) -> List[str]:
    """Options that only some backends / engines implement: refused where they would be
    accepted and ignored."""
    errors = []
    rw, r = cfg.reward, cfg.rollout
    if rw.overlap_groups:
        # honoured by the native engines (each group reported as it stops) and by
        # batch_invariant sampling (each group is its own call, scored as the next one samples)
        if r.engine != "native" and not r.batch_invariant:
            errors.append(f"reward.overlap_groups=true needs rollout.engine=native or "
                          f"rollout.batch_invariant=true (rollout.engine={r.engine} returns "
                          "the whole batch at once); use reward.overlap_chunks instead")
        if cfg.tools.enabled and not r.batch_invariant:
            errors.append("reward.overlap_groups=true with tools.enabled=true needs "
                          "rollout.batch_invariant=true (multi-turn rollouts return all groups "
                          "together)")
        if rw.overlap_chunks > 1:
            errors.append(f"reward.overlap_groups=true and reward.overlap_chunks="
                          f"{rw.overlap_chunks} both schedule scoring during generation: keep "
                          "one")
    if cfg.train.padding_free and cfg.backend != "torch":
        errors.append(f"train.padding_free=true packs rows on backend=torch only; "
                      f"backend={cfg.backend} pads micro-batches to length buckets for its "
                      "compiled graphs: set train.padding_free=false")
    if cfg.model.gradient_checkpointing and cfg.backend == "mindformers":
        errors.append("model.gradient_checkpointing=true: backend=mindformers recomputes "
                      "through mindformers.recompute; set that instead")
    return errors


def _check_routing_replay(cfg) -> List[str]:
    """Combinations ``model.moe.routing_replay`` / ``aux_loss_coef`` do not run with."""
    mode, coef = cfg.model.moe.routing_replay, cfg.model.moe.aux_loss_coef
    errors = []
    if coef < 0:
        errors.append(f"model.moe.aux_loss_coef={coef} must be >= 0")
    if coef and cfg.backend not in ("torch", "mindspore"):
        errors.append(f"model.moe.aux_loss_coef={coef} needs backend=torch or mindspore")
    if mode == "none":
        return errors
    key = f"model.moe.routing_replay={mode}"
    if cfg.backend not in ("torch", "mindspore"):
        errors.append(f"{key} needs backend=torch or mindspore (got backend={cfg.backend})")
    if cfg.train.padding_free:
        errors.append(f"{key} replays routes on padded batches: set train.padding_free=false")
    if mode == "rollout" and cfg.rollout.engine != "native":
        errors.append(f"{key} needs rollout.engine=native (got {cfg.rollout.engine}): the "
                      "native engines record the experts they routed each token to; vLLM "
                      "returns them only with its V2 model runner (GPU)")
    if mode == "rollout" and cfg.rollout.mode != "sync":
        errors.append(f"{key} with rollout.mode={cfg.rollout.mode} is not supported")
    if mode == "rollout" and (cfg.rollout.async_ahead or cfg.tools.enabled):
        errors.append(f"{key} with rollout.async_ahead or tools.enabled is not supported")
    return errors


def _check_async_ray(cfg) -> List[str]:
    """Combinations ``rollout.mode=async_ray`` does not run with (mindrl.trainer.async_ray)."""
    r = cfg.rollout
    if r.mode != "async_ray":
        if r.partial_rollouts:
            return ["rollout.partial_rollouts=true resumes generations across weight pushes to "
                    f"rollout workers: it needs rollout.mode=async_ray (got {r.mode})"]
        return []
    key, errors = "rollout.mode=async_ray", []
    if r.async_ahead:
        errors.append(f"{key} and rollout.async_ahead={r.async_ahead} both sample ahead: keep one")
    if r.workers < 1:
        errors.append(f"rollout.workers={r.workers} must be >= 1 with {key}")
    if r.max_staleness < 0:
        errors.append(f"rollout.max_staleness={r.max_staleness} must be >= 0 (0 = on-policy)")
    if r.max_restarts < -1:
        errors.append(f"rollout.max_restarts={r.max_restarts} must be >= 0, or -1 (no limit)")
    if r.partial_check_tokens < 1:
        errors.append(f"rollout.partial_check_tokens={r.partial_check_tokens} must be >= 1")
    batch = cfg.train.prompts_per_step
    if r.queue_size < 0 or 0 < r.queue_size < batch:
        errors.append(f"rollout.queue_size={r.queue_size} must be 0 (auto) or >= "
                      f"train.prompts_per_step={batch}: a step takes that many groups at once")
    limit = min(r.queue_size or batch * (r.max_staleness + 1), batch * (r.max_staleness + 1))
    if r.max_staleness >= 0 and r.workers > limit:
        errors.append(f"rollout.workers={r.workers} exceeds the groups that may be in flight "
                      f"(min(rollout.queue_size, (rollout.max_staleness + 1) x "
                      f"train.prompts_per_step) = {limit}): some workers would never sample")
    if cfg.backend not in ("torch", "mindspore"):
        errors.append(f"{key} needs backend=torch or mindspore (got backend={cfg.backend}): its "
                      "workers run the native torch or MindSpore engine, or vLLM")
    if cfg.device == "cpu" and r.worker_devices:
        errors.append(f"rollout.worker_devices={list(r.worker_devices)} places workers on "
                      "accelerators: it needs device=cuda or ascend (got device=cpu)")
    if cfg.device != "cpu" and not r.worker_devices:
        errors.append(f"{key} with device={cfg.device} needs rollout.worker_devices: the "
                      "accelerator ids the workers run on (the trainer keeps its own)")
    if any(d < 0 for d in r.worker_devices):
        errors.append(f"rollout.worker_devices={list(r.worker_devices)}: ids are >= 0")
    if cfg.tools.enabled:
        errors.append(f"{key} does not run multi-turn tool rollouts: set tools.enabled=false")
    if cfg.model.lora.enabled and r.vllm_lora == "adapter":
        errors.append(f"rollout.vllm_lora=adapter with {key}: the rollout workers merge each "
                      "pushed adapter into their own copy of the adapted base weights (the push "
                      "is the adapters alone); set rollout.vllm_lora=merged or auto")
    if cfg.algorithm.dynamic_sampling.enabled:
        errors.append(f"{key} with algorithm.dynamic_sampling.enabled=true is not supported")
    if r.batch_invariant:
        errors.append(f"{key} with rollout.batch_invariant=true is not supported")
    if cfg.reward.overlap_groups or cfg.reward.overlap_chunks > 1:
        errors.append(f"{key} scores each group in its worker: reward.overlap_groups and "
                      "reward.overlap_chunks > 1 do not apply")
    if cfg.train.fsdp or cfg.distributed.nproc * cfg.distributed.nnodes > 1:
        errors.append(f"{key} runs one trainer process: distributed.nproc and "
                      "distributed.nnodes must be 1, train.fsdp false")
    return errors


#: rollout keys read on one path only: key -> (the path's test on a RunConfig, its name).
_ASYNC_RAY = (lambda c: c.rollout.mode == "async_ray", "with rollout.mode=async_ray")
_SYNC_IN_ORDER = (lambda c: c.rollout.mode == "sync" and not c.rollout.async_ahead,
                  "with synchronous rollouts (rollout.mode=sync, rollout.async_ahead=0): "
                  "sampled one update ahead, the gap holds that update's drift")
MODE_KEYS = {
    "workers": _ASYNC_RAY, "max_staleness": _ASYNC_RAY, "queue_size": _ASYNC_RAY,
    "max_restarts": _ASYNC_RAY, "worker_devices": _ASYNC_RAY,
    "partial_check_tokens": (lambda c: c.rollout.mode == "async_ray" and
                             c.rollout.partial_rollouts,
                             "with rollout.mode=async_ray and rollout.partial_rollouts=true"),
    "async_sampler": (lambda c: c.rollout.mode == "sync" and bool(c.rollout.async_ahead),
                      "with rollout.async_ahead=1 (rollout.mode=sync)"),
    "logprob_gap_warn": _SYNC_IN_ORDER,
}
#: the keys that choose the path
MODE_SELECTORS = ("rollout.mode", "rollout.async_ahead", "rollout.partial_rollouts")

#: keys of a feature, read only when it is on: (keys, the feature's test on a RunConfig, where
#: they are read, the keys that turn it on). Set away from their defaults with the feature off,
#: they would change nothing: refused (:func:`unread_mode_keys`).
_VLLM = lambda c: c.rollout.engine == "vllm"  # noqa: E731
FEATURE_KEYS = [
    (tuple(f"critic.{f.name}" for f in dataclasses.fields(CriticConfig)),
     lambda c: c.algorithm.adv_estimator == "gae",
     "with algorithm.adv_estimator=gae (the PPO critic)", ("algorithm.adv_estimator",)),
    (("model.lora.rank", "model.lora.alpha", "model.lora.dropout", "model.lora.target_modules"),
     lambda c: c.model.lora.enabled, "with model.lora.enabled=true", ("model.lora.enabled",)),
    (("algorithm.distill.mode", "algorithm.distill.coef", "algorithm.distill.task_weight",
      "algorithm.distill.teacher_temperature", "algorithm.distill.estimator"),
     lambda c: bool(c.algorithm.distill.teacher), "with algorithm.distill.teacher set",
     ("algorithm.distill.teacher",)),
    (tuple(f"mindformers.{f.name}" for f in dataclasses.fields(MindformersConfig)),
     lambda c: c.backend == "mindformers", "with backend=mindformers", ("backend",)),
    (("rollout.gpu_memory_utilization", "rollout.tensor_parallel_size"), _VLLM,
     "with rollout.engine=vllm", ("rollout.engine",)),
    (("rollout.vllm_lora",), lambda c: _VLLM(c) and c.model.lora.enabled,
     "with rollout.engine=vllm and model.lora.enabled=true",
     ("rollout.engine", "model.lora.enabled")),
    (("rollout.ascend_plugin",), lambda c: _VLLM(c) and c.device == "ascend",
     "with rollout.engine=vllm and device=ascend", ("rollout.engine", "device")),
    (("rollout.native_packed_weights",),
     lambda c: c.rollout.engine == "native" and c.backend == "torch",
     "with rollout.engine=native and backend=torch", ("rollout.engine", "backend")),
]


def _get(cfg, key: str):
    for part in key.split("."):
        cfg = getattr(cfg, part)
    return cfg


def unread_mode_keys(cfg) -> List[Tuple[str, Any, str, Tuple[str, ...]]]:
    """(key, value, where it is read, the keys that choose that path) of each key of
    :data:`MODE_KEYS` (``rollout.*``) and :data:`FEATURE_KEYS` set away from its default on a
    path that never reads it."""
    default = RunConfig()
    out = []
    for name, (reads, where) in MODE_KEYS.items():
        value = getattr(cfg.rollout, name)
        if value != getattr(default.rollout, name) and not reads(cfg):
            out.append((f"rollout.{name}", value, where, MODE_SELECTORS))
    for keys, reads, where, selectors in FEATURE_KEYS:
        if reads(cfg):
            continue
        for key in keys:
            value = _get(cfg, key)
            if value != _get(default, key):
                out.append((key, value, where, selectors))
    return out


def _check_critic(cfg) -> List[str]:
    """Checks of ``critic.*`` and the GAE options."""
    a, c = cfg.algorithm, cfg.critic
    errors = []
    if not 0 <= a.gamma <= 1:
        errors.append(f"algorithm.gamma={a.gamma} must be in [0, 1]")
    if not 0 <= a.lam <= 1:
        errors.append(f"algorithm.lam={a.lam} must be in [0, 1]")
    if c.lr <= 0:
        errors.append(f"critic.lr={c.lr} must be > 0")
    for key in ("weight_decay", "grad_clip", "cliprange_value", "warmup_steps", "head_init_std"):
        if getattr(c, key) < 0:
            errors.append(f"critic.{key}={getattr(c, key)} must be >= 0")
    from algorithms.aggregation import AGG_MODES

    if c.loss_agg_mode not in AGG_MODES:
        errors.append(f"critic.loss_agg_mode={c.loss_agg_mode!r} is not one of "
                      f"{', '.join(AGG_MODES.names())}")
    if a.adv_estimator == "gae":
        if cfg.backend == "mindformers":
            errors.append("algorithm.adv_estimator=gae needs a critic, which backend=mindformers "
                          "does not have yet: use backend=torch or mindspore")
        if cfg.train.fsdp:
            errors.append("algorithm.adv_estimator=gae: the critic is not sharded; "
                          "train.fsdp=true is not supported with it yet")
        if c.warmup_steps >= cfg.train.steps:
            errors.append(f"critic.warmup_steps={c.warmup_steps} must be < train.steps="
                          f"{cfg.train.steps}: the policy would never be trained")
    return errors


def _check_lora(lo: LoraConfig, run: "RunConfig") -> List[str]:
    """Checks of model.lora (also when disabled: a typo should not wait for enabled=true)."""
    errors = []
    if lo.rank < 1:
        errors.append(f"model.lora.rank={lo.rank} must be >= 1")
    if lo.alpha <= 0:
        errors.append(f"model.lora.alpha={lo.alpha} must be > 0")
    if not 0 <= lo.dropout < 1:
        errors.append(f"model.lora.dropout={lo.dropout} must be in [0, 1)")
    unknown = [m for m in lo.target_modules if m not in LORA_TARGETS]
    if unknown or not lo.target_modules:
        errors.append(f"model.lora.target_modules={list(lo.target_modules)}: "
                      + (f"unknown module(s) {unknown}" if unknown else "empty")
                      + f"; choose from {', '.join(LORA_TARGETS)}")
    if lo.enabled and run.train.fsdp:
        errors.append("model.lora.enabled=true with train.fsdp=true is not supported (the "
                      "adapters are small: train them data parallel without FSDP)")
    if lo.enabled and lo.dropout and run.backend == "mindspore":
        errors.append(f"model.lora.dropout={lo.dropout}: adapter dropout is not implemented on "
                      "backend=mindspore (set 0, or use backend=torch)")
    if lo.enabled and run.backend == "mindformers":
        errors.append("model.lora.enabled=true needs backend=torch or mindspore")
    return errors


def _check_distill(d: DistillConfig, backend: str) -> List[str]:
    """Value checks of algorithm.distill.* (the teacher's files: mindrl.trainer.teacher)."""
    errors = []
    if d.coef < 0:
        errors.append(f"algorithm.distill.coef={d.coef} must be >= 0")
    if d.teacher_temperature <= 0:
        errors.append(f"algorithm.distill.teacher_temperature={d.teacher_temperature} must be > 0")
    if d.teacher and d.estimator == "full" and d.mode != "loss":
        errors.append(f"algorithm.distill.estimator=full is a loss term: it needs "
                      f"algorithm.distill.mode=loss (got {d.mode})")
    if d.teacher and d.estimator == "full" and backend not in ("torch", "mindspore"):
        errors.append(f"algorithm.distill.estimator=full: backend={backend} computes only the "
                      f"sampled estimator; use backend=torch or estimator=sampled")
    if d.teacher and backend == "mindformers":
        errors.append("algorithm.distill.teacher: backend=mindformers has no teacher model; use "
                      "backend=mindspore or torch")
    return errors


@dataclass(frozen=True)
class SandboxConfig:
    isolation: str = opt("auto", "Isolation of the python tool: auto (the strongest available), "
                         "bwrap (bubblewrap), unshare (fallback: namespaces + rlimits), none.",
                         ["auto", "bwrap", "unshare", "none"])
    allow_unisolated: bool = opt(False, "Run tool RL even when no isolation is available "
                                 "(the model's code could reach the network and your files).")
    timeout_s: float = opt(10.0, "Wall-time (and CPU-time) limit of one tool call, seconds.")
    memory_mb: int = opt(1024, "Address-space limit of one tool call, MB.")
    output_bytes: int = opt(16384, "stdout+stderr bytes kept from one call.")
    max_procs: int = opt(16, "Processes one call may run at once (enforced as root).")
    hide_paths: List[str] = opt([], "More paths the sandbox hides (the run directory, the data "
                                "directories and $HOME always are).")


@dataclass(frozen=True)
class ToolsConfig:
    enabled: bool = opt(False, "Multi-turn rollouts with tools (tool-integrated reasoning).")
    format: str = opt("tir", "Call format: tir (```python ... ``` then ```output```, "
                      "Qwen2.5-Math) or chat (<tool_call> JSON, Qwen2.5 chat template).",
                      ["tir", "chat"])
    names: List[str] = opt(["python"], "Tools: registered names (python) or user tools "
                           "by import path (pkg.mod:function).")
    max_output_tokens: int = opt(256, "Tokens of one tool output shown to the model.")
    workers: int = opt(4, "Tool calls run at once (sandbox processes).")
    sandbox: SandboxConfig = section(SandboxConfig, "The sandbox of the python tool.")


# tool rollouts' keys (mindrl.tools.multi_turn.build_tool_rollout, the SFT trace split), read
# only with tools.enabled (appended here: the table above is defined before these sections)
FEATURE_KEYS.append((
    ("rollout.max_turns",) + tuple(f"tools.{f.name}" for f in dataclasses.fields(ToolsConfig)
                                   if f.name not in ("enabled", "sandbox"))
    + tuple(f"tools.sandbox.{f.name}" for f in dataclasses.fields(SandboxConfig)),
    lambda c: c.tools.enabled, "with tools.enabled=true", ("tools.enabled",)))


@dataclass(frozen=True)
class PlanConfig:
    """The per-device memory plan (``mindrl plan``; mindrl.memory.plan)."""

    check: bool = opt(True, "Refuse to start training when the memory plan exceeds the "
                      "device (plan.device_memory_gb); the message names the largest part and "
                      "the keys that shrink it. false = start anyway.")
    device_memory_gb: float = opt(0.0, "Memory of one device in GB (10^9 bytes); 0 = by "
                                  "device: ascend 64 (Ascend 910B), cuda 80 (H100 / A100 "
                                  "80 GB; set 141 for an H200, 40 for an A100 40 GB), cpu the "
                                  "memory of this machine.")
    host_memory_gb: float = opt(0.0, "Host memory of one node in GB; 0 = not checked (the "
                                "plan still prints the host's share of each node).")
    model_config: str = opt("", "The config.json (or a model directory, or a known model name "
                            "such as Qwen2.5-7B) the plan reads the shapes from; '' = "
                            "model.path's.")


@dataclass(frozen=True)
class RunConfig:
    backend: str = opt("torch", "Training backend: torch, mindspore, or mindformers (MindSpore "
                       "with tensor/pipeline parallelism through mindformers, Ascend only, "
                       "untested here).", ["torch", "mindspore", "mindformers"])
    device: str = opt("cpu", "Device: cpu, cuda, ascend.", ["cpu", "cuda", "ascend"])
    model: ModelConfig = section(ModelConfig, "The policy model.")
    data: DataConfig = section(DataConfig, "Prompt data.")
    rollout: RolloutConfig = section(RolloutConfig, "Rollout engine and sampling.")
    algorithm: AlgorithmConfig = section(AlgorithmConfig, "Advantages and losses.")
    critic: CriticConfig = section(CriticConfig, "The value model of PPO "
                                   "(algorithm.adv_estimator=gae).")
    reward: RewardConfig = section(RewardConfig, "Reward functions.")
    train: TrainConfig = section(TrainConfig, "Optimisation.")
    checkpoint: CheckpointConfig = section(CheckpointConfig, "Checkpoints and resume.")
    validation: ValidationConfig = section(ValidationConfig, "Held-out validation.")
    logging: LoggingConfig = section(LoggingConfig, "Metrics and plots.")
    distributed: DistributedConfig = section(DistributedConfig, "Multi-process launch.")
    preference: PreferenceConfig = section(PreferenceConfig, "DPO / SimPO options.")
    mindformers: MindformersConfig = section(MindformersConfig, "backend=mindformers: "
                                             "tensor/pipeline parallel layout.")
    tools: ToolsConfig = section(ToolsConfig, "Tools the model calls mid-answer (python).")
    plan: PlanConfig = section(PlanConfig, "The per-device memory plan and the check before "
                               "training (mindrl plan).")

    def check(self) -> None:
        """Cross-field checks; raises :class:`ConfigError` naming the keys involved."""
        a, r, t = self.algorithm, self.rollout, self.train
        errors = []
        if self.tools.enabled and r.max_turns < 1:
            errors.append(f"rollout.max_turns={r.max_turns} must be >= 1")
        if a.adv_estimator in GROUP_ESTIMATORS and r.n < 2:
            errors.append(f"algorithm.adv_estimator={a.adv_estimator} compares samples within a "
                          f"group and needs rollout.n >= 2 (got rollout.n={r.n})")
        if a.adv_estimator == "passk" and not 1 <= a.passk_k <= r.n:
            errors.append(f"algorithm.passk_k={a.passk_k} must satisfy 1 <= k <= rollout.n={r.n}")
        for key in ("clip_eps_low", "clip_eps_high"):
            if getattr(a, key) <= 0:
                errors.append(f"algorithm.{key}={getattr(a, key)} must be > 0")
        if a.clip_eps_low >= 1 and a.policy_loss != "cispo":
            errors.append(f"algorithm.clip_eps_low={a.clip_eps_low} must be < 1")
        if a.dual_clip_c and a.dual_clip_c <= 1:
            errors.append(f"algorithm.dual_clip_c={a.dual_clip_c} must be > 1 (or 0 = off)")
        errors.extend(_check_losses(a, r))
        if a.std_eps < 0:
            errors.append(f"algorithm.std_eps={a.std_eps} must be >= 0")
        if a.kl.coef < 0:
            errors.append(f"algorithm.kl.coef={a.kl.coef} must be >= 0")
        if a.kl.in_reward and a.adv_estimator not in ("reinforce_pp", "reinforce_pp_baseline",
                                                      "gae"):
            errors.append("algorithm.kl.in_reward=true folds KL into token-level returns and needs "
                          "algorithm.adv_estimator=reinforce_pp, reinforce_pp_baseline or gae "
                          f"(got {a.adv_estimator})")
        errors.extend(_check_critic(self))
        errors.extend(_check_async(self))
        errors.extend(_check_honoured(self))
        errors.extend(_check_async_ray(self))
        errors.extend(_check_routing_replay(self))
        errors.extend(_check_distill(a.distill, self.backend))
        if r.temperature < 0:
            errors.append(f"rollout.temperature={r.temperature} must be >= 0")
        if not 0 < r.top_p <= 1:
            errors.append(f"rollout.top_p={r.top_p} must be in (0, 1]")
        if not 0 <= r.min_p < 1:
            errors.append(f"rollout.min_p={r.min_p} must be in [0, 1)")
        if r.top_k == 0 or r.top_k < -1:
            errors.append(f"rollout.top_k={r.top_k} must be -1 (off) or >= 1")
        for key in ("n", "max_new_tokens"):
            if getattr(r, key) < 1:
                errors.append(f"rollout.{key}={getattr(r, key)} must be >= 1")
        batch = t.prompts_per_step * r.n
        for key in ("steps", "prompts_per_step", "micro_batch_size", "ppo_epochs"):
            if getattr(t, key) < 1:
                errors.append(f"train.{key}={getattr(t, key)} must be >= 1")
        mini = t.mini_batch_size or batch
        if t.mini_batch_size < 0 or (batch % mini):
            errors.append(f"train.mini_batch_size={t.mini_batch_size} must divide "
                          f"train.prompts_per_step * rollout.n = {batch}")
        if 1 <= t.micro_batch_size < mini and mini % t.micro_batch_size:
            errors.append(f"train.micro_batch_size={t.micro_batch_size} must divide the "
                          f"mini-batch ({mini} rollouts)")
        if t.lr <= 0:
            errors.append(f"train.lr={t.lr} must be > 0")
        if t.logprob_chunk_tokens < -1:
            errors.append(f"train.logprob_chunk_tokens={t.logprob_chunk_tokens} must be -1 "
                          "(automatic), 0 (off) or a token count")
        elif t.logprob_chunk_tokens > 0 and self.backend not in ("torch", "mindspore"):
            errors.append(f"train.logprob_chunk_tokens={t.logprob_chunk_tokens}: the chunked "
                          "LM head runs on backend=torch and backend=mindspore; "
                          f"backend={self.backend} builds full logits: leave it at -1 "
                          "(automatic) or 0")
        if self.data.max_response_len < 1:
            errors.append(f"data.max_response_len={self.data.max_response_len} must be >= 1")
        if not 0 <= self.data.max_truncated_share <= 1:
            errors.append(f"data.max_truncated_share={self.data.max_truncated_share} must be "
                          "in [0, 1]")
        if t.max_tokens_per_micro_batch < 0:
            errors.append(f"train.max_tokens_per_micro_batch={t.max_tokens_per_micro_batch} "
                          "must be >= 0 (0 = off)")
        if self.reward.overlap_chunks < 0:
            errors.append(f"reward.overlap_chunks={self.reward.overlap_chunks} must be >= 0")
        if len(t.betas) != 2 or not all(0 <= b < 1 for b in t.betas):
            errors.append(f"train.betas={t.betas} must be two numbers in [0, 1)")
        if not self.reward.functions:
            errors.append("reward.functions is empty: at least one reward is needed")
        rs = self.data.resample
        if rs.n < 1:
            errors.append(f"data.resample.n={rs.n} must be >= 1")
        if not 0 <= rs.lo < rs.hi <= 1:
            errors.append(f"data.resample.lo={rs.lo} and data.resample.hi={rs.hi} must satisfy "
                          "0 <= lo < hi <= 1 (both exclusive)")
        if rs.temperature < 0 or rs.max_new_tokens < 0:
            errors.append("data.resample.temperature and data.resample.max_new_tokens must be "
                          ">= 0")
        if self.reward.timeout <= 0:
            errors.append(f"reward.timeout={self.reward.timeout} must be > 0")
        if self.distributed.nproc < 1 or self.distributed.nnodes < 1:
            errors.append("distributed.nproc and distributed.nnodes must be >= 1")
        d = self.distributed
        if d.launcher == "msrun" and self.backend == "torch":
            errors.append("distributed.launcher=msrun starts MindSpore workers and needs "
                          "backend=mindspore or mindformers (torch uses torchrun)")
        if r.tensor_parallel_size > 1 and self.backend != "mindformers":
            errors.append(f"rollout.tensor_parallel_size={r.tensor_parallel_size} needs "
                          "backend=mindformers (the torch and mindspore backends run one engine "
                          "per rank)")
        if t.shard_optimizer and self.backend != "mindspore":
            other = {"torch": "train.fsdp=true shards a torch model's optimizer state",
                     "mindformers": "backend=mindformers shards it with "
                                    "mindformers.optimizer_shard"}.get(self.backend, "")
            errors.append(f"train.shard_optimizer=true shards the MindSpore backend's AdamW "
                          f"(backend={self.backend})" + (f"; {other}" if other else ""))
        if t.fsdp and self.backend != "torch":
            errors.append(f"train.fsdp=true shards a torch model (backend={self.backend}); "
                          "MindSpore models shard with backend=mindformers")
        if self.backend == "mindformers":
            if self.algorithm.entropy_control.enabled:
                errors.append("algorithm.entropy_control.enabled=true: the mindformers backend "
                              "does not take a per-step entropy coefficient (torch and "
                              "mindspore do)")
            if self.device != "ascend":
                errors.append(f"backend=mindformers runs on Ascend only (device={self.device}); "
                              "its fused kernels have no CPU/GPU versions here. On CPU use "
                              "backend=mindspore")
            if r.engine != "vllm":
                errors.append("backend=mindformers has no native sampler: set "
                              "rollout.engine=vllm (vllm-ascend / vllm-mindspore)")
            m = self.mindformers
            try:
                parallel_layout(d.nproc * d.nnodes, {}, tp=m.tensor_parallel,
                                pp=m.pipeline_stages, micro_batches=m.micro_batch_num,
                                rollout_tp=r.tensor_parallel_size,
                                global_rollouts=t.mini_batch_size or batch)
            except ConfigError as e:
                errors.extend(str(e).split("\n  - ")[1:])
        if not 0 <= d.master_port <= 65535 or (d.master_port == 0 and d.launcher != "ray"):
            errors.append(f"distributed.master_port={d.master_port} must be a port in 1..65535 "
                          "(0 = a free port on node 0, only with distributed.launcher=ray)")
        dc = self.data
        for key in ("preflight_max_unscorable", "step_max_unscorable"):
            if not 0 <= getattr(dc, key) <= 1:
                errors.append(f"data.{key}={getattr(dc, key)} must be in [0, 1]")
        if dc.preflight_rows < 1:
            errors.append(f"data.preflight_rows={dc.preflight_rows} must be >= 1")
        if self.logging.save_rollouts < 0 or self.logging.save_rollouts_max_mb <= 0:
            errors.append(f"logging.save_rollouts={self.logging.save_rollouts} must be >= 0 and "
                          f"logging.save_rollouts_max_mb={self.logging.save_rollouts_max_mb} "
                          "must be > 0")
        errors.extend(_check_lora(self.model.lora, self))
        if self.checkpoint.keep_last < 1:
            errors.append(f"checkpoint.keep_last={self.checkpoint.keep_last} must be >= 1")
        if self.plan.device_memory_gb < 0 or self.plan.host_memory_gb < 0:
            errors.append("plan.device_memory_gb and plan.host_memory_gb must be >= 0 (0 = "
                          "the default)")
        if self.checkpoint.stop_grace_s < 0:
            errors.append(f"checkpoint.stop_grace_s={self.checkpoint.stop_grace_s} must be "
                          ">= 0 (0 = wait for the step)")
        if errors:
            raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(errors))
