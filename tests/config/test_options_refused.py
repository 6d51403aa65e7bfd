"""Options a backend, engine or job does not implement are refused before the model loads, with
one line naming the key and the conflicting setting; the combinations that are honoured load."""

import logging
import sys

import pytest

from mindrl.config.loader import load_config
from mindrl.errors import ConfigError


def refused(*overrides) -> str:
    with pytest.raises(ConfigError) as e:
        load_config(None, list(overrides))
    lines = [x for x in str(e.value).splitlines() if x.strip().startswith("- ")]
    assert len(lines) == 1, str(e.value)           # one problem, one line
    return lines[0]


@pytest.mark.parametrize("overrides,names", [
    (["reward.overlap_groups=true", "rollout.engine=vllm"],
     ["reward.overlap_groups=true", "rollout.engine=vllm", "rollout.batch_invariant"]),
    (["reward.overlap_groups=true", "tools.enabled=true"],
     ["reward.overlap_groups=true", "tools.enabled=true", "rollout.batch_invariant"]),
    (["reward.overlap_groups=true", "reward.overlap_chunks=2"],
     ["reward.overlap_groups=true", "reward.overlap_chunks=2"]),
    (["backend=mindspore", "train.padding_free=true"],
     ["train.padding_free=true", "backend=mindspore"]),
    (["backend=mindformers", "device=ascend", "rollout.engine=vllm",
      "model.gradient_checkpointing=true"],
     ["model.gradient_checkpointing=true", "mindformers.recompute"]),
])
def test_ignored_combinations_are_refused_naming_both_keys(overrides, names):
    line = refused(*overrides)
    for name in names:
        assert name in line, (name, line)


@pytest.mark.parametrize("overrides,key,path", [
    (["rollout.workers=4"], "rollout.workers=4", "rollout.mode=async_ray"),
    (["rollout.max_staleness=2"], "rollout.max_staleness=2", "rollout.mode=async_ray"),
    (["rollout.queue_size=64"], "rollout.queue_size=64", "rollout.mode=async_ray"),
    (["rollout.max_restarts=-1"], "rollout.max_restarts=-1", "rollout.mode=async_ray"),
    (["rollout.worker_devices=[0]"], "rollout.worker_devices=[0]", "rollout.mode=async_ray"),
    (["rollout.partial_check_tokens=16"], "rollout.partial_check_tokens=16",
     "rollout.partial_rollouts=true"),
    (["rollout.mode=async_ray", "rollout.partial_check_tokens=16"],
     "rollout.partial_check_tokens=16", "rollout.partial_rollouts=true"),
    (["rollout.async_sampler=thread"], "rollout.async_sampler=thread", "rollout.async_ahead=1"),
    (["rollout.mode=async_ray", "rollout.logprob_gap_warn=0.1"], "rollout.logprob_gap_warn=0.1",
     "rollout.async_ahead=0"),
    (["rollout.async_ahead=1", "rollout.logprob_gap_warn=0.1"], "rollout.logprob_gap_warn=0.1",
     "rollout.async_ahead=0"),
])
def test_keys_of_another_rollout_mode_are_refused(overrides, key, path):
    line = refused(*overrides)
    assert key in line and path in line and "the command line" in line, line


def test_async_ray_refuses_vllm_lora_adapter_and_merges_otherwise():
    lora = ["rollout.mode=async_ray", "rollout.engine=vllm", "model.lora.enabled=true"]
    line = refused(*lora, "rollout.vllm_lora=adapter")
    assert "rollout.vllm_lora=adapter" in line and "rollout.mode=async_ray" in line, line
    for mode in ("merged", "auto"):
        assert load_config(None, lora + [f"rollout.vllm_lora={mode}"]).rollout.vllm_lora == mode


@pytest.mark.parametrize("overrides", [
    ["rollout.mode=async_ray", "rollout.workers=4", "rollout.max_staleness=2",
     "rollout.queue_size=64", "rollout.max_restarts=-1"],
    ["rollout.mode=async_ray", "rollout.partial_rollouts=true", "rollout.partial_check_tokens=16"],
    ["rollout.async_ahead=1", "rollout.async_sampler=thread"],
    ["rollout.logprob_gap_warn=0.1"],
])
def test_keys_of_the_chosen_rollout_mode_load(overrides):
    load_config(None, overrides)


