"""Every option is read by the code path that runs, or refused at load time.

A one-step GRPO run per backend x engine (tiny model, most RL features on) records which config
keys its code reads (:mod:`options_read`). Every key of the schema must then be read, or be
listed below with the reason this run has no use for it (another job, engine, backend or a
feature the run leaves off), or be refused by the config on this backend. A key added to the
schema and never read, or read by one backend and ignored by another, fails here until it is
implemented, refused, or listed with its reason. A listed key that the run does read fails
too (the entry is stale), so the list stays the list of keys the run really ignores.
"""

import fnmatch
import json

import pytest

from mindrl.config.loader import load_config
from mindrl.errors import ConfigError

from options_read import leaf_keys, recording, section_prefixes

# Keys no one-process GRPO run reads, by reason (dotted keys or fnmatch patterns).
NOT_READ_BY_RL = {
    "on-policy distillation, read with algorithm.distill.teacher set":
        ["algorithm.distill.coef", "algorithm.distill.estimator",
         "algorithm.distill.task_weight"],
    "the bounds of rollout_is / rollout_rs, read when those are set":
        ["algorithm.rollout_correction.rollout_is_threshold",
         "algorithm.rollout_correction.rollout_rs_threshold"],
    "read on resume only": ["checkpoint.allow_changes"],
    "the memory plan, read by `mindrl train` / `mindrl plan` before the run starts "
    "(mindrl.memory.plan)": ["plan.*"],
    "a later stage of a multi-stage recipe: the stage runner rates the problems first "
    "(data.from_stage is refused elsewhere)": ["data.from_stage", "data.resample.*"],
    "the PPO critic: algorithm.adv_estimator=gae": ["critic.*"],
    "DPO / SimPO jobs": ["preference.*"],
    "SFT and DPO / SimPO jobs (their response lengths)":
        ["data.max_response_len", "data.max_truncated_share"],
    "SFT jobs (format traces)": ["data.trace_select"],
    "a held-out share of the training file, read when data.val_file is empty (this run "
    "validates on a file of its own)": ["data.val_split"],
    "read by `mindrl launch`, which starts the workers (the trainer checks nproc/nnodes)":
        ["distributed.launcher", "distributed.master_addr", "distributed.master_port",
         "distributed.ray_*"],
    "backend=mindformers": ["mindformers.*"],
    "LoRA, read with model.lora.enabled=true":
        ["model.lora.rank", "model.lora.alpha", "model.lora.dropout",
         "model.lora.target_modules"],
    "rollout.async_ahead=1 only": ["rollout.async_sampler"],
    "rollout.mode=async_ray only (the Ray rollout workers)":
        ["rollout.workers", "rollout.max_staleness", "rollout.queue_size",
         "rollout.max_restarts", "rollout.partial_rollouts", "rollout.partial_check_tokens",
         "rollout.worker_devices"],
    "tool rollouts, tools.enabled=true":
        ["rollout.max_turns", "tools.format", "tools.names", "tools.max_output_tokens",
         "tools.workers", "tools.sandbox.*"],
    "vLLM on device=ascend": ["rollout.ascend_plugin"],
    "vLLM with model.lora.enabled=true": ["rollout.vllm_lora"],
}
NOT_READ_BY_ENGINE = {
    "native": {"vLLM options": ["rollout.gpu_memory_utilization",
                                "rollout.tensor_parallel_size"]},
    "vllm": {"the torch native engine's option": ["rollout.native_packed_weights"]},
}
NOT_READ_BY_BACKEND = {
    # the MindSpore RL step reads it when it builds the step (a constant of the graph)
    "torch": {"on-policy distillation": ["algorithm.distill.teacher_temperature"],
              "MindSpore's own log level (GLOG_v)": ["logging.verbose"]},
    "mindspore": {"the torch native engine's option": ["rollout.native_packed_weights"]},
}
# Keys a backend does not implement: each must be refused at load time with these overrides.
REFUSED = {
    "torch": {"train.shard_optimizer": ["train.shard_optimizer=true"]},
    "mindspore": {"train.fsdp": ["train.fsdp=true"],
                  "train.padding_free": ["train.padding_free=true"]},
}

RUN = ["model.path=builtin:tiny", "model.chat_template=none", "data.max_val_samples=2",
       "validation.every=1", "rollout.n=2", "rollout.max_new_tokens=4",
       "train.prompts_per_step=2", "train.micro_batch_size=4", "train.steps=1",
       "reward.num_workers=0", "algorithm.kl.coef=0.01", "algorithm.entropy_control.enabled=true",
       "algorithm.dynamic_sampling.enabled=true", "logging.save_rollouts=1",
       "logging.profile=true", "logging.plot=false", "logging.progress_bar=false",
       "checkpoint.every=0"]


def _expand(patterns):
    keys = leaf_keys()
    out = set()
    for p in patterns:
        hit = {k for k in keys if fnmatch.fnmatchcase(k, p)}
        assert hit, f"allow-list entry {p!r} matches no config key (renamed or removed?)"
        out |= hit
    return out


def not_read(backend: str, engine: str):
    lists = list(NOT_READ_BY_RL.values()) + list(NOT_READ_BY_ENGINE[engine].values()) + \
        list(NOT_READ_BY_BACKEND[backend].values())
    return _expand([p for ps in lists for p in ps])


def assert_refused(backend: str, key: str, overrides):
    with pytest.raises(ConfigError) as e:
        load_config(None, [f"backend={backend}", *overrides])
    assert key in str(e.value), (key, str(e.value))


