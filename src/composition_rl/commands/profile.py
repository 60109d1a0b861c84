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
        help="auto: openai with --base-url, llama for a GGUF (a .gguf file or smollm2 / qwen-0.5b / "
        "qwen-1.5b) when llama-cpp-python is installed, else hf (local transformers)",
    )
    g.add_argument("--concurrency", type=int, default=16, help="parallel requests to an endpoint")
    g.add_argument("--device", help="hf backend: cpu, cuda, cuda:1 (default: cuda if available)")
    g.add_argument("--dtype", default="auto", help="hf and vllm backends: auto, float32, bfloat16, float16")
    g.add_argument(
        "--batch-size",
        type=int,
        help="most sequences decoded together: per generate call for hf (default 64), per decode "
        "step for llama (default 16)",
    )
    g.add_argument("--tensor-parallel-size", type=int, default=1, help="vllm backend: GPUs per model")
    g.add_argument("--gpu-memory-utilization", type=float, default=0.9,
                   help="vllm backend on a GPU: share of the GPU's memory vLLM may take (weights and KV cache)")
    g.add_argument("--kv-cache-gib", type=float,
                   help="vllm backend: KV cache size in GiB (on a CPU default 1, or $VLLM_CPU_KVCACHE_SPACE; "
                        "on a GPU it replaces --gpu-memory-utilization's share)")
    g.add_argument(
        "--no-chat-template",
        action="store_true",
        help="feed the prompt raw even if the tokenizer has a chat template (base models)",
    )
    s = p.add_argument_group("decoding (defaults: the paper preset)")
    s.add_argument("-n", type=int, default=8, help="samples per prompt (1 to 1024)")
    from composition_rl.backends.rollout import SamplingConfig
    from composition_rl.flags import add_flags

    add_flags(s, SamplingConfig)  # --temperature, --top-p, --top-k, --max-tokens, --seed
    s.add_argument("--template", default="boxed", help="prompts/rollout_<NAME>.txt or a .txt path")
    s.add_argument(
        "--chunk",
        type=int,
        help="prompts per generate call and log flush (default: 32 locally, 4 x --concurrency "
        "for an endpoint, so slow requests overlap)",
    )
    from composition_rl.executors import ExecutorConfig

    add_flags(p.add_argument_group("executor (where sampling and grading run; see docs/scale.md)"), ExecutorConfig)
    i = p.add_argument_group("input")
    i.add_argument("--question-field", help="force the question field")
    i.add_argument("--answer-field", help="force the answer field")
    i.add_argument("--limit", type=positive_int, help="use only the first N problems of each file (N >= 1)")
    i.add_argument("--verify-timeout", type=float, default=5.0, help="seconds per answer check")
    from composition_rl.verify.verifier import FALLBACK_HELP

    i.add_argument("--fallback", action="append", help=FALLBACK_HELP)
    from composition_rl.progress import progress_help

    i.add_argument("--no-progress", action="store_true", help=progress_help())


def sampling_from_args(args: argparse.Namespace):
    from composition_rl.backends.rollout import SamplingConfig
    from composition_rl.flags import from_flags

    try:
        return from_flags(SamplingConfig, args)
    except ValueError as e:
        raise UsageError(str(e)) from None


def chunk_from_args(args: argparse.Namespace) -> int:
    if args.chunk is not None:
        return args.chunk
    return 4 * args.concurrency if args.base_url else 32