def test_a_recipes_async_keys_with_the_mode_switched_on_the_command_line_warn(tmp_path, caplog):
    # the recipe is written for async_ray; this run switches to sync: its keys are a warning,
    # not an error, and the warning names each of them
    recipe = tmp_path / "async.yaml"
    recipe.write_text("rollout:\n  mode: async_ray\n  workers: 4\n  max_staleness: 2\n")
    with pytest.raises(ConfigError, match="rollout.workers=4"):
        load_config(None, ["rollout.workers=4"])
    with caplog.at_level(logging.WARNING, logger="mindrl"):
        cfg = load_config(str(recipe), ["rollout.mode=sync"])
    assert cfg.rollout.mode == "sync"
    text = caplog.text
    assert "rollout.workers=4" in text and "rollout.max_staleness=2" in text, text
    assert "rollout.mode set on the command line" in text, text


# A feature's key set with the feature off changes nothing: refused, one line naming the key,
# where it came from and what turns it on. (overrides with the feature off, the key=value in
# the line, the setting that reads it, the overrides that turn it on)
FEATURE_OFF = [
    (["critic.lr=1e-5"], "critic.lr=1e-05", "algorithm.adv_estimator=gae",
     ["algorithm.adv_estimator=gae"]),
    (["critic.warmup_steps=2"], "critic.warmup_steps=2", "algorithm.adv_estimator=gae",
     ["algorithm.adv_estimator=gae"]),
    (["critic.model_path=/some/critic"], "critic.model_path=/some/critic",
     "algorithm.adv_estimator=gae", ["algorithm.adv_estimator=gae"]),
    (["model.lora.rank=16"], "model.lora.rank=16", "model.lora.enabled=true",
     ["model.lora.enabled=true"]),
    (["model.lora.target_modules=[q_proj]"], "model.lora.target_modules=['q_proj']",
     "model.lora.enabled=true", ["model.lora.enabled=true"]),
    (["algorithm.distill.coef=0.5"], "algorithm.distill.coef=0.5",
     "algorithm.distill.teacher set", ["algorithm.distill.teacher=builtin:tiny"]),
    (["algorithm.distill.mode=loss"], "algorithm.distill.mode=loss",
     "algorithm.distill.teacher set", ["algorithm.distill.teacher=builtin:tiny"]),
    (["mindformers.micro_batch_num=4"], "mindformers.micro_batch_num=4",
     "backend=mindformers", ["backend=mindformers", "device=ascend", "rollout.engine=vllm"]),
    (["backend=mindspore", "mindformers.recompute=false"], "mindformers.recompute=False",
     "backend=mindformers", ["backend=mindformers", "device=ascend", "rollout.engine=vllm"]),
    (["rollout.gpu_memory_utilization=0.3"], "rollout.gpu_memory_utilization=0.3",
     "rollout.engine=vllm", ["rollout.engine=vllm"]),
    (["rollout.engine=vllm", "rollout.vllm_lora=merged"], "rollout.vllm_lora=merged",
     "model.lora.enabled=true", ["rollout.engine=vllm", "model.lora.enabled=true"]),
    (["rollout.ascend_plugin=vllm-ascend"], "rollout.ascend_plugin=vllm-ascend",
     "device=ascend", ["rollout.engine=vllm", "device=ascend"]),
    (["backend=mindspore", "rollout.native_packed_weights=false"],
     "rollout.native_packed_weights=False", "rollout.engine=native and backend=torch",
     ["backend=torch"]),
    (["rollout.max_turns=2"], "rollout.max_turns=2", "tools.enabled=true",
     ["tools.enabled=true"]),
    (["tools.format=chat"], "tools.format=chat", "tools.enabled=true", ["tools.enabled=true"]),
    (["tools.names=[python,pkg.mod:fn]"], "tools.names=['python', 'pkg.mod:fn']",
     "tools.enabled=true", ["tools.enabled=true"]),
    (["tools.sandbox.timeout_s=3"], "tools.sandbox.timeout_s=3", "tools.enabled=true",
     ["tools.enabled=true"]),
]


@pytest.mark.parametrize("overrides,key,reads,on", FEATURE_OFF,
                         ids=[row[1].split("=")[0] for row in FEATURE_OFF])
def test_a_features_keys_with_the_feature_off_are_refused(overrides, key, reads, on):
    line = refused(*overrides)
    assert key in line and reads in line and "the command line" in line, line
    load_config(None, overrides + on)              # the feature on: the key is read, it loads


