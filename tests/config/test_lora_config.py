"""model.lora: listed with help, checked at load (unknown target modules name the key)."""

import pytest

from mindrl.config.loader import describe, load_config
from mindrl.errors import ConfigError


def test_lora_keys_are_listed_with_help():
    keys = {k: h for k, _, _, h in describe()}
    for name in ("enabled", "rank", "alpha", "dropout", "target_modules"):
        assert f"model.lora.{name}" in keys and keys[f"model.lora.{name}"]
    assert "peft: r" in keys["model.lora.rank"]
    assert "lora_alpha" in keys["model.lora.alpha"]


@pytest.mark.parametrize("override, words", [
    ("model.lora.target_modules=[q_proj,qkv]", ["model.lora.target_modules", "qkv"]),
    ("model.lora.target_modules=[]", ["model.lora.target_modules", "empty"]),
    ("model.lora.rank=0", ["model.lora.rank=0"]),
    ("model.lora.alpha=0", ["model.lora.alpha=0"]),
    ("model.lora.dropout=1.0", ["model.lora.dropout=1.0"]),
])
def test_bad_lora_values_name_the_key(override, words):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    for w in words:
        assert w in str(e.value)


def test_lora_with_fsdp_is_refused():
    with pytest.raises(ConfigError, match="train.fsdp"):
        load_config(None, ["model.lora.enabled=true", "train.fsdp=true"])


def test_good_lora_config_loads():
    cfg = load_config(None, ["model.lora.enabled=true", "model.lora.rank=4",
                             "model.lora.target_modules=[q_proj,down_proj]"])
    assert cfg.model.lora.rank == 4 and cfg.model.lora.target_modules == ["q_proj", "down_proj"]


def test_vllm_lora_mode_resolution():
    """rollout.vllm_lora: listed with help; merged as asked; a rank vLLM cannot serve falls back
    to merged under auto and is refused (naming both keys) under adapter; no LoRA -> None."""
    from mindrl.rollout.vllm_engine import lora_mode

    keys = {k: h for k, _, _, h in describe()}
    assert "adapter" in keys["rollout.vllm_lora"] and "merged" in keys["rollout.vllm_lora"]
    on = ["rollout.engine=vllm", "model.lora.enabled=true"]
    assert lora_mode(load_config(None, ["rollout.engine=vllm"])) is None
    with pytest.raises(ConfigError, match="rollout.vllm_lora=adapter .* is read only with "
                                          "rollout.engine=vllm and model.lora.enabled=true"):
        load_config(None, ["rollout.engine=vllm", "rollout.vllm_lora=adapter"])
    assert lora_mode(load_config(None, on + ["rollout.vllm_lora=merged"])) == "merged"
    big = on + ["model.lora.rank=1024"]
    assert lora_mode(load_config(None, big + ["rollout.vllm_lora=auto"])) == "merged"
    with pytest.raises(ConfigError) as e:
        lora_mode(load_config(None, big + ["rollout.vllm_lora=adapter"]))
    assert "rollout.vllm_lora=adapter" in str(e.value) and "model.lora.rank=1024" in str(e.value)
    with pytest.raises(ConfigError):
        load_config(None, ["rollout.vllm_lora=lora"])


@pytest.mark.slow
def test_vllm_lora_auto_is_merged_on_cpu_and_adapter_elsewhere_with_this_vllm():
    from mindrl.rollout.vllm_engine import lora_mode

    cfg = load_config(None, ["model.lora.enabled=true", "model.lora.rank=8"])
    assert cfg.rollout.vllm_lora == "auto" and cfg.device == "cpu" and lora_mode(cfg) == "merged"
    gpu = load_config(None, ["model.lora.enabled=true", "model.lora.rank=8", "device=cuda"])
    assert lora_mode(gpu) == "adapter"
