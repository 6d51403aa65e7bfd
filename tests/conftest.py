"""Shared test set-up: one thread per process, quiet frameworks, paths to ../shared/data."""

import dataclasses
import os
from pathlib import Path

for _k, _v in {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "GLOG_v": "3",
    "VLLM_LOGGING_LEVEL": "ERROR",
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "RAY_AUTH_MODE": "disabled",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
}.items():
    os.environ.setdefault(_k, _v)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

# tests/isolation.py: the heavy modules run in child processes (the suite's memory footprint)
pytest_plugins = ["isolation"]

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("MINDRL_SHARED_DATA", REPO.parent / "shared" / "data"))
# The suite reads the public files through the product's own resolution
# (mindrl.data.location): $MINDRL_DATA_DIR points at ../shared/data when it is there. Without
# it, a test that needs a file the machine lacks is reported as skipped with this reason.
HAVE_SHARED_DATA = SHARED_DATA.is_dir()
if HAVE_SHARED_DATA:
    os.environ.setdefault("MINDRL_DATA_DIR", str(SHARED_DATA))
NO_DATA_REASON = (f"needs the public data files, not on this machine ({SHARED_DATA} is missing; "
                  f"`mindrl data fetch all`, then MINDRL_SHARED_DATA=~/.cache/mindrl/data)")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The public benchmark files beside the checkout (../shared/data)."""
    if not HAVE_SHARED_DATA:
        pytest.skip(NO_DATA_REASON)
    return SHARED_DATA


def _missing_data(excinfo) -> bool:
    """The failure is a data file this machine lacks: the product's MissingDataError, or an
    error that names a path under SHARED_DATA."""
    from mindrl.data.location import MissingDataError

    if excinfo.errisinstance(MissingDataError):
        return True
    text = str(excinfo.value)
    return str(SHARED_DATA) in text or "mindrl data fetch" in text


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if HAVE_SHARED_DATA or call.excinfo is None:
        return
    rep = outcome.get_result()
    if rep.failed and _missing_data(call.excinfo):
        import re

        text = str(call.excinfo.value)
        m = re.search(r"data file not found: (\S+)", text) or \
            re.search(re.escape(str(SHARED_DATA)) + r"/[\w./-]+", text)
        what = (m.group(1) if m and m.lastindex else m.group(0) if m else "a data file")
        rep.outcome = "skipped"
        rep.longrepr = (str(item.path), (item.location[1] or 0) + 1,
                        f"Skipped: {what}: {NO_DATA_REASON}")



@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    """The built-in tiny model, built once per session (into $MINDRL_TEST_CACHE if set)."""
    from mindrl.models.tiny import resolve_model_path

    cache = os.environ.get("MINDRL_TEST_CACHE") or str(tmp_path_factory.getbasetemp() / "cache")
    return resolve_model_path("builtin:tiny", cache_dir=cache)


@pytest.fixture(scope="session")
def tiny_model_dir(tiny_dir):
    return tiny_dir


@pytest.fixture(scope="session")
def tiny_judge_dir(tiny_dir):
    """``builtin:tiny-judge`` (hand-set weights, known verdicts), beside the session's tiny."""
    from mindrl.models.tiny import resolve_model_path

    return resolve_model_path("builtin:tiny-judge", cache_dir=str(Path(tiny_dir).parent))


def _make_cfg(model_path, **sections):
    """A RunConfig with ``sections`` = {"train": {...}, "algorithm": {...}} replaced."""
    from mindrl.config.schema import RunConfig

    cfg = RunConfig()
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, path=model_path))
    for name, fields in sections.items():
        if not isinstance(fields, dict):            # a top-level field (device, backend)
            cfg = dataclasses.replace(cfg, **{name: fields})
            continue
        cfg = dataclasses.replace(cfg, **{name: dataclasses.replace(getattr(cfg, name),
                                                                      **fields)})
    return cfg


def _fixed_batch(B=8, P=6, T=5, vocab=1000, seed=0, advantage=1.0):
    """A TrainBatch of random tokens with ragged prompts/responses and constant advantages."""
    from mindrl.types import TrainBatch, pad_token_batch

    rng = np.random.default_rng(seed)
    prompts = [rng.integers(3, vocab, rng.integers(2, P + 1)).tolist() for _ in range(B)]
    responses = [rng.integers(3, vocab, rng.integers(1, T + 1)).tolist() for _ in range(B)]
    tokens = pad_token_batch(prompts, responses, pad_id=0, prompt_len=P, response_len=T)
    adv = np.full((B, T), advantage, np.float32) * tokens.response_mask
    return TrainBatch(tokens, adv, np.zeros((B, T), np.float32))


