"""rollout.mode=async_ray: configuration errors before Ray starts, the staleness rule by hand, a
run that survives kill -9 of a rollout worker, a tiny model learning a dense reward with 2
workers and max_staleness 1 while every sample's version lag stays <= 1 (torch workers on the
torch backend, MindSpore sampler workers on the MindSpore backend), and vLLM workers that
sample with every pushed version (both backends)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mindrl.config.loader import load_config
from mindrl.config.schema import ConfigError

QUIET = ["logging.tensorboard=false", "logging.progress_bar=false", "logging.plot=false"]
BASE = [
    "model.path=builtin:tiny", "model.chat_template=none",
    "data.train_file=arithmetic:digits=2,ops=+", "data.max_val_samples=8",
    "rollout.n=4", "rollout.max_new_tokens=6", "rollout.temperature=1.0",
    "train.prompts_per_step=4", "train.micro_batch_size=8", "train.lr=5e-3",
    "reward.num_workers=0", "reward.functions=[{name: 'trainer_helpers:parity_reward'}]",
    "checkpoint.save_final=false", "rollout.mode=async_ray", "rollout.workers=2", *QUIET,
]


def cfg_for(tmp_path, *extra):
    return load_config(None, BASE + [f"logging.output_dir={tmp_path}"] + list(extra))


def rows(run_dir):
    from mindrl.trainer.logger import read_metrics

    return read_metrics(run_dir)


@pytest.fixture(scope="module")
def one_ray():
    """One local Ray for the module's in-process runs, started as a trainer starts its own:
    each trainer joins it instead of starting and stopping a Ray of its own (~3 s of CPU and
    ~10 s of wall time each). The runs in a subprocess start their own."""
    import ray

    from mindrl.distributed.ray_launch import join_ray

    own = not ray.is_initialized()
    if own:
        join_ray("local", log_to_driver=False, num_cpus=max(2, os.cpu_count() or 1))
    yield ray
    if own:
        ray.shutdown()


# ------------------------------------------------------------------ configuration (fast)
@pytest.mark.parametrize("extra, message", [
    (["rollout.workers=0"], "rollout.workers=0 must be >= 1"),
    (["rollout.max_staleness=-1"], "rollout.max_staleness=-1 must be >= 0"),
    (["rollout.queue_size=3"], "rollout.queue_size=3 must be 0 (auto) or >= "
                               "train.prompts_per_step=4"),
    # k=0: at most 4 groups (one batch) in flight, so a 5th worker never gets one
    (["rollout.max_staleness=0", "rollout.workers=5"], "rollout.workers=5 exceeds the groups "
                                                      "that may be in flight"),
    (["rollout.queue_size=4", "rollout.workers=6"], "rollout.workers=6 exceeds"),
    (["rollout.async_ahead=1"], "rollout.mode=async_ray and rollout.async_ahead=1"),
    (["backend=mindformers"], "rollout.mode=async_ray needs backend=torch or mindspore"),
    (["device=cuda"], "with device=cuda needs rollout.worker_devices"),
    (["rollout.worker_devices=[1]"], "it needs device=cuda or ascend"),
    (["device=cuda", "rollout.worker_devices=[-1]"], "ids are >= 0"),
    (["tools.enabled=true"], "does not run multi-turn tool rollouts"),
    (["algorithm.dynamic_sampling.enabled=true"], "algorithm.dynamic_sampling.enabled=true"),
    (["distributed.nproc=2"], "runs one trainer process"),
    (["rollout.max_restarts=-2"], "rollout.max_restarts=-2"),
])
def test_combinations_that_cannot_work_are_config_errors(tmp_path, extra, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")
                       .replace(")", r"\)")):
        cfg_for(tmp_path, *extra)


def test_valid_combinations_load(tmp_path):
    cfg = cfg_for(tmp_path, "rollout.max_staleness=0", "rollout.workers=4")
    assert (cfg.rollout.mode, cfg.rollout.workers, cfg.rollout.max_staleness) == \
        ("async_ray", 4, 0)
    assert cfg_for(tmp_path, "rollout.queue_size=4").rollout.queue_size == 4
    assert cfg_for(tmp_path, "backend=mindspore").backend == "mindspore"
    assert cfg_for(tmp_path, "rollout.engine=vllm").rollout.engine == "vllm"
    both = cfg_for(tmp_path, "backend=mindspore", "rollout.engine=vllm")
    assert (both.backend, both.rollout.engine) == ("mindspore", "vllm")


@pytest.mark.slow
def test_workers_on_accelerators_see_only_their_device(one_ray, tmp_path):
    """device=cuda / ascend: worker i's process sees worker_devices[i % len] alone (its engine's
    device 0), and Ray is told not to set the variable itself; on the CPU nothing is set. The
    variables reach a real Ray actor's process through the options (the GPU run itself was not
    done: written against Ray's documented runtime_env)."""
    import ray

    from mindrl.distributed.ray_launch import join_ray
    from mindrl.trainer.async_ray import worker_options

    cuda = cfg_for(tmp_path, "device=cuda", "rollout.worker_devices=[2,3]", "rollout.workers=3")
    npu = cfg_for(tmp_path, "device=ascend", "backend=mindspore", "rollout.worker_devices=[5]")
    envs = [worker_options(cuda, i)["runtime_env"]["env_vars"] for i in range(3)]
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["2", "3", "2"]
    assert all(e["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"] == "1" for e in envs)
    assert worker_options(npu, 1)["runtime_env"]["env_vars"] == {
        "ASCEND_RT_VISIBLE_DEVICES": "5", "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES": "1"}
    assert worker_options(cfg_for(tmp_path), 0) == {}

    def seen():
        return os.environ.get("CUDA_VISIBLE_DEVICES")

    own = not ray.is_initialized()
    if own:
        join_ray("local", log_to_driver=False, num_cpus=2)
    try:
        probe = ray.remote(num_cpus=0)(seen)
        got = ray.get([probe.options(**worker_options(cuda, i)).remote() for i in range(2)])
    finally:
        if own:
            ray.shutdown()
    assert got == ["2", "3"]


