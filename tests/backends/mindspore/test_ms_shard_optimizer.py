"""AdamW state and gradient sharded over data-parallel ranks (``train.shard_optimizer``).

Under msrun with 2 CPU workers (msrun_zero_worker.py): 5 RL steps with a sharded optimizer (each
micro-batch's gradient reduced into the ranks' slices in several buckets; 2 and 3 micro-batches
on the two ranks) equal the replicated 2-process run and the 1-process run, in float32 and with
``model.dtype=bfloat16`` (float32 weights saved with the optimizer state); a checkpoint of the
sharded run resumes on 2 ranks bit for bit and on 1 rank (re-sliced) to the same weights; the
optimizer alone on float16 parameters, with 2 micro-batches per rank and step, keeps float32
master slices equal to a NumPy AdamW; each rank holds half of the replicated run's gradient
accumulator, moments and masters. The PPO critic (msrun_critic_zero_worker.py) sharded equals
the replicated critic and resumes from its slices. Without msrun: the shard files re-slice to
any number of ranks, reading only the bytes a rank owns.

The module's other msrun checks share the same launch (msrun_suite_worker.py runs each worker's
part in the same 2 processes, so the cluster is built once): replicated data parallel
(msrun_dp_worker.py: RL and SFT steps of 2 workers equal 1 process) and MoE load balancing over
the ranks (msrun_moe_worker.py). The launch runs only the parts the selected tests need."""

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ms_helpers import ms_config, random_batch, split

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from msrun_zero_worker import SAVE_AT, SETTINGS, STEPS, batches, fp16_grads  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _msrun(script, args, tmp_path, timeout=600):
    bindir = Path(sys.executable).parent
    msrun = bindir / "msrun"
    if not msrun.exists() and shutil.which("msrun") is None:
        pytest.skip("msrun not installed")
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=os.pathsep.join([str(HERE.parents[2]),
                                           os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1", GLOG_v="3")
    cmd = [str(msrun if msrun.exists() else "msrun"), "--worker_num", "2",
           "--local_worker_num", "2", "--master_port", str(_free_port()),
           "--log_dir", str(tmp_path / "logs"), "--join", "True", str(HERE / script), *args]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=timeout)
    logs = "".join(p.read_text()[-3000:] for p in sorted((tmp_path / "logs").glob("*.log")))
    assert proc.returncode == 0, proc.stdout[-2000:] + logs


def _one_process(cfg, directory, data, be=None):
    from mindrl.backends.mindspore import MindSporeBackend

    be = be or MindSporeBackend(cfg, model_path=directory)
    metrics = [[m["loss"], m["grad_norm"]] for m in
               (be.train_step(split(b, 4), norm) for b, norm in data)]
    return be, np.array(metrics)


def _weights(npz, tag):
    return {k.split("/", 1)[1]: v for k, v in npz.items() if k.startswith(tag + "/")}


def _numpy_adamw(w0, grads, lr, wd=0.01, b1=0.9, b2=0.999, eps=1e-8, clip=1.0):
    """torch.optim.AdamW with clip_grad_norm_, float64."""
    p, m, v = w0.astype(np.float64), np.zeros(w0.size), np.zeros(w0.size)
    for t, g in enumerate(grads, start=1):
        g = g.astype(np.float64)
        g = g * min(1.0, clip / (np.sqrt((g * g).sum()) + 1e-6))
        p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr / (1 - b1 ** t) * m / (np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps)
    return p


# each part of msrun_suite_worker.py: the fixture its tests use
PARTS = {"dp_run": "dp", "zero_run": "zero", "critic_run": "critic", "moe_run": "moe"}


@pytest.fixture(scope="module")
def msrun_suite(request, hf_tied, tmp_path_factory):
    """One msrun launch for the module: the parts the selected tests of this module need."""
    mine = [item for item in request.session.items if item.module is request.module]
    parts = [part for fixture, part in PARTS.items()
             if any(fixture in getattr(item, "fixturenames", ()) for item in mine)]
    tmp = tmp_path_factory.mktemp("msrun")
    directory, _ = hf_tied
    moe_dir = ""
    if "moe" in parts:                                 # built once, here, not by 2 ranks
        from mindrl.models.tiny import resolve_model_path

        tiny = request.getfixturevalue("tiny_dir")
        moe_dir = resolve_model_path("builtin:tiny-qwen3-moe", cache_dir=str(Path(tiny).parent))
    # the separate launches' time limits added up: 10 min for the sharded runs, 5 for the rest
    _msrun("msrun_suite_worker.py", [directory, moe_dir, str(tmp), ",".join(parts)], tmp,
           timeout=300 * len(parts) + 300 * ("zero" in parts))
    return directory, moe_dir, tmp


@pytest.fixture(scope="module")
def zero_run(msrun_suite):
    directory, _, tmp = msrun_suite
    return directory, tmp, [dict(np.load(tmp / f"rank{r}.npz")) for r in (0, 1)]


@pytest.mark.slow
def test_sharded_equals_replicated_two_ranks_and_one_process(zero_run):
    directory, _, (r0, r1) = zero_run
    sharded, replicated = _weights(r0, "sharded"), _weights(r0, "replicated")
    for k, w in sharded.items():                      # every rank holds the gathered weights
        np.testing.assert_array_equal(w, r1[f"sharded/{k}"], err_msg=k)
    moved = max(np.abs(w - replicated[k]).max() for k, w in sharded.items())
    np.testing.assert_allclose(r0["sharded_metrics"], r0["replicated_metrics"], rtol=1e-5)
    for k, w in sharded.items():
        np.testing.assert_allclose(w, replicated[k], atol=1e-5, err_msg=k)
    assert r0["sharded_metrics"][:, 1].max() > 0.5    # the clip (0.5) was active

    _, metrics = _one_process(ms_config(*SETTINGS), directory, batches())
    np.testing.assert_allclose(r0["sharded_metrics"], metrics, rtol=1e-5)
    from mindrl.backends.mindspore import weights as W

    start = dict(W.iter_checkpoint(directory))
    change = max(np.abs(w - start[k]).max() for k, w in sharded.items())
    assert change > 100 * 1e-5 and moved < 1e-5     # the weights moved far beyond the tolerance


@pytest.mark.slow
def test_checkpoint_of_two_ranks_resumes_on_two_ranks_exactly_and_on_one(zero_run):
    """The resumed 2-rank run is the uninterrupted one bit for bit; on 1 rank the re-assembled
    state is the files' (read by the safetensors library), and steps 4-5 land on the same
    weights."""
    from safetensors.numpy import load_file

    from mindrl.backends.mindspore import MindSporeBackend

    directory, tmp, (r0, r1) = zero_run
    sharded = _weights(r0, "sharded")
    for k, w in _weights(r0, "resumed").items():
        np.testing.assert_array_equal(w, sharded[k], err_msg=k)
    np.testing.assert_array_equal(r0["resumed_metrics"], r0["sharded_metrics"][SAVE_AT:])

    ckpt = tmp / "ckpt"
    files = sorted(ckpt.glob("ms_optimizer.shard*-of-00002.safetensors"))
    assert len(files) == 2 and not (ckpt / "ms_optimizer.safetensors").exists()
    assert json.loads((ckpt / "ms_state.json").read_text())["optimizer_shards"] == 2
    parts = [load_file(str(f)) for f in files]
    # the trainer's checkpoints: slices gathered to rank 0, which writes the same files
    staged = [load_file(str(tmp / "ckpt_staged" / f.name)) for f in files]
    for part, again in zip(parts, staged):
        assert sorted(part) == sorted(again) == ["exp_avg", "exp_avg_sq"]
        for k in part:
            np.testing.assert_array_equal(part[k], again[k])
    n = sum(p["exp_avg"].size for p in parts)
    assert abs(parts[0]["exp_avg"].size - parts[1]["exp_avg"].size) <= 1   # halves

    be = MindSporeBackend(ms_config(*SETTINGS, "train.shard_optimizer=true"),
                          model_path=directory)
    assert be.world == 1
    be.load_state(str(ckpt))
    state = be.optimizer.state_arrays()
    for tag in ("exp_avg", "exp_avg_sq"):
        flat = np.concatenate([state[f"{tag}.{p.name}"].reshape(-1) for p in be.params])
        assert flat.size == n
        np.testing.assert_array_equal(flat, np.concatenate([p[tag] for p in parts]))
    assert be.optimizer.step == SAVE_AT and be.optimizer_steps == SAVE_AT
    _, metrics = _one_process(None, None, batches()[SAVE_AT:], be=be)
    np.testing.assert_allclose(metrics, r0["sharded_metrics"][SAVE_AT:], rtol=1e-5)
    for p in be.params:
        np.testing.assert_allclose(p.asnumpy(), sharded[p.name], atol=1e-5, err_msg=p.name)


@pytest.mark.slow
def test_bf16_model_sharded_resumes_from_its_float32_slices(zero_run):
    """model.dtype=bfloat16 on CPU: float32 compute (so the run equals the float32 one, which
    equals 1 process), the model directory in bf16, the float32 weights in the optimizer's
    slices. Loading its step-3 checkpoint on 1 rank gives the float32 weights bit for bit (the
    bf16 directory alone is up to half a bf16 step off), and steps 4-5 from there land on the
    sharded run's weights."""
    from safetensors.numpy import load_file

    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.backends.mindspore import weights as W

    directory, tmp, (r0, _) = zero_run
    np.testing.assert_array_equal(r0["bf16_metrics"], r0["sharded_metrics"])
    bf16, at3 = _weights(r0, "bf16"), _weights(r0, f"bf16_at{SAVE_AT}")
    for k, w in _weights(r0, "sharded").items():
        np.testing.assert_array_equal(bf16[k], w, err_msg=k)

    ckpt = tmp / "ckpt_bf16"
    parts = sorted(ckpt.glob("ms_optimizer.shard*-of-00002.safetensors"))
    assert len(parts) == 2
    for f in parts:                       # gathered to rank 0 with the masters: the same
        again = load_file(str(tmp / "ckpt_bf16_staged" / f.name))
        assert sorted(again) == ["exp_avg", "exp_avg_sq", "master"]
        for k, v in load_file(str(f)).items():
            np.testing.assert_array_equal(v, again[k])
    be = MindSporeBackend(ms_config(*SETTINGS, "model.dtype=bfloat16",
                                    "train.shard_optimizer=true"), model_path=directory)
    rounded = dict(W.iter_checkpoint(str(ckpt)))
    be.load_state(str(ckpt))
    off_rounded = 0.0
    for p in be.params:
        np.testing.assert_array_equal(p.asnumpy(), at3[p.name], err_msg=p.name)
        off_rounded = max(off_rounded, np.abs(p.asnumpy() - rounded[p.name]).max())
    assert off_rounded > 1e-4        # what the bf16 directory alone would have resumed from
    _, metrics = _one_process(None, None, batches()[SAVE_AT:], be=be)
    np.testing.assert_allclose(metrics, r0["bf16_metrics"][SAVE_AT:], rtol=1e-5)
    for p in be.params:
        np.testing.assert_allclose(p.asnumpy(), bf16[p.name], atol=1e-5, err_msg=p.name)


@pytest.mark.slow
def test_float16_storage_keeps_float32_master_slices_equal_to_numpy_adamw(zero_run):
    from msrun_zero_worker import fp16_params

    _, _, (r0, r1) = zero_run
    params = fp16_params()
    w0 = np.concatenate([p.asnumpy().astype(np.float32).reshape(-1) for p in params])
    n = w0.size
    assert n % 2 == 1                                     # the last slice carries padding
    grads = [sum(g.astype(np.float64) for g in a + b)         # 2 ranks x 2 micro-batches
             for a, b in zip(fp16_grads(n, 0), fp16_grads(n, 1))]
    ref = _numpy_adamw(w0, grads, 1e-6)
    s = (n + 1) // 2
    masters = np.concatenate([r0["fp16_sharded_master_slice"], r1["fp16_sharded_master_slice"]])
    assert masters.size == 2 * s and masters[n:].tolist() == [0.0]   # padding stays zero
    # float32 rounding of |w| <= 0.1 over 5 steps, against updates of ~1e-6 per step
    np.testing.assert_allclose(masters[:n], ref, rtol=0, atol=5e-8)
    assert np.median(np.abs(masters[:n] - w0)) > 1e-6     # 5 steps of ~1e-6 each
    half = np.concatenate([r0[f"fp16_sharded/{p.name}"].reshape(-1) for p in params])
    np.testing.assert_array_equal(half, masters[:n].astype(np.float16).astype(np.float32))
    assert np.mean(half != masters[:n]) > 0.5     # the masters hold what float16 rounds away
    replicated = np.concatenate([r0[f"fp16_replicated/{p.name}"].reshape(-1) for p in params])
    assert np.mean(half != replicated) < 1e-3
    # set_masters: each rank's slice of float32 arrays, not their float16 rounding
    from msrun_zero_worker import fp16_exact

    exact = np.concatenate([a.reshape(-1) for a in fp16_exact()])
    got = np.concatenate([r0["fp16_set_master_slice"], r1["fp16_set_master_slice"]])[:n]
    np.testing.assert_array_equal(got, exact)
    assert (exact != exact.astype(np.float16).astype(np.float32)).mean() > 0.99
    np.testing.assert_allclose(r0["fp16_sharded_norms"], r0["fp16_replicated_norms"], rtol=1e-6)
    np.testing.assert_allclose(r0["fp16_sharded_norms"],
                               [np.sqrt((g.astype(np.float64) ** 2).sum()) for g in grads],
                               rtol=1e-6)


@pytest.mark.slow
def test_each_rank_holds_half_of_the_gradient_accumulator_and_optimizer_state(zero_run):
    """Bytes of the arrays each rank's optimizer holds: the float32 gradient accumulator, the
    moments (and masters) are 1/2 of the replicated run's, each on its own."""
    _, _, ranks = zero_run
    for tag in ("", "fp16_"):
        rep = {k.split("/")[1]: int(v) for k, v in ranks[0].items()
               if k.startswith(f"{tag}replicated_bytes/")}
        state = [k for k in ("grad_accum", "exp_avg", "exp_avg_sq", "master") if k in rep]
        assert state == (["grad_accum", "exp_avg", "exp_avg_sq"] + (["master"] if tag else []))
        for r in ranks:
            sh = {k.split("/")[1]: int(v) for k, v in r.items()
                  if k.startswith(f"{tag}sharded_bytes/")}
            assert sorted(sh) == sorted(state)
            for k in state:                   # 1/2, plus the last slice's padding (4 B)
                assert 0.5 <= sh[k] / rep[k] <= 0.5 + 4 / rep[k], (tag, k, sh[k], rep[k])
            mine, total = sum(sh.values()), sum(rep[k] for k in state)
            print(f"{tag or 'model '}gradient accumulator + optimizer state: replicated "
                  f"{total} B, sharded rank {mine} B ({mine / total:.4f})")


@pytest.fixture(scope="module")
def critic_run(msrun_suite):
    directory, _, tmp = msrun_suite
    return directory, tmp, [dict(np.load(tmp / f"critic_rank{r}.npz")) for r in (0, 1)]


@pytest.mark.slow
def test_critic_sharded_equals_replicated_and_resumes_on_one_and_two_ranks(critic_run):
    """The PPO critic with train.shard_optimizer: 4 value steps (2 and 3 micro-batches on the
    two ranks, several gradient buckets) equal the replicated critic; its checkpoint (one
    optimizer file per slice, written by rank 0) resumes on 2 ranks bit for bit and, read by a
    1-process replicated critic, gives steps 3-4 the same metrics and weights."""
    from safetensors.numpy import load_file

    from mindrl.backends.mindspore import MindSporeBackend
    from msrun_critic_zero_worker import SAVE_AT, SETTINGS as CSET, value_batches

    directory, tmp, (r0, r1) = critic_run
    sharded, replicated = _weights(r0, "sharded"), _weights(r0, "replicated")
    for k, w in sharded.items():
        np.testing.assert_array_equal(w, r1[f"sharded/{k}"], err_msg=k)
        np.testing.assert_allclose(w, replicated[k], atol=1e-5, err_msg=k)
    np.testing.assert_allclose(r0["sharded_metrics"], r0["replicated_metrics"], rtol=1e-5)
    assert r0["sharded_metrics"][:, 1].max() > 0.5                 # the clip (0.5) was active
    for k, w in _weights(r0, "resumed").items():
        np.testing.assert_array_equal(w, sharded[k], err_msg=k)
    np.testing.assert_array_equal(r0["resumed_metrics"], r0["sharded_metrics"][SAVE_AT:])
    # per rank: half of the replicated critic's gradient accumulator and moments
    rep = {k.split("/")[1]: int(v) for k, v in r0.items() if k.startswith("replicated_bytes/")}
    for r in (r0, r1):
        sh = {k.split("/")[1]: int(v) for k, v in r.items() if k.startswith("sharded_bytes/")}
        for k in ("grad_accum", "exp_avg", "exp_avg_sq"):
            assert 0.5 <= sh[k] / rep[k] <= 0.5 + 4 / rep[k], (k, sh[k], rep[k])

    ckpt = tmp / "critic_ckpt" / "critic"
    files = sorted(ckpt.glob("ms_optimizer.shard*-of-00002.safetensors"))
    assert len(files) == 2 and not (ckpt / "critic_optimizer.safetensors").exists()
    parts = [load_file(str(f)) for f in files]
    be = MindSporeBackend(ms_config(*CSET), model_path=directory)   # 1 process, replicated
    be.critic.load_state(str(tmp / "critic_ckpt"))
    state = be.critic.optimizer.state_arrays()
    flat = np.concatenate([state[f"exp_avg.{p.name}"].reshape(-1) for p in be.critic.params])
    np.testing.assert_array_equal(flat, np.concatenate([p["exp_avg"] for p in parts]))
    metrics = [[m["loss"], m["grad_norm"]] for m in
               (be.critic.step([vb.rows(slice(0, 4)), vb.rows(slice(4, 8))], norm)
                for vb, norm in value_batches()[SAVE_AT:])]
    np.testing.assert_allclose(metrics, r0["sharded_metrics"][SAVE_AT:], rtol=1e-5)
    for p in be.critic.params:
        np.testing.assert_allclose(p.asnumpy(), sharded[p.name], atol=1e-5, err_msg=p.name)
    moved = max(np.abs(w - replicated[k]).max() for k, w in sharded.items())
    assert moved < 1e-5 < max(np.abs(sharded[k]).max() for k in sharded)


@pytest.fixture(scope="module")
def dp_run(msrun_suite):
    directory, _, tmp = msrun_suite
    return directory, dict(np.load(tmp / "dp.npz"))


@pytest.mark.slow
def test_msrun_two_workers_equal_one_process(dp_run):
    """Replicated data parallel (msrun_dp_worker.py): 2 CPU workers on halves of a global batch
    equal 1 process, for RL train steps and then an SFT step."""
    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.types import LossNormalizers

    directory, dp = dp_run
    be = MindSporeBackend(ms_config("train.lr=1e-2", "train.grad_clip=0.5"),
                          model_path=directory)
    batch = random_batch(np.random.default_rng(7), 8)
    norm = LossNormalizers(float(batch.tokens.response_mask.sum()), 8.0, 16.0)
    for _ in range(2):
        metrics = be.train_step(split(batch, 4), norm)
    sft = be.sft_step([mb.tokens for mb in split(batch, 4)], norm)
    assert float(dp["grad_norm"]) == pytest.approx(metrics["grad_norm"], rel=1e-4)
    assert float(dp["loss"]) == pytest.approx(metrics["loss"], rel=1e-4, abs=1e-6)
    assert float(dp["sft_grad_norm"]) == pytest.approx(sft["grad_norm"], rel=1e-4)
    assert float(dp["sft_loss"]) == pytest.approx(sft["loss"], rel=1e-4)
    assert float(dp["sft_nll"]) == pytest.approx(sft["nll"], rel=1e-4)
    for name, arr in be.named_weights():
        np.testing.assert_allclose(dp[name], arr, atol=1e-5, err_msg=name)


@pytest.fixture(scope="module")
def moe_run(msrun_suite):
    _, moe_dir, tmp = msrun_suite
    return moe_dir, dict(np.load(tmp / "moe.npz"))


@pytest.mark.slow
def test_moe_load_balancing_over_two_msrun_workers_equals_one_process(moe_run):
    """MoE data parallel (msrun_moe_worker.py): the pre-pass sums the expert shares over the
    ranks, so 2 msrun workers (CPU) on halves of the mini-batch give the 1-process gradient of
    the whole of it and the same ``moe/aux_loss`` (builtin:tiny-qwen3-moe,
    ``model.moe.aux_loss_coef``)."""
    from msrun_moe_worker import run

    path, got = moe_run
    grads, metrics, _ = run(path)
    keys = sorted(grads)
    assert got["keys"].tolist() == keys
    want = np.concatenate([grads[k].ravel() for k in keys]).astype(np.float64)
    scale = float(np.abs(want).max())
    np.testing.assert_allclose(got["grads"], want, atol=1e-5 * scale, rtol=0)
    at = 0
    for k in keys:                # the routers' gradient (mostly the aux term's) on its own
        n = grads[k].size
        if k.endswith("mlp.gate.weight"):
            g, w = got["grads"][at:at + n], want[at:at + n]
            assert np.abs(w).max() > 1e-4, k
            assert np.linalg.norm(g - w) <= 1e-5 * np.linalg.norm(w), k
        at += n
    assert 2.0 < metrics["moe/aux_loss"] < 4.0
    assert float(got["metric:moe/aux_loss"]) == pytest.approx(metrics["moe/aux_loss"], rel=1e-6)
    for key in ("loss", "grad_norm"):
        assert float(got[f"metric:{key}"]) == pytest.approx(metrics[key], rel=1e-5), key


def test_shard_files_reslice_to_any_number_of_ranks(tmp_path):
    """Slices written by 3 ranks read back as the ranges of 2 ranks (and of 1: the whole
    vector, assembled per parameter), each read touching only the bytes it needs."""
    from mindrl.backends.mindspore.sharded_optim import (
        read_flat, replicated_arrays, save_shard, shard_bounds)

    n = 11
    full = {"exp_avg": np.arange(n, dtype=np.float32),
            "exp_avg_sq": np.arange(n, dtype=np.float32) ** 2}
    assert [shard_bounds(n, 3, r) for r in range(3)] == [(4, 0, 4), (4, 4, 8), (4, 8, 11)]
    assert shard_bounds(2, 3, 2) == (1, 2, 2)             # a rank past the end owns nothing

    class Slice:                                          # what save_shard reads of a rank
        def __init__(self, rank):
            self.n, self.rank, self.world = n, rank, 3
            _, self.lo, self.hi = shard_bounds(n, 3, rank)

        def shard_arrays(self):
            return {k: v[self.lo:self.hi] for k, v in full.items()}

    for r in range(3):
        save_shard(Slice(r), str(tmp_path))
    for r in range(2):
        _, lo, hi = shard_bounds(n, 2, r)
        for tag, v in full.items():
            np.testing.assert_array_equal(read_flat(str(tmp_path), 3, tag, lo, hi, n), v[lo:hi])
        assert read_flat(str(tmp_path), 3, "master", lo, hi, n) is None

    class P:
        def __init__(self, name, shape):
            self.name, self.shape = name, shape
    arrays = replicated_arrays([P("a", (2, 3)), P("b", (5,))], str(tmp_path), 3)
    np.testing.assert_array_equal(arrays["exp_avg.a"], full["exp_avg"][:6].reshape(2, 3))
    np.testing.assert_array_equal(arrays["exp_avg_sq.b"], full["exp_avg_sq"][6:])
    assert "master.a" not in arrays
    with pytest.raises(ValueError, match="12 trainable values"):
        read_flat(str(tmp_path), 3, "exp_avg", 0, 12, 12)
    (tmp_path / "ms_optimizer.shard00001-of-00003.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="saved by 3 ranks; missing "
                       "ms_optimizer.shard00001-of-00003"):
        read_flat(str(tmp_path), 3, "exp_avg", 0, 4, n)


def test_shard_optimizer_is_refused_outside_the_mindspore_backend():
    from mindrl.config.loader import load_config
    from mindrl.errors import ConfigError

    with pytest.raises(ConfigError, match=r"train.shard_optimizer=true .*backend=torch.*"
                                          r"train.fsdp=true"):
        load_config(None, ["backend=torch", "train.shard_optimizer=true"])
    cfg = load_config(None, ["backend=mindspore", "train.shard_optimizer=true"])
    assert cfg.train.shard_optimizer
