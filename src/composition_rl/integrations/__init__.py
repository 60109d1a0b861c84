"""Thin adapters to the trainers; each module imports its engine only when used.

- :mod:`.trl`: :func:`~composition_rl.integrations.trl.make_reward_fn`, a reward function for
  TRL's ``GRPOTrainer``;
- :mod:`.verl`: :func:`~composition_rl.integrations.verl.compute_score`, verl's custom reward
  (``reward.custom_reward_function.path=pkg://composition_rl.integrations.verl``);
- :mod:`.verl_recipe`: the launch recipe with the paper's settings (``crl verl-recipe``);
- :mod:`.verl_online`: the online curriculum inside verl's trainer (imports verl and torch).

Both rewards are :func:`composition_rl.grading.reward.score_completions`, the function
``crl train`` uses too; ``composition_rl.make_reward_fn`` and ``composition_rl.compute_score``
are the same functions.

>>> from composition_rl.integrations.trl import make_reward_fn
>>> make_reward_fn()(prompts=["..."], completions=[r"\\boxed{4}"], answer=["4"])
[1.0]
"""
