"""Where the built-in data files are read from: data.data_dir, then $MINDRL_DATA_DIR, then the
user cache ($XDG_CACHE_HOME/mindrl/data), then a shared/data folder beside the checkout."""

import json

import pytest

from mindrl.config.schema import RunConfig
from mindrl import paths as location
from mindrl.data.benchmarks import load_benchmark
from mindrl.data.location import MissingDataError, find_data_file, user_data_dir
from mindrl.data.prompts import load_prompts


def _gsm8k(root, answers):
    """A GSM8K-shaped test file under ROOT/eval with one row per answer."""
    path = root / "eval" / "gsm8k_test.openai.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps({"question": f"q{i}", "answer": f"so\n#### {a}"}) + "\n"
                            for i, a in enumerate(answers)))
    return path


@pytest.fixture
def no_checkout(monkeypatch, tmp_path):
    """No development copy beside the checkout, no environment variable, an empty cache."""
    monkeypatch.setattr(location, "CHECKOUT_DATA_DIR", tmp_path / "no-checkout")
    monkeypatch.delenv("MINDRL_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path


def test_user_cache_honours_xdg(no_checkout, monkeypatch):
    assert user_data_dir() == no_checkout / "xdg" / "mindrl" / "data"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(no_checkout / "home"))
    assert user_data_dir() == no_checkout / "home" / ".cache" / "mindrl" / "data"


@pytest.mark.filterwarnings("ignore:.*rows, expected")
def test_order_config_then_env_then_cache(no_checkout, monkeypatch):
    cache = _gsm8k(no_checkout / "xdg" / "mindrl" / "data", [1, 2])
    env = _gsm8k(no_checkout / "env", [3])
    own = _gsm8k(no_checkout / "own", [4, 5, 6])
    # the training config's default data_dir reaches the cache, then the variable
    default = RunConfig().data.data_dir
    assert find_data_file("eval/gsm8k_test.openai.jsonl", default) == cache
    assert [r["answer"] for r in load_prompts("gsm8k_test", data_dir=default)] == ["1", "2"]
    monkeypatch.setenv("MINDRL_DATA_DIR", str(no_checkout / "env"))
    assert [r["answer"] for r in load_prompts("gsm8k_test", data_dir=default)] == ["3"]
    assert [r["answer"] for r in load_benchmark("gsm8k", default)] == ["3"]
    # an explicit directory wins; .../data/eval works as well as .../data
    assert [r["answer"] for r in load_benchmark("gsm8k", str(own.parent.parent))] == \
        ["4", "5", "6"]
    assert find_data_file("eval/gsm8k_test.openai.jsonl", str(own.parent)) == own
    assert env.is_file()


@pytest.mark.filterwarnings("ignore:.*rows, expected")
def test_checkout_copy_is_the_last_resort(no_checkout, monkeypatch):
    checkout = _gsm8k(no_checkout / "checkout", [7])
    monkeypatch.setattr(location, "CHECKOUT_DATA_DIR", no_checkout / "checkout")
    assert [r["answer"] for r in load_benchmark("gsm8k")] == ["7"]
    cache = _gsm8k(no_checkout / "xdg" / "mindrl" / "data", [8])
    assert find_data_file("eval/gsm8k_test.openai.jsonl") == cache
    assert checkout.is_file()


def test_missing_benchmark_names_the_fetch_command(no_checkout):
    with pytest.raises(MissingDataError) as e:
        load_benchmark("math500")
    msg = str(e.value)
    assert "\n" not in msg
    assert "`mindrl data fetch math500`" in msg
    assert str(no_checkout / "xdg" / "mindrl" / "data") in msg
    with pytest.raises(MissingDataError, match=r"mindrl data fetch gsm8k_train"):
        load_prompts("gsm8k", data_dir="")
