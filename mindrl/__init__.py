"""mindrl: reinforcement-learning fine-tuning of reasoning LLMs, Ascend-first on MindSpore.

Importing :mod:`mindrl` is cheap: torch, mindspore and vllm are imported only inside the
backend or engine that needs them.
"""

__version__ = "0.1.0"
