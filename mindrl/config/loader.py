"""Build a :class:`RunConfig` from YAML recipes and dotted command-line overrides.

- A recipe may ``extends: base.yaml`` (a path relative to the recipe, or a list of them); the
  child's keys are merged over the base's, section by section.
- Overrides look like ``algorithm.adv_estimator=rloo train.lr=1e-6``; values are parsed as YAML
  (``true``, ``3``, ``[0.9, 0.95]``).
- Every error names the dotted key and where its value came from (file or command line) and
  is raised before any work starts: unknown keys (with the closest valid key), wrong types (with
  the value and the expected type), values outside a field's choices, then the cross-field
  checks of :meth:`RunConfig.check`.
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import yaml

from mindrl.config.schema import ConfigError, RunConfig
from mindrl.registry import closest, error_text

REPO_CONFIGS = Path(__file__).resolve().parents[2] / "yaml_configs"
CLI = "the command line"


def resolve_recipe(name: str) -> Path:
    """A recipe path, or a bare name looked up in ``yaml_configs/`` (``grpo_tiny`` works)."""
    p = Path(name)
    if p.is_file():
        return p
    for cand in (REPO_CONFIGS / name, REPO_CONFIGS / f"{name}.yaml"):
        if cand.is_file():
            return cand
    known = sorted(x.stem for x in REPO_CONFIGS.glob("*.yaml"))
    raise ConfigError(f"recipe '{name}' not found (not a file, not in {REPO_CONFIGS}); "
                      f"known recipes: {', '.join(known)}")


def _read_yaml(path: Path, sources: Dict[str, str], chain: Tuple[Path, ...] = ()) -> Dict:
    path = path.resolve()
    if path in chain:
        raise ConfigError(f"recipe inheritance loops: {' -> '.join(map(str, chain + (path,)))}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a recipe must be a mapping of sections, got "
                          f"{type(data).__name__}")
    bases = data.pop("extends", None) or []
    merged: Dict = {}
    for base in [bases] if isinstance(bases, str) else bases:
        merged = _merge(merged, _read_yaml(path.parent / base, sources, chain + (path,)))
    _record_sources(data, str(path), sources)
    return _merge(merged, data)


def _merge(base: Dict, over: Dict) -> Dict:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k != "params":
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def _record_sources(data: Dict, origin: str, sources: Dict[str, str], prefix: str = "") -> None:
    for k, v in data.items():
        key = f"{prefix}{k}"
        sources[key] = origin
        if isinstance(v, dict):
            _record_sources(v, origin, sources, key + ".")


def parse_override(text: str) -> Tuple[List[str], Any]:
    if "=" not in text:
        raise ConfigError(f"override '{text}' on {CLI} must look like section.key=value")
    key, raw = text.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise ConfigError(f"override '{text}' on {CLI}: empty key segment in '{key}'")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return parts, value


def apply_overrides(data: Dict, overrides: Sequence[str], sources: Dict[str, str]) -> Dict:
    data = _merge({}, data)
    for text in overrides:
        parts, value = parse_override(text)
        node = data
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                node[p] = {}
            node = node[p]
        node[parts[-1]] = value
        sources[".".join(parts)] = CLI
        if isinstance(value, dict):
            _record_sources(value, CLI, sources, ".".join(parts) + ".")
    return data


# --------------------------------------------------------------------------- building
def _where(key: str, sources: Dict[str, str]) -> str:
    """Where a key's value came from: the nearest enclosing key with a recorded source."""
    while key:
        if key in sources:
            return sources[key]
        cut = max(key.rfind("."), key.rfind("["))
        key = key[:cut] if cut > 0 else ""
    return "the defaults"


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is None:
        return getattr(tp, "__name__", str(tp))
    args = ", ".join(_type_name(a) for a in typing.get_args(tp))
    return f"{getattr(origin, '__name__', str(origin))}[{args}]"