def test_queue_cap_and_lag_by_hand():
    from mindrl.trainer.async_ray import lag_ok, queue_cap

    # B=4, k=1: 8 groups before a step takes its batch (this batch + the next), 4 after
    assert queue_cap(1, 4, 0, after_take=False) == 8 and queue_cap(1, 4, 0, after_take=True) == 4
    assert queue_cap(2, 4, 0, False) == 12 and queue_cap(2, 4, 0, True) == 8
    assert queue_cap(2, 4, 6, False) == 6 and queue_cap(2, 4, 6, True) == 6
    assert queue_cap(0, 4, 0, False) == 4 and queue_cap(0, 4, 0, True) == 0   # on-policy
    assert lag_ok(5, 4, 1) and lag_ok(5, 5, 1) and not lag_ok(5, 3, 1)
    assert lag_ok(5, 3, 2) and not lag_ok(5, 5 + 1, 3)      # from the future: never


def test_token_tis_is_the_default_correction(tmp_path):
    from mindrl.trainer.async_rollout import effective_config

    rc = effective_config(cfg_for(tmp_path)).algorithm.rollout_correction
    assert (rc.rollout_is, rc.rollout_is_threshold) == ("token", 2.0)
    kept = effective_config(cfg_for(tmp_path, "algorithm.rollout_correction.rollout_is=sequence"))
    assert kept.algorithm.rollout_correction.rollout_is == "sequence"
    sync = effective_config(cfg_for(tmp_path, "rollout.mode=sync"))
    assert sync.algorithm.rollout_correction.rollout_is is None


