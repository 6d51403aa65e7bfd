"""What every training loop shares: set-up (model, data, backend, engine, rewards), the
step loop with progress bar, validation, metrics, checkpoints, resume and signal handling.
:mod:`mindrl.trainer.rl` and :mod:`mindrl.trainer.sft` only define one step."""


from __future__ import annotations

import dataclasses
import logging
import os
import math
import random
import signal
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from mindrl.types import Rollouts, SamplingParams

log = logging.getLogger("mindrl.train")
PROMPT_CACHE_SIZE = 65_536      # encoded prompts kept (cleared when full: memory stays bounded)


# --------------------------------------------------------------------------- helpers
def exit_now(code: int, message: str) -> None:
    """Log ``message``, kill this process's worker processes (reward pool, engine workers) and
    exit with ``code`` at once: no checkpoint, no waiting for the step or for the workers."""
    import multiprocessing

    log.error("%s", message)
    for h in logging.getLogger().handlers + log.handlers:
        try:
            h.flush()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass
    for child in multiprocessing.active_children():
        try:
            child.kill()
        except Exception:  # noqa: BLE001
            pass
    os._exit(code)


class StopRequested:
    """SIGINT / SIGTERM set a flag; the loop checkpoints after the current step and exits.

    The stop is bounded: a second SIGINT or SIGTERM exits at once, and when the step has not
    ended ``grace_s`` seconds after the first signal (a hang, a step that never ends), a
    watchdog thread exits with a line naming ``checkpoint.stop_grace_s``; both without a
    checkpoint, with exit code 128 + the signal number. ``grace_s <= 0`` waits for the step
    however long it takes."""

    def __init__(self, grace_s: float = 0.0):
        self.signum: Optional[int] = None
        self.grace_s = grace_s
        self.bar = None                 # a progress bar drawn on stderr: end its line first
        self._old = {}
        self._watchdog = None

    def __enter__(self):
        for s in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[s] = signal.signal(s, self._handle)
            except ValueError:  # not the main thread
                pass
        return self

    def _handle(self, signum, frame):
        if self.signum is not None:  # second signal: stop now
            exit_now(128 + signum, f"signal {signum} received again: exiting now, without "
                                   f"a checkpoint")
        self.signum = signum
        if self.bar is not None:        # the bar's line has no newline yet
            sys.stderr.write("\n")
            sys.stderr.flush()
        log.warning("signal %d received: saving a checkpoint after this step, then exiting "
                    "(a second signal exits at once)", signum)
        if self.grace_s > 0:
            import threading

            self._watchdog = threading.Timer(self.grace_s, self._expired)
            self._watchdog.daemon = True
            self._watchdog.start()

    def _expired(self):
        exit_now(128 + (self.signum or signal.SIGTERM),
                 f"signal {self.signum} received {self.grace_s:g} s ago and the step has not "
                 f"ended (checkpoint.stop_grace_s={self.grace_s:g}): exiting without a "
                 f"checkpoint")

    def step_ended(self) -> None:
        """The step reached its end: the checkpoint and exit that follow are not cut."""
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    def __exit__(self, *exc):
        self.step_ended()
        for s, h in self._old.items():
            signal.signal(s, h)


def stopped_line(signum: int, step: int, steps: int, checkpoint) -> str:
    """The closing line of a run stopped by a signal: the checkpoint saved and how to resume
    (the same command again)."""
    import shlex

    prog = os.path.basename(sys.argv[0]) if sys.argv else ""
    args = sys.argv[1:] if prog in ("mindrl", "__main__.py") else []
    again = f": {shlex.join(['mindrl'] + args)}" if args else ""
    return (f"stopped by signal {signum} after step {step} of {steps}; checkpoint saved: "
            f"{checkpoint}; to resume from step {step}, run the same command again{again}")


UNSIZED_EPOCH_ROWS = 10_000     # an "epoch" of a generator stream, for the too-long guard


def epoch_rows(stream) -> int:
    """The rows one epoch of ``stream`` visits (:data:`UNSIZED_EPOCH_ROWS` for a generator)."""
    n = getattr(stream, "n", None)
    if n is None and isinstance(getattr(stream, "rows", None), list):
        n = len(stream.rows)
    return int(n) if n else UNSIZED_EPOCH_ROWS


