"""The report of a refresh: ``report.json``, ``report.md`` and ``bands.png``.

What it says: the band histogram of the stale set and of the refreshed set (as selected,
and re-profiled with another seed) side by side; the informative share of each with its
Wilson interval over prompts; informative prompts gained per 1,000 generated rollouts and
per hour; what was set aside, by reason and stage, with counts that add up.

The re-profile is the check of the selection: a prompt kept because its pass rate fell in
the band at one seed can land outside it at another (regression to the mean), so the
refreshed set's informative share is quoted from the fresh samples, not from the ones that
chose it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from composition_rl.io.files import atomic_write_json
from composition_rl.records import Problem
from composition_rl.stats import wilson_interval

__all__ = ["build_report"]

REPORT_JSON, REPORT_MD, REPORT_PNG = "report.json", "report.md", "bands.png"


def _share(k: int, total: int, confidence: float) -> dict[str, Any]:
    if total == 0:
        return {"count": 0, "of": 0, "share": None, "wilson": None}
    lo, hi = wilson_interval(k, total, confidence)
    return {"count": k, "of": total, "share": k / total, "wilson": [lo, hi]}


def _hist(rows: Sequence[tuple[int, int]]) -> dict[str, int]:
    """How many prompts had each pass rate ``k/n`` (keys ``"k/n"``, in order)."""
    c = Counter(rows)
    return {f"{k}/{n}": c[(k, n)] for k, n in sorted(c, key=lambda kn: (kn[1], kn[0]))}


def build_report(out: Path, *, originals: Sequence[Problem], clean: Sequence[Problem],
                 profile: Mapping[str, dict[str, Any]], confirm: Mapping[str, dict[str, Any]],
                 measured: Mapping[str, dict[str, Any]], refreshed: Sequence[Problem],
                 set_aside: Sequence[dict[str, Any]], reprofile: Mapping[str, dict[str, Any]],
                 compositions: Mapping[int, dict[str, Any]], config: Any, seconds: Mapping[str, float],
                 model: Mapping[str, Any], sampling: Mapping[str, Any],
                 grown: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write ``report.json``, ``report.md`` and ``bands.png`` into ``out``; returns the report.

    ``grown``: the grow stage's counts (seeds, candidates, kept, set aside) and its
    MagicBeanStalk stats, when the refresh grew its solve_none prompts."""
    conf = config.profile.confidence
    n = config.profile.n
    stale = [(int(profile[p.id]["correct"]), int(profile[p.id]["n"])) for p in clean]
    sel = [(int(p.metadata["refresh"]["correct"]), int(p.metadata["refresh"]["n"])) for p in refreshed]
    fresh = [(int(reprofile[p.id]["correct"]), int(reprofile[p.id]["n"])) for p in refreshed if p.id in reprofile]

    def informative(rows: Sequence[tuple[int, int]]) -> dict[str, Any]:
        return _share(sum(0 < k < m for k, m in rows), len(rows), conf)

    stale_informative = sum(0 < k < m for k, m in stale)
    gained = len(refreshed) - sum(1 for p in refreshed if p.metadata["refresh"]["source"] == "original")
    n_grown = sum(1 for p in refreshed if p.metadata["refresh"]["source"] == "grown")
    rollouts = _rollouts(out, profile, confirm, grown)
    work_s = sum(v for k, v in seconds.items() if k != "reprofile")
    kept_orig = sum(1 for p in refreshed if p.metadata["refresh"]["source"] == "original")
    aside_block, aside_grown = _set_aside_block(set_aside, originals, kept_orig, compositions, gained - n_grown)
    report: dict[str, Any] = {
        "model": dict(model),
        "n": n, "confirm": config.confirm, "band": config.run_record()["band"], "sampling": dict(sampling),
        "input": {"prompts": len(originals), "after_decontamination": len(clean)},
        "informative_share": {
            "stale": informative(stale),
            "refreshed_as_selected": informative(sel),
            "refreshed_reprofiled": informative(fresh) if fresh else None,
        },
        "histograms": {"stale": _hist(stale), "refreshed_as_selected": _hist(sel),
                       "refreshed_reprofiled": _hist(fresh)},
        "refreshed": {"prompts": len(refreshed), "originals": kept_orig, "composed": gained - n_grown,
                      "grown": n_grown,
                      "by_source": dict(Counter(p.metadata["refresh"]["source"] for p in refreshed))},
        "confirm_step": {
            "n_of_n_at_profile": sum(1 for k, m in stale if k == m),
            "confirmed_solve_all": sum(1 for p in clean if measured[p.id]["class"] == "solve_all"),
        },
        "compositions": {f"depth {d}": c for d, c in sorted(compositions.items())},
        "gain": {
            "informative_prompts_gained": gained, "stale_informative": stale_informative,
            "rollouts": rollouts, "seconds": round(work_s, 1),
            "per_1000_rollouts": 1000 * gained / rollouts if rollouts else None,
            "per_hour": 3600 * gained / work_s if work_s > 0 else None,
        },
        "set_aside": aside_block,
        "stage_seconds": {k: round(v, 1) for k, v in seconds.items()},
    }
    if grown is not None:
        report["grow"] = _grow_block(out, grown, refreshed, seconds, n_grown)
        report["set_aside"]["counts_add_up"]["grown"] = {
            "candidates": grown["candidates"], "kept": grown["kept"], "set_aside": aside_grown,
            "ok": grown["kept"] + aside_grown == grown["candidates"] and grown["kept"] == n_grown,
            "seeds": {"in": grown["seeds"], "counts_add_up": bool(grown["stats"]["counts_add_up"])}}
    atomic_write_json(out / REPORT_JSON, report)
    (out / REPORT_MD).write_text(_markdown(report), encoding="utf-8")
    _plot(report, n, out / REPORT_PNG)
    return report