def backend_from_args(args: argparse.Namespace):
    """The executor the flags ask for, holding (or placing) the rollout backend they ask for."""
    from composition_rl.backends.rollout import resolve_backend

    # a GGUF with llama.cpp installed is decoded on its quantized weights, many sequences per
    # step; without llama-cpp-python the hf backend de-quantizes it (slower on a CPU)
    name = resolve_backend(args.backend, args.model, args.base_url)
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
            "max_batch_sequences": args.batch_size or 64,
            "chat_template": chat,
        }
    elif name == "llama":
        if args.base_url:
            raise UsageError("--base-url goes with --backend openai, not llama")
        kw = {"model": args.model, "n_parallel": args.batch_size or 16, "chat_template": chat}
    else:
        if args.base_url:
            raise UsageError(f"--base-url goes with --backend openai, not {name}")
        kw = {"model": args.model, "tensor_parallel_size": args.tensor_parallel_size, "chat_template": chat,
              "dtype": args.dtype, "gpu_memory_utilization": args.gpu_memory_utilization,
              "kv_cache_gib": args.kv_cache_gib}
    from composition_rl.executors import BackendSpec, ExecutorConfig, build_executor
    from composition_rl.flags import from_flags

    try:
        return build_executor(from_flags(ExecutorConfig, args), BackendSpec(name, kw))
    except (ImportError, ValueError) as e:
        raise UsageError(f"cannot start the {name} backend ({args.executor} executor): {e}") from None


def fit_to_context(problems, args: argparse.Namespace, model: str | None = None, where: str = "", backend=None):
    """``problems`` whose prompt fits the local model's context, and the rest as rejects
    (reason ``prompt_too_long``). A prompt that fills the context cannot be answered, so it
    is set aside by itself before sampling instead of being sampled to nothing.

    The built ``backend`` (or the local executor's) says it when it can (the hf and llama
    backends answer ``prompt_too_long(prompt)``: a GGUF's context is known only to them);
    without one, a model folder's tokenizer and config say it. An endpoint's context is not
    known here: its problems all pass.
    """
    model = model or args.model
    if getattr(args, "base_url", None):
        return list(problems), []
    from composition_rl.backends.rollout import load_template, render_prompt
    from composition_rl.executors.local import LocalExecutor
    from composition_rl.io.readers import set_aside

    local = backend.backend if isinstance(backend, LocalExecutor) else backend
    ask = getattr(local, "prompt_too_long", None)
    if callable(ask):
        reason, context = ask, getattr(local, "context", None)
    elif Path(model).is_dir():
        from composition_rl.backends.context import PromptFit

        try:
            fit = PromptFit.for_model(model, False if getattr(args, "no_chat_template", False) else None)
        except (OSError, ValueError) as e:
            raise UsageError(f"--model {model}: cannot read its tokenizer and config ({e})") from None
        reason, context = fit.reason, fit.context
    else:
        return list(problems), []
    try:
        template = load_template(args.template)
    except (OSError, ValueError) as e:
        raise UsageError(str(e)) from None
    kept, rejects = set_aside(problems, lambda p: reason(render_prompt(template, p.question)))
    if rejects:
        print(f"{where or 'input'}: {len(rejects):,} of {len(problems):,} prompts are longer than the context of "
              f"{model}" + (f" ({context:,} tokens)" if context else "")
              + f": set aside (e.g. {rejects[0]['detail']})", file=sys.stderr)
    return kept, rejects


def load_input(path: str, args: argparse.Namespace, rejects: list | None = None):
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
        if rejects is not None:
            rejects.extend(res.rejects)
    problems = problems[: args.limit] if args.limit else problems
    if not problems:
        raise UsageError(f"{path}: no usable problems")
    return problems


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_backend_arguments(p)
    p.add_argument("--input", required=True,
                   help="problems file (json, jsonl, csv, tsv, parquet; also .gz/.zst), or a composed.jsonl")
    p.add_argument("--out", required=True, help="output folder (rerun the same command to resume)")
    p.add_argument("--confidence", type=float, default=0.95, help="Wilson interval level")
    p.add_argument("--keep-responses", action="store_true", help="store every response in profile.jsonl")
    p.add_argument(
        "--keep",
        help="after profiling, write the input problems in this band to --keep-out: band names (goldilocks, "
        "informative, solve_all, solve_none, stale) or a pass-rate interval LO,HI such as 0.125,0.875 or (0,1)",
    )
    p.add_argument("--keep-out", help="file for --keep (default OUT/kept.jsonl); rejects go beside it")


