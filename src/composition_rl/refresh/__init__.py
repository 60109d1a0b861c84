"""Refresh a stale prompt set for a checkpoint (``crl refresh``), and decontaminate a set
against benchmarks (``crl decontaminate``).

:mod:`~composition_rl.refresh.pipeline` holds the stages, :mod:`~composition_rl.refresh.decontaminate`
the n-gram overlap measure, :mod:`~composition_rl.refresh.report` the report.
"""

from composition_rl.refresh.decontaminate import BenchmarkIndex, DecontamConfig
from composition_rl.refresh.pipeline import RefreshConfig, RefreshResult, refresh_problems

__all__ = ["BenchmarkIndex", "DecontamConfig", "RefreshConfig", "RefreshResult", "refresh_problems"]
