"""The RL loop end to end on the tiny model (torch backend, native engine): every estimator,
dynamic sampling, resume equality, SIGTERM, bad input, and a 2-process torchrun run."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mindrl.config.loader import load_config
from trainer_helpers import fit_stopped_by_sigterm

REPO = Path(__file__).resolve().parents[2]

BASE = [
    "model.path=builtin:tiny", "model.chat_template=none",
    "data.train_file=arithmetic:digits=2,ops=+", "data.max_val_samples=16",
    "rollout.n=4", "rollout.max_new_tokens=4", "train.prompts_per_step=4",
    "train.micro_batch_size=8", "train.lr=1e-3", "reward.num_workers=0",
    "reward.functions=[{name: arithmetic}]", "logging.tensorboard=false",
    "logging.progress_bar=false", "logging.plot=false", "checkpoint.save_final=false",
]


def cfg_for(tmp_path, *extra):
    return load_config(None, BASE + [f"logging.output_dir={tmp_path}"] + list(extra))


def rows(run_dir):
    return [json.loads(x) for x in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


def weights(trainer):
    return {k: v.copy() for k, v in trainer.backend.named_weights()}


@pytest.mark.slow
@pytest.mark.parametrize("estimator, extra", [
    ("grpo", []),
    ("dr_grpo", ["algorithm.loss_agg_mode=seq_mean_token_sum_norm"]),
    ("rloo", ["algorithm.clip_eps_high=0.28", "algorithm.dual_clip_c=3"]),
    ("reinforce_pp", ["algorithm.kl.coef=0.05", "algorithm.kl.in_reward=true"]),
    ("reinforce_pp_baseline", ["algorithm.entropy_coef=0.01"]),
    ("passk", ["algorithm.passk_k=2", "algorithm.kl.coef=0.05"]),
])
def test_every_estimator_trains(tmp_path, estimator, extra):
    from mindrl.trainer.rl import RLTrainer

    # a reward with signal even for an untrained model, so that advantages are non-zero
    cfg = cfg_for(tmp_path, f"algorithm.adv_estimator={estimator}", "train.steps=2",
                  "reward.functions=[{name: 'trainer_helpers:parity_reward'}]", *extra)
    tr = RLTrainer(cfg)
    before = weights(tr)
    last = tr.fit()
    tr.close()
    after = weights(tr)
    changed = [k for k in before if not np.allclose(before[k], after[k])]
    assert changed, "no parameter changed"
    m = rows(tmp_path)
    assert [r["step"] for r in m] == [1, 2]
    for key in ("reward/mean", "loss", "grad_norm", "response_length/mean", "time/step"):
        assert key in last and np.isfinite(last[key]), key
    if "kl.coef" in " ".join(extra):
        assert "kl" in last and np.isfinite(last["kl"])


@pytest.mark.slow
def test_dynamic_sampling_drops_flat_groups(tmp_path):
    from mindrl.trainer.rl import RLTrainer

    cfg = cfg_for(tmp_path, "train.steps=1", "algorithm.dynamic_sampling.enabled=true",
                  "algorithm.dynamic_sampling.max_refill_batches=4",
                  "reward.functions=[{name: 'trainer_helpers:parity_reward'}]")
    tr = RLTrainer(cfg)
    rows_, ro, sc, m = tr.collect()
    tr.close()
    n = cfg.rollout.n
    flat = [np.ptp(sc.total[g * n:(g + 1) * n]) == 0 for g in range(len(rows_))]
    # groups are whole and in order; flat ones only fill in when the budget ran out
    assert len(ro) == cfg.train.prompts_per_step * n
    assert sum(flat) == m["dynamic_sampling/filled_with_flat"]
    assert 0 < m["dynamic_sampling/kept_fraction"] < 1
    assert m["dynamic_sampling/batches"] >= 1
    for g, row in enumerate(rows_):
        if int(row["problem"][0]) % 2 == 0:   # always flat by construction
            assert flat[g]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "mindspore"])
def test_resume_equals_uninterrupted_and_sigterm_checkpoints(tmp_path, monkeypatch, backend):
    from mindrl.trainer.rl import RLTrainer

    extra = [f"backend={backend}", "train.steps=4", "checkpoint.every=100", "rollout.temperature=1.0",
             "reward.functions=[{name: 'trainer_helpers:parity_reward'}]",
             "train.lr_schedule=cosine", "train.warmup_steps=1"]
    full = tmp_path / "full"
    tr = RLTrainer(cfg_for(full, *extra))
    tr.fit()
    w_full = weights(tr)
    tr.close()

    part = tmp_path / "part"
    tr = RLTrainer(cfg_for(part, *extra))
    stop = fit_stopped_by_sigterm(tr, monkeypatch)   # during the 2nd step: checkpoint at 2
    assert stop.code == 128 + signal.SIGTERM
    assert (part / "checkpoints" / "step_000002" / "COMPLETE").is_file()

    tr = RLTrainer(cfg_for(part, *extra))
    tr.fit()
    w_part = weights(tr)
    tr.close()
    a, b = rows(full), rows(part)
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    for ra, rb in zip(a, b):
        for key in ("reward/mean", "loss", "grad_norm", "lr", "response_length/mean"):
            assert ra[key] == pytest.approx(rb[key], rel=1e-5, abs=1e-6), (ra["step"], key)
    for k in w_full:
        np.testing.assert_allclose(w_full[k], w_part[k], rtol=1e-5, atol=1e-6)


def test_bad_data_file_fails_before_model_loads(tmp_path):
    from mindrl.trainer.rl import RLTrainer

    cfg = cfg_for(tmp_path, f"data.train_file={tmp_path}/nope.jsonl")
    with pytest.raises(Exception, match="nope.jsonl"):
        RLTrainer(cfg)


def test_model_dir_without_tokenizer_is_named(tmp_path):
    from mindrl.trainer.rl import RLTrainer

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    cfg = cfg_for(tmp_path, f"model.path={tmp_path / 'm'}")
    with pytest.raises(FileNotFoundError, match="tokenizer"):
        RLTrainer(cfg)


def test_unknown_reward_fails_at_config_load(tmp_path):
    from mindrl.config.schema import ConfigError

    with pytest.raises(ConfigError, match=r"reward.functions\[0\].name='acuracy'.*did you mean "
                                          r"'accuracy'"):
        cfg_for(tmp_path, "reward.functions=[{name: acuracy}]")


def _write_recipe(path: Path, overrides) -> Path:
    """A recipe file holding the test's overrides (launchers take a recipe, not a list)."""
    import yaml

    from mindrl.config.loader import apply_overrides

    data = apply_overrides({}, overrides, {})
    path.write_text(yaml.safe_dump(data))
    return path


