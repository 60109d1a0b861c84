"""Per-step training metrics, per-prompt pass-rate history, and the solve-rate plot.

``metrics.jsonl`` holds one JSON object per optimizer step. The required keys are
``step, depth, solve_all, solve_none, informative, reward_mean`` (ratios over all groups
sampled in the step, before filtering, as in Figure 2 left); the row also has the
stage, response length, dynamic-sampling counters and a ``per_depth`` breakdown.
``pass_rates.jsonl`` holds one row per sampled group: ``step, id, depth, pass_rate, ...``.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from composition_rl.io.files import dumps, read_jsonl
from composition_rl.jobs.train.dynamic_sampling import GroupRecord, StepSample

__all__ = ["REQUIRED_KEYS", "plot_solve_rates", "step_row", "truncate_after"]

REQUIRED_KEYS = ("step", "depth", "solve_all", "solve_none", "informative", "reward_mean")


def _ratios(groups: list[GroupRecord]) -> dict[str, float]:
    n = len(groups)
    if n == 0:
        return {"groups": 0, "solve_all": 0.0, "solve_none": 0.0, "informative": 0.0, "reward_mean": 0.0}
    kinds = defaultdict(int)
    for g in groups:
        kinds[g.kind] += 1
    completions = sum(len(g.scores) for g in groups)
    return {
        "groups": n,
        "solve_all": kinds["solve_all"] / n,
        "solve_none": kinds["solve_none"] / n,
        "informative": kinds["informative"] / n,
        "reward_mean": sum(sum(g.scores) for g in groups) / completions,
    }


def step_row(step: int, stage: str, depth: int, sample: StepSample, seconds: dict[str, float]) -> dict[str, Any]:
    """The metrics row of one step from what the dynamic sampler saw."""
    groups = sample.groups
    trained = sample.trained_groups
    row: dict[str, Any] = {"step": step, "stage": stage, "depth": depth, **_ratios(groups)}
    row["response_length"] = sum(g.mean_length for g in groups) / max(1, len(groups))
    # every completion generated this step, kept or dropped: the step's sampling compute
    row["generated_tokens"] = round(sum(g.mean_length * len(g.scores) for g in groups))
    row["reward_mean_trained"] = _ratios(trained)["reward_mean"]
    row["trained_groups"] = len(trained)
    row["trained_informative"] = sum(g.kind == "informative" for g in trained)
    row["rounds"] = sample.rounds
    row["generated"] = sample.generated
    row["bound_hit"] = sample.bound_hit
    row["filled_uninformative"] = sample.filled
    by_depth: dict[int, list[GroupRecord]] = defaultdict(list)
    for g in groups:
        by_depth[g.depth].append(g)
    row["per_depth"] = {str(d): _ratios(gs) for d, gs in sorted(by_depth.items())}
    row.update({k: round(v, 4) for k, v in seconds.items()})
    return row


def truncate_after(path: str | os.PathLike, step: int) -> int:
    """Drop the rows of ``path`` with ``step`` greater than ``step`` (for a resumed run).

    Returns the number of rows kept. A missing file is left missing.
    """
    path = Path(path)
    if not path.exists():
        return 0
    rows = [r for r in read_jsonl(path) if int(r["step"]) <= step]
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(dumps(r) + "\n")
    os.replace(tmp, path)
    return len(rows)


def solve_rates_figure(metrics_path: str | os.PathLike, transitions: list[dict[str, Any]] | None = None,
                       title: str | None = None, captions: tuple[str, str] | None = None):
    """The figure of :func:`plot_solve_rates` (a matplotlib ``Figure``; the caller closes it).

    The legend sits above the top panel, off the curves (at the right it covered the last
    stage's, depth 2 in the demo), and each curve has its colour in ``crl browse``
    (:data:`composition_rl.colours.COLOURS`).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from composition_rl.colours import COLOURS

    rows = list(read_jsonl(metrics_path))
    steps = [r["step"] for r in rows]
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(7, 6.4), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    for key in ("solve_all", "solve_none", "informative"):
        ax.plot(steps, [r[key] for r in rows], label=key, color=COLOURS[key], alpha=0.6 if key == "informative" else 1)
    ax.set_ylabel("ratio of sampled groups")
    ax.set_ylim(-0.02, 1.02)
    ax2.plot(steps, [r["reward_mean"] for r in rows], color=COLOURS["reward"], label="mean reward")
    ax2.set_ylabel("mean reward")
    ax2.set_xlabel("step")
    ax2.set_ylim(-0.02, 1.02)
    for t in transitions or []:
        for a in (ax, ax2):
            a.axvline(t["step"] + 0.5, color="gray", linestyle="--", linewidth=1)
        if t.get("to_stage"):
            ax.text(t["step"] + 0.7, 0.95, t["to_stage"], fontsize=8, color="gray", va="top")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False, fontsize=9)
    fig.suptitle(title or "solve_all / solve_none of sampled groups (before filtering)", fontsize=11)
    if captions:
        fig.set_size_inches(8, 7.6)
        for a, text in zip((ax, ax2), captions):
            a.text(0.0, -0.16 if a is ax else -0.42, text, transform=a.transAxes, fontsize=8.5, va="top",
                   wrap=True, color="#333333")
    fig.tight_layout()
    return fig


def plot_solve_rates(metrics_path: str | os.PathLike, out_png: str | os.PathLike,
                     transitions: list[dict[str, Any]] | None = None, title: str | None = None,
                     captions: tuple[str, str] | None = None) -> Path:
    """Plot solve_all and solve_none over steps (the shape of Figure 2, left).

    Stage transitions are drawn as dashed vertical lines labelled with the new stage.
    ``captions`` puts one line of plain words under each panel (what rose, what fell, why).
    """
    import matplotlib.pyplot as plt

    fig = solve_rates_figure(metrics_path, transitions, title, captions)
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
