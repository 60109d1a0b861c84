"""Rollout backends: sampling a policy, ``generate(prompts, n, sampling)`` (transformers,
llama.cpp, vLLM offline, an OpenAI-compatible server). Chat backends for composing are in
:mod:`composition_rl.chat`.
"""
