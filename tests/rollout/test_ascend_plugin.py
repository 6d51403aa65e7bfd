"""The Ascend rollout plugin selection (the NPU path itself cannot run here: no Ascend NPU)."""

import pytest

from mindrl.config.loader import load_config
from mindrl.rollout.ascend import choose_plugin, prepare_ascend_vllm


def test_auto_picks_plugin_by_backend():
    npu = ["device=ascend", "rollout.engine=vllm"]           # where the plugin is read
    assert choose_plugin(load_config(None, ["backend=mindspore", *npu])) == "vllm-mindspore"
    assert choose_plugin(load_config(None, ["backend=torch", *npu])) == "vllm-ascend"
    cfg = load_config(None, ["backend=mindspore", *npu, "rollout.ascend_plugin=vllm-ascend"])
    assert choose_plugin(cfg) == "vllm-ascend"


@pytest.mark.parametrize("backend, module", [("torch", "vllm_ascend"),
                                             ("mindspore", "vllm_mindspore")])
def test_missing_plugin_is_named_with_install_hint(backend, module):
    cfg = load_config(None, [f"backend={backend}", "device=ascend", "rollout.engine=vllm"])
    with pytest.raises(ImportError, match=f"'{module}'.*not installed.*rollout.engine=native"):
        prepare_ascend_vllm(cfg)
