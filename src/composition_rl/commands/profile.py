"""``crl profile``: per-prompt pass rates of a policy, and ``--keep goldilocks`` filtering.

    crl profile --model runs/tiny --input data.jsonl -n 8 --out runs/profile
    crl profile --base-url http://localhost:8000/v1 --model Qwen3-4B --input composed.jsonl \\
        -n 8 --out runs/profile-composed --keep goldilocks --keep-out composed.goldilocks.jsonl
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from composition_rl.cli import UsageError

HELP = "measure per-prompt pass rates of a policy (solve_all / goldilocks / solve_none)"
RESUMABLE = True  # a rerun continues from the finished work


def add_backend_arguments(p: argparse.ArgumentParser) -> None:
    """Model, backend and decoding flags shared by ``crl profile`` and ``crl eval``."""
    from composition_rl.backends.rollout import ROLLOUT_BACKENDS
    from composition_rl.flags import positive_int

    g = p.add_argument_group("policy")
    g.add_argument("--model", required=True,
                   help="local model folder, a .gguf file or a GGUF by name (smollm2, qwen-0.5b, qwen-1.5b), "
                        "or the served model name with --base-url")
    g.add_argument(
        "--base-url",
        action="append",
        help="OpenAI-compatible endpoint (vLLM, SGLang); repeat to balance over several; "
        "the key is read from $OPENAI_API_KEY",
    )
    g.add_argument(
        "--backend",
        choices=["auto", *ROLLOUT_BACKENDS.names()],
        default="auto",
        help="auto: openai with --base-url, else hf (local transformers)",
    )
    g.add_argument("--concurrency", type=int, default=16, help="parallel requests to an endpoint")
    g.add_argument("--device", help="hf backend: cpu, cuda, cuda:1 (default: cuda if available)")
    g.add_argument("--dtype", default="auto", help="hf backend: auto, float32, bfloat16, float16")
    g.add_argument("--batch-size", type=int, default=64, help="hf backend: most sequences per generate call")
    g.add_argument("--tensor-parallel-size", type=int, default=1, help="vllm backend: GPUs per model")
    g.add_argument(
        "--no-chat-template",
        action="store_true",
        help="feed the prompt raw even if the tokenizer has a chat template (base models)",
    )
    s = p.add_argument_group("decoding (defaults: the paper preset)")
    s.add_argument("-n", type=int, default=8, help="samples per prompt")
    s.add_argument("--temperature", type=float, default=0.6)
    s.add_argument("--top-p", type=float, default=0.95)
    s.add_argument("--top-k", type=int, default=20)
    s.add_argument("--max-tokens", type=int, default=4096)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--template", default="boxed", help="prompts/rollout_<NAME>.txt or a .txt path")
    s.add_argument(
        "--chunk",
        type=int,
        help="prompts per generate call and log flush (default: 32 locally, 4 x --concurrency "
        "for an endpoint, so slow requests overlap)",
    )
    from composition_rl.executors import ExecutorConfig
    from composition_rl.flags import add_flags

    add_flags(p.add_argument_group("executor (where sampling and grading run; see docs/scale.md)"), ExecutorConfig)
    i = p.add_argument_group("input")
    i.add_argument("--question-field", help="force the question field")
    i.add_argument("--answer-field", help="force the answer field")
    i.add_argument("--limit", type=positive_int, help="use only the first N problems of each file (N >= 1)")
    i.add_argument("--verify-timeout", type=float, default=5.0, help="seconds per answer check")
    i.add_argument("--no-progress", action="store_true")


def sampling_from_args(args: argparse.Namespace):
    from composition_rl.backends.rollout import SamplingConfig

    try:
        return SamplingConfig(
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k,
            max_tokens=args.max_tokens,
            seed=args.seed,
        )
    except ValueError as e:
        raise UsageError(str(e)) from None


def chunk_from_args(args: argparse.Namespace) -> int:
    if args.chunk is not None:
        return args.chunk
    return 4 * args.concurrency if args.base_url else 32


def backend_from_args(args: argparse.Namespace):
    """The executor the flags ask for, holding (or placing) the rollout backend they ask for."""
    name = args.backend
    if name == "auto":
        name = "openai" if args.base_url else "hf"
    chat = False if args.no_chat_template else None
    if name == "openai":
        if not args.base_url:
            raise UsageError("--backend openai needs --base-url")
        kw: dict[str, Any] = {
            "base_url": args.base_url,
            "model": args.model,
            "concurrency": args.concurrency,
        }
    elif name == "hf":
        if args.base_url:
            raise UsageError("--base-url goes with --backend openai, not hf")
        from composition_rl.backends.hf_model import is_local_model

        if not is_local_model(args.model):
            raise UsageError(f"--model {args.model!r} is not a local model folder or GGUF (use --base-url for an "
                             "endpoint)")
        kw = {
            "model": args.model,
            "device": args.device,
            "dtype": args.dtype,
            "max_batch_sequences": args.batch_size,
            "chat_template": chat,
        }
    else:
        kw = {"model": args.model, "tensor_parallel_size": args.tensor_parallel_size, "chat_template": chat}
    from composition_rl.executors import BackendSpec, ExecutorConfig, build_executor
    from composition_rl.flags import from_flags

    try:
        return build_executor(from_flags(ExecutorConfig, args), BackendSpec(name, kw))
    except (ImportError, ValueError) as e:
        raise UsageError(f"cannot start the {name} backend ({args.executor} executor): {e}") from None


def load_input(path: str, args: argparse.Namespace):
    """Problems of one input file (rejected rows are reported, not fatal).

    Problem records (composed sets) are read back as they are, keeping their ids, links and
    parents, so ``--keep`` writes composed prompts that can be composed or analysed again.
    """
    from composition_rl.io.readers import InputError, ReaderConfig, load_problems

    # the reader keeps Problem records (composed sets) whole: ids, links, parents
    try:
        res = load_problems(path, ReaderConfig(question_field=args.question_field, answer_field=args.answer_field))
    except (InputError, OSError) as e:
        raise UsageError(str(e)) from None
    problems = res.problems
    if res.rejects:
        print(res.rejected_note(path), file=sys.stderr)
    problems = problems[: args.limit] if args.limit else problems
    if not problems:
        raise UsageError(f"{path}: no usable problems")
    return problems


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_backend_arguments(p)
    p.add_argument("--input", required=True, help="problems file (json, jsonl, parquet)")
    p.add_argument("--out", required=True, help="output folder (rerun the same command to resume)")
    p.add_argument("--confidence", type=float, default=0.95, help="Wilson interval level")
    p.add_argument("--keep-responses", action="store_true", help="store every response in profile.jsonl")
    p.add_argument(
        "--keep",
        help="after profiling, write the input problems in these bands (e.g. goldilocks) to --keep-out",
    )
    p.add_argument("--keep-out", help="file for --keep (default OUT/kept.jsonl); rejects go beside it")


def run(args: argparse.Namespace) -> int:
    from composition_rl.backends.rollout import RolloutError
    from composition_rl.io.files import atomic_write_jsonl, writable_dir
    from composition_rl.io.runs import run_identity
    from composition_rl.profile import (
        ProfileConfig,
        RunMismatch,
        keep_from_profile,
        parse_bands,
        profile_problems,
    )

    if args.keep:
        try:
            parse_bands(args.keep)
        except ValueError as e:
            raise UsageError(str(e)) from None
    try:
        config = ProfileConfig(
            n=args.n,
            sampling=sampling_from_args(args),
            template=args.template,
            chunk=chunk_from_args(args),
            confidence=args.confidence,
            keep_responses=args.keep_responses,
        )
    except ValueError as e:
        raise UsageError(str(e)) from None
    try:
        writable_dir(args.out)  # before any model is loaded: one line, not a traceback later
    except ValueError as e:
        raise UsageError(str(e)) from None
    problems = load_input(args.input, args)
    backend = backend_from_args(args)
    from composition_rl.verify import VerifyConfig, shared_verifier

    out = Path(args.out)
    try:
        # The process-wide pool: one per process, closed at exit (see verify.shared_verifier).
        verifier = shared_verifier(VerifyConfig(timeout_s=args.verify_timeout))
        summary = profile_problems(
            problems,
            backend,
            verifier,
            out,
            config,
            progress=not args.no_progress,
            extra_run_info={"input": str(args.input)},
            identity=run_identity(model=args.model, backend=backend.name, inputs={"input": args.input}),
        )
    except RunMismatch as e:
        raise UsageError(str(e)) from None
    except RolloutError as e:
        print(f"crl: generation failed: {e}\nfinished prompts are saved; rerun the same command to resume", file=sys.stderr)
        return 1
    finally:
        backend.close()
    c = summary["counts"]
    print(
        f"profiled {summary['prompts']} prompts at n={summary['n']}: "
        f"solve_all {c['solve_all']} ({100 * (summary['solve_all'] or 0):.1f}%), "
        f"goldilocks {c['goldilocks']} ({100 * (summary['goldilocks'] or 0):.1f}%), "
        f"solve_none {c['solve_none']} ({100 * (summary['solve_none'] or 0):.1f}%) -> {out}"
    )
    if args.keep:
        keep_out = Path(args.keep_out) if args.keep_out else out / "kept.jsonl"
        kept, rejected = keep_from_profile(problems, out, args.keep)
        atomic_write_jsonl(keep_out, (p.to_dict() for p in kept))
        rej_path = keep_out.with_name(keep_out.stem + ".rejects.jsonl")
        atomic_write_jsonl(rej_path, rejected)
        print(f"--keep {args.keep}: kept {len(kept)} -> {keep_out}; dropped {len(rejected)} -> {rej_path}")
    return 0