def test_queue_state_survives_json_exactly():
    """RayRollout.state() -> JSON -> load_state(): the ready groups (rollouts, totals and
    components with NaN, the row, the version of each token of a resumed group), the groups to
    sample again in issue order, the rows not yet issued and the counters come back as they
    were."""
    import collections

    from mindrl.trainer.async_ray import Finished, Group, RayRollout
    from mindrl.trainer.base import Scored
    from mindrl.types import Rollouts

    q = object.__new__(RayRollout)
    ro = Rollouts(prompt_ids=[[1, 2]] * 2, response_ids=[[5, 6, 2], [7]],
                  logprobs=[np.float32([-0.1, -1 / 3, -2.5]), np.float32([-0.7])],
                  finish_reasons=["stop", "length"], group_index=np.zeros(2, np.int64),
                  texts=["ab", "c"])
    sc = Scored(np.array([1.0, np.nan]), {"acc": np.array([1.0, np.nan])}, {"timeouts": 1.0})
    q.ready = [Finished(Group(3, {"problem": "1+1", "answer": "2"}, [1, 2], 99), 4, ro, sc,
                        1, 4242, 0.5, 0.25, [np.array([3, 4, 4]), np.array([3])], 1)]
    q.in_flight = {"ref-a": (Group(7, {"problem": "p7"}, [3], 11), 0),
                   "ref-b": (Group(5, {"problem": "p5"}, [4], 12, 1), 1)}
    q.retry = collections.deque([Group(6, {"problem": "p6"}, [5], 13)])
    q.rows = collections.deque([{"problem": "p8"}])
    q.next_gid, q.dropped, q.reissued, q.restarts = 8, 2, 1, 1
    q.harvest = lambda block: None                   # nothing in flight to wait for here
    state = json.loads(json.dumps(q.state()))
    r = object.__new__(RayRollout)
    r.load_state(state)
    f = r.ready[0]
    assert (f.group.gid, f.group.row, f.group.prompt_ids, f.group.seed, f.version) == \
        (3, {"problem": "1+1", "answer": "2"}, [1, 2], 99, 4)
    assert f.rollouts.response_ids == ro.response_ids and f.rollouts.texts == ["ab", "c"]
    for a, b in zip(f.rollouts.logprobs, ro.logprobs):
        assert a.dtype == np.float32 and np.array_equal(a, b)
    np.testing.assert_array_equal(f.scored.total, sc.total)         # NaN where it was
    np.testing.assert_array_equal(f.scored.components["acc"], sc.components["acc"])
    assert f.scored.metrics == {"timeouts": 1.0}
    assert [v.tolist() for v in f.token_versions] == [[3, 4, 4], [3]] and f.resumes == 1
    assert [(g.gid, g.seed, g.attempts) for g in r.retry] == [(5, 12, 1), (6, 13, 0), (7, 11, 0)]
    assert list(r.rows) == [{"problem": "p8"}] and r.next_gid == 8
    assert (r.dropped, r.reissued, r.restarts) == (2, 1, 1)
    assert r.from_checkpoint == {"ready": 1, "resampled": 3} and r.version is None


# ------------------------------------------------------------------ runs (slow)
@pytest.mark.slow
def test_killed_worker_is_restarted_and_its_groups_reissued(one_ray, tmp_path, monkeypatch):
    """kill -9 of worker 0's process in the middle of step 3 (its groups for step 4 in
    flight): Ray restarts it, the groups are issued again, all steps run, later batches come
    from the new process, and no sample lags more than max_staleness."""
    from mindrl.trainer.rl import RLTrainer

    tr = RLTrainer(cfg_for(tmp_path, "train.steps=7", "validation.every=0",
                           "rollout.max_staleness=1"))
    q = tr.ahead
    old_pid = q.pids[0]
    killed = {}
    original = RLTrainer.update

    def update(self, batch):
        if self.step == 2:              # after collect() topped the queue up
            killed["in_flight"] = q.per_worker[0]
            os.kill(old_pid, signal.SIGKILL)
        out = original(self, batch)
        # a tiny step takes ~0.1 s, a restart (a fresh process loading the model) seconds:
        # stretch the updates after the kill until the queue has seen the worker back
        if self.step == 3:
            t0 = time.time()
            while q.pids[0] == old_pid and time.time() - t0 < 120:
                time.sleep(0.5)
                q.harvest(block=False)
        return out

    monkeypatch.setattr(RLTrainer, "update", update)
    try:
        tr.fit()
        m = rows(tmp_path)
        assert [r["step"] for r in m] == list(range(1, 8))
        assert m[-1]["rollout/worker_restarts"] == 1.0
        assert q.pids[0] != old_pid
        print("\nkilled with", killed["in_flight"], "groups in flight; reissued",
              m[-1]["rollout/groups_reissued"])
        assert m[-1]["rollout/groups_reissued"] >= killed["in_flight"]
        after = {pid for step in q.sources[4:] for w, pid in step if w == 0}
        assert q.pids[0] in after and old_pid not in after
        assert all(lag.max() <= 1 for lag in q.lags)
    finally:
        tr.close()
    assert not _alive(old_pid)


