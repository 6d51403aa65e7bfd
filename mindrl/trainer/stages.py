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

import dataclasses
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


RESAMPLED = "resample/train.jsonl"
RESAMPLE_DONE = "resample/done.json"


def resolve_from_stage(stage: Stage) -> Stage:
    """The stage as it trains when ``data.from_stage`` is set: on the rated problems written to
    ``STAGE_DIR/resample/train.jsonl`` (columns problem, answer, pass_rate). Deterministic, so a
    rerun compares the same config (and resumes)."""
    cfg = stage.cfg
    if not cfg.data.from_stage:
        return stage
    data = dataclasses.replace(cfg.data, from_stage="",
                               train_file=str(Path(cfg.logging.output_dir) / RESAMPLED),
                               prompt_field="problem", answer_field="answer", id_field="",
                               format="auto", max_train_samples=0)
    return dataclasses.replace(stage, cfg=dataclasses.replace(cfg, data=data))


def select_rated(rates: Dict, lo: float, hi: float, keep_unsolved: bool = False):
    """(kept keys in order, number dropped as too easy, number dropped as too hard) for
    pass rates ``rates`` {key: rate}: kept when lo < rate < hi, or rate == 0 with
    ``keep_unsolved``; too easy when rate >= hi.

    >>> select_rated({"a": 0.0, "b": 0.5, "c": 1.0}, 0.0, 1.0)
    (['b'], 1, 1)
    >>> select_rated({"a": 0.0, "b": 0.5, "c": 1.0}, 0.0, 1.0, keep_unsolved=True)
    (['a', 'b'], 1, 0)
    """
    kept, easy, hard = [], 0, 0
    for key, rate in rates.items():
        if rate >= hi:
            easy += 1
        elif rate > lo or (keep_unsolved and rate == 0):
            kept.append(key)
        else:
            hard += 1
    return kept, easy, hard


def prepare_from_stage(stage: Stage, prev: Stage) -> Dict[str, int]:
    """Rate ``stage``'s training problems with ``prev``'s final model (``data.resample.n``
    samples each, the eval grader) and write those whose pass rate lies strictly between
    ``data.resample.lo`` and ``hi``. Resumable: the rating is an eval run (its samples are
    reused), and a finished selection (``resample/done.json``) is not redone. Returns counts."""
    from mindrl.data.io import DataError
    from mindrl.data.tools import load_eval_samples, pass_rate, write_jsonl
    from mindrl.eval.runner import run_eval
    from mindrl.eval.settings import EvalSettings

    cfg, rs = stage.cfg, stage.cfg.data.resample
    root = Path(cfg.logging.output_dir)
    done = root / RESAMPLE_DONE
    asked = {"model": str(prev.final_model), "train_file": cfg.data.train_file,
             "resample": dataclasses.asdict(rs)}
    if done.is_file():
        counts = json.loads(done.read_text())
        if counts.get("asked") == asked:
            print(f"[stages] {stage.label}: rated problems from earlier ({root / RESAMPLED}: "
                  f"{counts['kept']} of {counts['problems']} kept)", flush=True)
            return counts
        done.unlink()                    # other settings: rate again (the eval reuses samples)
    print(f"[stages] {stage.label}: rating {cfg.data.train_file} with {prev.final_model} "
          f"({rs.n} samples each; keeping {rs.lo} < pass rate < {rs.hi}"
          f"{' and the never solved' if rs.keep_unsolved else ''})", flush=True)
    settings = EvalSettings(
        model=str(prev.final_model), benchmarks=[cfg.data.train_file], n=rs.n,
        temperature=rs.temperature, top_p=1.0,
        max_new_tokens=rs.max_new_tokens or cfg.rollout.max_new_tokens, seed=cfg.rollout.seed,
        template=cfg.model.chat_template, system_prompt=cfg.data.system_prompt or None,
        engine=cfg.rollout.engine, backend="mindspore" if cfg.backend == "mindspore" else "torch",
        dtype=cfg.model.dtype, device=cfg.device, data_dir=cfg.data.data_dir,
        problem_field=cfg.data.prompt_field or None, answer_field=cfg.data.answer_field or None,
        id_field=cfg.data.id_field or None, limit=cfg.data.max_train_samples,
        output_dir=str(root / "resample" / "eval"), grade_workers=0, plot=False)
    run_eval(settings, echo_table=False)
    samples = load_eval_samples(root / "resample" / "eval")
    rates = {key: pass_rate(recs) for key, recs in samples.groups.items()}
    kept, easy, hard = select_rated(rates, rs.lo, rs.hi, rs.keep_unsolved)
    rows = [{**samples.problem_row(key), "pass_rate": rates[key],
             "n": len(samples.groups[key]), "benchmark": key[0], "problem_id": key[1]}
            for key in kept]
    counts = {"problems": len(samples.groups), "kept": len(rows), "too_easy": easy,
              "too_hard": hard, "asked": asked}
    if not rows:
        raise DataError(f"{stage.label}: data.from_stage={cfg.data.from_stage}: none of the "
                        f"{counts['problems']} problems of {cfg.data.train_file} has a pass rate "
                        f"in ({rs.lo}, {rs.hi}) under {prev.final_model} ({easy} always solved, "
                        f"{hard} never): nothing to train on; widen data.resample.lo/hi or "
                        "raise data.resample.n")
    write_jsonl(rows, root / RESAMPLED)
    done.write_text(json.dumps(counts) + "\n")
    print(f"[stages] {stage.label}: kept {len(rows)} of {counts['problems']} problems "
          f"({easy} always solved, {hard} never) -> {root / RESAMPLED}", flush=True)
    return counts


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
    asked = list(stages)                       # data.from_stage as written, for preparing it
    stages = [resolve_from_stage(s) for s in stages]
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
        if asked[s.index - 1].cfg.data.from_stage:
            prepare_from_stage(asked[s.index - 1], stages[s.index - 2])
        how = "resuming" if status == "started" else "starting"
        print(f"[stages] {s.label}: {how} `mindrl {s.run}`, {s.cfg.train.steps} steps from "
              f"{s.cfg.model.path} -> {s.cfg.logging.output_dir}", flush=True)
        last = trainers[s.run](s.cfg)
    if int(os.environ.get("RANK", "0")) == 0:
        _write_plan(stages, run_dir)
    print(f"[stages] all {len(stages)} stages finished; final model: {stages[-1].final_model}",
          flush=True)
    return last