def check_run(backend: str, engine: str, tmp_path):
    from mindrl.trainer.rl import train

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"problem": f"{a}+{a}", "answer": str(2 * a)}) + "\n"
                            for a in range(1, 7)))
    overrides = [f"backend={backend}", f"rollout.engine={engine}", *RUN,
                 f"data.train_file={data}", f"data.val_file={data}",
                 f"logging.output_dir={tmp_path / 'run'}"]
    cfg = load_config(None, overrides, require_model=True)
    with recording() as reads:
        train(cfg)
    reads = set(reads)
    allowed = not_read(backend, engine)
    refused = REFUSED[backend]
    for key, ov in refused.items():
        assert_refused(backend, key, ov)
    stale = sorted(allowed & reads)
    assert not stale, f"listed as not read but read by the {backend}/{engine} run: {stale}"
    silent = sorted(leaf_keys() - reads - allowed - set(refused))
    assert not silent, (f"{backend}/{engine}: options neither read nor refused nor listed "
                        f"with a reason: {silent}")
    return reads


def test_recording_sees_reads_by_running_code_and_not_by_the_config_machinery():
    import dataclasses

    cfg = load_config(None, ["train.lr=0.5"])          # check() reads every section: not counted
    with recording() as reads:
        assert cfg.train.lr == 0.5
        dataclasses.asdict(cfg)                        # copies touch every field: not counted
        dataclasses.replace(cfg.train, steps=3)
        assert cfg == cfg
        [f.name for f in cfg.reward.functions]
    assert reads == {"train", "train.lr", "reward", "reward.functions",
                     "reward.functions[].name"}
    assert not hasattr(type(cfg.train), "__getattribute__") or \
        "__getattribute__" not in type(cfg.train).__dict__


def test_every_section_class_has_one_place_in_the_schema():
    prefixes = section_prefixes()
    assert prefixes[type(load_config(None).model.lora)] == "model.lora."
    assert any(p == "reward.functions[]." for p in prefixes.values())


def test_a_key_no_code_reads_fails_the_check(tmp_path):
    """The check itself: an option the run ignores is reported by name."""
    leaf = leaf_keys()
    assert "model.gradient_checkpointing" in leaf
    reads = leaf - {"model.gradient_checkpointing"}      # as if the backend ignored it
    silent = sorted(leaf - reads - not_read("mindspore", "native") - set(REFUSED["mindspore"]))
    assert silent == ["model.gradient_checkpointing"]


@pytest.mark.parametrize("backend,key,overrides", [
    ("mindspore", key, ov) for key, ov in REFUSED["mindspore"].items()])
def test_refused_keys_are_refused(backend, key, overrides):
    assert_refused(backend, key, overrides)


@pytest.mark.slow
def test_torch_native_reads_or_refuses_every_option(tmp_path):
    reads = check_run("torch", "native", tmp_path)
    assert {"train.padding_free", "model.gradient_checkpointing"} <= reads


@pytest.mark.slow
def test_mindspore_native_reads_or_refuses_every_option(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                  # MindSpore may leave rank_*/ litter in the cwd
    reads = check_run("mindspore", "native", tmp_path)
    assert {"model.gradient_checkpointing", "model.trust_remote_code"} <= reads


@pytest.mark.slow
def test_torch_vllm_reads_or_refuses_every_option(tmp_path):
    pytest.importorskip("vllm")
    reads = check_run("torch", "vllm", tmp_path)
    assert {"rollout.gpu_memory_utilization", "rollout.tensor_parallel_size"} <= reads


# Every rollout mode: a key the run above lists as read only by another rollout mode changes
# nothing in this one, so set away from its default it must be refused here (naming it), and
# load in a mode that reads it.
MODE_GROUPS = {"rollout.async_ahead=1 only": ["rollout.async_ahead=1"],
               "rollout.mode=async_ray only (the Ray rollout workers)":
                   ["rollout.mode=async_ray", "rollout.partial_rollouts=true"]}
# what the asynchronous modes do not run with (refused, each with its own line)
ASYNC_OFF = ["algorithm.dynamic_sampling.enabled=false"]
NON_DEFAULT = {"rollout.async_sampler": "thread", "rollout.workers": 3,
               "rollout.max_staleness": 2, "rollout.queue_size": 16, "rollout.max_restarts": 5,
               "rollout.partial_rollouts": "true", "rollout.partial_check_tokens": 4,
               "rollout.worker_devices": "[0]"}
NEEDS = {"rollout.worker_devices": ["device=cuda"]}      # accelerator ids need an accelerator


@pytest.mark.parametrize("group", sorted(MODE_GROUPS))
def test_keys_of_another_rollout_mode_are_refused_in_the_sync_run(group):
    from mindrl.config.schema import MODE_KEYS

    for key in NOT_READ_BY_RL[group]:
        value = NON_DEFAULT[key]
        extra = NEEDS.get(key, [])
        with pytest.raises(ConfigError) as e:
            load_config(None, RUN + extra + [f"{key}={value}"])
        assert f"{key}=" in str(e.value), (key, str(e.value))
        cfg = load_config(None, RUN + extra + ASYNC_OFF + MODE_GROUPS[group] +
                          [f"{key}={value}"])
        assert str(getattr(cfg.rollout, key.split(".")[1])).lower().replace(" ", "") == \
            str(value).lower(), key
        assert key.split(".")[1] in MODE_KEYS or key == "rollout.partial_rollouts", key
