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
