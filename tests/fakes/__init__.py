"""Offline stand-ins for external services used by the tests (and the LLM benchmark)."""