def _fmt(metrics: Dict[str, float]) -> str:
    return ", ".join(f"{k}={v:.4g}" for k, v in sorted(metrics.items()))


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2 ** 32))


def group_all_equal(rewards: np.ndarray, group_index: np.ndarray) -> np.ndarray:
    """(G,) bool per group id 0..G-1: True when every reward in the group is the same."""
    groups = np.unique(group_index)
    return np.array([np.ptp(rewards[group_index == g]) < 1e-12 for g in groups])


def stats(prefix: str, x: np.ndarray) -> Dict[str, float]:
    x = np.asarray(x, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return {}
    return {f"{prefix}/mean": float(x.mean()), f"{prefix}/std": float(x.std()),
            f"{prefix}/max": float(x.max()), f"{prefix}/min": float(x.min())}


class Scored:
    """Rewards of a batch of rollouts: the weighted sum and every component (NaN = None);
    ``outputs``: a model reward's text per rollout (a judge's verdicts), by component key."""

    def __init__(self, total: np.ndarray, components: Dict[str, np.ndarray],
                 metrics: Dict[str, float], outputs: Optional[Dict[str, list]] = None):
        self.total, self.components, self.metrics = total, components, metrics
        self.outputs = outputs or {}

    @staticmethod
    def concat(parts: List["Scored"]) -> "Scored":
        comps = {k: np.concatenate([p.components[k] for p in parts]) for k in parts[0].components}
        metrics: Dict[str, float] = {}
        for p in parts:  # counts add up (timeouts, errors, unscorable)
            for k, v in p.metrics.items():
                metrics[k] = metrics.get(k, 0.0) + v
        outputs = {k: [x for p in parts for x in p.outputs.get(k, [None] * len(p.total))]
                   for k in {k for p in parts for k in p.outputs}}
        return Scored(np.concatenate([p.total for p in parts]), comps, metrics, outputs)

    def select(self, rows) -> "Scored":
        idx = np.arange(len(self.total))[rows]
        return Scored(self.total[rows], {k: v[rows] for k, v in self.components.items()},
                      self.metrics, {k: [v[i] for i in idx] for k, v in self.outputs.items()})


def score_rollouts(scorer, rows: List[Dict], rollouts: Rollouts) -> Scored:
    """Call the reward pool with the completions and each row's columns, repeated n times."""
    columns: Dict[str, list] = {}
    for key in rows[0]:
        columns[key] = [rows[g][key] for g in rollouts.group_index]
    columns["completion_lengths"] = rollouts.response_lengths.tolist()
    columns["finish_reasons"] = list(rollouts.finish_reasons)
    result = scorer.score(rollouts.texts, **columns)
    comps = {name: np.array([np.nan if v is None else v for v in vals], dtype=np.float64)
             for name, vals in result.components.items()}
    counts = {"none": float(sum(result.num_none.values())),
              "timeouts": float(sum(result.num_timeouts.values())),
              "errors": float(sum(result.num_errors.values()))}
    for key, extra in getattr(result, "counts", {}).items():   # a model reward's counters
        for name, v in extra.items():
            counts[f"{key}/{name}"] = float(v)
    return Scored(np.asarray(result.total, dtype=np.float64), comps, counts,
                  dict(getattr(result, "outputs", {})))


# --------------------------------------------------------------------------- the trainer
def check_launched(cfg, env=os.environ) -> None:
    """``distributed.nproc`` x ``nnodes`` > 1 in a process that no launcher started (no
    torchrun / msrun environment) would train alone: refused before the model loads."""
    from mindrl.errors import ConfigError

    d = cfg.distributed
    want = d.nproc * d.nnodes
    if want > 1 and not any(k in env for k in ("WORLD_SIZE", "MS_WORKER_NUM", "MS_ROLE")):
        raise ConfigError(f"distributed.nproc={d.nproc} x distributed.nnodes={d.nnodes} asks for "
                          f"{want} workers, but this process was not started by a launcher "
                          "(torchrun / msrun): run `mindrl launch RECIPE ...`, or set "
                          "distributed.nproc=1")


class Trainer:
    kind = "train"

    def __init__(self, cfg):
        from mindrl.backends.base import build_backend
        from mindrl.models.tiny import check_model_dir, resolve_model_path
        from rewards import build_scorer

        check_launched(cfg)
        self.cfg = cfg
        self.run_dir = Path(cfg.logging.output_dir)
        # Before anything heavy: pick the checkpoint to resume from (the newest intact one) and
        # refuse a changed configuration.
        self.config_text, self.resume_from, damaged = self._check_resume(cfg)
        seed_everything(cfg.train.seed)
        model_path = resolve_model_path(cfg.model.path)
        check_model_dir(model_path)
        self.model_path = model_path
        cfg = self.cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model,
                                                                            path=model_path))
        # Data first: bad data paths fail before any model or engine starts.
        self.train_stream, self.val_rows = self.build_streams()
        self.scorer = build_scorer(cfg.reward)
        self.backend = build_backend(cfg.backend, cfg, with_reference=self.needs_reference())
        self.rank, self.world = self.backend.rank, self.backend.world_size
        self.is_main = bool(getattr(self.backend, "is_main", self.rank == 0))
        if self.is_main:
            for line in damaged:
                log.warning("%s; resuming from the previous one, %s", line, self.resume_from.name)
        if cfg.train.prompts_per_step % self.world:
            raise ValueError(f"train.prompts_per_step={cfg.train.prompts_per_step} must be a "
                             f"multiple of the number of ranks ({self.world})")
        self.local_prompts = cfg.train.prompts_per_step // self.world
        self.tokenizer = self.backend.tokenizer
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.tokenizer.eos_token_id
        self.stop_ids = self._stop_token_ids()
        self.engine = self._build_engine()
        self._engine_fresh = True               # built from the weights the policy starts with
        keys = [c.key for c in self.scorer.components]
        self.val_reward = cfg.validation.reward or keys[0]
        if self.val_reward not in keys:
            raise ValueError(f"validation.reward='{self.val_reward}' is not a reward component "
                             f"of this run; components: {', '.join(keys)}")
        self.step = 0
        self._prompt_cache: Dict[str, List[int]] = {}

    # ----------------------------------------------------------------- set-up pieces
    def needs_reference(self) -> bool:
        return self.cfg.algorithm.kl.coef > 0

    def build_streams(self, check: bool = True):
        """(train stream, validation rows); ``check``: run the data preflight on them."""
        from mindrl.trainer.prompts import build_streams

        return build_streams(self.cfg.data, self.cfg.train.seed,
                             cfg=self.cfg if check else None,
                             job="sft" if self.kind == "sft" else "rl")

    @classmethod
    def for_tokens(cls, cfg, tokenizer) -> "Trainer":
        """An instance that reads and encodes rows exactly as this trainer's steps do, with
        ``tokenizer`` and nothing else loaded (no model, backend, engine or rewards): the memory
        plan measures a run's data with it before anything loads."""
        self = cls.__new__(cls)
        self.cfg, self.tokenizer, self.is_main = cfg, tokenizer, True
        self.stop_ids = self._stop_token_ids()
        self._prompt_cache = {}
        return self

    def _stop_token_ids(self) -> Tuple[int, ...]:
        ids = []
        for tok in ("<|im_end|>", "<|endoftext|>"):
            tid = self.tokenizer.convert_tokens_to_ids(tok)
            if isinstance(tid, int) and tid >= 0 and tid != self.tokenizer.unk_token_id:
                ids.append(tid)
        if self.tokenizer.eos_token_id is not None:
            ids.append(self.tokenizer.eos_token_id)
        return tuple(sorted(set(ids)))

    @property
    def engine_needs_sync(self) -> bool:
        """Engines with their own weights (vLLM; a native engine that keeps a full copy beside a
        sharded policy) take the trainer's weights after every update."""
        return self.cfg.rollout.engine != "native" or getattr(self.engine, "shared", True) is False

    def sync_engine(self) -> None:
        """Push the trainer's weights into the engine: torch tensors in the model's dtype when
        both sides speak them (no float32 host copy), else (name, NumPy array) pairs."""
        if getattr(self.engine, "lora_mode", None) == "adapter":
            self._sync_adapter()
            return
        tensors = getattr(self.backend, "named_tensors", None)
        if tensors is not None and getattr(self.engine, "takes_tensors", False):
            self.engine.load_weights(tensors())
        else:
            self.engine.load_weights(self.backend.named_weights())
        self._engine_fresh = True

    def _sync_adapter(self) -> None:
        """LoRA with ``rollout.vllm_lora`` in adapter mode: write the adapter alone (peft format)
        to ``<run>/rollout_adapter/r<rank>_<n>``, have the engine load it, then delete the
        previous one (the engine has read it and holds one adapter)."""
        import shutil

        root = self.run_dir / "rollout_adapter"
        self._adapter_syncs = getattr(self, "_adapter_syncs", 0) + 1
        d = root / f"r{self.rank}_{self._adapter_syncs:06d}"
        if d.exists():                      # left by an earlier run in this directory
            shutil.rmtree(d)
        self.backend.save_adapter(str(d))
        self.engine.load_adapter(d)
        prev, self._adapter_dir = getattr(self, "_adapter_dir", None), d
        if prev is not None:
            shutil.rmtree(prev, ignore_errors=True)
        self._engine_fresh = True

    def _build_engine(self):
        if self.cfg.rollout.engine == "native":
            from mindrl.rollout.native_torch import make_native_engine

            return make_native_engine(self.cfg, backend=self.backend)
        from mindrl.rollout.vllm_engine import VLLMEngine

        engine = VLLMEngine(self.cfg, self.model_path)
        return engine

    def encode(self, problem: str) -> List[int]:
        ids = self._prompt_cache.get(problem)
        if ids is None:
            from mindrl.data.preflight import prompt_ids

            ids = prompt_ids(problem, self.cfg, self.tokenizer)
            if len(self._prompt_cache) >= PROMPT_CACHE_SIZE:     # bounded for large data sets
                self._prompt_cache.clear()
            self._prompt_cache[problem] = ids
        return ids

    def _take_rows(self) -> List[Dict]:
        """This rank's slice of the next global batch of prompts (too-long prompts skipped).

        Stops with :func:`mindrl.data.preflight.no_prompt_fits` (a ``DataError`` naming
        ``data.max_prompt_len``) when this rank has skipped twice the data's rows in a row
        (:func:`epoch_rows`): a whole epoch then yielded no prompt that fits."""
        out: List[Dict] = []
        limit = self.cfg.data.max_prompt_len
        while len(out) < self.local_prompts:
            glob = self.train_stream.take(self.cfg.train.prompts_per_step)
            mine = glob[self.rank * self.local_prompts:(self.rank + 1) * self.local_prompts]
            for row in mine:
                n = len(self.encode(row["problem"]))
                if n <= limit:
                    out.append(row)
                    self._long_run = []
                else:
                    self._skipped_long = getattr(self, "_skipped_long", 0) + 1
                    run = self._long_run = getattr(self, "_long_run", [])
                    run.append(n)
            rows = epoch_rows(self.train_stream)
            if len(getattr(self, "_long_run", [])) >= 2 * rows:
                from mindrl.data.io import DataError
                from mindrl.data.preflight import no_prompt_fits

                raise DataError(no_prompt_fits(limit, f"a whole epoch ({rows} rows)",
                                               self._long_run))
        return out[:self.local_prompts]

    def sampling(self, attempt: int = 0, **over) -> SamplingParams:
        seed = (self.cfg.rollout.seed * 1_000_003 + self.step * 101 + attempt) * 64 + self.rank
        over.setdefault("seed", seed)
        return SamplingParams.from_config(self.cfg.rollout, stop_token_ids=self.stop_ids, **over)

    # ----------------------------------------------------------------- distributed helpers
    def gather(self, x: np.ndarray) -> np.ndarray:
        return x if self.world == 1 else self.backend.all_gather(x)

    def allsum(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        return x if self.world == 1 else self.backend.all_reduce_sum(x)

    # ----------------------------------------------------------------- validation
    def validate(self) -> Dict[str, float]:
        if not self.val_rows:
            return {}
        v = self.cfg.validation
        if self.engine_needs_sync and not getattr(self, "_engine_fresh", False):
            self.sync_engine()       # SFT / preference loops do not sync after their updates
        rows = self.val_rows[self.rank::self.world]
        prompt_ids = [self.encode(r["problem"]) for r in rows]
        sp = self.sampling(n=v.n, temperature=v.temperature, top_p=1.0 if v.temperature == 0
                           else self.cfg.rollout.top_p, seed=12345 + self.rank)
        sample = self.engine.generate
        if self.cfg.tools.enabled:           # validate the way rollouts run: with the tools
            from mindrl.tools.multi_turn import trainer_sampler

            sample = trainer_sampler(self, record=False)
        ro = sample(prompt_ids, sp)
        sc = score_rollouts(self.scorer, rows, ro)
        comp = sc.components.get(self.val_reward)
        if comp is None:
            raise KeyError(f"validation.reward='{self.val_reward}' is not among reward.functions "
                           f"({', '.join(sc.components)})")
        correct = self.allsum(np.sum(np.nan_to_num(comp, nan=-np.inf) >= v.correct_threshold))
        total = self.allsum(len(comp))
        length = self.allsum(ro.response_lengths.sum())
        out = {"val/accuracy": float(correct / max(total, 1)),
               "val/response_length": float(length / max(total, 1)),
               "val/samples": float(total)}
        if self.cfg.tools.enabled:           # calls, errors, turns of the validation pass
            from mindrl.tools.multi_turn import pop_tool_metrics

            out.update({"val/" + k: v for k, v in pop_tool_metrics(self, validation=True)
                        .items()})
        return out

    # ----------------------------------------------------------------- checkpoints
    def trainer_state(self) -> Dict:
        return {"step": self.step, "data": self.train_stream.state(),
                "python_rng": repr(random.getstate()),
                "config_backend": self.cfg.backend}

    def save(self) -> Path:
        from mindrl.trainer.checkpoint import save_checkpoint

        stage = getattr(self.backend, "stage_checkpoint", None)
        if stage is not None:           # sharded backends gather on every rank first
            stage()
        path = save_checkpoint(self.run_dir / "checkpoints", self.step, self.backend,
                               self.trainer_state(), self.cfg.checkpoint.keep_last,
                               is_main=self.is_main,
                               meta={"chat_template": self.cfg.model.chat_template,
                                     "system_prompt": self.cfg.data.system_prompt,
                                     "base_model": str(self.model_path), "step": self.step},
                               config=self.config_text)
        self.backend.barrier()
        return path

    def _check_resume(self, cfg) -> Tuple[str, Optional[Path], List[str]]:
        """(this run's config as YAML, the checkpoint to resume from or None, damaged newer
        checkpoints skipped). Raises ConfigError when the checkpoint's stored config differs
        in keys that checkpoint.allow_changes does not allow."""
        import yaml

        from mindrl.config.loader import dump_config
        from mindrl.trainer.checkpoint import (check_resume_config, find_resumable,
                                               read_checkpoint_config)

        text = dump_config(cfg)
        if not cfg.checkpoint.resume:
            return text, None, []
        ckpt, damaged = find_resumable(self.run_dir / "checkpoints")
        if ckpt is None:
            return text, None, []
        old = read_checkpoint_config(ckpt)
        if old is None:
            log.warning("%s stores no config (written by an older mindrl): resuming without "
                        "checking that the configuration is unchanged", ckpt)
        else:
            defaults = yaml.safe_load(dump_config(type(cfg)()))
            changes = check_resume_config(old, yaml.safe_load(text),
                                          cfg.checkpoint.allow_changes, ckpt, defaults)
            if changes:
                log.info("resuming with changed config: %s", "; ".join(
                    f"{k}: {o!r} -> {n!r}" for k, (o, n) in changes.items()))
        return text, ckpt, damaged

    def maybe_resume(self, logger) -> None:
        from mindrl.trainer.checkpoint import read_trainer_state

        ckpt = self.resume_from
        if ckpt is None:
            return
        st = read_trainer_state(ckpt)
        self.backend.load_pretrained_weights(str(ckpt / "model"))
        self.backend.load_state(str(ckpt / "state"))
        self.train_stream.restore(st["data"])
        self.step = int(st["step"])
        if self.engine_needs_sync:
            self.sync_engine()
        if self.is_main:
            log.info("resumed from %s (step %d)", ckpt, self.step)

    # ----------------------------------------------------------------- the loop
    def fit(self) -> Dict[str, float]:
        from mindrl.trainer.checkpoint import record_config
        from mindrl.trainer.logger import MetricsLogger

        cfg = self.cfg
        if self.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        logger = MetricsLogger(self.run_dir, cfg.logging.tensorboard, enabled=self.is_main)
        self.maybe_resume(logger)
        if self.is_main:      # config.yaml: the current config; config_history/: every one used
            record_config(self.run_dir, self.config_text, self.step)
        logger.truncate_after(self.step)  # rows after the checkpoint (or all, when starting) go
        if cfg.validation.before_training and self.step == 0 and self.val_rows:
            first = self.validate()
            logger.log(0, first)
            if self.is_main:
                log.info("validation before training: %s", _fmt(first))
        bar = None
        if cfg.logging.progress_bar and self.is_main:
            from tqdm.auto import tqdm

            bar = tqdm(total=cfg.train.steps, initial=self.step, desc=self.kind, unit="step",
                       dynamic_ncols=True)
        last: Dict[str, float] = {}
        with StopRequested(cfg.checkpoint.stop_grace_s) as stop:
            stop.bar = bar
            while self.step < cfg.train.steps:
                self._engine_fresh = False      # the update below changes the weights
                metrics = self.run_step()
                self.step += 1
                v = cfg.validation
                if v.every and (self.step % v.every == 0 or self.step == cfg.train.steps):
                    t0 = time.perf_counter()
                    metrics.update(self.validate())
                    metrics["time/validation"] = time.perf_counter() - t0
                t_io = time.perf_counter()
                logger.log(self.step, metrics)
                last = metrics
                if cfg.logging.profile:         # reported in the next step's row
                    from mindrl.trainer.profile import note_io

                    note_io(self, "time/logging", time.perf_counter() - t_io)
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix({k: f"{metrics[k]:.3f}" for k in
                                     ("reward/mean", "accuracy", "val/accuracy")
                                     if k in metrics and math.isfinite(metrics[k])})
                every = cfg.checkpoint.every
                done = self.step == cfg.train.steps
                # every rank must agree to stop (a save is collective for sharded backends):
                # a signal seen by any rank stops them all after this step
                signum = stop.signum or 0
                if self.world > 1:
                    signum = int(np.max(self.backend.all_gather(np.array([signum], np.int64))))
                if signum:
                    stop.step_ended()
                    if bar is not None:
                        bar.close()
                        bar = None
                saved = None
                if (every and self.step % every == 0) or (done and cfg.checkpoint.save_final) \
                        or signum:
                    t_io = time.perf_counter()
                    saved = self.save()
                    if cfg.logging.profile:
                        from mindrl.trainer.profile import note_io

                        note_io(self, "time/checkpoint", time.perf_counter() - t_io)
                if signum:
                    stop.signum = signum
                    logger.close()
                    self.close()
                    if self.is_main:
                        print(stopped_line(signum, self.step, cfg.train.steps, saved),
                              file=sys.stderr, flush=True)
                    raise SystemExit(128 + stop.signum)
        if bar is not None:
            bar.close()
        logger.close()
        if self.is_main and cfg.logging.plot:
            from mindrl.trainer.plots import plot_run

            plot_run(self.run_dir)
        return last

    def close(self) -> None:
        for obj in (self.scorer, self.engine):
            close = getattr(obj, "close", None)
            if close is not None:
                close()



    def run_step(self) -> Dict[str, float]:  # pragma: no cover - defined by subclasses
        raise NotImplementedError


def run_trainer(trainer_cls, cfg) -> Dict[str, float]:
    """Build a trainer from a resolved config, run it to the end, always release its workers
    and engine; returns the last step's metrics."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    trainer = trainer_cls(cfg)
    try:
        return trainer.fit()
    finally:
        trainer.close()
