"""Run the stages of a multi-stage recipe in order (see :mod:`mindrl.config.stages`).

On disk, under the recipe's ``logging.output_dir`` (RUN_DIR)::

    RUN_DIR/stage_1_ctx8k/      a whole run directory: config.yaml, metrics.jsonl, checkpoints/
    RUN_DIR/stage_2_ctx16k/     its model.path is stage_1_ctx8k/checkpoints/step_<steps>/model
    RUN_DIR/stages.json         the plan: name, run, directory, steps and status of each stage

Resume needs no bookkeeping of its own: a stage is finished when its directory holds a complete
checkpoint at its last step (``train.steps``), and is then skipped; the first unfinished stage
runs, and its trainer resumes from that stage's newest checkpoint as any run does
(``checkpoint.resume``). So a killed multi-stage run restarted with the same command goes on in
the stage it was in, from its last checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Callable, Dict, List

from mindrl.config.stages import Stage

log = logging.getLogger("mindrl.stages")


def _trainers() -> Dict[str, Callable]:
    from mindrl.trainer.preference import train_preference
    from mindrl.trainer.rl import train
    from mindrl.trainer.sft import train_sft

    return {"train": train, "sft": train_sft, "dpo": train_preference,
            "simpo": train_preference, "pref": train_preference}


def stage_status(stage: Stage) -> str:
    """'done' (a complete checkpoint at the stage's last step), 'started' (an earlier
    checkpoint) or 'new'."""
    from mindrl.config.stages import final_checkpoint
    from mindrl.trainer.checkpoint import COMPLETE, latest_checkpoint

    final = final_checkpoint(stage.cfg)
    if (final / COMPLETE).is_file():
        return "done"
    return "started" if latest_checkpoint(final.parent) is not None else "new"


def _write_plan(stages: List[Stage], run_dir: Path) -> None:
    rows = [{"stage": s.index, "name": s.name, "run": s.run, "dir": s.cfg.logging.output_dir,
             "steps": s.cfg.train.steps, "model": s.cfg.model.path, "status": stage_status(s)}
            for s in stages]
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = run_dir / "stages.json.tmp"
    tmp.write_text(json.dumps(rows, indent=1) + "\n")
    os.replace(tmp, run_dir / "stages.json")


def check_finished_stage(stage: Stage) -> None:
    """A finished stage is skipped only when it ran with this configuration: its final
    checkpoint's stored config is compared as a resume compares it (the keys a resume may
    change, and checkpoint.allow_changes, are allowed); else ConfigError naming the stage and
    listing ``key: old -> new``."""
    import yaml

    from mindrl.config.loader import dump_config
    from mindrl.config.schema import ConfigError
    from mindrl.config.stages import final_checkpoint
    from mindrl.trainer.checkpoint import check_resume_config, read_checkpoint_config

    final = final_checkpoint(stage.cfg)
    old = read_checkpoint_config(final)
    if old is None:
        return
    defaults = yaml.safe_load(dump_config(type(stage.cfg)()))
    try:
        check_resume_config(old, yaml.safe_load(dump_config(stage.cfg)),
                            stage.cfg.checkpoint.allow_changes, final, defaults)
    except ConfigError as e:
        detail = str(e).split(":\n", 1)[-1].split("\nTo resume")[0]
        keys = ",".join(line.strip()[2:].split(":")[0] for line in detail.splitlines()
                        if line.strip().startswith("- "))
        raise ConfigError(
            f"{stage.label} finished earlier in {stage.cfg.logging.output_dir} with another "
            f"configuration, so it would be skipped and its old model used:\n{detail}\n"
            "To train with the new configuration, use another logging.output_dir; to keep the "
            f"finished stage anyway, add checkpoint.allow_changes=[{keys}]") from None


def run_stages(stages: List[Stage]) -> Dict[str, float]:
    """Run every unfinished stage in order; returns the last stage's last metrics. A stage
    that finished earlier with another configuration stops the run before anything trains
    (:func:`check_finished_stage`)."""
    trainers = _trainers()
    if len(stages) == 1 and not stages[0].name:
        return trainers[stages[0].run](stages[0].cfg)
    for s in stages:
        if stage_status(s) == "done":
            check_finished_stage(s)
    run_dir = Path(stages[0].cfg.logging.output_dir).parent
    last: Dict[str, float] = {}
    for s in stages:
        status = stage_status(s)
        main = int(os.environ.get("RANK", "0")) == 0
        if main:
            _write_plan(stages, run_dir)
        if status == "done":
            print(f"[stages] {s.label}: finished earlier ({s.cfg.logging.output_dir}), skipped",
                  flush=True)
            continue
        how = "resuming" if status == "started" else "starting"
        print(f"[stages] {s.label}: {how} `mindrl {s.run}`, {s.cfg.train.steps} steps from "
              f"{s.cfg.model.path} -> {s.cfg.logging.output_dir}", flush=True)
        last = trainers[s.run](s.cfg)
    if int(os.environ.get("RANK", "0")) == 0:
        _write_plan(stages, run_dir)
    print(f"[stages] all {len(stages)} stages finished; final model: {stages[-1].final_model}",
          flush=True)
    return last