def _safetensors(model_dir: Path):
    from safetensors.numpy import load_file

    out = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


DP = ["train.steps=2", "rollout.batch_invariant=true", "checkpoint.save_final=true",
      "reward.functions=[{name: 'trainer_helpers:parity_reward'}]", "validation.every=2",
      "data.max_val_samples=8"]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "tests" / "trainer"), str(REPO),
                                         env.get("PYTHONPATH", "")])
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env["PATH"]
    return env


def _compare_runs(one: Path, two: Path):
    a, b = rows(one), rows(two)
    assert [r["step"] for r in a] == [r["step"] for r in b] == [1, 2]
    for ra, rb in zip(a, b):
        for key in ("reward/mean", "loss", "grad_norm", "response_length/mean", "val/accuracy",
                    "advantage/std", "entropy"):
            if key in ra:
                assert ra[key] == pytest.approx(rb[key], rel=1e-4, abs=1e-5), (ra["step"], key)
    wa = _safetensors(one / "checkpoints" / "step_000002" / "model")
    wb = _safetensors(two / "checkpoints" / "step_000002" / "model")
    assert wa.keys() == wb.keys()
    for k in wa:
        np.testing.assert_allclose(wa[k].astype(np.float32), wb[k].astype(np.float32),
                                   rtol=1e-4, atol=1e-5, err_msg=k)


