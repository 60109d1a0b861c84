"""Chat backends: the models that write compositions and MagicBeanStalk's problems
(``await backend.chat(ChatRequest)``; OpenAI-compatible endpoints, local transformers, a
response cache). The policy's rollouts are in :mod:`composition_rl.rollout`.
"""
