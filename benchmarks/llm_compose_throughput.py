"""Throughput of the LLM composition engine against a loopback OpenAI-compatible server.

The server (tests/fakes/openai_server.py with the scripted composition model of
tests/fakes/composer_script.py) runs in its own process and answers every request after a
fixed latency (default 150 ms). An untimed warm-up pass lets the scripted model answer each
prompt once, so that in the timed pass the server costs its fixed latency and nothing else
(a real inference server's compute is on another machine). With ``concurrency`` requests in flight the best possible
rate is ``concurrency / latency`` calls/s; the benchmark prints the achieved rate as a ratio
of that bound, side by side with:

* the transport floor: the same number of bare chat calls through the same backend, no
  composition work (what the client alone achieves on this machine);
* the official client's default httpx transport (``--compare-httpx``), which the backend
  replaces for ``http://`` endpoints.

It also prints calls per accepted composition (the issue's budget: at most 4).

    .venv/bin/python benchmarks/llm_compose_throughput.py            # MATH train, 3000 candidates
    .venv/bin/python benchmarks/llm_compose_throughput.py --candidates 1000 --compare-httpx
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the loopback server and scripted model live there


def _serve(latency: float, conn) -> None:
    sys.path.insert(0, str(REPO / "tests"))
    from fakes.composer_script import good_composer
    from fakes.openai_server import FakeOpenAIServer

    memo: dict[str, str] = {}

    def model(body: dict) -> str:
        # a real server's compute is elsewhere and costs only its fixed latency: answer each
        # distinct prompt once (warm-up pass) and replay it after that
        key = body["messages"][-1]["content"]
        if key not in memo:
            memo[key] = good_composer(body)
        return memo[key]

    with FakeOpenAIServer(model, latency_s=latency) as srv:
        conn.send(srv.url)
        conn.recv()  # wait for "stop"
        conn.send(srv.requests)


def _problems():
    path = REPO.parent / "shared" / "data" / "train" / "math_train.json"
    if path.exists():
        from composition_rl.io.readers import load_problems

        return load_problems(str(path)).problems, "MATH train"
    from composition_rl.io.readers import load_reasoning_gym

    return load_reasoning_gym(seed=0).problems, "reasoning-gym default"


def _measure(args, url: str, problems, tmp: Path):
    """Compose against the fake server (after an untimed warm-up pass), replay it from the
    cache, and time the bare calls: (stats, replay stats, wall seconds, floor calls/s, httpx
    calls/s or None)."""
    from composition_rl.chat.base import ChatRequest, run_chat_batch
    from composition_rl.chat.openai import OpenAIChat
    from composition_rl.jobs.compose.pipeline import ComposeConfig
    from composition_rl.jobs.compose.run import run_compose
    from composition_rl.spc.llm import LLMComposeConfig

    cache_path = str(tmp / "cache.jsonl")
    cfg = LLMComposeConfig(
        base_urls=(url,),
        model="fake-model",
        concurrency=args.concurrency,
        timeout_s=30,
        cache=cache_path,
        plan="model",  # one proposal per link, as measured in docs/llm_engine.md (the program plan calls far less)
    )
    # warm-up: imports, connections
    b = OpenAIChat([url], "fake-model", concurrency=args.concurrency)
    run_chat_batch(b, [ChatRequest.user(f"warm {i}") for i in range(args.concurrency)])

    cc = ComposeConfig(
        depth=2, pool_size=20, max_candidates=args.candidates, seed=0, engine="llm"
    )
    # warm-up pass (untimed, no cache): the scripted model answers each prompt once
    warm = LLMComposeConfig(
        base_urls=(url,), model="fake-model", concurrency=args.concurrency, no_cache=True, plan="model"
    )
    run_compose(problems, cc, tmp / "warm", llm_config=warm, progress=False)
    t0 = time.perf_counter()
    stats = run_compose(
        problems, cc, tmp / "run", llm_config=cfg, progress=False
    )
    wall = time.perf_counter() - t0
    # the engine alone: the same job again into a fresh folder, every reply from the cache
    replay = run_compose(
        problems, cc, tmp / "replay", llm_config=cfg, progress=False
    )
    assert replay["this_run"]["calls"] == 0
    calls = stats["this_run"]["calls"]

    # transport floor: the same number of bare calls, same backend and concurrency
    b = OpenAIChat([url], "fake-model", concurrency=args.concurrency)
    reqs = [ChatRequest.user(f"floor {i} " + "word " * 200) for i in range(calls)]
    t0 = time.perf_counter()
    run_chat_batch(b, reqs)
    floor_cps = calls / (time.perf_counter() - t0)

    httpx_cps = None
    if args.compare_httpx:
        n = min(calls, 1000)
        b = OpenAIChat([url], "fake-model", concurrency=args.concurrency, lean_transport=False)
        run_chat_batch(b, [ChatRequest.user(f"warm {i}") for i in range(args.concurrency)])
        t0 = time.perf_counter()
        run_chat_batch(b, [ChatRequest.user(f"httpx {i} " + "word " * 200) for i in range(n)])
        httpx_cps = n / (time.perf_counter() - t0)
    return stats, replay, wall, floor_cps, httpx_cps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--latency", type=float, default=0.15, help="server latency in seconds (default 0.15)"
    )
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--candidates", type=int, default=3000)
    ap.add_argument(
        "--compare-httpx",
        action="store_true",
        help="also time the client's default httpx transport",
    )
    args = ap.parse_args()

    problems, source = _problems()
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(args.latency, parent), daemon=True)
    server.start()
    url = child.recv()
    bound = args.concurrency / args.latency
    tmp_root = tempfile.TemporaryDirectory()
    try:
        stats, replay, wall, floor_cps, httpx_cps = _measure(args, url, problems, Path(tmp_root.name))
        calls = stats["this_run"]["calls"]
        compose_cps = calls / stats["elapsed_s"]
    finally:
        child.send("stop")
        served = child.recv()
        server.join(5)
        tmp_root.cleanup()

    out = {
        "load_average_1min": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "source": source,
        "candidates": stats["candidates"],
        "accepted": stats["accepted"],
        "acceptance": stats["acceptance"],
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "bound_calls_per_s": round(bound, 1),
        "compose_calls": calls,
        "compose_elapsed_s": stats["elapsed_s"],
        "compose_wall_s": round(wall, 2),
        "compose_calls_per_s": round(compose_cps, 1),
        "compose_ratio_of_bound": round(compose_cps / bound, 3),
        "floor_calls_per_s": round(floor_cps, 1),
        "floor_ratio_of_bound": round(floor_cps / bound, 3),
        "compose_vs_floor": round(compose_cps / floor_cps, 3),
        "engine_only_candidates_per_s": round(replay["candidates"] / replay["elapsed_s"], 1),
        "engine_only_requests_per_s": round(replay["llm"]["requests"] / replay["elapsed_s"], 1),
        "httpx_calls_per_s": round(httpx_cps, 1) if httpx_cps else None,
        "httpx_ratio_of_bound": round(httpx_cps / bound, 3) if httpx_cps else None,
        "calls_per_accepted": stats["llm"]["requests_per_llm_accepted"],
        "tokens": stats["llm"]["prompt_tokens"] + stats["llm"]["completion_tokens"],
        "server_requests": served,
    }
    print(json.dumps(out, indent=2))
    print(
        f"\ncompose: {compose_cps:.0f} calls/s = {compose_cps / bound:.2f} x the bound "
        f"({args.concurrency} / {args.latency} s = {bound:.0f} calls/s); transport floor {floor_cps:.0f} calls/s "
        f"= {floor_cps / bound:.2f} x; {out['calls_per_accepted']} calls per accepted composition"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