def _reference_run(tmp_path, env, base, two_extra=(), cwd=None):
    """Recipes for a 1-process reference run (``one``, run here) and a distributed run
    (``two``, the caller launches it); returns (one dir, two dir, two's recipe)."""
    one, two = tmp_path / "one", tmp_path / "two"
    r1 = _write_recipe(tmp_path / "one.yaml", base + [f"logging.output_dir={one}"])
    r2 = _write_recipe(tmp_path / "two.yaml", base + [f"logging.output_dir={two}",
                                                      *two_extra])
    subprocess.run([sys.executable, "-m", "mindrl", "train", str(r1)], env=env, check=True,
                   timeout=300, capture_output=True, cwd=cwd)
    return one, two, r1, r2


@pytest.fixture(scope="module")
def torch_one(tmp_path_factory):
    """The 1-process torch run of BASE + DP, shared by the tests whose distributed runs
    (torchrun, Ray) must equal it: (its run dir, the launch environment)."""
    tmp = tmp_path_factory.mktemp("torch_one")
    env = _launch_env()
    one, _, _, _ = _reference_run(tmp, env, BASE + DP)
    return one, env


@pytest.fixture(scope="module")
def ms_one(tmp_path_factory):
    """The 1-process MindSpore run of BASE + DP, shared by the two msrun tests (replicated and
    sharded optimizer): (its run dir, the launch environment)."""
    tmp = tmp_path_factory.mktemp("ms_one")
    env = _launch_env()
    one, _, _, _ = _reference_run(tmp, env, BASE + DP + ["backend=mindspore"], cwd=tmp)
    return one, env


def _two_recipe(tmp_path, base, two_extra=()):
    """The distributed run's recipe (``two``, the caller launches it): (two dir, recipe)."""
    two = tmp_path / "two"
    return two, _write_recipe(tmp_path / "two.yaml", base + [f"logging.output_dir={two}",
                                                             *two_extra])


