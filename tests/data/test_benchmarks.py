"""Benchmark and prompt loaders on the real shared files, and their error messages."""

import json

import pytest

from mindrl.data import BENCHMARKS, DataError, load_benchmark, load_prompts
from mindrl.data.benchmarks import gsm8k_final_answer, number_to_str, strip_suffix_line


@pytest.fixture(scope="module")
def eval_dir(shared_data):
    return shared_data / "eval"


@pytest.mark.parametrize("name,rows", [("math500", 500), ("aime24", 30), ("aime25", 30),
                                       ("amc23", 40), ("gsm8k", 1319)])
def test_builtin_row_counts_and_shape(eval_dir, name, rows):
    data = load_benchmark(name, eval_dir)
    assert len(data) == rows
    assert all(set(r) == {"id", "problem", "answer"} for r in data)
    assert all(isinstance(r[k], str) and r[k] for r in data for k in r)
    assert len({r["id"] for r in data}) == rows


def test_normalised_answers_spot_checks(eval_dir, shared_data):
    aime24 = load_benchmark("aime24", eval_dir)
    raw = [json.loads(x) for x in (eval_dir / "aime24_test.simplerl.jsonl").open()]
    assert raw[7]["answer"] == "025" and aime24[7]["answer"] == "25"
    assert raw[15]["answer"] == "073" and aime24[15]["answer"] == "73"
    assert aime24[0]["id"] == "60" and aime24[0]["answer"] == "204"

    amc = load_benchmark("amc23", eval_dir)
    assert [r["answer"] for r in amc[:4]] == ["27", "36", "45", "3159"]
    assert amc[15]["answer"] == "-1"

    gsm = load_benchmark("gsm8k", eval_dir)
    assert gsm[0]["answer"] == "18"
    assert gsm[146]["answer"] == "2125" and gsm[201]["answer"] == "114200"
    assert "####" not in gsm[0]["problem"] and gsm[0]["problem"].startswith("Janet")

    aime25 = load_benchmark("aime25", eval_dir)
    assert aime25[0]["answer"] == "70" and aime25[0]["id"] == "0"
    assert all("Please reason step by step" not in r["problem"] for r in aime25)
    assert aime25[0]["problem"].endswith("divisor of $97_b.$")

    m500 = load_benchmark("math500", eval_dir)
    assert m500[0]["id"] == "test/precalculus/807.json"
    assert m500[0]["answer"] == "\\left( 3, \\frac{\\pi}{2} \\right)"


def test_parent_data_dir_and_limit(shared_data):
    rows = load_benchmark("gsm8k", shared_data, limit=3)   # .../data works as well as .../eval
    assert len(rows) == 3


def test_unknown_benchmark_lists_valid_names(eval_dir):
    with pytest.raises(DataError) as e:
        load_benchmark("aime2024", eval_dir)
    for name in BENCHMARKS.names():
        assert name in str(e.value)


def test_missing_file_names_the_file(tmp_path):
    with pytest.raises(DataError, match="math500_test.simplerl.jsonl"):
        load_benchmark("math500", tmp_path)
    with pytest.raises(DataError, match="nope.jsonl"):
        load_benchmark(str(tmp_path / "nope.jsonl"))


def test_missing_field_names_file_and_field(tmp_path):
    f = tmp_path / "mine.jsonl"
    f.write_text('{"q": "1+1?", "a": 2}\n{"q": "2+2?"}\n')
    rows = load_benchmark(str(f), problem_field="q", answer_field="a", limit=1)
    assert rows == [{"id": "0", "problem": "1+1?", "answer": "2"}]
    with pytest.raises(DataError) as e:
        load_benchmark(str(f), problem_field="q", answer_field="a")
    # the second line lacks the field: 1-based, as every data error counts
    assert "mine.jsonl: line 2: field 'a'" in str(e.value)
    with pytest.raises(DataError) as e:
        load_benchmark(str(f), problem_field="question", answer_field="a")
    assert "mine.jsonl" in str(e.value) and "'question'" in str(e.value)
    # builtin file with a field missing
    (tmp_path / "amc23_test.simplerl.jsonl").write_text('{"id": 0, "problem": "x"}\n')
    with pytest.raises(DataError) as e, pytest.warns(UserWarning, match="expected 40"):
        load_benchmark("amc23", tmp_path)
    assert "amc23_test.simplerl.jsonl" in str(e.value) and "'answer'" in str(e.value)


def test_local_file_defaults_and_gsm8k_style(tmp_path):
    f = tmp_path / "gsmlike.jsonl"
    f.write_text('{"question": "q1", "answer": "so\\n#### 1,234"}\n'
                 '{"question": "q2", "answer": 7.0}\n')
    rows = load_benchmark(str(f))
    assert [r["answer"] for r in rows] == ["1234", "7"]
    assert [r["problem"] for r in rows] == ["q1", "q2"]


def test_parquet_and_hf_need_their_packages(tmp_path):
    pq = tmp_path / "x.parquet"
    pq.write_bytes(b"PAR1")
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(DataError, match="pyarrow"):
            load_benchmark(str(pq))
    try:
        import datasets  # noqa: F401
    except ImportError:
        with pytest.raises(DataError, match="datasets"):
            load_benchmark("hf:HuggingFaceH4/MATH-500")


def test_number_normalisation():
    assert number_to_str("025") == "25"
    assert number_to_str(27.0) == "27" and number_to_str(0.5) == "0.5"
    assert number_to_str("1,234") == "1234" and number_to_str("-3") == "-3"
    assert number_to_str("\\frac{1}{2}") == "\\frac{1}{2}"
    assert number_to_str("2.50") == "2.5"
    assert gsm8k_final_answer("a\n#### 1,000") == "1000"
    assert gsm8k_final_answer("#### -5") == "-5"
    assert strip_suffix_line("P?\nPlease reason step by step, and put your final answer "
                             "within \\boxed{}.") == "P?"


def test_training_prompt_sets(shared_data):
    gsm = load_prompts("gsm8k", shared_data)
    assert len(gsm) == 7473
    assert gsm[0]["answer"] == "72" and gsm[0]["problem"].startswith("Natalia")
    assert gsm[0]["question"] == gsm[0]["problem"] and "####" in gsm[0]["answer_raw"]

    math = load_prompts("math_l3to5", shared_data, max_rows=50)
    assert len(math) == 50
    assert all(r["answer"] == r["gt_answer"] for r in math)
    assert {"level", "subject", "question"} <= set(math[0])

    cd = load_prompts("countdown", shared_data)
    assert len(cd) == 256
    assert cd[0]["nums"] == [30, 100, 93] and cd[0]["target"] == 23 and cd[0]["answer"] == "23"
    assert "[30, 100, 93]" in cd[0]["problem"] and cd[0]["input"] == "30,100,93"


def test_prompts_from_path_and_errors(tmp_path, shared_data):
    f = tmp_path / "p.jsonl"
    f.write_text('{"prompt": "a", "solution": "4", "extra": 1}\n')
    rows = load_prompts(str(f), prompt_field="prompt", answer_field="solution")
    assert rows == [{"prompt": "a", "solution": "4", "extra": 1, "problem": "a", "answer": "4"}]
    with pytest.raises(DataError, match="unknown prompt set 'gsm9k'.*countdown, gsm8k, gsm8k_test, math_l3to5"):
        load_prompts("gsm9k", shared_data)
    with pytest.raises(DataError, match="p.jsonl.*'nope'"):
        load_prompts(str(f), prompt_field="nope", answer_field="solution")
    with pytest.raises(DataError, match="gsm8k_train.openai.jsonl"):
        load_prompts("gsm8k", tmp_path)
