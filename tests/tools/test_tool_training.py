"""One RL step with tools on (torch and MindSpore backends, tiny model, real sandbox): the
trainer's hook applies the tool mask to the batch the backend trains on, and the tool metrics
are logged.

The tiny untrained model never writes a code block by itself, so its first turn is forced: a
wrapper returns a fixed call (as ids, one character at a time) and every later turn comes from
the real native engine."""

import json
from pathlib import Path

import numpy as np
import pytest

from mindrl.config.loader import load_config

BASE = [
    "model.path=builtin:tiny", "model.chat_template=none",
    "data.train_file=arithmetic:digits=2,ops=+", "data.max_val_samples=4",
    "rollout.n=2", "rollout.max_new_tokens=48", "train.prompts_per_step=2",
    "train.micro_batch_size=8", "reward.num_workers=0", "reward.functions=[{name: arithmetic}]",
    "logging.tensorboard=false", "logging.progress_bar=false", "logging.plot=false",
    "checkpoint.save_final=false", "train.steps=1", "validation.every=1",
    "tools.enabled=true", "rollout.max_turns=2", "tools.sandbox.timeout_s=5",
]


class ForcedFirstTurn:
    def __init__(self, engine, tok, code):
        self.engine, self.tok = engine, tok
        self.ids = [i for c in f"```python\n{code}\n```" for i in tok.encode(
            c, add_special_tokens=False)]
        self.shared = getattr(engine, "shared", True)
        self.resumed = 0                  # rows that came back for a turn after a tool output

    def generate(self, prompt_ids, sampling):
        from mindrl.types import Rollouts

        if any("```output" in self.tok.decode(p) for p in prompt_ids):
            self.resumed += len(prompt_ids)
            return self.engine.generate(prompt_ids, sampling)
        rows = [list(p) for p in prompt_ids for _ in range(sampling.n)]
        return Rollouts(rows, [list(self.ids) for _ in rows],
                        [np.full(len(self.ids), -0.5, np.float32) for _ in rows],
                        ["stop"] * len(rows), np.repeat(np.arange(len(prompt_ids)), sampling.n))

    def __getattr__(self, name):
        return getattr(self.engine, name)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "mindspore"])
def test_one_step_with_tools_masks_tool_output(tmp_path, capsys, backend):
    from mindrl.trainer.rl import RLTrainer

    cfg = load_config(None, BASE + [f"logging.output_dir={tmp_path}", f"backend={backend}"])
    tr = RLTrainer(cfg)
    tr.engine = ForcedFirstTurn(tr.engine, tr.tokenizer, "print(6 * 7)")
    seen = []
    real_step = tr.backend.train_step

    def spy(micro, norm):
        seen.extend(micro)
        return real_step(micro, norm)

    tr.backend.train_step = spy
    last = tr.fit()
    tr.close()
    assert "sandbox isolation:" in capsys.readouterr().out
    assert last["tools/calls_per_sample"] == 1.0 and last["tools/errors"] == 0
    assert last["tools/turns_mean"] == 2.0 and np.isfinite(last["loss"])
    out = tr.tokenizer.encode("\n```output\n42\n```\n", add_special_tokens=False)
    n_call = len(tr.engine.ids)
    for mb in seen:
        P = mb.tokens.prompt_len
        for i in range(len(mb)):
            resp = mb.tokens.input_ids[i, P:P + n_call + len(out)].tolist()
            assert resp == tr.engine.ids + out
            m = mb.tokens.response_mask[i]
            assert m[:n_call].all() and not m[n_call:n_call + len(out)].any()
            assert not mb.advantages[i, n_call:n_call + len(out)].any()
    rows = [json.loads(x) for x in (Path(tmp_path) / "metrics.jsonl").read_text().splitlines()]
    assert [r["tools/calls_per_sample"] for r in rows if "tools/calls_per_sample" in r] == [1.0]
    # validation ran through the loop too (its calls are not counted in the step's metrics)
    assert any("val/accuracy" in r for r in rows)
    assert tr._tool_metric_parts == []
    assert tr.engine.resumed == 4 + 4          # 2 prompts x 2 samples, then 4 validation rows