@pytest.mark.slow
def test_torchrun_two_ranks_equal_one_process(tmp_path, torch_one):
    """2 torchrun ranks (gloo) on halves of the prompts == 1 process on the global batch."""
    one, env = torch_one
    two, r2 = _two_recipe(tmp_path, BASE + DP)
    torchrun = Path(sys.executable).parent / "torchrun"
    res = subprocess.run([str(torchrun), "--nproc_per_node", "2", "--master_port",
                          str(_free_port()), "-m", "mindrl", "train", str(r2)], env=env,
                         timeout=300, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    _compare_runs(one, two)


@pytest.mark.slow
def test_fsdp_two_ranks_equal_one_process_and_resume(tmp_path):
    """train.fsdp: 2 torchrun ranks with sharded parameters/grads/AdamW (FSDP2, gloo) and a
    native engine holding a synced full copy == 1 unsharded process; then 2 more steps resumed
    from the sharded run's checkpoint == 4 uninterrupted steps of one process."""
    env = _launch_env()
    one, two, r1, r2 = _reference_run(tmp_path, env, BASE + DP + ["train.lr=1e-2"],
                                      ["train.fsdp=true"])
    torchrun = Path(sys.executable).parent / "torchrun"
    cmd = [str(torchrun), "--nproc_per_node", "2", "--master_port", str(_free_port()), "-m",
           "mindrl", "train", str(r2)]
    res = subprocess.run(cmd, env=env, timeout=300, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    _compare_runs(one, two)
    assert rows(two)[-1]["time/weight_sync"] > 0          # the engine's copy was refreshed
    # resume the sharded run to step 4; compare with one process running 4 steps
    subprocess.run([sys.executable, "-m", "mindrl", "train", str(r1), "train.steps=4"], env=env,
                   check=True, timeout=300, capture_output=True)
    res = subprocess.run(cmd + ["train.steps=4"], env=env, timeout=300, capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    a, b = rows(one), rows(two)
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    for ra, rb in zip(a[2:], b[2:]):
        for key in ("reward/mean", "loss", "grad_norm"):
            assert ra[key] == pytest.approx(rb[key], rel=1e-4, abs=1e-5), (ra["step"], key)
    wa = _safetensors(one / "checkpoints" / "step_000004" / "model")
    wb = _safetensors(two / "checkpoints" / "step_000004" / "model")
    for k in wa:
        # 1 process steps torch's fused AdamW, FSDP's DTensor shards the foreach one (and a dense
        # tied-embedding gradient for the sparse one): the same arithmetic in another order
        np.testing.assert_allclose(wa[k], wb[k], rtol=1e-4, atol=2e-5, err_msg=k)


GAP_ALARM = "rollout-vs-trainer log-prob gap"


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "mindspore"])
def test_vllm_engine_in_the_loop_stays_in_sync(tmp_path, backend, caplog):
    """Trainer weights are pushed to vLLM after every update; the rollout-vs-trainer log-prob
    gap stays at float32 noise and its alarm stays silent (a stale engine shows ~0.1+ nats
    after one lr=1e-2 step: see the next test)."""
    from mindrl.trainer.rl import RLTrainer

    cfg = cfg_for(tmp_path, f"backend={backend}", "rollout.engine=vllm", "train.steps=3",
                  "train.lr=1e-2", "reward.functions=[{name: 'trainer_helpers:parity_reward'}]")
    tr = RLTrainer(cfg)
    with caplog.at_level("WARNING", logger="mindrl"):
        tr.fit()
    tr.close()
    m = rows(tmp_path)
    assert len(m) == 3
    for r in m:
        assert r["rollout/logprob_gap_mean"] < 2e-4, r["rollout/logprob_gap_mean"]
        assert r["grad_norm"] > 0
    assert m[-1]["time/weight_sync"] > 0
    assert not [r for r in caplog.records if GAP_ALARM in r.getMessage()]


@pytest.mark.slow
def test_a_skipped_weight_sync_raises_the_gap_alarm(tmp_path, caplog, monkeypatch):
    """The same run with the engine's ``load_weights`` made a no-op: vLLM keeps sampling from
    the step-0 weights. Step 1 still agrees (nothing was updated yet); from step 2 the gap
    exceeds ``rollout.logprob_gap_warn`` and the warning names each stale step."""
    from mindrl.rollout.vllm_engine import VLLMEngine
    from mindrl.trainer.rl import RLTrainer

    syncs = []
    monkeypatch.setattr(VLLMEngine, "load_weights", lambda self, weights: syncs.append(1))
    cfg = cfg_for(tmp_path, "rollout.engine=vllm", "train.steps=3", "train.lr=1e-2",
                  "reward.functions=[{name: 'trainer_helpers:parity_reward'}]")
    tr = RLTrainer(cfg)
    with caplog.at_level("WARNING", logger="mindrl"):
        tr.fit()
    tr.close()
    assert len(syncs) >= 2                 # the trainer did ask for a sync after each update
    gaps = [r["rollout/logprob_gap_mean"] for r in rows(tmp_path)]
    warn = cfg.rollout.logprob_gap_warn
    assert gaps[0] < 2e-4 and min(gaps[1:]) > warn, gaps
    alarms = [r.getMessage() for r in caplog.records if GAP_ALARM in r.getMessage()]
    assert [a.split(":")[0] for a in alarms] == ["step 2", "step 3"], alarms


@pytest.mark.slow
def test_msrun_two_workers_equal_one_process(tmp_path, ms_one):
    """MindSpore backend: 2 msrun workers on halves of the prompts == 1 process."""
    one, env = ms_one
    two, r2 = _two_recipe(tmp_path, BASE + DP + ["backend=mindspore"])
    msrun = Path(sys.executable).parent / "msrun"
    res = subprocess.run([str(msrun), "--worker_num", "2", "--local_worker_num", "2",
                          "--master_port", str(_free_port()), "--log_dir", str(tmp_path / "logs"),
                          "--join", "True", str(REPO / "launch" / "train_entry.py"), "train",
                          str(r2)], env=env, timeout=300, capture_output=True, text=True,
                         cwd=tmp_path)
    logs = "\n".join(f"== {p.name}\n" + p.read_text()[-6000:]
                      for p in sorted((tmp_path / "logs").glob("*.log")))
    assert res.returncode == 0, logs
    _compare_runs(one, two)


@pytest.mark.slow
def test_msrun_sharded_optimizer_equals_one_process_and_checkpoints_every_slice(tmp_path,
                                                                                  ms_one):
    """train.shard_optimizer=true under msrun: 2 workers == 1 process, and the trainer's
    checkpoint (written by rank 0 alone) holds both ranks' AdamW slices, which together are
    the 1-process run's moments."""
    from safetensors.numpy import load_file

    from mindrl.trainer.checkpoint import find_resumable

    one, env = ms_one
    two, r2 = _two_recipe(tmp_path, BASE + DP + ["backend=mindspore"],
                          ["train.shard_optimizer=true"])
    msrun = Path(sys.executable).parent / "msrun"
    res = subprocess.run([str(msrun), "--worker_num", "2", "--local_worker_num", "2",
                          "--master_port", str(_free_port()), "--log_dir", str(tmp_path / "logs"),
                          "--join", "True", str(REPO / "launch" / "train_entry.py"), "train",
                          str(r2)], env=env, timeout=300, capture_output=True, text=True,
                         cwd=tmp_path)
    logs = "\n".join(f"== {p.name}\n" + p.read_text()[-6000:]
                      for p in sorted((tmp_path / "logs").glob("*.log")))
    assert res.returncode == 0, logs
    _compare_runs(one, two)
    ckpt, damaged = find_resumable(two / "checkpoints")
    assert ckpt.name == "step_000002" and not damaged
    state = ckpt / "state"
    assert json.loads((state / "ms_state.json").read_text())["optimizer_shards"] == 2
    assert not (state / "ms_optimizer.safetensors").exists()
    parts = [load_file(str(state / f"ms_optimizer.shard{r:05d}-of-00002.safetensors"))
             for r in range(2)]
    from mindrl.backends.mindspore.weights import read_safetensors   # in the file's order

    ref = read_safetensors(str(one / "checkpoints" / "step_000002" / "state" /
                               "ms_optimizer.safetensors"))
    for tag in ("exp_avg", "exp_avg_sq"):
        want = np.concatenate([v.reshape(-1) for k, v in ref.items()
                               if k.startswith(tag + ".")])
        got = np.concatenate([p[tag] for p in parts])
        assert got.size == want.size and abs(parts[0][tag].size - parts[1][tag].size) <= 1
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())


