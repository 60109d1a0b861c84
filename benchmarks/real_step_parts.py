"""The parts of a real-cpu GRPO step, each timed alone: generation, and one update.

    .venv/bin/python benchmarks/real_step_parts.py gen    [--rows 24] [--new-tokens 96] [--threads 2]
    .venv/bin/python benchmarks/real_step_parts.py update [--rows 16] [--new-tokens 96] [--threads 2]

A whole step of ``crl train --config real-cpu`` takes minutes on a loaded 2-core machine;
this times its two big parts on the same model (SmolLM2-135M-Instruct from its GGUF, float32,
as the trainer loads it) and the same prompts (the preset's ``basic_arithmetic`` questions in
the model's chat template with the boxed-answer instruction), so a setting (threads,
attention implementation, lengths) can be compared without running a step:

- ``gen``: ``model.generate`` as TRL calls it (sampling at the preset's temperature, top-k
  off, the end-of-turn token as stop), ``--rows`` rows = prompts x 4 completions;
- ``update``: one forward pass over ``--rows`` rows of prompt + ``--new-tokens`` completion
  tokens with log-probabilities of the completion only (TRL's ``logits_to_keep``), the
  backward pass and one AdamW step, each timed.

The last line is JSON with the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

QUESTIONS = [f"Calculate {a} {op} {b}." for a, op, b in
             [(3, "+", 4), (5, "-", 9), (7, "+", 2), (8, "-", 8), (1, "+", 6), (9, "-", 3), (0, "-", 4), (6, "+", 6)]]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("part", choices=["gen", "update"])
    p.add_argument("--model", default="smollm2-135m-instruct-q4_1")
    p.add_argument("--rows", type=int, help="sequences (default: 24 for gen, 16 for update)")
    p.add_argument("--new-tokens", type=int, default=96)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--attn", default="sdpa", help="attention implementation: sdpa or eager")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    import torch
    from transformers import GenerationConfig

    from composition_rl.io.hf_model import load_causal_lm
    from composition_rl.jobs.export import user_prompt

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    tok, lm = load_causal_lm(args.model)
    lm.config._attn_implementation = args.attn
    load_s = time.perf_counter() - t0
    rows = args.rows or (24 if args.part == "gen" else 16)
    texts = [tok.apply_chat_template([{"role": "user", "content": user_prompt(q)}], add_generation_prompt=True,
                                     tokenize=False) for q in QUESTIONS]
    texts = [texts[(i // 4) % len(texts)] for i in range(rows)]  # 4 completions per prompt, as the preset
    tok.padding_side = "left"
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    out = {"part": args.part, "rows": rows, "prompt_tokens": enc["input_ids"].shape[1], "new_tokens": args.new_tokens,
           "threads": args.threads, "attn": args.attn, "load_s": round(load_s, 1)}
    lm.train()  # as TRL holds it while generating
    if args.part == "gen":
        gc = GenerationConfig(max_new_tokens=args.new_tokens, do_sample=True, temperature=args.temperature, top_p=1.0,
                              top_k=0, pad_token_id=tok.pad_token_id, eos_token_id=[tok.eos_token_id],
                              disable_compile=True)
        with torch.no_grad():
            t0 = time.perf_counter()
            ids = lm.generate(**enc, generation_config=gc)
            out["generate_s"] = round(time.perf_counter() - t0, 1)
        comp = ids[:, enc["input_ids"].shape[1]:]
        out["decode_steps"] = comp.shape[1]
        out["mean_len"] = round(float((comp != tok.pad_token_id).sum(1).float().mean()), 1)
        print(f"generate {rows} rows x up to {args.new_tokens} tokens: {out['generate_s']} s "
              f"({out['decode_steps']} decode steps, mean length {out['mean_len']})")
    else:
        n = args.new_tokens
        ids = torch.cat([enc["input_ids"], torch.randint(100, 1000, (rows, n))], 1)
        mask = torch.cat([enc["attention_mask"], torch.ones(rows, n, dtype=torch.long)], 1)
        opt = torch.optim.AdamW(lm.parameters(), lr=1e-7)
        t0 = time.perf_counter()
        logits = lm(input_ids=ids, attention_mask=mask, logits_to_keep=n + 1).logits[:, :-1]
        logps = torch.log_softmax(logits, -1).gather(-1, ids[:, -n:, None]).squeeze(-1)
        t1 = time.perf_counter()
        (-logps.mean()).backward()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad()
        t3 = time.perf_counter()
        out.update(forward_s=round(t1 - t0, 1), backward_s=round(t2 - t1, 1), optimizer_s=round(t3 - t2, 1))
        print(f"update on {rows} rows x {ids.shape[1]} tokens: forward {out['forward_s']} s, backward "
              f"{out['backward_s']} s, AdamW {out['optimizer_s']} s")
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
