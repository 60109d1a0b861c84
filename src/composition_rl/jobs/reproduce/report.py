"""Aggregate a reproduction's jobs into results.json, report.md and PNG figures.

Every number comes from the job results and the logs under ``seed_S/``; across seeds a
difference is reported as its mean with a Student-t 95% interval (``stats.mean_interval``),
and an effect is said to hold only when that interval excludes zero.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from composition_rl.io.files import atomic_write_json, read_jsonl
from composition_rl.jobs.reproduce.config import ReproduceConfig
from composition_rl.jobs.reproduce.seed import TESTS, informative_share, seed_dir
from composition_rl.stats import mean_interval

__all__ = ["aggregate", "verdict", "write_report"]

#: The held-out measures compared between arms: depth 1, the new-pairs tests (kind i) and the
#: compositions of held-out problems (kind ii). ``train_depth1`` is reported, not compared.
DEPTHS = ("depth1", "new_depth2", "new_depth3", "depth2", "depth3")
SHORT = {"depth1": "d1", "new_depth2": "(i) d2", "new_depth3": "(i) d3", "depth2": "(ii) d2", "depth3": "(ii) d3",
         "train_depth1": "train d1"}
ARM_LABELS = {
    "continue": "(a) continue on depth 1",
    "depth2": "(b) composed depth 2",
    "curriculum": "(c) automatic depth curriculum",
    "mix": "(d) mix of original and composed",
    "online": "(e) online composition (per prompt)",
    "skip": "(f) skip stale prompts (GRESO), no composition",
}


def _get(results: dict[str, dict[str, Any]], seed: int, name: str) -> dict[str, Any]:
    return results[f"s{seed}/{name}"]


def _interval(values: list[float]) -> dict[str, Any]:
    m, ci = mean_interval(values)
    return {"mean": m, "ci95": list(ci) if ci else None, "per_seed": values}


def verdict(entry: dict[str, Any]) -> str:
    """``holds (+)``, ``holds (-)`` or ``not shown`` from a mean and its interval.

    >>> verdict({"mean": 0.1, "ci95": [0.02, 0.18]}), verdict({"mean": 0.1, "ci95": [-0.01, 0.2]})
    ('holds (+)', 'not shown')
    >>> verdict({"mean": -0.1, "ci95": [-0.2, -0.05]}), verdict({"mean": 0.1, "ci95": None})
    ('holds (-)', 'one seed: no interval')
    """
    ci = entry.get("ci95")
    if ci is None:
        return "one seed: no interval"
    if ci[0] > 0:
        return "holds (+)"
    if ci[1] < 0:
        return "holds (-)"
    return "not shown"


def aggregate(cfg: ReproduceConfig, results: dict[str, dict[str, Any]], wall_s: float,
              resumed_jobs: int = 0, out_dir: Path | None = None) -> dict[str, Any]:
    """The results.json dict (schema in docs/science.md); ``out_dir`` (the run folder, for the
    per-step logs) is needed only when both the online and curriculum arms ran."""
    seeds = list(cfg.seeds)
    climb = [_get(results, s, "d1") for s in seeds]
    prof = [_get(results, s, "profile") for s in seeds]
    evals: dict[int, dict[str, Any]] = {}
    for s in seeds:
        evals[s] = {}
        for a in ("start", *cfg.arms):
            got = dict(_get(results, s, f"eval-{a}"))
            curve = got.pop("curve", [])  # one per eval job: it belongs to that job's arm
            evals[s].update(got)
            evals[s][a] = {**evals[s][a], "curve": curve}
    arms = ["start", *cfg.arms]
    keys = (*DEPTHS, "train_depth1", "v1_recovery_depth2", "v1_recovery_depth3", "new_v1_recovery_depth2")
    out: dict[str, Any] = {
        "seeds": seeds,
        "config": cfg.to_dict(),
        "solve_all_climb": {
            "first": _mean([c["solve_all_first"] for c in climb]),
            "last": _mean([c["solve_all_last"] for c in climb]),
            "per_seed": [{"first": c["solve_all_first"], "last": c["solve_all_last"]} for c in climb],
            "steps": cfg.d1_steps,
        },
        "composition_drop": {
            "pool_solve_all": _mean([p["pool"]["solve_all"] for p in prof]),
            "composed_solve_all": _mean([p["depth2"]["solve_all"] for p in prof]),
            "by_set": {
                name: {b: _mean([p[name][b] for p in prof]) for b in ("solve_all", "goldilocks",
                                                                                  "solve_none")}
                for name in ("pool", "depth2", "depth3")
            },
        },
        "arms": {a: {k: _mean_opt([evals[s][a][k] for s in seeds]) for k in keys} for a in arms},
        "diff_vs_continue": {},
        "training_signal": _training_signal(cfg, results, seeds),
        "tests": _tests_block(cfg, results, evals, seeds),
        "curves": curves(cfg, evals),
        "wall_s": wall_s,
        "resumed_jobs": resumed_jobs,
        "job_seconds": {name: r.get("seconds") for name, r in sorted(results.items())},
    }
    if "skip" in cfg.arms:
        out["training_signal"]["skip"]["skipped"] = [_get(results, s, "arm-skip")["skip"] for s in seeds]
    for a in cfg.arms:
        if a == "continue":
            continue
        out["diff_vs_continue"][a] = {
            k: _interval([evals[s][a][k] - evals[s]["continue"][k] for s in seeds]) for k in DEPTHS
        }
    out["matched_compute"] = _matched_compute(cfg, evals, seeds)
    if "online" in cfg.arms and "curriculum" in cfg.arms:
        out["online_vs_curriculum"] = online_vs_curriculum(cfg, results, evals, out_dir)
    return out


def _training_signal(cfg: ReproduceConfig, results: dict[str, dict[str, Any]], seeds: list[int]) -> dict[str, Any]:
    """Per arm, over seeds: the mean informative and solve_all shares of its groups and the
    tokens it generated per step."""
    return {
        a: {
            "informative_mean": _mean([_get(results, s, f"arm-{a}")["informative_mean"] for s in seeds]),
            "solve_all_mean": _mean([_get(results, s, f"arm-{a}")["solve_all_mean"] for s in seeds]),
            "tokens_per_step": _mean([_get(results, s, f"arm-{a}")["tokens_at_arm_steps"] / cfg.arm_steps
                                      for s in seeds]),
        }
        for a in cfg.arms
    }


def _tests_block(cfg: ReproduceConfig, results: dict[str, dict[str, Any]], evals: dict[int, dict[str, Any]],
                 seeds: list[int]) -> dict[str, Any]:
    """Per test set: its kind, size and the starting policy's accuracy on it."""
    return {
        key: {"kind": kind,
              "size": min(_get(results, s, "tests").get(file, cfg.test_composed) if file.startswith("new")
                          else cfg.test_composed for s in seeds),
              "start_accuracy": _mean([evals[s]["start"][key] for s in seeds]),
              "start_accuracy_per_seed": [evals[s]["start"][key] for s in seeds],
              # seeds whose start solved too few probed problems: their (i) sets use all probed ones
              **({"fallback_seeds": [s for s in seeds if _get(results, s, "tests").get("fallback_to_probed")]}
                 if file.startswith("new") else {})}
        for key, (kind, file) in TESTS.items()
    }