@pytest.mark.slow
def test_ray_two_nodes_equal_one_process(tmp_path, ray_two_nodes, torch_one):
    """launcher=ray: a torchrun per Ray node (nnodes=2, rendezvous on node 0's address, free port)
    trains exactly like 1 process on the global batch; each node's output is kept in a log."""
    one, env = torch_one
    two, r2 = _two_recipe(tmp_path, BASE + DP)
    res = subprocess.run([sys.executable, "-m", "mindrl", "launch", str(r2),
                          "distributed.launcher=ray", "distributed.nnodes=2",
                          "distributed.master_port=0",
                          f"distributed.ray_address={ray_two_nodes.address}"],
                         env=env, timeout=400, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    _compare_runs(one, two)
    logs = sorted((two / "launch_logs").glob("ray_node*.log"))
    assert [p.name for p in logs] == ["ray_node0.log", "ray_node1.log"]
    assert "--node_rank 1" in logs[1].read_text()


@pytest.mark.slow
def test_ray_reports_a_cluster_too_small_and_a_failing_node(tmp_path, ray_two_nodes):
    env = _launch_env()
    recipe = _write_recipe(tmp_path / "r.yaml", BASE + [f"logging.output_dir={tmp_path}"])
    ray_args = ["distributed.launcher=ray", f"distributed.ray_address={ray_two_nodes.address}"]
    res = subprocess.run([sys.executable, "-m", "mindrl", "launch", str(recipe), *ray_args,
                          "distributed.nnodes=3", "distributed.ray_placement_timeout_s=3"],
                         env=env, timeout=200, capture_output=True, text=True)
    assert res.returncode != 0
    assert "cannot place 3 node(s)" in res.stderr and "the cluster has 2 node(s)" in res.stderr
    # the launcher's own model check would stop this before Ray: let the nodes fail instead
    res = subprocess.run([sys.executable, "-m", "mindrl", "launch", str(recipe), *ray_args,
                          "distributed.nnodes=2", "model.path=/nonexistent/model"],
                         env={**env, "MINDRL_SKIP_PREFLIGHT": "1"}, timeout=300,
                         capture_output=True, text=True)
    assert res.returncode != 0
    out = res.stdout + res.stderr
    assert "/nonexistent/model" in out and "exited with" in out
