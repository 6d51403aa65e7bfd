"""mindrl's rewards and advantage estimators inside other RL frameworks.

  - ``mindrl.integrations.verl``: ``compute_score`` for ``custom_reward_function``, a reward
    manager that scores through mindrl's pool, and ``mindrl_*`` advantage estimators.
  - ``mindrl.integrations.openrlhf_reward``: a ``--remote_rm_url`` file (``reward_func``);
    the HTTP protocol is served by ``mindrl serve-rewards`` at ``/openrlhf``.
  - ``mindrl.integrations.trl``: reward functions with TRL's ``reward_funcs`` signature.
  - ``mindrl.integrations.mindspeed_rl``: MindSpeed-RL rule-reward registration (Ascend only).

Nothing here imports a framework at package import; each module imports its own on use.
"""
