"""Typed run configuration: schema (dataclasses) and loader (YAML + dotted overrides)."""

from mindrl.config.loader import dump_config, load_config, save_config
from mindrl.config.schema import ConfigError, RunConfig

__all__ = ["ConfigError", "RunConfig", "dump_config", "load_config", "save_config"]
