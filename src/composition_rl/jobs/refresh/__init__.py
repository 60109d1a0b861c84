"""Refresh a stale prompt set for a checkpoint (``crl refresh``), and decontaminate a set
against benchmarks (``crl decontaminate``).

:mod:`~composition_rl.jobs.refresh.run` holds the stages, :mod:`~composition_rl.jobs.decontaminate`
the n-gram overlap measure, :mod:`~composition_rl.jobs.refresh.report` the report.
"""

from composition_rl.jobs.decontaminate import BenchmarkIndex, DecontamConfig
from composition_rl.jobs.refresh.run import RefreshConfig, RefreshResult, refresh_problems

__all__ = ["BenchmarkIndex", "DecontamConfig", "RefreshConfig", "RefreshResult", "refresh_problems"]
