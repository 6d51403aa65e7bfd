"""Build a :class:`RunConfig` from YAML recipes and dotted command-line overrides.

- A recipe may ``extends: base.yaml`` (a path relative to the recipe, or a list of them); the
  child's keys are merged over the base's, section by section. A bare name (``extends:
  grpo_tiny_demo``) is looked up as the command line does: beside the recipe first (with or
  without ``.yaml``), then in ``yaml_configs/``.
- YAML is read strictly: a key given twice in one mapping, a file that is not UTF-8 and a
  syntax error each raise one line naming the file and line.
- Overrides look like ``algorithm.adv_estimator=rloo train.lr=1e-6``; values are parsed as YAML
  (``true``, ``3``, ``[0.9, 0.95]``).
- Every error names the dotted key and where its value came from (file or command line) and
  is raised before any work starts: unknown keys (with the closest valid key), wrong types (with
  the value and the expected type), values outside a field's choices, then the cross-field
  checks of :meth:`RunConfig.check`. ``model.path`` is checked too: a ``builtin:`` name always,
  a local directory when the caller is about to load it (``require_model=True``).
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


def _known_recipes(name: str = "") -> str:
    """A short hint at the built-in recipes: the closest names to ``name`` (difflib) and where
    the full list is, not the list itself (it runs to thousands of characters)."""
    import difflib  # noqa: PLC0415

    names = sorted(x.stem for x in REPO_CONFIGS.glob("*.yaml"))
    stem = Path(name).stem
    close = difflib.get_close_matches(stem, names, n=3, cutoff=0.6)
    if not close:
        close = [n for n in names if stem and (stem in n or n in stem)][:3]
    guess = f"did you mean {' or '.join(close)}? " if close else ""
    return f"{guess}`mindrl recipes` lists all {len(names)}"


def _recipe_candidates(name: str, beside: Path) -> List[Path]:
    """Where a recipe named ``name`` may be: in ``beside`` (as given, then + .yaml), then, for a
    bare name, in ``yaml_configs/``."""
    p = Path(name).expanduser()
    yaml_name = not name.endswith((".yaml", ".yml"))
    out = [beside / p] + ([beside / f"{name}.yaml"] if yaml_name else [])
    if len(p.parts) == 1:
        out += [REPO_CONFIGS / name] + ([REPO_CONFIGS / f"{name}.yaml"] if yaml_name else [])
    return out


def resolve_recipe(name: str) -> Path:
    """A recipe path, or a bare name looked up in ``yaml_configs/`` (``grpo_tiny`` works)."""
    for cand in _recipe_candidates(name, Path(".")):
        if cand.is_file():
            return cand
    raise ConfigError(f"recipe '{name}' not found (not a file, not in {REPO_CONFIGS}); "
                      f"{_known_recipes(name)}")


def _resolve_base(base: Any, child: Path) -> Path:
    """The file an ``extends:`` entry of ``child`` names."""
    if not isinstance(base, str) or not base.strip():
        raise ConfigError(f"{child}: extends: {base!r} must be a recipe name or path (or a "
                          "list of them)")
    cands = _recipe_candidates(base.strip(), child.parent)
    for cand in cands:
        if cand.is_file():
            return cand
    raise ConfigError(f"{child}: extends: '{base}' not found (looked for "
                      f"{', '.join(map(str, cands))}); {_known_recipes(str(base))}")


class _DuplicateKey(Exception):
    def __init__(self, key: Any, line: int, first: int):
        super().__init__(key, line, first)
        self.key, self.line, self.first = key, line, first


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: Dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # '<<' merges may override
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:                # unhashable: the base class says so
                    continue
                line = key_node.start_mark.line + 1
                if first is not None:
                    raise _DuplicateKey(key, line, first)
                seen[key] = line
        return super().construct_mapping(node, deep)


def read_yaml_file(path: Path, error: type = ConfigError) -> Any:
    """Parse one YAML file strictly; raises ``error`` (a UserError) with a one-line message
    naming the file and line for a missing or unreadable file, a non-UTF-8 byte, a syntax error
    and a duplicated key."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise error(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise error(f"{path}, line {line}: not UTF-8 text (byte 0x{raw[e.start]:02x}); "
                    "save the file as UTF-8") from None
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except _DuplicateKey as e:
        raise error(f"{path}, line {e.line}: key '{e.key}' appears twice in one mapping (first "
                    f"on line {e.first}); YAML would silently keep the last, so remove one"
                    ) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark else str(path)
        what = " ".join(str(x) for x in (getattr(e, "context", None),
                                         getattr(e, "problem", None)) if x) or str(e)
        raise error(f"{where}: not valid YAML: {' '.join(what.split())}") from None


def _read_yaml(path: Path, sources: Dict[str, str], chain: Tuple[Path, ...] = ()) -> Dict:
    path = path.resolve()
    if path in chain:
        raise ConfigError(f"recipe inheritance loops: {' -> '.join(map(str, chain + (path,)))}")
    data = read_yaml_file(path) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a recipe must be a mapping of sections, got "
                          f"{type(data).__name__}")
    bases = data.pop("extends", None) or []
    merged: Dict = {}
    for base in [bases] if isinstance(bases, str) else bases:
        merged = _merge(merged, _read_yaml(_resolve_base(base, path), sources, chain + (path,)))
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
        value = yaml.load(raw, Loader=_StrictLoader) if raw.strip() else ""
    except _DuplicateKey as e:
        raise ConfigError(f"override '{text}' on {CLI}: key '{e.key}' appears twice") from None
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


