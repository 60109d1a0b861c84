"""``crl probe``: reject the composed records a solver answers without their first problem.

    crl probe --input runs/d2/composed.jsonl --probe-model qwen2.5-coder-0.5b-instruct-awq-q4_k_m -k 4 --out runs/d2-probe
    crl probe --input runs/d2/composed.jsonl --probe-base-url http://localhost:8000/v1 \\
        --probe-model Qwen3-4B --out runs/d2-probe

Writes ``kept.jsonl`` (the records the solver could not answer from the later problem alone,
whole), ``rejected.jsonl`` (one row per ``guessable`` record, with its pass rate),
``profile.jsonl`` (the solver's pass rate on each withheld problem; a rerun resumes from it)
and ``probe_summary.json``. See :mod:`composition_rl.jobs.probe` and docs/composition.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from composition_rl.cli import UsageError

HELP = "reject composed records a solver answers with the first problem's value withheld (guessable)"
RESUMABLE = True  # the solver's pass rates are appended as they finish


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``crl probe``: ``--input``, ``--out``, the solver and its backend,
    ``-k`` and ``--tau``, and the decoding settings."""
    from composition_rl.flags import add_flags
    from composition_rl.jobs.probe import BACKEND_HELP, BASE_URL_HELP, MODEL_HELP, ProbeConfig
    from composition_rl.rollout.base import ROLLOUT_BACKENDS, SamplingConfig

    p.add_argument("--input", required=True, help="a composed set (crl compose's composed.jsonl)")
    p.add_argument("--out", required=True, help="output folder (rerun the same command to resume)")
    s = p.add_argument_group("solver (the policy being trained, or a stronger model)")
    s.add_argument("--probe-model", required=True, help=MODEL_HELP)
    s.add_argument("--probe-base-url", action="append", default=[], help=BASE_URL_HELP)
    s.add_argument("--probe-backend", choices=["auto", *ROLLOUT_BACKENDS.names()], default="auto", help=BACKEND_HELP)
    s.add_argument("--concurrency", type=int, default=16, help="parallel requests to an endpoint")
    s.add_argument("--batch-size", type=int, default=16,
                   help="most sequences decoded together (llama: per decode step; hf: per generate call)")
    s.add_argument("--template", default="boxed",
                   help="prompts/rollout_<NAME>.txt or a .txt path: the prompt format the policy is trained with")
    s.add_argument("--chunk", type=int, default=32, help="records per generate call and log flush")
    s.add_argument("--verify-timeout", type=float, default=5.0, help="seconds per answer check")
    from composition_rl.grading.verifier import FALLBACK_HELP

    s.add_argument("--fallback", action="append", help=FALLBACK_HELP)
    s.add_argument("--keep-responses", action="store_true", help="store the solver's replies in profile.jsonl")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    d = p.add_argument_group("probe")
    add_flags(d, ProbeConfig)  # -k, --tau
    add_flags(p.add_argument_group("decoding (defaults: the paper preset)"), SamplingConfig)


def run(args: argparse.Namespace) -> int:
    """Probe each composed record of ``--input`` with its first problem's value withheld
    (resuming a rerun), and print how many were rejected as guessable and kept; 0 on success."""
    from composition_rl.flags import from_flags
    from composition_rl.io.runs import RunBusy, run_folder
    from composition_rl.jobs.probe import ProbeConfig

    try:
        from composition_rl.rollout.base import SamplingConfig

        config = from_flags(ProbeConfig, args, sampling=from_flags(SamplingConfig, args), template=args.template,
                            chunk=args.chunk, keep_responses=args.keep_responses)
    except ValueError as e:
        raise UsageError(str(e)) from None
    out = Path(args.out)
    try:
        with run_folder(out, "probe", inputs={"--input": args.input},
                        refusals=(UsageError, ValueError), work=("profile.jsonl",)):
            return _probe(args, config, out)
    except (RunBusy, ValueError) as e:
        raise UsageError(str(e)) from None


def _probe(args: argparse.Namespace, config, out: Path) -> int:
    import sys

    from composition_rl.grading import VerifyConfig
    from composition_rl.grading.verifier import fallbacks_from_names
    from composition_rl.jobs.probe import probe_file
    from composition_rl.jobs.profile import no_answer_note

    try:
        fallbacks = fallbacks_from_names(args.fallback)
        verify_config = VerifyConfig(timeout_s=args.verify_timeout, fallbacks=fallbacks)
    except ValueError as e:
        from composition_rl.flags import in_flags

        raise UsageError(in_flags(e, {"timeout_s": "--verify-timeout", "fallbacks": "--fallback"})) from None
    result = probe_file(args.input, out, config, verify_config, fallbacks, model=args.probe_model,
                        base_urls=args.probe_base_url, backend=args.probe_backend, concurrency=args.concurrency,
                        batch_size=args.batch_size, progress=not args.no_progress)
    s = result.summary
    print(f"probed {s['probed']:,} of {s['records']:,} composed records at k={config.k}: {s['rejected_guessable']:,} "
          f"guessable (pass rate >= {config.tau}) -> {out / 'rejected.jsonl'}; kept {s['kept']:,} -> "
          f"{out / 'kept.jsonl'}" + (f"; {s['unprobed']:,} without a readable relation kept unprobed"
                                    if s["unprobed"] else ""))
    note = no_answer_note(s["no_answer"], s["replies"])
    if note:  # "0 guessable" from replies with no answer says nothing about the records
        print(note, file=sys.stderr)
    return 0
