"""Ascend rollout: the vLLM engine with an Ascend platform plugin.

Nothing here has run on an Ascend NPU (none exists where mindrl is developed); it follows the
plugins' documented set-up and sits behind the same :class:`~mindrl.rollout.vllm_engine.VLLMEngine`
as the CPU and GPU paths, which are tested.

- ``vllm-ascend`` (torch + torch-npu): registers itself as a vLLM platform plugin through the
  ``vllm.platform_plugins`` entry point; ``vllm.LLM`` then runs on the NPU unchanged, and weight
  sync uses the same ``collective_rpc("reload_weights")`` call as on CPU/GPU.
- ``vllm-mindspore``: MindSpore models inside vLLM; its documentation requires ``import
  vllm_mindspore`` before vLLM is imported, and the model backend is chosen with the
  ``vLLM_MODEL_BACKEND`` environment variable (e.g. ``MindFormers``).

``rollout.ascend_plugin: auto`` picks vllm-mindspore for the MindSpore backend and vllm-ascend
for the torch backend.
"""

from __future__ import annotations

import importlib.util
import os

PLUGINS = {
    "vllm-ascend": ("vllm_ascend", "pip install vllm-ascend (needs CANN and torch-npu)"),
    "vllm-mindspore": ("vllm_mindspore", "install vllm-mindspore from "
                       "https://gitee.com/mindspore/vllm-mindspore (needs CANN and MindSpore "
                       "for Ascend)"),
}


def choose_plugin(cfg) -> str:
    plugin = cfg.rollout.ascend_plugin
    if plugin == "auto":
        plugin = "vllm-mindspore" if cfg.backend in ("mindspore", "mindformers") else "vllm-ascend"
    if plugin not in PLUGINS:
        raise ValueError(f"rollout.ascend_plugin='{plugin}'; valid: auto, "
                         + ", ".join(PLUGINS))
    return plugin


def prepare_ascend_vllm(cfg) -> str:
    """Make the chosen plugin active before ``import vllm``; returns the plugin's name.
    Raises ImportError naming the missing package and how to install it."""
    plugin = choose_plugin(cfg)
    module, how = PLUGINS[plugin]
    if importlib.util.find_spec(module) is None:
        raise ImportError(f"device=ascend with rollout.engine=vllm needs the {plugin} plugin "
                          f"(python module '{module}'), which is not installed: {how}. Or use "
                          "rollout.engine=native.")
    if plugin == "vllm-mindspore":
        os.environ.setdefault("vLLM_MODEL_BACKEND", "MindFormers")
        importlib.import_module(module)  # must precede `import vllm`
    return plugin