def _convert(tp: Any, value: Any, key: str, sources: Dict[str, str]) -> Any:
    where = _where(key, sources)
    bad = ConfigError(f"{key}={value!r} (from {where}) has type {type(value).__name__}; "
                      f"expected {_type_name(tp)}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise bad
        return build_dataclass(tp, value, key, sources)
    origin = typing.get_origin(tp)
    if origin in (list, List):
        (item_tp,) = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise bad
        return [_convert(item_tp, v, f"{key}[{i}]", sources) for i, v in enumerate(value)]
    if origin in (dict, Dict):
        if not isinstance(value, dict):
            raise bad
        return dict(value)
    if origin is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _convert(args[0], value, key, sources)
    if tp is bool:
        if not isinstance(value, bool):
            raise bad
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad
        return value
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads "1e-6" (no dot) as a string
            try:
                return float(value)
            except ValueError:
                raise bad from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise bad
        return value
    if tp is Any:
        return value
    raise bad


def build_dataclass(cls: type, data: Dict, prefix: str, sources: Dict[str, str]) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for k, v in data.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if k not in fields:
            valid = [f"{prefix}.{n}" if prefix else n for n in fields]
            hint = closest(key, valid)
            where = _where(key, sources)
            msg = f"unknown key '{key}' (from {where})"
            msg += f"; did you mean '{hint}'?" if hint else f"; valid keys here: {', '.join(valid)}"
            raise ConfigError(msg)
        value = _convert(hints[k], v, key, sources)
        choices = fields[k].metadata.get("choices")
        if choices is not None and value not in choices:
            raise ConfigError(f"{key}={value!r} (from {_where(key, sources)}) must be "
                              f"one of {choices}")
        kwargs[k] = value
    return cls(**kwargs)


def load_config(recipe: Optional[str] = None, overrides: Sequence[str] = ()) -> RunConfig:
    """Read a recipe (or the defaults), apply overrides, type-check and cross-check."""
    sources: Dict[str, str] = {}
    data = _read_yaml(resolve_recipe(recipe), sources) if recipe else {}
    data = apply_overrides(data, overrides, sources)
    cfg = build_dataclass(RunConfig, data, "", sources)
    cfg.check()
    _check_registered_names(cfg)
    return cfg


def _check_registered_names(cfg: RunConfig) -> None:
    """Names resolved through registries, checked now rather than at step 1."""
    try:
        import algorithms  # noqa: F401  (registers estimators and losses)
        from algorithms.advantages import ADV_ESTIMATORS
        from algorithms.aggregation import AGG_MODES
        from algorithms.policy_loss import POLICY_LOSSES
    except ImportError:  # the algorithms package is part of mindrl; absent only mid-install
        return
    for key, reg, value in (("algorithm.adv_estimator", ADV_ESTIMATORS, cfg.algorithm.adv_estimator),
                            ("algorithm.policy_loss", POLICY_LOSSES, cfg.algorithm.policy_loss),
                            ("algorithm.loss_agg_mode", AGG_MODES, cfg.algorithm.loss_agg_mode)):
        try:
            reg.get(value)
        except KeyError as e:
            raise ConfigError(f"{key}: {error_text(e)}") from None
    try:
        from rewards.registry import resolve_reward
    except ImportError:
        return
    for i, fn in enumerate(cfg.reward.functions):
        try:
            resolve_reward(fn.name, fn.params)
        except (KeyError, ImportError, AttributeError, TypeError, ValueError) as e:
            raise ConfigError(f"reward.functions[{i}].name='{fn.name}': {error_text(e)}") \
                from None


# --------------------------------------------------------------------------- output
def config_to_dict(cfg: Any) -> Dict:
    return dataclasses.asdict(cfg)


def dump_config(cfg: Any) -> str:
    return yaml.safe_dump(config_to_dict(cfg), sort_keys=False, default_flow_style=False)


def save_config(cfg: Any, path: Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_config(cfg))


def describe(cls: type = RunConfig, prefix: str = "") -> List[Tuple[str, str, Any, str]]:
    """(dotted key, type, default, help) for every option, for ``mindrl config show --help-keys``."""
    rows = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = f"{prefix}{f.name}"
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            rows.extend(describe(tp, key + "."))
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        if isinstance(default, list):
            default = [config_to_dict(d) if dataclasses.is_dataclass(d) else d for d in default]
        rows.append((key, _type_name(tp), default, f.metadata.get("help", "")))
    return rows
