"""``mindrl eval`` before any engine starts: the first problem of each benchmark printed as the
engine will see it, and gold answers the grader cannot use stopped (built-in sets included)."""

import json
import warnings

import pytest

from mindrl.data.io import DataError
from mindrl.eval.runner import run_eval
from mindrl.eval.settings import EvalSettings


def gsm8k_dir(tmp_path, answers):
    """A stand-in for the built-in GSM8K file (question, rationale ending in '#### N')."""
    d = tmp_path / "eval"
    d.mkdir()
    rows = [{"question": f"Tom has {i} apples and buys 2 more. How many now?",
             "answer": f"He has {i} + 2 apples.\n#### {a}"} for i, a in enumerate(answers)]
    (d / "gsm8k_test.openai.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def settings(model, data_dir, tmp_path, **kw):
    base = dict(model=model, benchmarks=["gsm8k"], n=1, max_new_tokens=4, template="none",
                data_dir=str(data_dir), output_dir=str(tmp_path / "run"), plot=False)
    base.update(kw)
    return EvalSettings(**base)


class Engine:
    def __init__(self, spec, log):
        self.lines_before = list(log)

    def generate(self, prompt_ids, sampling):
        raise RuntimeError("stop here: only the start matters")


def test_eval_prints_the_first_example_before_the_engine(tiny_model_dir, tmp_path):
    data = gsm8k_dir(tmp_path, ["1,002", "3", "4"])
    log, engines = [], []

    def factory(spec):
        engines.append(Engine(spec, log))
        return engines[-1]

    with warnings.catch_warnings(), pytest.raises(RuntimeError, match="stop here"):
        warnings.simplefilter("ignore")      # 3 rows, not GSM8K's 1319
        run_eval(settings(tiny_model_dir, data, tmp_path), engine_factory=factory,
                 log=log.append)
    before = "\n".join(engines[0].lines_before)
    assert "[eval] gsm8k: 3 problems; the first as the engine sees it:" in before
    assert "  problem: Tom has 0 apples and buys 2 more. How many now?" in before
    assert "  gold answer: 1002  (id 0)" in before          # '#### 1,002' normalised
    # template 'none' renders the problem as it is
    assert "  prompt after template 'none': Tom has 0 apples and buys 2 more. How many now?" \
        in before


def test_eval_stops_on_unusable_gold_answers_of_a_builtin(tiny_model_dir, tmp_path):
    data = gsm8k_dir(tmp_path, ["", "", "5"])               # '#### ' with nothing after

    def never(spec):
        raise AssertionError("the engine must not start")

    with warnings.catch_warnings(), pytest.raises(DataError) as err:
        warnings.simplefilter("ignore")
        run_eval(settings(tiny_model_dir, data, tmp_path), engine_factory=never)
    msg = str(err.value)
    assert "gsm8k (gsm8k_test.openai.jsonl): field 'answer'" in msg
    assert "cannot score 2 of the first 3 gold answers" in msg
