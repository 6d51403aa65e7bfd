"""Multi-stage recipes: a ``stages:`` list, each stage its own overrides of the recipe's keys.

A recipe with stages (``yaml_configs/deepscaler_*.yaml``)::

    model: {path: /models/DeepSeek-R1-Distill-Qwen-1.5B}
    rollout: {n: 8}
    logging: {output_dir: runs/deepscaler}
    stages:
      - name: ctx8k                  # letters, digits, '_' or '-'; unique
        rollout: {max_new_tokens: 8192}
        train: {steps: 1040}
      - name: ctx16k
        run: train                   # what the stage runs: train (RL, the default), sft, dpo,
        rollout: {max_new_tokens: 16384}   # simpo or pref (preference.loss from the recipe)

Stage ``i`` (1-based) is resolved as: the recipe's top-level keys, merged with the stage's keys,
then the command-line overrides (``train.steps=2`` for every stage; ``stages.ctx16k.train.steps=2``
for one stage), then two keys the runner sets:

- ``logging.output_dir`` = ``RUN_DIR/stage_<i>_<name>``, RUN_DIR being the recipe's own
  ``logging.output_dir`` (a stage may not set it);
- ``model.path`` of stage ``i > 1`` = the final checkpoint of stage ``i - 1``
  (``RUN_DIR/stage_<i-1>_<name>/checkpoints/step_<steps>/model``); a later stage may not set it,
  and every stage but the last must keep ``checkpoint.save_final`` on.

Every stage is resolved and checked when the recipe is loaded, before the first one starts, so a
bad key in the last stage stops the run at once, naming the stage and the key. The runner is
:mod:`mindrl.trainer.stages`; ``mindrl config show RECIPE`` prints each stage's resolved config.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from mindrl.config.loader import (CLI, _merge, _record_sources, apply_overrides,
                                  check_no_from_stage, config_from_data, parse_override,
                                  read_recipe, resolve_recipe)
from mindrl.config.schema import ConfigError, RunConfig

RUNS = ("train", "sft", "dpo", "simpo", "pref")
STAGE_KEYS = ("name", "run")
NAME = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclasses.dataclass(frozen=True)
class Stage:
    index: int                    # 1-based
    name: str                     # '' for a recipe without stages
    run: str                      # train | sft | dpo | simpo | pref
    cfg: RunConfig
    count: int                    # number of stages of the recipe

    @property
    def label(self) -> str:
        return f"stage {self.index}/{self.count} '{self.name}'" if self.name else "the run"

    @property
    def final_model(self) -> Path:
        """Where this stage's final weights will be (the next stage starts from them)."""
        return final_checkpoint(self.cfg) / "model"


def final_checkpoint(cfg: RunConfig) -> Path:
    from mindrl.paths import step_dir

    return step_dir(Path(cfg.logging.output_dir) / "checkpoints", cfg.train.steps)


def stage_dir(run_dir: str, index: int, name: str) -> str:
    return str(Path(run_dir) / f"stage_{index}_{name}")


def _stage_overrides(overrides: Sequence[str], names: List[str]) -> Tuple[List[str],
                                                                          Dict[str, List[str]]]:
    """Split command-line overrides into those for every stage and ``stages.NAME.key=v``."""
    common: List[str] = []
    per: Dict[str, List[str]] = {n: [] for n in names}
    for text in overrides:
        parts, _ = parse_override(text)
        if parts[0] != "stages":
            common.append(text)
            continue
        if len(parts) < 3 or parts[1] not in per:
            raise ConfigError(f"override '{text}' on {CLI}: a stage override looks like "
                              f"stages.NAME.section.key=value with NAME one of "
                              f"{', '.join(names) or '(this recipe has no stages)'}")
        per[parts[1]].append(text.split(".", 2)[2])
    return common, per