KILL_RECIPE = """
extends: {repo}/yaml_configs/grpo_tiny_demo.yaml
model: {{path: "builtin:tiny", chat_template: none}}
data: {{train_file: "arithmetic:digits=2,ops=+", max_val_samples: 8}}
rollout: {{n: 4, max_new_tokens: 6, temperature: 1.0, mode: async_ray, workers: 2,
          max_staleness: 2}}
reward:
  functions: [{{name: "trainer_helpers:parity_reward"}}]
  num_workers: 0
validation: {{every: 0}}
train: {{steps: 5, prompts_per_step: 4, micro_batch_size: 8, lr: 5.0e-3}}
checkpoint: {{every: 2, save_final: false}}
logging: {{tensorboard: false, plot: false, progress_bar: false}}
"""


@pytest.mark.slow
def test_trainer_killed_resumes_with_the_queue_it_checkpointed(tmp_path):
    """kill -9 of the trainer (the Ray driver; then its process group, Ray's own processes)
    once step 2's checkpoint is complete; the same command again resumes there with the
    checkpoint's queue: its ready groups train first, the prompts that were in flight are
    sampled again, and steps 3-5 run once each."""
    repo = Path(__file__).resolve().parents[2]
    recipe = tmp_path / "kill.yaml"
    recipe.write_text(KILL_RECIPE.format(repo=repo))
    run = tmp_path / "run"
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    env["PYTHONPATH"] = os.pathsep.join([str(repo / "tests" / "trainer"), str(repo),
                                         env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "mindrl", "train", str(recipe), f"logging.output_dir={run}"]
    ckpt = run / "checkpoints" / "step_000002"
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        t0 = time.monotonic()
        while not (ckpt / "COMPLETE").is_file():
            if proc.poll() is not None or time.monotonic() - t0 > 300:
                pytest.fail(f"no checkpoint at step 2: {proc.communicate()[1][-3000:]}")
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode == -signal.SIGKILL
    assert not (run / "checkpoints" / "step_000004").exists()
    queue = json.loads((ckpt / "trainer.json").read_text())["async_rollout"]
    ready, resample = len(queue["ready"]), len(queue["resample"])
    print(f"\ncheckpoint queue: {ready} ready groups, {resample} to sample again, "
          f"{len(queue['rows'])} rows not yet issued")
    assert ready + resample + len(queue["rows"]) >= 1, queue.keys()   # the queue ran ahead
    res = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "resumed from" in res.stderr and "step 2" in res.stderr
    m = rows(run)
    assert [r["step"] for r in m] == [1, 2, 3, 4, 5]
    assert m[2]["rollout/ready_from_checkpoint"] == ready
    assert m[2]["rollout/resampled_after_resume"] == resample
    assert all("rollout/ready_from_checkpoint" not in r for r in m[3:])
    assert all(r["rollout/staleness_max"] <= 2 for r in m)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


RL_STEPS = 20
MS_RL_STEPS = 30


def worker_gap(tr, worker: int = 0):
    """Publish the trainer's current weights as a new version, have rollout worker ``worker``
    sample one group with them, and score that group with the trainer: (the version the worker
    sampled with, the largest |worker log-prob - trainer log-prob| over its tokens). A worker
    that did not load the pushed weights shows the update's drift (~0.1 nats), not float noise."""
    import ray

    from mindrl.types import pad_token_batch

    q = tr.ahead
    q.publish()
    group = q._new_group()
    f = ray.get(q.workers[worker].run.remote(group, tr.sampling(seed=group.seed)), timeout=120)
    ro = f.rollouts
    T = int(ro.response_lengths.max())
    tokens = pad_token_batch(ro.prompt_ids, ro.response_ids, tr.pad_id,
                             max(len(p) for p in ro.prompt_ids), T)
    logp = tr.backend.logprobs(tokens, temperature=1.0,
                               micro_batch_size=tr.cfg.train.micro_batch_size)
    gap = max(float(np.abs(logp[i, :len(lp)] - lp).max()) for i, lp in enumerate(ro.logprobs))
    return f.version, gap


def learn_with_two_workers(tmp_path, steps, *extra):
    """builtin:tiny rewarded for the share of digits in its completions (8 prompts x 8 samples,
    lr 5e-3), 2 rollout workers, max_staleness 1: the batch reward of the last 5 steps is many
    times that of the first 5, the queue really runs ahead (some samples lag 1), no sample lags
    more than 1, token TIS weighs the stale ones, and after the run a worker samples with the
    weights pushed last (its log-probs equal the trainer's)."""
    from mindrl.trainer.rl import RLTrainer

    tr = RLTrainer(cfg_for(
        tmp_path, "reward.functions=[{name: 'trainer_helpers:digit_share_reward'}]",
        "rollout.n=8", "train.prompts_per_step=8", "train.micro_batch_size=16",
        "rollout.max_staleness=1", f"train.steps={steps}", "validation.every=0",
        "checkpoint.every=0", *extra))
    try:
        tr.fit()
        lags = list(tr.ahead.lags)
        names = list(tr.ahead.engine_names)
        version, gap = worker_gap(tr)
    finally:
        tr.close()
    m = [r for r in rows(tmp_path) if "reward/mean" in r]
    reward = [r["reward/mean"] for r in m]
    print(f"\nworkers {names}; reward by step {np.round(reward, 3).tolist()}; staleness mean by "
          f"step {[round(r['rollout/staleness'], 2) for r in m]}; worker gap after the last "
          f"push {gap:.2e}")
    assert len(m) == steps and len(lags) == steps
    first, last = np.mean(reward[:5]), np.mean(reward[-5:])
    assert last > 0.12 and last > 4 * first, reward
    assert all(int(lag.max()) <= 1 and int(lag.min()) >= 0 for lag in lags)
    assert all(r["rollout/staleness_max"] <= 1 for r in m)
    assert m[0]["rollout/staleness_max"] == 0           # the first batch: the start weights
    assert m[0]["rollout/logprob_gap_mean"] < 1e-4      # ... sampled by the workers' engines
    assert sum(r["rollout/staleness"] for r in m[1:]) > 0    # later ones ran ahead
    assert all(len(lag) == 8 * 8 for lag in lags)
    for r, lag in zip(m, lags):
        assert r["rollout/staleness"] == pytest.approx(lag.mean())
    assert all(0 < r["rollout_corr/is_weight_mean"] < 2 for r in m)    # token TIS ran
    assert version == steps and gap < 1e-4, (version, gap)
    return names


@pytest.mark.slow
def test_learns_with_two_workers_and_staleness_one(one_ray, tmp_path):
    """torch backend, native torch engine in the workers, 20 steps (measured, 3 runs on 2
    loaded cores: reward 0.01 -> 0.27-0.30; a synchronous run of the same config: 0.01 ->
    0.27)."""
    names = learn_with_two_workers(tmp_path, RL_STEPS)
    assert names == ["NativeTorchEngine"] * 2


@pytest.mark.slow
def test_mindspore_workers_learn_with_staleness_one(one_ray, tmp_path):
    """backend=mindspore: each worker runs the native MindSpore sampler over its own copy of the
    model and loads the float32 NumPy weights the trainer pushes. The MindSpore update is
    slower than torch's on 2 shared cores, so the workers run further ahead (mean lag 0.3-0.7
    vs torch's ~0.2) and the reward climbs a few steps later: 30 steps (measured, 3 runs:
    last-5 reward 0.01 -> ...; at 20 steps 0.05-0.21; a synchronous MindSpore run of the same
    config reaches 0.26 at 20 steps)."""
    names = learn_with_two_workers(tmp_path, MS_RL_STEPS, "backend=mindspore")
    assert names == ["MindSporeSampler"] * 2


@pytest.mark.slow
def test_a_mindspore_worker_samples_what_the_trainers_sampler_samples(tmp_path):
    """The engine a MindSpore rollout worker builds from the model directory (its own copy, no
    optimizer) draws the same tokens with the same log-probs as the backend's own sampler, for
    a mixture-of-experts model too (no Ray: the worker's constructor path alone)."""
    from mindrl.backends.mindspore.backend import MindSporeBackend
    from mindrl.models.tiny import resolve_model_path
    from mindrl.trainer.async_ray import worker_engine
    from mindrl.types import SamplingParams

    cfg = cfg_for(tmp_path, "backend=mindspore", "model.path=builtin:tiny-qwen3-moe")
    path = resolve_model_path(cfg.model.path)
    backend = MindSporeBackend(cfg, model_path=path)
    worker = worker_engine(cfg, path)
    assert type(worker).__name__ == "MindSporeSampler" and worker.model is not backend.model
    sp = SamplingParams.from_config(cfg.rollout, seed=7, n=4)
    ours, theirs = (e.generate([[5, 6, 7, 8], [9, 10]], sp)
                    for e in (worker, backend.native_engine()))
    assert ours.response_ids == theirs.response_ids
    for a, b in zip(ours.logprobs, theirs.logprobs):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "mindspore"])