def load_config(recipe: Optional[str] = None, overrides: Sequence[str] = (), *,
                require_model: bool = False) -> RunConfig:
    """Read a recipe (or the defaults), apply overrides, type-check and cross-check.

    ``require_model``: also check that a local ``model.path`` is a model directory (commands
    that load the model ask for it; ``config show`` of a recipe for another machine does not).
    """
    sources: Dict[str, str] = {}
    data = _read_yaml(resolve_recipe(recipe), sources) if recipe else {}
    if "stages" in data:
        raise staged_recipe_error(recipe, data["stages"])
    data = apply_overrides(data, overrides, sources)
    cfg = config_from_data(data, sources, require_model=require_model)
    check_no_from_stage(cfg, sources)
    return cfg


def check_no_from_stage(cfg: RunConfig, sources: Dict[str, str], label: str = "") -> None:
    """``data.from_stage`` rates problems with the model of the stage before: only a stage
    after the first of a multi-stage recipe has one."""
    if cfg.data.from_stage:
        raise ConfigError(f"{label + ': ' if label else ''}data.from_stage="
                          f"{cfg.data.from_stage} ({_where('data.from_stage', sources)}) needs "
                          "a previous stage: use it in a stage after the first of a recipe with "
                          "stages")


def read_recipe(recipe: Optional[str], sources: Dict[str, str]) -> Dict:
    """A recipe's merged mapping (``extends`` resolved), sources recorded; {} for None."""
    return _read_yaml(resolve_recipe(recipe), sources) if recipe else {}


def config_from_data(data: Dict, sources: Dict[str, str], *,
                     require_model: bool = False) -> RunConfig:
    """Type-check and cross-check a merged recipe mapping (see :func:`load_config`)."""
    cfg = build_dataclass(RunConfig, data, "", sources)
    cfg.check()
    _check_mode_keys(cfg, sources)
    _check_registered_names(cfg)
    _check_model_path(cfg.model.path, _where("model.path", sources), require_model)
    if require_model:        # a command that will run: its run directory must be creatable
        from mindrl.paths import check_output_path

        check_output_path(cfg.logging.output_dir, "logging.output_dir", error=ConfigError,
                          where=_where("logging.output_dir", sources))
    return cfg


def _check_mode_keys(cfg: RunConfig, sources: Dict[str, str]) -> None:
    """A key that the chosen path never reads (a rollout mode's key in another mode; a
    feature's key with the feature off: the critic without GAE, LoRA, distillation, the
    mindformers backend, vLLM, tool rollouts) is refused, naming the key and where it is read;
    unless the recipe set it and a later layer chose another path: the command line (a recipe's
    keys for its own mode, the mode switched for this run: a warning) or a recipe that extends
    it (its parent's keys: logged)."""
    import logging

    from mindrl.config.schema import unread_mode_keys

    log = logging.getLogger("mindrl")
    errors = []
    for key, value, where, selectors in unread_mode_keys(cfg):
        origin = _where(key, sources)
        switched = [k for k in selectors if sources.get(k) == CLI]
        below = [k for k in selectors if sources.get(k) not in (None, CLI, origin)]
        line = f"{key}={value} ({origin}) is read only {where}"
        if switched and origin != CLI:
            log.warning("%s; ignored (%s set on %s)", line, " and ".join(switched), CLI)
        elif below and origin != CLI:
            log.info("%s; ignored (%s set in %s)", line, " and ".join(below),
                     sources[below[0]])
        elif selectors[0].startswith("rollout.mode"):
            errors.append(line + ": remove it or change the rollout mode")
        else:
            errors.append(line + f": remove it or set {' and '.join(selectors)}")
    if errors:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(errors))


def _check_model_path(path: str, where: str, local: bool) -> None:
    """A ``builtin:`` name must be one of the built-in models; with ``local``, any other path
    must be a model directory (config.json, tokenizer, weights). Imports nothing heavy."""
    from mindrl.models.tiny import BUILTIN_PREFIX, builtin_names, check_model_dir

    head = f"model.path={path!r} (from {where})"
    if path.startswith(BUILTIN_PREFIX):
        if path[len(BUILTIN_PREFIX):] not in builtin_names():
            raise ConfigError(f"{head}: unknown built-in model; valid: "
                              + ", ".join(BUILTIN_PREFIX + n for n in builtin_names()))
        return
    if not local:
        return
    if not Path(path).expanduser().is_dir():
        raise ConfigError(f"{head}: no such directory; give a local Hugging Face model "
                          "directory (config.json, tokenizer, weights) or a built-in model ("
                          + ", ".join(BUILTIN_PREFIX + n for n in builtin_names()) + ")")
    try:
        check_model_dir(str(Path(path).expanduser()), key=head)
    except FileNotFoundError as e:
        raise ConfigError(str(e)) from None


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


def staged_recipe_error(recipe: Optional[str], stages: Any) -> ConfigError:
    names = [s.get("name", "?") for s in stages if isinstance(s, dict)] \
        if isinstance(stages, list) else []
    return ConfigError(f"recipe '{recipe}' has stages ({', '.join(map(str, names))}): `mindrl "
                       "train` runs them in order and `mindrl config show` prints each stage's "
                       "config; to run one stage alone, give its output of `mindrl config show` "
                       "to the command as a recipe")
