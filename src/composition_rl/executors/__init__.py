"""Executors: where ``crl profile`` and ``crl eval`` sample and grade (see :mod:`.base`).

Importing this package is light: an executor's engine (Ray) is imported when it is built.
"""

from composition_rl.executors.base import (
    EXECUTORS,
    BackendSpec,
    Executor,
    ExecutorConfig,
    SampleJob,
    Scored,
    build_executor,
    check_completions,
    chunks_of,
)
from composition_rl.executors.local import LocalExecutor, as_executor

__all__ = [
    "EXECUTORS",
    "BackendSpec",
    "Executor",
    "ExecutorConfig",
    "LocalExecutor",
    "SampleJob",
    "Scored",
    "as_executor",
    "build_executor",
    "check_completions",
    "chunks_of",
]
