"""The reproduction's statistics: Student-t intervals across seeds on known inputs, verdicts,
and the matched-compute bookkeeping (which snapshot of the continue arm matches an arm)."""

from __future__ import annotations

import json
import math

import pytest

from composition_rl.jobs.reproduce.config import ReproduceConfig
from composition_rl.jobs.reproduce.report import verdict
from composition_rl.jobs.reproduce.seed import continue_steps, eval_targets
from composition_rl.stats import mean_interval, t_quantile


@pytest.mark.parametrize(
    "df, q975",  # two-sided 95% critical values from any t table
    [(1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (9, 2.262), (29, 2.045)],
)
def test_t_quantile_matches_the_table(df, q975):
    assert t_quantile(0.975, df) == pytest.approx(q975, abs=5e-4)
    assert t_quantile(0.025, df) == pytest.approx(-q975, abs=5e-4)


def test_mean_interval_on_known_inputs():
    m, (lo, hi) = mean_interval([1.0, 2.0, 3.0])  # sd 1, n 3: half-width 4.303 / sqrt(3)
    assert m == 2.0
    assert (lo, hi) == pytest.approx((2 - 4.3027 / math.sqrt(3), 2 + 4.3027 / math.sqrt(3)), abs=1e-3)
    m, (lo, hi) = mean_interval([0.3, 0.3, 0.3])
    assert (m, lo, hi) == pytest.approx((0.3, 0.3, 0.3))
    assert mean_interval([0.25]) == (0.25, None)
    m, (lo, hi) = mean_interval([0.1, 0.2, 0.3, 0.4], confidence=0.9)  # t(0.95, 3) = 2.353
    assert hi - m == pytest.approx(2.3534 * math.sqrt(0.05 / 3) / 2, abs=1e-3)  # s = sqrt(0.05/3)
    with pytest.raises(ValueError):
        mean_interval([])


def test_verdicts_follow_the_interval_not_the_mean():
    assert verdict({"mean": 0.05, "ci95": [0.001, 0.1]}) == "holds (+)"
    assert verdict({"mean": 0.2, "ci95": [-0.001, 0.4]}) == "not shown"
    assert verdict({"mean": -0.2, "ci95": [-0.4, -0.01]}) == "holds (-)"


def test_continue_arm_runs_long_enough_for_the_largest_composed_budget():
    cfg = ReproduceConfig(arm_steps=30, snapshot_every=5, curve_every=10, max_continue_factor=4)
    d1 = [{"generated_tokens": 900}] * 5 + [{"generated_tokens": 1000}] * 10
    # 1.1 * 61,000 / 1,000 = 67.1 -> 70 (next snapshot)
    assert continue_steps(cfg, d1, [30_000, 61_000]) == 70
    assert continue_steps(cfg, d1, [10_000]) == 30  # never fewer than arm_steps
    assert continue_steps(cfg, d1, [10**9]) == 120  # capped at 4 x arm_steps


def test_eval_targets_pick_the_snapshot_closest_in_generated_tokens(tmp_path):
    cfg = ReproduceConfig(seeds=(0,), arms=("continue", "depth2", "mix"), arm_steps=2, snapshot_every=1,
                          curve_every=1)
    d = tmp_path / "seed_0" / "arms"
    (d / "continue" / "checkpoints").mkdir(parents=True)
    for s in (1, 2, 3, 4, 5):
        (d / "continue" / "checkpoints" / f"checkpoint-{s}").mkdir()
    rows = [{"step": s, "generated_tokens": 100} for s in range(1, 6)]  # cumulative 100..500
    (d / "continue" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for arm, per_step in (("depth2", 190), ("mix", 140)):  # totals 380 and 280 over 2 steps
        (d / arm).mkdir()
        (d / arm / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "generated_tokens": per_step}) + "\n"
                                                       for s in (1, 2)))
    t = eval_targets(cfg, tmp_path, 0, "continue")
    assert t["continue"][0].name == "checkpoint-2" and t["continue"][1]["tokens"] == 200
    assert t["continue@tokens:depth2"][0].name == "checkpoint-4"  # 400 is closest to 380
    assert t["continue@tokens:depth2"][1] == {"steps": 4, "tokens": 400, "target_tokens": 380}
    assert t["continue@tokens:mix"][0].name == "checkpoint-3"  # 300 is closest to 280
    assert eval_targets(cfg, tmp_path, 0, "start")["start"][0].parts[-2:] == ("d1", "final")


def test_config_validation_names_the_bad_values():
    with pytest.raises(ValueError, match="arms"):
        ReproduceConfig(arms=("depth2",))
    with pytest.raises(ValueError, match="workers=0"):
        ReproduceConfig(workers=0)
    assert ReproduceConfig.quick(seeds=(4,)).seeds == (4,)


def test_online_arm_is_off_by_default_and_arms_can_be_added_to_a_finished_run(tmp_path):
    from composition_rl.jobs.reproduce.run import Job, _check_config, _stale

    assert "online" not in ReproduceConfig().arms
    base = ReproduceConfig(arms=("continue", "depth2"))
    _check_config(tmp_path, base)
    more = ReproduceConfig(arms=("continue", "depth2", "online"))
    _check_config(tmp_path, more)  # adding an arm reuses the run
    assert json.loads((tmp_path / "config.json").read_text())["arms"] == ["continue", "depth2", "online"]
    with pytest.raises(ValueError, match=r"arms: \['continue', 'depth2', 'online'\] -> \['continue', 'depth2'\]"):
        _check_config(tmp_path, base)  # dropping one is another run
    with pytest.raises(ValueError, match="eval_n"):
        _check_config(tmp_path, ReproduceConfig(arms=("continue", "depth2", "online"), eval_n=3))
    # the continue arm's evaluation lacks its matched-token snapshot for the new arm: it reruns
    done = {"continue": {}, "continue@tokens:depth2": {}}
    assert _stale(more, Job(0, "eval", "continue"), done)
    assert not _stale(base, Job(0, "eval", "continue"), done)
    assert not _stale(more, Job(0, "eval", "depth2"), {})


def test_an_interrupted_reproduction_leaves_no_worker_running():
    """A job runs for minutes; on Ctrl-C / SIGTERM / a failed job the executor must end its workers,
    not leave them training in the background after the command has exited."""
    import multiprocessing
    import time
    from concurrent.futures import ProcessPoolExecutor

    from composition_rl.jobs.reproduce.run import _stop_workers

    pool = ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn"))
    futures = [pool.submit(time.sleep, 120) for _ in range(3)]
    while not any(f.running() for f in futures):
        time.sleep(0.05)
    procs = list(pool._processes.values())
    t0 = time.monotonic()
    _stop_workers(pool, grace_s=2.0)
    assert time.monotonic() - t0 < 10
    assert procs and not any(p.is_alive() for p in procs)