def _set_aside_block(set_aside: Sequence[dict[str, Any]], originals: Sequence[Problem], kept_orig: int,
                     compositions: Mapping[int, dict[str, Any]], kept_comps: int) -> tuple[dict[str, Any], int]:
    """The report's ``set_aside`` block (by stage and reason, and the counts that must add up:
    every original and every profiled composition is kept or set aside), and how many grown
    candidates were set aside."""
    reasons = Counter((r["stage"], r["reason"]) for r in set_aside)
    orig_ids = {p.id for p in originals}
    aside_orig = sum(1 for r in set_aside if r["id"] in orig_ids)
    profiled_comps = sum(int(c.get("profiled", 0)) for c in compositions.values())
    decontam_comps = sum(1 for r in set_aside if r["id"] not in orig_ids and r["reason"] == "benchmark_overlap"
                         and r["stage"] != "grow")
    aside_grown = sum(1 for r in set_aside if r["stage"] == "grow")
    aside_comps = len(set_aside) - aside_orig - aside_grown
    block = {
        "total": len(set_aside),
        "by_stage_and_reason": {f"{s}: {r}": c for (s, r), c in sorted(reasons.items())},
        "counts_add_up": {
            "originals": {"in": len(originals), "refreshed": kept_orig, "set_aside": aside_orig,
                          "ok": kept_orig + aside_orig == len(originals)},
            "compositions": {"profiled_or_decontaminated": profiled_comps + decontam_comps,
                             "kept": kept_comps, "set_aside": aside_comps,
                             "ok": kept_comps + aside_comps == profiled_comps + decontam_comps},
        },
    }
    return block, aside_grown


def _rollouts(out: Path, profile: Mapping[str, dict[str, Any]], confirm: Mapping[str, dict[str, Any]],
              grown: Mapping[str, Any] | None) -> int:
    """The policy's samples spent on the refresh (the re-profile, a measurement, not counted)."""
    rollouts = 0
    for name in ("profile", "confirm", "profile-d2", "profile-d3", "grow/qualify"):
        rows = {"profile": profile, "confirm": confirm}.get(name)
        if rows is None:
            p = out / name / "profile.jsonl"
            if p.is_file():
                from composition_rl.io.files import read_jsonl

                rollouts += sum(int(r["n"]) for r in read_jsonl(p))
        else:
            rollouts += sum(int(r["n"]) for r in rows.values())
    if grown:  # the policy's samples of the grow stage: effectivity tests and calibration (as its student)
        rollouts += int(grown["stats"]["cost"].get("student_rollouts", 0))
    return rollouts


def _grow_block(out: Path, grown: Mapping[str, Any], refreshed: Sequence[Problem], seconds: Mapping[str, float],
                n_grown: int) -> dict[str, Any]:
    """The report's ``grow`` block: the MagicBeanStalk funnel, its cost and its yield."""
    st = grown["stats"]
    cost = st["cost"]
    block: dict[str, Any] = {
        "seeds": grown["seeds"], "seeds_with_a_kept_problem": len(
            {p.metadata["refresh"]["parents"][0] for p in refreshed if p.metadata["refresh"]["source"] == "grown"}),
        "funnel": st["funnel"], "seeds_dropped_by_reason": st["dropped_by_reason"],
        "candidates": grown["candidates"], "kept": grown["kept"], "set_aside": grown["set_aside"],
        # a reply kept before a kill and read back on the resume counts once, as one call
        "teacher_calls": int(cost.get("teacher_calls", 0)) + int(cost.get("teacher_kept_replies", 0)),
        "teacher_tokens": int(cost.get("teacher_prompt_tokens", 0)) + int(cost.get("teacher_completion_tokens", 0)),
        "policy_samples": int(cost.get("student_rollouts", 0)),
        "seconds": round(seconds.get("grow", 0.0), 1),
        "per_1000_rollouts": None, "per_hour": None,
    }
    g_roll = int(cost.get("student_rollouts", 0))
    qp = out / "grow" / "qualify" / "profile.jsonl"
    if qp.is_file():
        from composition_rl.io.files import read_jsonl

        g_roll += sum(int(r["n"]) for r in read_jsonl(qp))
    block["policy_samples"] = g_roll
    if g_roll:
        block["per_1000_rollouts"] = 1000 * n_grown / g_roll
    if seconds.get("grow", 0.0) > 0:
        block["per_hour"] = 3600 * n_grown / seconds["grow"]
    return block


