"""logging.profile (per-phase step time in metrics.jsonl and curves.png) and
reward.overlap_chunks (scoring in this thread while a background thread generates)."""

import json
import threading
from pathlib import Path

import pytest

from mindrl.config.loader import load_config

BASE = [
    "model.path=builtin:tiny", "model.chat_template=none",
    "data.train_file=arithmetic:digits=2,ops=+", "data.max_val_samples=0",
    "rollout.n=4", "rollout.max_new_tokens=6", "train.prompts_per_step=4",
    "train.micro_batch_size=8", "train.lr=1e-3", "reward.num_workers=0",
    "reward.functions=[{name: 'trainer_helpers:parity_reward'}]", "logging.tensorboard=false",
    "logging.progress_bar=false", "checkpoint.save_final=false",
]


def test_pipelined_scores_in_this_thread_while_the_next_chunk_generates():
    from mindrl.trainer.overlap import chunk_bounds, pipelined

    assert chunk_bounds(5, 2) == [(0, 2), (2, 5)]
    assert chunk_bounds(2, 4) == [(0, 1), (1, 2)]
    scored_first = threading.Event()
    seen = []

    def generate(c, a, b):
        if c == 1:   # chunk 1 finishes only once chunk 0 was scored: needs the overlap
            assert scored_first.wait(20), "chunk 0 was not scored while chunk 1 generated"
        seen.append(("gen", c, threading.current_thread() is threading.main_thread()))
        return list(range(a, b))

    def score(a, b, ro):
        seen.append(("score", a, threading.current_thread() is threading.main_thread()))
        scored_first.set()
        return [x * 10 for x in ro]

    ro, sc, t_gen, t_score = pipelined(chunk_bounds(4, 2), generate, score)
    assert ro == [[0, 1], [2, 3]] and sc == [[0, 10], [20, 30]]
    assert ("gen", 0, False) in seen and ("score", 0, True) in seen and ("score", 2, True) in seen
    assert t_gen >= 0 and t_score >= 0


def test_pipelined_raises_a_generation_error_here():
    from mindrl.trainer.overlap import pipelined

    def generate(c, a, b):
        raise ValueError("engine broke")

    with pytest.raises(ValueError, match="engine broke"):
        pipelined([(0, 1)], generate, lambda a, b, ro: ro)