def _matched_compute(cfg: ReproduceConfig, evals: dict[int, dict[str, Any]], seeds: list[int]) -> dict[str, Any]:
    """Each arm against a continue run given the same generated tokens (its difference per depth)."""
    matched: dict[str, Any] = {"basis": "generated tokens (every completion sampled, kept or filtered)",
                               "arms": {}}
    for a in cfg.arms:
        if a == "continue":
            continue
        ref = f"continue@tokens:{a}"
        matched["arms"][a] = {
            "arm_tokens": _mean([evals[s][ref]["target_tokens"] for s in seeds]),
            "continue_tokens": _mean([evals[s][ref]["tokens"] or 0 for s in seeds]),
            "continue_steps": [evals[s][ref]["steps"] for s in seeds],
            "continue": {k: _mean([evals[s][ref][k] for s in seeds]) for k in DEPTHS},
            "diff_vs_continue": {k: _interval([evals[s][a][k] - evals[s][ref][k] for s in seeds]) for k in DEPTHS},
        }
    return matched


def curves(cfg: ReproduceConfig, evals: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Fig. 3: new-pairs depth-2 accuracy against generated tokens, per arm (mean over seeds).

    Each arm's points are step 0 (the start), its snapshots every ``curve_every`` steps and its
    model at ``arm_steps``; the continue arm runs on to its last snapshot. Tokens are the arm's
    cumulative generated tokens at that step.
    """
    seeds = list(cfg.seeds)
    out: dict[str, Any] = {}
    for a in cfg.arms:
        per_seed = []
        for s in seeds:
            pts = {0: (0, evals[s]["start"]["new_depth2"])}
            for p in evals[s][a].get("curve", []):
                pts[p["step"]] = (p["tokens"], p["new_depth2"])
            pts[cfg.arm_steps] = (evals[s][a]["tokens"], evals[s][a]["new_depth2"])
            per_seed.append(pts)
        common = sorted(set.intersection(*(set(p) for p in per_seed)))
        out[a] = {"steps": common,
                  "tokens": [_mean([p[k][0] for p in per_seed]) for k in common],
                  "new_depth2": [_mean([p[k][1] for p in per_seed]) for k in common],
                  "per_seed": [[{"step": k, "tokens": p[k][0], "new_depth2": p[k][1]} for k in sorted(p)]
                               for p in per_seed]}
    return out


def _arm_rows(out_dir: Path, seed: int, arm: str, steps: int) -> list[dict[str, Any]]:
    return [r for r in read_jsonl(seed_dir(out_dir, seed) / "arms" / arm / "metrics.jsonl") if r["step"] <= steps]


def online_vs_curriculum(cfg: ReproduceConfig, results: dict[str, dict[str, Any]], evals: dict[int, dict[str, Any]],
                         out_dir: Path) -> dict[str, Any]:
    """Online vs curriculum: the online arm against the static curriculum, same start, same steps.

    Per seed: the share of informative groups among all groups sampled over the arm's steps
    (group-weighted) and per step; held-out accuracy at matched steps; generated tokens; and,
    at matched compute, each arm's gain over the continue arm's snapshot nearest its own tokens.
    """
    seeds = list(cfg.seeds)
    rows = {a: {s: _arm_rows(out_dir, s, a, cfg.arm_steps) for s in seeds} for a in ("online", "curriculum")}
    share = {a: [informative_share(rows[a][s]) for s in seeds] for a in rows}
    per_step: dict[str, list[float]] = {}
    for a in rows:
        by: dict[int, list[float]] = {}
        for s in seeds:
            for r in rows[a][s]:
                by.setdefault(int(r["step"]), []).append(r["informative"])
        per_step[a] = [sum(by[k]) / len(by[k]) for k in sorted(by)]
    steps_at_or_above = [sum(o >= c for o, c in zip(per_step["online"], per_step["curriculum"])),
                         min(len(per_step["online"]), len(per_step["curriculum"]))]
    tokens = {a: [sum(int(r["generated_tokens"]) for r in rows[a][s]) for s in seeds] for a in rows}

    def gain(a: str, s: int, k: str) -> float:
        return evals[s][a][k] - evals[s][f"continue@tokens:{a}"][k]

    return {
        "informative_share": {a: _interval(share[a]) for a in share},
        "informative_share_diff": _interval([o - c for o, c in zip(share["online"], share["curriculum"])]),
        "informative_per_step": per_step,
        "steps_online_at_or_above": steps_at_or_above,
        "tokens": {a: _interval([float(t) for t in tokens[a]]) for a in tokens},
        "matched_steps_diff": {k: _interval([evals[s]["online"][k] - evals[s]["curriculum"][k] for s in seeds])
                               for k in DEPTHS},
        "matched_tokens_gain_diff": {k: _interval([gain("online", s, k) - gain("curriculum", s, k) for s in seeds])
                                     for k in DEPTHS},
        "pool": [_get(results, s, "arm-online").get("online") for s in seeds],
    }


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _mean_opt(values: list[Any]) -> float | None:
    vals = [v for v in values if v is not None]
    return _mean(vals) if vals else None


# ----------------------------------------------------------------------------- figures


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def fig_solve_all(cfg: ReproduceConfig, out: Path) -> Path:
    """Figure 2 left: solve_all / solve_none of sampled groups during depth-1 GRPO, per seed."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, s in enumerate(cfg.seeds):
        rows = list(read_jsonl(seed_dir(out, s) / "d1" / "metrics.jsonl"))
        steps = [r["step"] for r in rows]
        ax.plot(steps, [r["solve_all"] for r in rows], color="tab:red", alpha=0.8,
                label="solve_all" if i == 0 else None)
        ax.plot(steps, [r["solve_none"] for r in rows], color="tab:blue", alpha=0.8,
                label="solve_none" if i == 0 else None)
    ax.set_xlabel("depth-1 GRPO step")
    ax.set_ylabel("share of sampled groups (G=8)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"Fig. 2 left: the policy masters its depth-1 pool ({len(cfg.seeds)} seed(s), one line each)")
    ax.legend(loc="center right")
    fig.tight_layout()
    path = out / "fig2_left_solve_all.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def fig_composition(res: dict[str, Any], out: Path) -> Path:
    """Figure 2 right: the same checkpoint on its pool and on compositions of the pool."""
    plt = _plt()
    by = res["composition_drop"]["by_set"]
    names = ["pool", "depth2", "depth3"]
    labels = ["training pool\n(depth 1)", "compositions\n(depth 2)", "compositions\n(depth 3)"]
    fig, ax = plt.subplots(figsize=(7, 4))
    bottom = [0.0] * 3
    for band, color in (("solve_all", "tab:red"), ("goldilocks", "tab:green"), ("solve_none", "tab:blue")):
        vals = [by[n][band] for n in names]
        ax.bar(labels, vals, bottom=bottom, color=color, label=band)
        for i, v in enumerate(vals):
            if v > 0.06:
                ax.text(i, bottom[i] + v / 2, f"{v:.2f}", ha="center", va="center", color="white", fontsize=9)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel("share of prompts (8 samples each)")
    ax.set_title("Fig. 2 right: same checkpoint, mastered pool vs its compositions")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    path = out / "fig2_right_composition.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def fig_arms(cfg: ReproduceConfig, res: dict[str, Any], out: Path) -> Path:
    """Table 1 / Figure 3: held-out avg@N per depth for each arm, with per-seed points."""
    plt = _plt()
    arms = ["start", *cfg.arms]
    fig, axes = plt.subplots(1, len(DEPTHS), figsize=(3.4 * len(DEPTHS), 3.8), sharey=False)
    for ax, depth in zip(axes, DEPTHS):
        means = [res["arms"][a][depth] for a in arms]
        ax.bar(range(len(arms)), means, color=["gray"] + [COLORS.get(a, "black") for a in cfg.arms])
        for i, a in enumerate(arms):
            if a == "start":
                continue
            if a != "continue":
                ci = res["diff_vs_continue"][a][depth]["ci95"]
                if ci:
                    ref = res["arms"]["continue"][depth]
                    ax.plot([i, i], [ref + ci[0], ref + ci[1]], color="black", linewidth=1.5)
        ax.set_xticks(range(len(arms)))
        ax.set_xticklabels(["start", *[a for a in cfg.arms]], rotation=30, fontsize=8)
        ax.set_title(TESTS[depth][0], fontsize=8)
        ax.set_ylim(0, 1)
    axes[0].set_ylabel(f"avg@{cfg.eval_n}")
    fig.suptitle(f"Arms after {cfg.arm_steps} steps from the depth-1 checkpoint "
                 "(bars: mean over seeds; black: continue + 95% CI of the difference)", fontsize=9)
    fig.tight_layout()
    path = out / "fig3_arms.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


COLORS = {"continue": "tab:blue", "depth2": "tab:orange", "curriculum": "tab:green", "mix": "tab:purple",
          "online": "tab:red", "skip": "tab:brown"}


def fig_curve(cfg: ReproduceConfig, res: dict[str, Any], out: Path) -> Path:
    """Fig. 3 of the Composition-RL paper at toy scale: new-pairs depth-2 accuracy against generated tokens."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for a, c in res["curves"].items():
        for seed_pts in c["per_seed"]:
            ax.plot([p["tokens"] for p in seed_pts], [p["new_depth2"] for p in seed_pts], color=COLORS.get(a),
                    alpha=0.15, linewidth=0.8)
        ax.plot(c["tokens"], c["new_depth2"], color=COLORS.get(a), marker="o", markersize=3,
                label=ARM_LABELS.get(a, a))
    ax.set_xlabel("generated tokens since the depth-1 checkpoint (every completion sampled)")
    ax.set_ylabel(f"avg@{cfg.eval_n}, (i) new pairs, depth 2")
    ax.set_title(f"Held-out composition accuracy vs compute ({len(cfg.seeds)} seed(s): mean, and each seed faint)",
                 fontsize=9)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    path = out / "fig3_curve.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def fig_signal(cfg: ReproduceConfig, out: Path) -> Path:
    """The mechanism during the arms: share of informative groups per step, per arm."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    colors = COLORS
    for a in cfg.arms:
        per_step: dict[int, list[float]] = {}
        for s in cfg.seeds:
            for r in read_jsonl(seed_dir(out, s) / "arms" / a / "metrics.jsonl"):
                if r["step"] <= cfg.arm_steps:
                    per_step.setdefault(r["step"], []).append(r["informative"])
        steps = sorted(per_step)
        ax.plot(steps, [sum(per_step[k]) / len(per_step[k]) for k in steps], color=colors.get(a), label=a)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("arm step")
    ax.set_ylabel("informative groups (0 < pass < 1)")
    ax.set_title("Learning signal per arm (mean over seeds)")
    ax.legend()
    fig.tight_layout()
    path = out / "fig_signal.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------- markdown


def _f(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}"


def _ci(e: dict[str, Any]) -> str:
    ci = e["ci95"]
    return f"{e['mean']:+.3f}" + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "")


def render(cfg: ReproduceConfig, res: dict[str, Any], figures: list[Path]) -> str:
    """The text of ``report.md``: the figures' sections, the test sets, the arms' table and
    its differences with intervals, and what holds (``figures`` is not read: the image names are
    fixed)."""
    n = cfg.eval_n
    c = res["solve_all_climb"]
    d = res["composition_drop"]
    lines = [
        "# Composition-RL at toy scale: reproduction report",
        "",
        f"Seeds {res['seeds']}; wall time {res['wall_s']:.0f} s"
        + (f" (this invocation; {res['resumed_jobs']} jobs were done by an earlier one)" if res["resumed_jobs"]
           else "") + ". Settings: `config.json`. "
        "Intervals are Student-t 95% intervals over seeds; an effect *holds* only when its interval "
        "excludes zero.",
        "",
        "## Figure 2 left: solve_all climbs during depth-1 GRPO",
        "",
        f"Mean solve_all of sampled groups, first 5 steps {c['first']:.3f} -> last 5 steps {c['last']:.3f} "
        f"({cfg.d1_steps} steps, pool of {cfg.pool_size} prompts).",
        "",
        "![](fig2_left_solve_all.png)",
        "",
        "## Figure 2 right: the mastered pool vs its compositions (same checkpoint)",
        "",
        "| set | solve_all | goldilocks | solve_none |",
        "|---|---|---|---|",
    ]
    for name in ("pool", "depth2", "depth3"):
        b = d["by_set"][name]
        lines.append(f"| {name} | {_f(b['solve_all'])} | {_f(b['goldilocks'])} | {_f(b['solve_none'])} |")
    lines += ["", "![](fig2_right_composition.png)", "", "## Test sets", "",
              "| test | kind | size | start accuracy (mean; per seed) |", "|---|---|---|---|"]
    for key, t in res["tests"].items():
        lines.append(f"| {SHORT[key]} | {t['kind']} | {t['size']} | {t['start_accuracy']:.3f}; "
                     + ", ".join(f"{x:.3f}" for x in t["start_accuracy_per_seed"]) + " |")
    cols = " | ".join(SHORT[k] for k in DEPTHS)
    lines += ["", f"## Table 1 / Figure 3: arms trained {cfg.arm_steps} steps from that checkpoint", "",
              f"avg@{n}, mean over seeds. Test problems appear nowhere in SFT or RL (kind i: their pairs do not).", "",
              f"| arm | {cols} | train d1 | v1 recovery (ii d2) | informative share | tokens/step |",
              "|---|" + "---|" * (len(DEPTHS) + 4)]
    for a in ["start", *cfg.arms]:
        m = res["arms"][a]
        sig = res["training_signal"].get(a, {})
        vals = " | ".join(_f(m[k]) for k in DEPTHS)
        lines.append(f"| {ARM_LABELS.get(a, 'depth-1 checkpoint (start)')} | {vals} | {_f(m['train_depth1'])} | "
                     f"{_f(m['v1_recovery_depth2'])} | {_f(sig.get('informative_mean'))} | "
                     + (f"{sig['tokens_per_step']:.0f} |" if sig else "- |"))
    lines += ["", "### Difference to (a) at matched steps", "",
              f"| arm | {cols} | verdict ({' / '.join(SHORT[k] for k in DEPTHS)}) |", "|---|" + "---|" * (len(DEPTHS) + 1)]
    for a, e in res["diff_vs_continue"].items():
        lines.append(f"| {ARM_LABELS[a]} | " + " | ".join(_ci(e[k]) for k in DEPTHS) + " | "
                     + " / ".join(verdict(e[k]) for k in DEPTHS) + " |")
    mc = res["matched_compute"]
    lines += ["", f"### Difference to (a) at matched compute ({mc['basis']}): the headline", "",
              "Arm (a) runs on until it has generated as many tokens as each other arm; its snapshot "
              "closest to that budget is evaluated.", "",
              f"| arm | arm tokens | (a) tokens | (a) steps | {cols} | verdict |",
              "|---|---|---|---|" + "---|" * (len(DEPTHS) + 1)]
    for a, e in mc["arms"].items():
        dv = e["diff_vs_continue"]
        lines.append(f"| {ARM_LABELS[a]} | {e['arm_tokens']:.0f} | {e['continue_tokens']:.0f} | "
                     f"{e['continue_steps']} | " + " | ".join(_ci(dv[k]) for k in DEPTHS) + " | "
                     + " / ".join(verdict(dv[k]) for k in DEPTHS) + " |")
    lines += ["", "![](fig3_curve.png)", "", "![](fig3_arms.png)", "", "![](fig_signal.png)", ""]
    if "online_vs_curriculum" in res:
        lines += render_online(cfg, res["online_vs_curriculum"])
    lines += ["## What holds", ""]
    lines += [f"- {s}" for s in summary_lines(res)]
    return "\n".join(lines) + "\n"


def render_online(cfg: ReproduceConfig, o: dict[str, Any]) -> list[str]:
    """The report section of :func:`online_vs_curriculum`."""
    sh, tk = o["informative_share"], o["tokens"]
    above, total = o["steps_online_at_or_above"]
    lines = ["## Online composition vs the static curriculum", "",
             f"Both arms start from the depth-1 checkpoint and train {cfg.arm_steps} steps. Informative share: "
             "informative groups / all groups sampled (before dynamic-sampling filtering), over the arm's steps.", "",
             "| | online | curriculum | online - curriculum |", "|---|---|---|---|",
             f"| informative share | {_ci(sh['online'])} | {_ci(sh['curriculum'])} | {_ci(o['informative_share_diff'])} |",
             f"| generated tokens | {tk['online']['mean']:.0f} | {tk['curriculum']['mean']:.0f} | "
             f"{tk['online']['mean'] - tk['curriculum']['mean']:+.0f} |",
             f"| steps where online's seed-mean share >= curriculum's | {above} of {total} | | |", "",
             "| held-out | online - curriculum, matched steps | verdict | (online - (a)@its tokens) - "
             "(curriculum - (a)@its tokens) | verdict |", "|---|---|---|---|---|"]
    for k in DEPTHS:
        a, b = o["matched_steps_diff"][k], o["matched_tokens_gain_diff"][k]
        lines.append(f"| {k} | {_ci(a)} | {verdict(a)} | {_ci(b)} | {verdict(b)} |")
    pools = [p for p in o["pool"] if p]
    if pools:
        lines += ["", "Online pool per seed (retired prompts, injected compositions, live prompts by depth at the end): "
                  + "; ".join(f"{p['retired']} / {p['injected']} / {p['live_by_depth']}" for p in pools) + "."]
    return lines + [""]


def summary_lines(res: dict[str, Any]) -> list[str]:
    """Plain sentences on each effect, positive or negative."""
    c, d = res["solve_all_climb"], res["composition_drop"]
    out = [
        f"solve_all of sampled depth-1 groups goes from {c['first']:.2f} (first 5 steps) to {c['last']:.2f} "
        f"(last 5)" + (": the policy masters its pool." if c["last"] > c["first"] else ": it does NOT rise."),
        f"On the same checkpoint, solve_all is {d['pool_solve_all']:.2f} on the pool and "
        f"{d['composed_solve_all']:.2f} on its depth-2 compositions"
        + (" (composition makes the mastered prompts harder)." if d["composed_solve_all"] < d["pool_solve_all"]
           else " (composition did NOT lower it)."),
    ]
    for a, e in res["diff_vs_continue"].items():
        parts = [f"{k} {_ci(e[k])} ({verdict(e[k])})" for k in DEPTHS]
        out.append(f"{ARM_LABELS[a]} vs (a), matched steps: " + "; ".join(parts) + ".")
    for a, e in res["matched_compute"]["arms"].items():
        dv = e["diff_vs_continue"]
        parts = [f"{k} {_ci(dv[k])} ({verdict(dv[k])})" for k in DEPTHS]
        out.append(f"{ARM_LABELS[a]} vs (a), matched tokens: " + "; ".join(parts) + ".")
    o = res.get("online_vs_curriculum")
    if o:
        d = o["informative_share_diff"]
        out.append(f"Online vs static curriculum: informative share {o['informative_share']['online']['mean']:.3f} vs "
                   f"{o['informative_share']['curriculum']['mean']:.3f}, difference {_ci(d)} ({verdict(d)}); "
                   "held-out at matched steps: " + "; ".join(f"{k} {_ci(o['matched_steps_diff'][k])} "
                                                             f"({verdict(o['matched_steps_diff'][k])})" for k in DEPTHS)
                   + ".")
    return out


def write_report(cfg: ReproduceConfig, out: Path, results: dict[str, dict[str, Any]], wall_s: float,
                 resumed_jobs: int = 0) -> dict:
    """Write results.json, the figures and report.md; return the results dict."""
    res = aggregate(cfg, results, wall_s, resumed_jobs, out_dir=out)
    figures = [fig_solve_all(cfg, out), fig_composition(res, out), fig_arms(cfg, res, out), fig_curve(cfg, res, out),
               fig_signal(cfg, out)]
    res["figures"] = [p.name for p in figures]
    atomic_write_json(out / "results.json", res)
    (out / "report.md").write_text(render(cfg, res, figures), encoding="utf-8")
    return res