def _fmt(s: dict[str, Any] | None) -> str:
    if not s or s["share"] is None:
        return "n/a"
    lo, hi = s["wilson"]
    return f"{s['share']:.1%} [{lo:.1%}, {hi:.1%}] ({s['count']}/{s['of']})"


def _markdown(r: dict[str, Any]) -> str:
    s = r["informative_share"]
    g = r["gain"]
    lines = [
        "# Refresh report", "",
        f"Model: {r['model'].get('model', '?')}"
        + (f" (content {r['model']['model_content']})" if r["model"].get("model_content") else "")
        + f", backend {r['model'].get('backend', '?')}; n = {r['n']}, confirm = {r['confirm']}, band {r['band']}.",
        "",
        "## Informative share (95% Wilson interval over prompts)", "",
        "| set | informative |", "|---|---|",
        f"| stale set (profile) | {_fmt(s['stale'])} |",
        f"| refreshed set, as selected | {_fmt(s['refreshed_as_selected'])} |",
        f"| refreshed set, re-profiled with another seed | {_fmt(s['refreshed_reprofiled'])} |", "",
        "## Gain", "",
        f"{g['informative_prompts_gained']} informative prompts gained "
        f"(kept compositions{' and grown problems' if 'grow' in r else ''}) from {g['rollouts']:,} "
        f"generated rollouts in {g['seconds']:.0f} s: "
        + (f"{g['per_1000_rollouts']:.2f} per 1,000 rollouts" if g["per_1000_rollouts"] is not None else "n/a")
        + (f", {g['per_hour']:.1f} per hour." if g["per_hour"] is not None else "."), "",
        "## Compositions", "",
        "| depth | owners | candidates | composed | profiled | kept | owners still solve_all |",
        "|---|---|---|---|---|---|---|",
    ]
    for d, c in r["compositions"].items():
        lines.append(f"| {d} | {c.get('owners', 0)} | {c.get('candidates', 0)} | {c.get('composed', 0)} | "
                     f"{c.get('profiled', 0)} | {c.get('kept', 0)} | {c.get('still_solve_all_owners', '-')} |")
    if "grow" in r:
        gr = r["grow"]
        lines += ["", "## Grown (MagicBeanStalk on the solve_none prompts)", "",
                  f"{gr['seeds']} solve_none prompts grown: {gr['candidates']} candidates, {gr['kept']} kept in the "
                  f"band (from {gr['seeds_with_a_kept_problem']} seeds), {gr['set_aside']} set aside; "
                  f"{gr['teacher_calls']:,} teacher calls, {gr['policy_samples']:,} policy samples, {gr['seconds']:.0f} s"
                  + (f": {gr['per_1000_rollouts']:.2f} kept per 1,000 policy samples" if gr["per_1000_rollouts"]
                     is not None else "")
                  + (f", {gr['per_hour']:.1f} per hour." if gr["per_hour"] is not None else "."),
                  "", "Seeds dropped by reason: " + (", ".join(f"{k} {v}" for k, v in
                                                               gr["seeds_dropped_by_reason"].items()) or "none") + "."]
    lines += ["", "## Set aside", "", "| stage: reason | prompts |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in r["set_aside"]["by_stage_and_reason"].items()]
    add = r["set_aside"]["counts_add_up"]
    o, c = add["originals"], add["compositions"]
    lines += ["", f"Originals: {o['in']} in = {o['refreshed']} refreshed + {o['set_aside']} set aside. "
              f"Compositions: {c['profiled_or_decontaminated']} profiled or decontaminated = {c['kept']} kept + "
              f"{c['set_aside']} set aside."
              + (f" Grown: {add['grown']['candidates']} candidates = {add['grown']['kept']} kept + "
                 f"{add['grown']['set_aside']} set aside." if "grown" in add else ""), "",
              "Pass-rate histograms: `bands.png`; every number above: `report.json`.", ""]
    return "\n".join(lines)


def _plot(r: dict[str, Any], n: int, path: Path) -> bool:
    """Three histograms side by side: prompts per pass rate, stale / selected / re-profiled."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = [("stale", "stale set"), ("refreshed_as_selected", "refreshed, as selected"),
             ("refreshed_reprofiled", "refreshed, re-profiled (other seed)")]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.5), sharey=False)
    for ax, (key, title) in zip(axes, names):
        hist = r["histograms"][key]
        xs = [_rate(k) for k in hist]
        ax.bar(xs, list(hist.values()), width=0.6 / n,
               color=["#c0392b" if x == 0 else "#2c7fb8" if x == 1 else "#27ae60" for x in xs])
        share = r["informative_share"].get(key)
        ax.set_title(f"{title}\ninformative {_fmt(share)}", fontsize=9)
        ax.set_xlabel("pass rate")
        ax.set_xlim(-0.08, 1.08)
    axes[0].set_ylabel("prompts")
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)
    return True


def _rate(key: str) -> float:
    """``"3/8"`` -> 0.375."""
    k, n = key.split("/")
    return int(k) / int(n)
