"""``logging.profile=true``: where a step's wall time goes, one ``time/<phase>`` key per phase.

Phases of one RL step (seconds, wall clock; on an accelerator each backend phase ends with a
device synchronise so queued kernels are charged to the phase that launched them):

    time/rollout          generation (the engine), refills of dynamic sampling included
    time/reward           scoring (the reward pool) not hidden behind generation
    time/old_logprobs     the trainer's forward over the rollouts (train.recompute_old_logp)
    time/ref_logprobs     the reference model's forward (algorithm.kl.coef > 0)
    time/advantages       advantages and the host-side batch work around them
    time/train_fwd_bwd    forward + backward of every micro-batch (backend)
    time/optimizer        gradient reduce, clip, optimizer and scheduler step (backend)
    time/batching         the rest of the update: mini/micro-batch slicing, metric merging
    time/weight_sync      trainer -> engine weights (engines with their own copy)
    time/logging          metrics.jsonl / TensorBoard of the PREVIOUS step (a row cannot time
                          its own writing)
    time/checkpoint       the checkpoint after the PREVIOUS step (0 when none was written)
    time/other            the rest: prompt encoding, metric reductions, rollout saving

``profile/overhead_fraction`` = 1 - (rollout + old_logprobs + ref_logprobs + train_fwd_bwd)
/ (step + logging + checkpoint): the share of the step spent outside model forward/backward
and generation. Backends that fuse forward, backward and optimizer into one compiled call
(MindSpore) report it all as ``time/train_fwd_bwd``.
"""

from __future__ import annotations

from typing import Dict

PHASES = ("time/rollout", "time/reward", "time/old_logprobs", "time/ref_logprobs",
          "time/advantages", "time/train_fwd_bwd", "time/optimizer", "time/batching",
          "time/weight_sync", "time/logging", "time/checkpoint", "time/other")
MODEL_PHASES = ("time/rollout", "time/old_logprobs", "time/ref_logprobs", "time/train_fwd_bwd")


def enabled(cfg) -> bool:
    return bool(getattr(cfg.logging, "profile", False))


def backend_reset(backend) -> None:
    """Zero the backend's own phase clocks (``backend.phase_times``) before an update."""
    times = getattr(backend, "phase_times", None)
    if times is not None:
        for k in times:
            times[k] = 0.0


def note_io(trainer, key: str, seconds: float) -> None:
    """Logging / checkpoint time of this step, reported in the next step's row."""
    io = trainer.__dict__.setdefault("_profile_io", {})
    io[key] = io.get(key, 0.0) + seconds


def finish(trainer, metrics: Dict[str, float]) -> Dict[str, float]:
    """Add the profile keys to ``metrics`` (in place; also returned). Needs time/step,
    time/update and the phases run_step timed; fills in the rest."""
    m = metrics
    bt = dict(getattr(trainer.backend, "phase_times", None) or {})
    update = m.get("time/update", 0.0)
    if bt:
        m["time/train_fwd_bwd"] = bt.get("train_fwd_bwd", 0.0)
        m["time/optimizer"] = bt.get("optimizer", 0.0)
    else:                               # a fused compiled step: all of it is forward/backward
        m["time/train_fwd_bwd"], m["time/optimizer"] = update, 0.0
    m["time/batching"] = max(0.0, update - m["time/train_fwd_bwd"] - m["time/optimizer"])
    io = trainer.__dict__.pop("_profile_io", {})
    m["time/logging"] = io.get("time/logging", 0.0)
    m["time/checkpoint"] = io.get("time/checkpoint", 0.0)
    inside = [k for k in PHASES if k not in ("time/other", "time/logging", "time/checkpoint")]
    m["time/other"] = max(0.0, m["time/step"] - sum(m.get(k, 0.0) for k in inside))
    total = m["time/step"] + m["time/logging"] + m["time/checkpoint"]
    model = sum(m.get(k, 0.0) for k in MODEL_PHASES)
    m["profile/overhead_fraction"] = max(0.0, 1.0 - model / total) if total > 0 else 0.0
    return m
