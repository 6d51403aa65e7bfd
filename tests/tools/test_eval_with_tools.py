"""`mindrl eval --tools python`: the same run and metrics, with the multi-turn loop in between.

The "model" is scripted so that it can only answer with the tool: turn 1 writes a program, turn 2
copies the number from the ```output block it was given into \\boxed{}. With tools on it scores
1.0; with tools off there is no output block and it scores 0.0."""

import json
import re

import numpy as np
import pytest

from mindrl.eval.runner import run_eval
from mindrl.eval.settings import EvalSettings
from mindrl.types import Rollouts


class ToolUser:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def ids(self, text):
        return [i for c in text for i in self.tokenizer.encode(c, add_special_tokens=False)]

    def generate(self, prompt_ids, sampling):
        rows = [list(p) for p in prompt_ids for _ in range(sampling.n)]
        out = []
        for ctx in rows:
            text = self.tokenizer.decode(ctx)
            m = re.findall(r"```output\n(.*?)\n```", text, re.S)
            if m:
                out.append(self.ids(f"So it is \\boxed{{{m[-1].strip()}}}.") +
                           [self.tokenizer.eos_token_id])
            else:
                a, b = re.findall(r"(\d+)\*(\d+)", text)[-1]
                out.append(self.ids(f"```python\nprint({a}*{b})\n```\nI guess \\boxed{{0}}") +
                           [self.tokenizer.eos_token_id])
        return Rollouts(rows, out, [np.zeros(len(o), np.float32) for o in out],
                        ["stop"] * len(rows), np.repeat(np.arange(len(prompt_ids)), sampling.n))


def _run(tmp_path, tiny_dir, tools):
    from transformers import AutoTokenizer

    data = tmp_path / "mul.jsonl"
    data.write_text("".join(json.dumps({"problem": f"What is {a}*{b}?", "answer": str(a * b)})
                            + "\n" for a, b in [(1234, 5678), (4321, 8765)]))
    tok = AutoTokenizer.from_pretrained(tiny_dir, local_files_only=True)
    s = EvalSettings(model=tiny_dir, benchmarks=[str(data)], n=2, temperature=1.0,
                     max_new_tokens=200, template="none", tools=tools,
                     output_dir=str(tmp_path / f"run_{bool(tools)}"), plot=False,
                     grade_workers=0)
    return run_eval(s, engine_factory=lambda spec: ToolUser(tok), log=lambda m: None,
                    echo_table=False)


@pytest.mark.slow
def test_eval_with_tools_scores_what_the_tool_computed(tmp_path, tiny_dir):
    on = _run(tmp_path, tiny_dir, "python")
    recs = [json.loads(x) for x in (on.run_dir / "samples.jsonl").read_text().splitlines()]
    assert sorted(r["extracted"] for r in recs) == ["37873565"] * 2 + ["7006652"] * 2
    assert all(r["score"] == 1.0 for r in recs)
    settings = json.loads((on.run_dir / "settings.json").read_text())
    assert settings["generation"]["tools"]["names"] == "python"
    off = _run(tmp_path, tiny_dir, "")
    recs = [json.loads(x) for x in (off.run_dir / "samples.jsonl").read_text().splitlines()]
    assert all(r["score"] == 0.0 for r in recs)
    assert "tools" not in json.loads((off.run_dir / "settings.json").read_text())["generation"]