def run(args: argparse.Namespace) -> int:
    from composition_rl.profile import ProfileConfig
    from composition_rl.stats import parse_band

    if args.keep:
        try:
            parse_band(args.keep)
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
    from composition_rl.verify import VerifyConfig
    from composition_rl.verify.verifier import fallbacks_from_names

    fallbacks = fallbacks_from_names(args.fallback)
    try:
        verify_config = VerifyConfig(timeout_s=args.verify_timeout, fallbacks=fallbacks)
    except ValueError as e:
        from composition_rl.flags import in_flags

        raise UsageError(in_flags(e, {"timeout_s": "--verify-timeout", "fallbacks": "--fallback"})) from None
    out = Path(args.out)
    keep_out = Path(args.keep_out) if args.keep_out else out / "kept.jsonl"
    keep_rejects = keep_out.with_name(keep_out.stem + ".rejects.jsonl")
    from composition_rl.io.runs import RunBusy, run_folder

    try:
        with run_folder(out, "profile", inputs={"--input": args.input},
                        files={"--keep-out": keep_out if args.keep else None,
                               "the --keep-out rejects file": keep_rejects if args.keep else None},
                        refusals=(UsageError, ValueError), work=("profile.jsonl",)):
            return _profile(args, config, out, keep_out, keep_rejects, verify_config, fallbacks)
    except (RunBusy, ValueError) as e:
        raise UsageError(str(e)) from None


def _profile(args: argparse.Namespace, config, out: Path, keep_out: Path, rej_path: Path, verify_config,
             fallbacks) -> int:
    """The profile run itself, with ``out`` held (see :func:`run`)."""
    from composition_rl.backends.rollout import RolloutError
    from composition_rl.io.files import atomic_write_jsonl
    from composition_rl.io.identity import run_identity
    from composition_rl.profile import (
        RunMismatch,
        keep_from_profile,
        no_answer_note,
        profile_problems,
    )

    input_rejects: list = []
    problems = load_input(args.input, args, input_rejects)
    backend = backend_from_args(args)
    from composition_rl.verify import shared_verifier

    try:
        # the backend says what fits its context (a GGUF's is known only once it is loaded)
        problems, too_long = fit_to_context(problems, args, where=args.input, backend=backend)
        input_rejects += too_long
        if not problems:
            raise UsageError(f"{args.input}: no prompt fits the context of {args.model} ({len(too_long)} set aside)")
        # The process-wide pool: one per process, closed at exit (see verify.shared_verifier).
        verifier = shared_verifier(verify_config)
        summary = profile_problems(
            problems,
            backend,
            verifier,
            out,
            config,
            progress=not args.no_progress,
            extra_run_info={"input": str(args.input)},
            identity=run_identity(model=args.model, backend=backend.name, inputs={"input": args.input},
                                  command="profile", fallbacks=list(fallbacks)),
        )
    except RunMismatch as e:
        raise UsageError(str(e)) from None
    except RolloutError as e:
        print(f"crl: generation failed: {e}\nfinished prompts are saved; rerun the same command to resume", file=sys.stderr)
        return 1
    finally:
        backend.close()
    # every input row is accounted for: profiled, or here with its reason
    atomic_write_jsonl(out / "input_rejects.jsonl", input_rejects)
    c = summary["counts"]
    print(
        f"profiled {summary['prompts']} prompts at n={summary['n']}: "
        f"solve_all {c['solve_all']} ({100 * (summary['solve_all'] or 0):.1f}%), "
        f"goldilocks {c['goldilocks']} ({100 * (summary['goldilocks'] or 0):.1f}%), "
        f"solve_none {c['solve_none']} ({100 * (summary['solve_none'] or 0):.1f}%) -> {out}"
        + (f"; {len(input_rejects)} input rows rejected -> {out / 'input_rejects.jsonl'}" if input_rejects else "")
    )
    note = no_answer_note(summary["no_answer"], summary["replies"])
    if note:
        print(note, file=sys.stderr)
    if args.keep:
        kept, rejected = keep_from_profile(problems, out, args.keep)
        atomic_write_jsonl(keep_out, (p.to_dict() for p in kept))
        atomic_write_jsonl(rej_path, rejected)
        print(f"--keep {args.keep}: kept {len(kept)} -> {keep_out}; dropped {len(rejected)} -> {rej_path}")
    return 0
