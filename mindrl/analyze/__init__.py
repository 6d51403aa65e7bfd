"""Analysis tools with pictures a person can read (``mindrl analyze``, ``mindrl show-rollouts``).

- :mod:`mindrl.analyze.rollouts`: read the rollouts a run saved (``logging.save_rollouts``) and
  print them for a terminal;
- :mod:`mindrl.analyze.logprobs`: position-wise low quantiles of log-probs under the initial
  policy across RL steps (or under checkpoints before/after SFT);
- :mod:`mindrl.analyze.lengths`: response lengths of eval runs, correct / wrong / truncated;
- :mod:`mindrl.analyze.plots`: their matplotlib (Agg) figures.
"""