@pytest.mark.slow
def test_profiled_run_writes_every_phase_and_draws_it(tmp_path):
    from mindrl.trainer.profile import PHASES
    from mindrl.trainer.rl import RLTrainer

    cfg = load_config(None, BASE + [
        f"logging.output_dir={tmp_path}", "train.steps=3", "logging.profile=true",
        "logging.plot=true", "checkpoint.every=1", "checkpoint.keep_last=1",
        "reward.overlap_chunks=2", "train.padding_free=true",
        "train.max_tokens_per_micro_batch=64"])
    tr = RLTrainer(cfg)
    try:
        tr.fit()
    finally:
        tr.close()
    rows = [json.loads(x) for x in (Path(tmp_path) / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 3
    for r in rows:
        for k in PHASES:
            assert r[k] >= 0.0, (k, r[k])
        inside = sum(r[k] for k in PHASES if k not in ("time/other", "time/logging",
                                                      "time/checkpoint"))
        # phases never overlap nor count twice: together they fit in the step (time/other is
        # clamped at 0, so an overlap would hide there)
        assert inside <= r["time/step"] + 1e-6, (inside, r["time/step"])
        assert abs(inside + r["time/other"] - r["time/step"]) < 1e-6
        assert abs(r["time/update"] - r["time/train_fwd_bwd"] - r["time/optimizer"]
                   - r["time/batching"]) < 1e-6
        assert 0.0 <= r["profile/overhead_fraction"] < 1.0
        assert r["time/train_fwd_bwd"] > 0 and r["time/optimizer"] > 0
    # logging and the checkpoint after step k are reported in step k+1's row
    assert rows[0]["time/checkpoint"] == 0.0 and rows[1]["time/checkpoint"] > 0.0
    assert rows[1]["time/logging"] > 0.0
    assert (Path(tmp_path) / "curves.png").is_file()


def test_group_watcher_reports_a_group_once_all_its_samples_stopped():
    import torch

    from mindrl.rollout.finished import GroupWatcher

    got = []
    w = GroupWatcher(prompt_len=2, n=2, stop_ids=[9], on_group_done=lambda g, r: got.append((g, r)))
    scores = torch.zeros(4, 3)
    # 4 rows (groups 0 and 1), prompt [1, 1]; step 1: rows 0 and 2 stop
    w(torch.tensor([[1, 1, 9], [1, 1, 5], [1, 1, 9], [1, 1, 6]]), scores)
    assert got == []
    # step 2: row 1 stops -> group 0 is done; row 3 goes on (pad after a stop is ignored)
    out = w(torch.tensor([[1, 1, 9, 0], [1, 1, 5, 9], [1, 1, 9, 0], [1, 1, 6, 7]]), scores)
    assert out is scores and got == [(0, [[9], [5, 9]])]
    w(torch.tensor([[1, 1, 9, 0, 0], [1, 1, 5, 9, 0], [1, 1, 9, 0, 0], [1, 1, 6, 7, 8]]), scores)
    assert len(got) == 1                  # group 1 not done, group 0 not reported twice


@pytest.mark.slow
def test_overlapped_scores_equal_scores_after_generation(tmp_path):
    import numpy as np

    from mindrl.trainer.base import score_rollouts
    from mindrl.trainer.overlap import reports_groups, score_while_generating
    from mindrl.trainer.rl import RLTrainer

    cfg = load_config(None, BASE + [f"logging.output_dir={tmp_path}", "train.steps=1",
                                     "rollout.max_new_tokens=12", "logging.plot=false"])
    tr = RLTrainer(cfg)
    try:
        assert reports_groups(tr.engine)
        rows = tr._take_rows()
        prompt_ids = [tr.encode(r["problem"]) for r in rows]
        # a third of the vocabulary stops a sample: groups finish at different steps
        sp = tr.sampling(0)
        sp = type(sp)(**{**sp.__dict__, "stop_token_ids": tuple(range(0, 1024, 3))})
        ro, sc, _, _ = score_while_generating(tr, rows, prompt_ids, 0, sampling=sp)
        want_ro = tr.engine.generate(prompt_ids, sp)
        want = score_rollouts(tr.scorer, rows, want_ro)
    finally:
        tr.close()
    assert ro.response_ids == want_ro.response_ids
    assert sc.metrics["overlapped_groups"] >= 1
    np.testing.assert_array_equal(sc.total, want.total)
    for k in want.components:
        np.testing.assert_array_equal(sc.components[k], want.components[k])


@pytest.mark.slow
def test_overlap_groups_with_batch_invariant_scores_each_group_as_the_next_samples(tmp_path):
    """rollout.batch_invariant samples each group in its own call: with reward.overlap_groups
    every group is scored in the background while the next one samples; the samples and the
    scores are those of the run without overlap. An engine that cannot report groups (and no
    batch_invariant) raises instead of scoring afterwards without a word."""
    import numpy as np

    from mindrl.trainer.base import score_rollouts
    from mindrl.trainer.overlap import score_while_generating
    from mindrl.trainer.rl import RLTrainer

    cfg = load_config(None, BASE + [f"logging.output_dir={tmp_path}", "train.steps=1",
                                     "rollout.max_new_tokens=6", "logging.plot=false",
                                     "rollout.batch_invariant=true", "reward.overlap_groups=true"])
    tr = RLTrainer(cfg)
    real = tr.engine
    try:
        rows = tr._take_rows()
        prompt_ids = [tr.encode(r["problem"]) for r in rows]
        ro, sc, _, _ = score_while_generating(tr, rows, prompt_ids, 0)
        want_ro = tr.generate(prompt_ids, 0)
        want = score_rollouts(tr.scorer, rows, want_ro)
        assert sc.metrics["overlapped_groups"] == len(prompt_ids)      # all of them, early

        class WholeBatchEngine:              # the real engine without group reports
            def __init__(self, engine):
                self.engine = engine

            def generate(self, prompt_ids, sampling):
                return self.engine.generate(prompt_ids, sampling)

        tr.cfg = load_config(None, BASE + [f"logging.output_dir={tmp_path}",
                                           "reward.overlap_groups=true"])
        tr.engine = WholeBatchEngine(tr.engine)
        with pytest.raises(RuntimeError, match="reward.overlap_groups=true"):
            score_while_generating(tr, rows, prompt_ids, 0)
    finally:
        tr.engine = real
        tr.close()
    assert ro.response_ids == want_ro.response_ids
    np.testing.assert_array_equal(sc.total, want.total)
    for k in want.components:
        np.testing.assert_array_equal(sc.components[k], want.components[k])
