"""Generated tokens per second of a real GGUF model on this CPU: today's one-request server
against batched options, side by side in one run, on the same model, prompts and settings.

Options (each one after the other, not at once, so they never share the cores):

* ``server``: today's path. ``scripts/serve_real_llm.sh`` (llama-cpp-python's OpenAI server,
  one request at a time) driven by crl's ``openai`` rollout backend, as ``crl profile
  --base-url`` drives it.
* ``llama-bN``: crl's ``llama`` rollout backend, in-process, N sequences per decode step on
  the GGUF's quantized weights (:mod:`composition_rl.rollout.llama`).
* ``hf-fp32``: transformers with the model de-quantized from the same GGUF to float32,
  batched ``generate`` (``--hf``; needs the ``gguf`` package).
* ``vllm-DTYPE``: crl's ``vllm`` rollout backend (vLLM's CPU build, offline engine, every
  prompt in one call) on the model de-quantized from the same GGUF, in DTYPE (``--vllm
  float32,bfloat16``). It runs in ``.venv-vllm`` (``scripts/setup_vllm_venv.sh``): a child
  process of that venv's Python gets the same prompts and settings and prints its figures.

The prompts are reasoning-gym ``gsm_symbolic`` questions in the boxed template; the paper's
sampling preset with a fixed ``--max-tokens``. Each option's aggregate rate is the generated
tokens of all completions over the wall time of the whole generate call (prefill included,
model load excluded), best of ``--repeats``. The last line is ``speedup: N.NNx``: the best
option over ``server``.

    .venv/bin/python benchmarks/real_model_throughput.py --model qwen2.5-coder-0.5b-instruct-awq-q4_k_m
    .venv/bin/python benchmarks/real_model_throughput.py --model smollm2-135m-instruct-q4_1 --prompts 8 -n 4 --hf
    .venv/bin/python benchmarks/real_model_throughput.py --model qwen2.5-coder-0.5b-instruct-awq-q4_k_m --parallel 16 --vllm bfloat16,float32
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from real_llm_report import Server  # noqa: E402  (the one server harness)


def model_path(alias: str) -> Path:
    """The assembled GGUF of ``alias`` (assembled and verified on first use)."""
    venv_llm = REPO / ".venv-llm"
    py = venv_llm / "bin" / "python"
    out = subprocess.run(
        [str(py if py.exists() else sys.executable), str(REPO / "scripts" / "real_llm_models.py"),
         "path", alias, "--dir", str(venv_llm / "models")],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return Path(out.stdout.strip().splitlines()[-1])


def questions(n: int) -> list[str]:
    import reasoning_gym

    from composition_rl.rollout.base import load_template, render_prompt

    ds = reasoning_gym.create_dataset("gsm_symbolic", seed=0, size=n)
    template = load_template("boxed")
    return [render_prompt(template, ds[i]["question"]) for i in range(n)]


def timed(backend, prompts, n, sampling) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    out = backend.generate(prompts, n, sampling)
    dt = time.perf_counter() - t0
    toks = sum(c.tokens for row in out for c in row)
    stops = sum(c.finish_reason == "stop" for row in out for c in row)
    return dt, toks, stops


class HFFromGGUF:
    """transformers, float32, the model de-quantized from the GGUF; one batched generate."""

    name = "hf-fp32"

    def __init__(self, gguf: Path, threads: int) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(threads)
        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name, padding_side="left")
        if self.tok.pad_token_id is None:
            self.tok.pad_token = self.tok.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        self.model.eval()

    def generate(self, prompts, n, sampling):
        from composition_rl.rollout.base import Completion

        texts = [self.tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                              add_generation_prompt=True) for p in prompts]
        enc = self.tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        self.torch.manual_seed(sampling.seed)
        with self.torch.inference_mode():
            seqs = self.model.generate(**enc, max_new_tokens=sampling.max_tokens, do_sample=True,
                                       temperature=sampling.temperature, top_p=sampling.top_p,
                                       top_k=sampling.top_k, num_return_sequences=n,
                                       pad_token_id=self.tok.pad_token_id)
        stop = {self.tok.eos_token_id}
        rows = seqs[:, enc["input_ids"].shape[1]:].tolist()
        out = []
        for row in rows:
            k = next((j for j, t in enumerate(row) if t in stop), None)
            out.append(Completion(text="", tokens=len(row) if k is None else k + 1,
                                  finish_reason="length" if k is None else "stop"))
        return [out[i * n:(i + 1) * n] for i in range(len(prompts))]

    def close(self):
        self.model = None


VLLM_PY = REPO / ".venv-vllm" / "bin" / "python"


def vllm_child(spec_file: Path) -> int:
    """In .venv-vllm: time crl's vllm backend on the prompts of ``spec_file``; print one JSON line."""
    from composition_rl.rollout.base import SamplingConfig
    from composition_rl.rollout.vllm import VLLMRollout

    spec = json.loads(spec_file.read_text())
    sampling = SamplingConfig(**spec["sampling"])
    t0 = time.perf_counter()
    backend = VLLMRollout(spec["model"], dtype=spec["dtype"], kv_cache_gib=spec["kv_cache_gib"])
    load_s = time.perf_counter() - t0
    best = None
    for _ in range(spec["repeats"]):
        backend._drawn.clear()  # every repeat samples what the first did
        got = timed(backend, spec["prompts"], spec["n"], sampling)
        if best is None or got[1] / got[0] > best[1] / best[0]:
            best = got
    backend.close()
    print("VLLM_RESULT " + json.dumps({"seconds": best[0], "tokens": best[1], "stopped": best[2], "load_s": load_s}),
          flush=True)
    return 0