@pytest.fixture(scope="session")
def make_cfg():
    return _make_cfg


@pytest.fixture(scope="session")
def fixed_batch():
    return _fixed_batch


def _forward_logprobs(model, rollouts, temperature, trunc=None):
    """Reference for the engines: one plain transformers forward of prompt+response,
    log_softmax(logits / T), gathered at the sampled tokens -> (B, T) numpy; with ``trunc`` (an
    ``algorithms.truncation.Truncation``) the log-probs under its top-k / min-p / top-p, by the
    NumPy reference."""
    import torch

    from mindrl.types import pad_token_batch

    b = pad_token_batch(rollouts.prompt_ids, rollouts.response_ids, pad_id=0)
    ids = torch.from_numpy(b.input_ids)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=torch.from_numpy(b.attention_mask),
                       position_ids=torch.from_numpy(b.position_ids)).logits
    P, T = b.prompt_len, b.response_len
    z = logits[:, P - 1:P - 1 + T].float() / temperature
    if trunc is not None:
        from algorithms.truncation import truncated_token_logp

        return truncated_token_logp(z.numpy(), b.input_ids[:, P:], trunc)
    lp = torch.log_softmax(z, -1)
    return lp.gather(-1, ids[:, P:].unsqueeze(-1)).squeeze(-1).numpy()


@pytest.fixture(scope="session")
def forward_logprobs():
    return _forward_logprobs


@pytest.fixture
def ray_two_nodes():
    """A Ray cluster of two nodes (two raylets on this machine, 1 CPU each)."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1,
                                                             "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    yield cluster
    cluster.shutdown()


# A real run of the RL loop, as small as it gets: builtin:tiny, 2 steps, a checkpoint after each.
TINY_RUN_OVERRIDES = [
    "model.path=builtin:tiny", "train.steps=2", "train.prompts_per_step=2", "rollout.n=2",
    "rollout.max_new_tokens=4", "validation.every=0", "checkpoint.every=1",
    "checkpoint.save_final=true", "logging.plot=false", "logging.tensorboard=false",
    "logging.progress_bar=false", "reward.num_workers=0", "logging.save_rollouts=1",
]


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, tiny_dir):
    """RUN_DIR of a 2-step ``mindrl train grpo_tiny_demo`` on builtin:tiny (checkpoints
    step_000001 and step_000002), run once per session through the command itself."""
    from mindrl.cli import main

    run = tmp_path_factory.mktemp("tiny_run") / "run"
    cache = str(Path(tiny_dir).parent)
    old = os.environ.get("MINDRL_CACHE")
    os.environ["MINDRL_CACHE"] = cache          # builtin:tiny = the session's tiny_dir
    try:
        rc = main(["train", "grpo_tiny_demo"] + TINY_RUN_OVERRIDES
                  + [f"logging.output_dir={run}"])
    finally:
        if old is None:
            os.environ.pop("MINDRL_CACHE", None)
        else:
            os.environ["MINDRL_CACHE"] = old
    assert rc == 0
    return run


# Memory footprint, per test: MINDRL_RSS_LOG=path appends one JSON line per test (its node id,
# the process RSS before and after it, and the peak RSS while it ran, in MB). The peak is reset
# before each test through /proc/self/clear_refs, so it is that test's own; off by default,
# since the reset also lowers the process's ru_maxrss that a caller may read.
_RSS_LOG = os.environ.get("MINDRL_RSS_LOG")


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


if _RSS_LOG:
    import json as _json

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass
        before = _status_mb("VmRSS")
        yield
        with open(_RSS_LOG, "a") as f:
            f.write(_json.dumps({"test": item.nodeid, "pid": os.getpid(),
                                 "before_mb": round(before),
                                 "after_mb": round(_status_mb("VmRSS")),
                                 "peak_mb": round(_status_mb("VmHWM"))}) + "\n")


@pytest.fixture(scope="session")
def head_memory_bench():
    """bench/head_memory.py as a module: its ``measure`` runs one row's log-probs + backward in
    a fresh process and returns the peak RSS it added."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "bench" / "head_memory.py"
    spec = importlib.util.spec_from_file_location("head_memory", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
