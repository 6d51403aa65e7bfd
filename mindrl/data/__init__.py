"""Prompt datasets, evaluation benchmarks and chat templates (no framework imports)."""

from mindrl.data.benchmarks import BENCHMARKS, benchmark_name, load_benchmark
from mindrl.data.io import DataError, read_rows
from mindrl.data.prompts import PROMPT_SETS, load_prompts
from mindrl.data.templates import TEMPLATES, render_prompt

__all__ = ["BENCHMARKS", "DataError", "PROMPT_SETS", "TEMPLATES", "benchmark_name",
           "load_benchmark", "load_prompts", "read_rows", "render_prompt"]