def test_vllm_workers_sample_with_the_pushed_weights(one_ray, tmp_path, backend):
    """rollout.engine=vllm: each worker holds an in-process vLLM-CPU engine and loads every
    pushed version through ``reload_weights`` (oneDNN repacking off, as in the synchronous
    sync). Samples of the current version agree with the trainer to float noise: the first
    batch, every batch whose samples all lag 0, and a group sampled after the last push (a
    stale engine shows ~0.1 nats after one lr=1e-2 update); no sample lags more than 1."""
    from mindrl.trainer.rl import RLTrainer

    tr = RLTrainer(cfg_for(tmp_path, f"backend={backend}", "rollout.engine=vllm",
                           "train.steps=4", "train.lr=1e-2", "validation.every=0",
                           "rollout.max_staleness=1"))
    try:
        tr.fit()
        names, lags = list(tr.ahead.engine_names), list(tr.ahead.lags)
        version, gap = worker_gap(tr, worker=1)
    finally:
        tr.close()
    m = rows(tmp_path)
    print(f"\nlogprob gap by step {[r['rollout/logprob_gap_mean'] for r in m]}; staleness "
          f"{[r['rollout/staleness'] for r in m]}; worker gap after the last push {gap:.2e}")
    assert names == ["VLLMEngine"] * 2 and len(m) == 4
    assert all(int(lag.max()) <= 1 for lag in lags)
    fresh = [r for r in m if r["rollout/staleness_max"] == 0]
    assert fresh and fresh[0] is m[0]
    assert all(r["rollout/logprob_gap_mean"] < 2e-4 for r in fresh), fresh
    # the weights moved (a step whose groups all tie has zero advantages and no update)
    assert any(r["grad_norm"] > 0 for r in m), [r["grad_norm"] for r in m]
    assert version == 4 and gap < 2e-4, (version, gap)


