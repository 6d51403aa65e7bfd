"""Data parallel under msrun: 2 CPU workers on halves of a global batch equal 1 process (RL
train steps, then an SFT step)."""

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_msrun_two_workers_equal_one_process(hf_tied, tmp_path):
    bindir = Path(sys.executable).parent
    msrun = bindir / "msrun"
    if not msrun.exists() and shutil.which("msrun") is None:
        pytest.skip("msrun not installed")
    directory, _ = hf_tied
    out = tmp_path / "dp.npz"
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=os.pathsep.join([str(HERE.parents[2]),
                                           os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1", GLOG_v="3")
    cmd = [str(msrun if msrun.exists() else "msrun"), "--worker_num", "2",
           "--local_worker_num", "2", "--master_port", str(_free_port()),
           "--log_dir", str(tmp_path / "logs"), "--join", "True",
           str(HERE / "msrun_dp_worker.py"), directory, str(out)]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=240)
    logs = "".join(p.read_text()[-3000:] for p in sorted((tmp_path / "logs").glob("*.log")))
    assert proc.returncode == 0 and out.is_file(), proc.stdout[-2000:] + logs

    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.types import LossNormalizers

    be = MindSporeBackend(ms_config("train.lr=1e-2", "train.grad_clip=0.5"),
                          model_path=directory)
    batch = random_batch(np.random.default_rng(7), 8)
    norm = LossNormalizers(float(batch.tokens.response_mask.sum()), 8.0, 16.0)
    for _ in range(2):
        metrics = be.train_step(split(batch, 4), norm)
    sft = be.sft_step([mb.tokens for mb in split(batch, 4)], norm)
    dp = np.load(out)
    assert float(dp["grad_norm"]) == pytest.approx(metrics["grad_norm"], rel=1e-4)
    assert float(dp["loss"]) == pytest.approx(metrics["loss"], rel=1e-4, abs=1e-6)
    assert float(dp["sft_grad_norm"]) == pytest.approx(sft["grad_norm"], rel=1e-4)
    assert float(dp["sft_loss"]) == pytest.approx(sft["loss"], rel=1e-4)
    assert float(dp["sft_nll"]) == pytest.approx(sft["nll"], rel=1e-4)
    for name, arr in be.named_weights():
        np.testing.assert_allclose(dp[name], arr, atol=1e-5, err_msg=name)