def test_a_parent_recipes_feature_keys_are_not_refused_in_a_recipe_that_turns_it_off(tmp_path):
    # a recipe that extends a PPO recipe and switches to GRPO inherits critic.* it does not use:
    # loads (logged); the same key on the command line is still refused
    (tmp_path / "ppo.yaml").write_text("algorithm: {adv_estimator: gae}\ncritic: {lr: 1.0e-5}\n")
    (tmp_path / "grpo.yaml").write_text("extends: ppo.yaml\nalgorithm: {adv_estimator: grpo}\n")
    assert load_config(str(tmp_path / "grpo.yaml")).critic.lr == 1e-5
    assert "critic.warmup_steps=2" in refused("critic.warmup_steps=2")
    with pytest.raises(ConfigError, match="critic.lr=1e-05"):
        load_config(str(tmp_path / "grpo.yaml"), ["critic.lr=1e-5"])
    (tmp_path / "bad.yaml").write_text("critic: {lr: 1.0e-5}\n")        # its own key: refused
    with pytest.raises(ConfigError, match="critic.lr=1e-05 .*bad.yaml"):
        load_config(str(tmp_path / "bad.yaml"))


@pytest.mark.parametrize("overrides", [
    ["reward.overlap_groups=true"],                                       # torch native
    ["reward.overlap_groups=true", "backend=mindspore"],                  # MindSpore sampler
    ["reward.overlap_groups=true", "rollout.engine=vllm", "rollout.batch_invariant=true"],
    ["reward.overlap_groups=true", "tools.enabled=true", "rollout.batch_invariant=true"],
    ["backend=mindspore", "model.gradient_checkpointing=true"],
    ["train.padding_free=true", "model.gradient_checkpointing=true"],     # torch
])
def test_honoured_combinations_load(overrides):
    # they load, and each key holds the value asked for (not dropped or reset by a check)
    cfg = load_config(None, overrides)
    for item in overrides:
        key, value = item.split("=", 1)
        got = cfg
        for part in key.split("."):
            got = getattr(got, part)
        assert str(got).lower() == value, (key, got)


@pytest.mark.parametrize("job", ["sft", "preference"])
def test_sft_and_preference_jobs_refuse_padding_free_before_loading(job, tmp_path):
    if job == "sft":
        from mindrl.trainer.sft import SFTTrainer as cls
    else:
        from mindrl.trainer.preference import PreferenceTrainer as cls
    cfg = load_config(None, ["train.padding_free=true", "model.path=/nonexistent/model",
                             f"logging.output_dir={tmp_path}"])
    with pytest.raises(ConfigError, match="train.padding_free=true"):
        cls(cfg)                         # before the (missing) model would be looked at
    assert not any(tmp_path.iterdir())


def test_more_workers_than_a_lone_process_is_refused():
    from mindrl.trainer.base import check_launched

    cfg = load_config(None, ["distributed.nproc=2"])
    with pytest.raises(ConfigError, match=r"distributed.nproc=2 x distributed.nnodes=1"):
        check_launched(cfg, env={})
    check_launched(cfg, env={"WORLD_SIZE": "2"})          # under torchrun
    check_launched(cfg, env={"MS_WORKER_NUM": "2"})       # under msrun
    check_launched(load_config(None, []), env={})


# --------------------------------------------------------------------------- tensorboard
def _scalars(logdir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(logdir))
    ea.Reload()
    tags = ea.Tags()
    out = {t: [(e.step, e.value) for e in ea.Scalars(t)] for t in tags["scalars"]}
    for t in tags["tensors"]:                       # tensorboard's own writer: scalar tensors
        out[t] = [(e.step, float(e.tensor_proto.float_val[0] if e.tensor_proto.float_val
                                 else e.tensor_proto.double_val[0])) for e in ea.Tensors(t)]
    return out


def test_tensorboard_scalars_are_written_without_torch(tmp_path, monkeypatch):
    """A MindSpore-only install has the tensorboard package but no torch."""
    from mindrl.trainer.logger import MetricsLogger

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)   # import fails
    logger = MetricsLogger(tmp_path, tensorboard=True)
    assert logger._tb is not None and type(logger._tb).__name__ == "_NativeWriter"
    logger.log(1, {"reward/mean": 0.25})
    logger.log(2, {"reward/mean": 0.75})
    logger.close()
    got = _scalars(tmp_path / "tensorboard")
    assert [(s, round(v, 6)) for s, v in got["reward/mean"]] == [(1, 0.25), (2, 0.75)]


def test_tensorboard_missing_says_so_in_one_warning(tmp_path, monkeypatch, caplog):
    from mindrl.trainer.logger import MetricsLogger

    for name in ("torch.utils.tensorboard", "tensorboard.summary", "tensorboardX"):
        monkeypatch.setitem(sys.modules, name, None)
    with caplog.at_level(logging.WARNING, logger="mindrl.train"):
        logger = MetricsLogger(tmp_path, tensorboard=True)
    assert logger._tb is None
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "logging.tensorboard=true" in warned[0]
    logger.log(1, {"x": 1.0})                         # metrics.jsonl still written
    assert (tmp_path / "metrics.jsonl").read_text().count("\n") == 1