@pytest.mark.slow
def test_groups_past_the_bound_are_dropped_and_sampled_again(one_ray, tmp_path, monkeypatch):
    """max_staleness 1 for two steps, then the bound tightens to 0 during step 2's update
    (tr.step 1): the groups already sampled for step 3 with version 1 would lag 1, so they
    are dropped, counted and sampled again with the new weights; from then on every lag is 0.
    Step 0's update waits for the groups in flight, so step 1 trains on groups of version 0
    whatever the load (on 2 busy cores the workers could start them after the push)."""
    from mindrl.trainer.rl import RLTrainer

    tr = RLTrainer(cfg_for(tmp_path, "train.steps=4", "validation.every=0",
                           "rollout.max_staleness=1"))
    q = tr.ahead
    original = RLTrainer.update

    def update(self, batch):
        out = original(self, batch)
        if self.step in (0, 1):
            # let the groups in flight finish with the weights they hold: at step 0 those of
            # step 1 (so they lag 1 however slowly the workers start on loaded cores), at
            # step 1 those of step 3, then tighten
            t0 = time.time()
            while len(q.in_flight) and time.time() - t0 < 60:
                q.harvest(block=True)
        if self.step == 1:
            q.k = 0
        return out

    monkeypatch.setattr(RLTrainer, "update", update)
    try:
        tr.fit()
    finally:
        tr.close()
    m = rows(tmp_path)
    assert [r["rollout/dropped_groups"] for r in m][:2] == [0.0, 0.0]
    assert m[2]["rollout/dropped_groups"] >= 1           # the queue held lag-1 groups
    assert m[3]["rollout/dropped_groups"] == 0
    assert [int(lag.max()) for lag in q.lags[2:]] == [0, 0]
    assert m[1]["rollout/staleness_max"] == 1            # k=1 ran ahead before
    assert m[3]["rollout/queue_in_flight"] <= 4 and q.queue_size == 0


@pytest.mark.slow
@pytest.mark.parametrize("backend, engine", [("torch", "native"), ("mindspore", "native"),
                                             ("torch", "vllm")])