def _check_stage_item(item: Any, i: int, origin: str) -> Tuple[str, str, Dict]:
    where = f"{origin}, stages[{i - 1}]"
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: a stage must be a mapping with a 'name' and section "
                          f"overrides, got {type(item).__name__}")
    name = item.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        raise ConfigError(f"{where}: name={name!r} must be letters, digits, '_' or '-'")
    run = item.get("run", "train")
    if run not in RUNS:
        raise ConfigError(f"{where} '{name}': run={run!r} must be one of {list(RUNS)}")
    body = {k: v for k, v in item.items() if k not in STAGE_KEYS}
    for key in ("extends", "stages"):
        if key in body:
            raise ConfigError(f"{where} '{name}': '{key}' is allowed only at the top of a recipe")
    return name, run, body


def load_stages(recipe: Optional[str], overrides: Sequence[str] = (), *,
                require_model: bool = False) -> List[Stage]:
    """Every stage of a recipe, resolved and checked (see the module docstring); a recipe
    without ``stages`` gives one stage with an empty name. Errors name the stage and the key."""
    sources: Dict[str, str] = {}
    data = read_recipe(recipe, sources)
    items = data.pop("stages", None)
    if items is None:
        data = apply_overrides(data, overrides, sources)
        cfg = config_from_data(data, sources, require_model=require_model)
        check_no_from_stage(cfg, sources)
        return [Stage(1, "", "train", cfg, 1)]
    origin = str(resolve_recipe(recipe).resolve())
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{origin}: stages must be a non-empty list of stages")
    parsed = [_check_stage_item(item, i, origin) for i, item in enumerate(items, 1)]
    names = [p[0] for p in parsed]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"{origin}: stage name(s) {', '.join(dup)} appear more than once")
    common, per = _stage_overrides(overrides, names)
    base = apply_overrides(data, common, sources)
    run_dir = str(base.get("logging", {}).get("output_dir") or RunConfig().logging.output_dir)
    out: List[Stage] = []
    for i, (name, run, body) in enumerate(parsed, 1):
        label = f"stage {i} '{name}'"
        src = dict(sources)
        _record_sources(body, f"{origin}, {label}", src)
        merged = _merge(base, body)
        merged = apply_overrides(merged, common, src)          # the command line wins
        merged = apply_overrides(merged, per[name], src)
        fixed = [f"logging.output_dir={stage_dir(run_dir, i, name)}"]
        if (body.get("logging") or {}).get("output_dir") is not None:
            raise ConfigError(f"{label}: logging.output_dir (from {origin}, {label}) is set by "
                              f"the stage runner (RUN_DIR/stage_{i}_{name}); set "
                              "logging.output_dir at the top of the recipe")
        if i > 1:
            if (body.get("model") or {}).get("path") is not None:
                raise ConfigError(f"{label}: model.path (from {origin}, {label}) is set by the "
                                  f"stage runner: stage {i} starts from the final checkpoint of "
                                  f"stage {i - 1} '{out[-1].name}'")
            fixed.append(f"model.path={out[-1].final_model}")
        merged = apply_overrides(merged, fixed, {})
        if run in ("dpo", "simpo"):
            merged = apply_overrides(merged, [f"preference.loss={run}"], src)
        try:
            cfg = config_from_data(merged, src, require_model=require_model and i == 1)
        except ConfigError as e:
            raise ConfigError(f"{label} of {len(parsed)}: {e}") from None
        if i == 1:
            check_no_from_stage(cfg, src, label)
        elif cfg.data.from_stage and run != "train":
            raise ConfigError(f"{label}: data.from_stage={cfg.data.from_stage} rates RL "
                              f"prompts; this stage runs `mindrl {run}`")
        if i < len(parsed) and not cfg.checkpoint.save_final:
            raise ConfigError(f"{label}: checkpoint.save_final=false, but stage {i + 1} starts "
                              "from this stage's final checkpoint")
        out.append(Stage(i, name, run, cfg, len(parsed)))
    return out


def describe_stages(stages: List[Stage]) -> str:
    """The resolved configs as YAML documents, one per stage, each headed by a comment."""
    from mindrl.config.loader import dump_config

    if len(stages) == 1 and not stages[0].name:
        return dump_config(stages[0].cfg)
    parts = []
    for s in stages:
        parts.append(f"# {s.label}: `mindrl {s.run}` in {s.cfg.logging.output_dir}\n"
                     + dump_config(s.cfg))
    return "---\n".join(parts)