def run_vllm_child(gguf: Path, dtype: str, prompts: list[str], n: int, sampling, repeats: int,
                   threads: int, logdir: Path) -> dict:
    """One vllm option, in .venv-vllm; its figures as the child printed them."""
    if not VLLM_PY.exists():
        raise SystemExit(f"--vllm needs {VLLM_PY}: run bash scripts/setup_vllm_venv.sh")
    logdir.mkdir(parents=True, exist_ok=True)
    spec_file = logdir / f"vllm-{dtype}.json"
    spec_file.write_text(json.dumps({"model": str(gguf), "dtype": dtype, "prompts": prompts, "n": n,
                                     "sampling": sampling.to_dict(), "repeats": repeats, "kv_cache_gib": 1}))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"),
           # vLLM binds its worker to these cores (its default, auto, keeps one core free)
           "VLLM_CPU_OMP_THREADS_BIND": os.environ.get("VLLM_CPU_OMP_THREADS_BIND", f"0-{threads - 1}")}
    log = logdir / f"vllm-{dtype}.log"
    with open(log, "w") as f:
        r = subprocess.run([str(VLLM_PY), __file__, "--vllm-child", str(spec_file)], stdout=subprocess.PIPE,
                           stderr=f, text=True, env=env, cwd=REPO)
    lines = [x for x in r.stdout.splitlines() if x.startswith("VLLM_RESULT ")]
    if r.returncode != 0 or not lines:
        raise SystemExit(f"the vllm-{dtype} option failed (exit {r.returncode}); see {log}")
    return json.loads(lines[-1].split(" ", 1)[1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-awq-q4_k_m",
                    help="a bundled GGUF by name (scripts/real_llm_models.py list; the old short names work too)")
    ap.add_argument("--prompts", type=int, default=8, help="gsm_symbolic questions (default: 8)")
    ap.add_argument("-n", type=int, default=4, help="samples per prompt (default: 4)")
    ap.add_argument("--max-tokens", type=int, default=64, help="new tokens per completion (default: 64)")
    ap.add_argument("--parallel", default="8,16,32", help="llama backend sequences per step to try (default: 8,16,32)")
    ap.add_argument("--repeats", type=int, default=1, help="runs of each option; the best counts (default: 1)")
    ap.add_argument("--hf", action="store_true", help="also time transformers float32 from the GGUF")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads for every option (default: 2)")
    ap.add_argument("--vllm", default="", help="vLLM dtypes to time in .venv-vllm, e.g. float32,bfloat16 "
                    "(default: none)")
    ap.add_argument("--vllm-child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    if args.vllm_child:
        return vllm_child(args.vllm_child)

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ["LLM_THREADS"] = str(args.threads)
    from composition_rl.rollout.base import SamplingConfig, build_backend

    gguf = model_path(args.model)
    prompts = questions(args.prompts)
    sampling = SamplingConfig(max_tokens=args.max_tokens, seed=0)
    print(f"model {args.model} ({gguf.stat().st_size / 1e6:.0f} MB GGUF), {args.prompts} prompts x n={args.n}, "
          f"max_tokens {args.max_tokens}, {args.threads} threads, {platform.processor() or platform.machine()}, "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    results: dict[str, dict] = {}

    def run(name, make=None, child=None):
        if child is not None:  # timed in another venv: its own figures
            got = child()
            best, load_s = (got["seconds"], got["tokens"], got["stopped"]), got["load_s"]
        else:
            t0 = time.perf_counter()
            backend = make()
            load_s = time.perf_counter() - t0
            best = None
            for _ in range(args.repeats):
                dt, toks, stops = timed(backend, prompts, args.n, sampling)
                if best is None or toks / dt > best[1] / best[0]:
                    best = (dt, toks, stops)
            backend.close()
        dt, toks, stops = best
        results[name] = {"seconds": round(dt, 2), "tokens": toks, "tok_per_s": round(toks / dt, 2),
                         "stopped": stops, "load_s": round(load_s, 1)}
        print(f"  {name:10s} {toks:6d} tokens in {dt:7.1f} s = {toks / dt:6.1f} tok/s "
              f"({stops}/{args.prompts * args.n} stopped; load {load_s:.1f} s; system load {os.getloadavg()[0]:.1f})",
              flush=True)

    logdir = REPO / "runs" / "real_model_throughput"
    with Server(args.model, logdir) as url:
        run("server", lambda: build_backend("openai", base_url=url, model=args.model, concurrency=1))
    for p in [int(x) for x in args.parallel.split(",") if x]:
        run(f"llama-b{p}", lambda p=p: build_backend("llama", model=str(gguf), n_parallel=p, n_threads=args.threads))
    if args.hf:
        run("hf-fp32", lambda: HFFromGGUF(gguf, args.threads))
    for dtype in [x for x in args.vllm.split(",") if x]:
        run(f"vllm-{dtype}", child=lambda d=dtype: run_vllm_child(gguf, d, prompts, args.n, sampling, args.repeats,
                                                                  args.threads, logdir))

    base = results["server"]["tok_per_s"]
    best_name = max((k for k in results if k != "server"), key=lambda k: results[k]["tok_per_s"])
    for v in results.values():
        v["vs_server"] = round(v["tok_per_s"] / base, 2)
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, "results": results}, indent=1))
    print(f"best: {best_name}")
    print(f"speedup: {results[best_name]['tok_per_s'] / base:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