def test_lora_pushes_only_the_adapters(one_ray, tmp_path, backend, engine):
    """model.lora: each version sends the adapters alone (rollout/push_mb a few percent of the
    model's checkpoint), each worker merges them into its own copy of the adapted base weights,
    and a group sampled after the last push agrees with the trainer (a worker that skipped the
    merge shows the update's drift: lr 1e-2 on the adapters). One rollout worker: the gap is
    measured on worker 0, and a version's push is the same whatever the number of workers."""
    from mindrl.models.tiny import resolve_model_path
    from mindrl.trainer.rl import RLTrainer

    tr = RLTrainer(cfg_for(tmp_path, f"backend={backend}", f"rollout.engine={engine}",
                           "model.lora.enabled=true", "model.lora.rank=4",
                           "model.lora.alpha=8", "train.lr=1e-2", "train.steps=3",
                           "validation.every=0", "rollout.max_staleness=1",
                           "rollout.workers=1"))
    try:
        tr.fit()
        version, gap = worker_gap(tr)
    finally:
        tr.close()
    m = rows(tmp_path)
    full_mb = sum(f.stat().st_size for f in
                  Path(resolve_model_path("builtin:tiny")).glob("*.safetensors")) / 1e6
    print(f"\npush {m[-1]['rollout/push_mb']:.4f} MB of a {full_mb:.3f} MB checkpoint; worker "
          f"gap after the last push {gap:.2e}; grad norms {[r['grad_norm'] for r in m]}")
    assert all(0 < r["rollout/push_mb"] < 0.15 * full_mb for r in m)
    assert any(r["grad_norm"] > 0 for r in m)
    assert version == 3 and gap < 2e-4, (version, gap)


@pytest.mark.slow
def test_unchanged_tensors_are_not_sent_again(one_ray, tmp_path):
    """A constant reward (zero advantages, zero gradients: AdamW leaves every weight bitwise
    as it was): the first version sends every tensor, later versions none (the manifest
    keeps the first refs, so a worker that skipped versions still finds every tensor), and a
    worker that fetched nothing since still samples what the trainer scores. (That changed
    tensors are sent is what the gap checks of the other runs here test.) One rollout worker:
    the gap is measured on worker 0."""
    from mindrl.trainer.rl import RLTrainer

    tr = RLTrainer(cfg_for(
        tmp_path, "reward.functions=[{name: 'trainer_helpers:constant_reward'}]",
        "train.steps=3", "validation.every=0", "rollout.workers=1"))
    try:
        tr.fit()
        q = tr.ahead
        version, gap = worker_gap(tr)
        assert q.push_skipped == len(q._last) and q.push_mb == 0.0
        changed_at = {c for c, _ in q._tensors.values()}
    finally:
        tr.close()
    m = rows(tmp_path)
    print(f"\npush MB by step {[r['rollout/push_mb'] for r in m]}; unchanged "
          f"{[r['rollout/push_unchanged'] for r in m]}; gap {gap:.1e}")
    assert m[0]["rollout/push_unchanged"] == 0 and m[0]["rollout/push_mb"] > 0.5
    assert all(r["rollout/push_mb"] == 0 and r["rollout/push_unchanged"] > 0 for r in m[1:])
    assert changed_at == {0} and version == 3 and gap < 1e-4


@pytest.mark.slow
def test_a_run_prints_no_ray_core_worker_error(tmp_path):
    """`mindrl train ... rollout.mode=async_ray` as a user runs it: no `E ... core_worker.cc`
    line from Ray (its warning about actors whose constructor arguments live in the object
    store; the workers get the weight store by name instead of a handle)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, OMP_NUM_THREADS="1", RAY_AUTH_MODE="disabled",
               PYTHONPATH=os.pathsep.join([str(repo / "tests" / "trainer"), str(repo)]))
    args = [a for a in BASE if not a.startswith("rollout.workers=")] + [
        "rollout.workers=1", "train.steps=2", "validation.every=0", "logging.output_dir=run"]
    res = subprocess.run([sys.executable, "-m", "mindrl", "train", "grpo_tiny_demo", *args],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "== finished: grpo_tiny_demo, 2 steps" in res.stdout
    assert "core_worker.cc" not in res.stderr + res.stdout
