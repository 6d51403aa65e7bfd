"""A large eval on a CPU says up front how long it may take, and its progress lines the time
left at the measured rate."""

from mindrl.eval.runner import CPU_WARN_SAMPLES, cpu_size_warning, progress_rate


def test_large_cpu_eval_warns_with_an_estimate():
    # the README's public-benchmark line: MATH-500 + GSM8K test (1,819 problems) x --n 4
    todo = (500 + 1319) * 4
    line = cpu_size_warning(todo, "cpu")
    assert line == ("[eval] warning: 7,276 samples to generate on a CPU: at the ~4 samples/s of "
                    "the built-in tiny model on 2 cores that is ~30 min, longer for a bigger "
                    "model; --limit N evaluates the first N problems of each benchmark")
    assert cpu_size_warning(todo, "cuda") is None
    assert cpu_size_warning(CPU_WARN_SAMPLES, "cpu") is None          # a user's 30-row file
    assert cpu_size_warning(30 * 4, "cpu") is None


def test_progress_shows_the_time_left():
    assert progress_rate(100, 7276, 25.0) == "4.0 samples/s, ~30 min left"   # 7176 / 4 s
    assert progress_rate(10, 50, 5.0) == "2.0 samples/s, ~20 s left"
    assert progress_rate(50, 50, 5.0) == "10.0 samples/s"
