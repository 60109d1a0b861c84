"""Build a tiny Qwen2 policy fully offline: tokenizer, weights and an SFT warm-up.

CPU-sized RL needs a model that starts with non-zero reward. This module trains, from
nothing and without any download:

1. a byte-level BPE tokenizer of about 300 tokens with Qwen2's own pre-tokenizer (digits
   split one per token), saved as a ``Qwen2Tokenizer`` with a chat template. transformers 5
   rebuilds the pre-tokenizer from the class for ``model_type: qwen2``, so we use exactly
   Qwen's, and :func:`check_tokenizer_roundtrip` proves the reloaded tokenizer agrees;
2. a Qwen2 model (hidden 128, 4 layers, about 1M parameters);
3. a short SFT warm-up on the arithmetic family of :mod:`composition_rl.jobs.train.arithmetic`
   with scratchpad targets and a share of composed (depth 2, 3) examples, because with no
   composed examples the model never composes zero-shot and depth-2 reward is exactly 0.

The build is cached: rerunning with the same config into the same folder returns at once.

>>> from composition_rl.jobs.tiny_model import TinyModelConfig
>>> TinyModelConfig(sft_steps=10).validate().sft_steps
10
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from composition_rl.io.files import atomic_write_json
from composition_rl.jobs.train.arithmetic import make_problem
from composition_rl.records import Problem, content_id

__all__ = [
    "ArithmeticTask",
    "CHAT_TEMPLATE",
    "TinyModelConfig",
    "build_tiny_model",
    "build_tokenizer",
    "check_tokenizer_roundtrip",
    "evaluate_greedy",
]

# Qwen-style chat markup. Completions end with <|im_end|>, which is the generation EOS.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
BUILD_INFO = "build_info.json"


@dataclass(frozen=True)
class TinyModelConfig:
    """What to build. The defaults take about 2 minutes on 2 idle CPU cores.

    The default task has one-digit operands: with this SFT recipe it reaches about 45%
    greedy accuracy at depth 1 after 150 steps, while two-digit operands (``digits=2``) were
    still at 3% after 700 steps of batch 32 (measured; see docs/training.md).

    Args:
        hidden_size, num_layers, num_heads, num_kv_heads, intermediate_size: Qwen2 shape.
        vocab_size: BPE vocabulary target (256 byte tokens + merges + 3 special tokens).
        sft_steps, sft_batch, sft_lr, warmup_steps: the SFT warm-up (AdamW, cosine decay).
        depth_mix: share of SFT examples per composition depth; the rest is depth 1.
        digits: operand digits of the arithmetic task (1 makes a much easier task, for tests).
        eval_n: held-out problems per depth for the greedy accuracy in ``build_info.json``.
        seed: every random choice (weights, data order) derives from it.
        threads: ``torch.set_num_threads`` while building (None: torch's default). One
            thread is as fast for a model this small and never stalls on a busy machine.
    """

    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 512
    max_position_embeddings: int = 512
    vocab_size: int = 300
    sft_steps: int = 300
    sft_batch: int = 32
    sft_lr: float = 2e-3
    warmup_steps: int = 50
    depth_mix: dict[int, float] = field(default_factory=lambda: {2: 0.15, 3: 0.05})
    digits: int = 1
    eval_n: int = 64
    seed: int = 0
    threads: int | None = 1

    def validate(self) -> TinyModelConfig:
        """Return ``self`` after checking the shape (heads divide the hidden size), the
        vocabulary size, the SFT settings and ``depth_mix``; raises ``ValueError`` naming the
        bad one."""
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must divide by num_heads ({self.num_heads}) "
                f"and num_heads by num_kv_heads ({self.num_kv_heads})"
            )
        if self.vocab_size < 256 + len(SPECIAL_TOKENS):
            raise ValueError(f"vocab_size ({self.vocab_size}) must be at least {256 + len(SPECIAL_TOKENS)}")
        if self.sft_steps < 0 or self.sft_batch < 1:
            raise ValueError(f"sft_steps ({self.sft_steps}) >= 0 and sft_batch ({self.sft_batch}) >= 1 required")
        share = sum(self.depth_mix.values())
        if any(d < 2 for d in self.depth_mix) or not 0 <= share < 1:
            raise ValueError(f"depth_mix {self.depth_mix} needs depths >= 2 and shares summing to < 1")
        return self

    def key(self) -> str:
        """Content hash of the config: the build cache key."""
        d = asdict(self)
        d["depth_mix"] = sorted(self.depth_mix.items())
        return content_id(json.dumps(d, sort_keys=True))


# --------------------------------------------------------------------------- task


@dataclass(frozen=True)
class ArithmeticTask:
    """The default SFT task: :func:`composition_rl.jobs.train.arithmetic.make_problem`.

    Any object with ``example(depth, index) -> (Problem, scratchpad)`` and a stable ``repr``
    can replace it (e.g. ``train.rg_task.RGTask``); its ``repr`` is part of the cache key.
    """

    seed: int = 0
    digits: int = 1

    def example(self, depth: int, index: int) -> tuple[Problem, str]:
        """Problem ``index`` of depth ``depth`` and its scratchpad
        (:func:`~composition_rl.jobs.train.arithmetic.make_problem` with this task's seed and digits)."""
        return make_problem(depth, seed=self.seed, index=index, digits=self.digits)


def _task_for(cfg: TinyModelConfig, task) -> object:
    return task if task is not None else ArithmeticTask(seed=cfg.seed, digits=cfg.digits)


# --------------------------------------------------------------------------- tokenizer


def _qwen_pre_tokenizer():
    """Qwen2's pre-tokenizer, taken from transformers' own Qwen2Tokenizer."""
    from tokenizers import Regex, pre_tokenizers
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def build_tokenizer(corpus: Sequence[str], vocab_size: int = 300):
    """Train a byte-level BPE on ``corpus`` and wrap it as a ``Qwen2Tokenizer``.

    The pre-tokenizer is Qwen2's (``\\p{N}`` splits every digit), so digits stay one token each.
    """
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, trainers
    from tokenizers.models import BPE
    from transformers import Qwen2Tokenizer

    raw = Tokenizer(BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    raw.normalizer = normalizers.NFC()
    raw.pre_tokenizer = _qwen_pre_tokenizer()
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    raw.train_from_iterator(list(corpus), trainer=trainer)
    model = json.loads(raw.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    tok = Qwen2Tokenizer(
        vocab=model["vocab"],
        merges=merges,
        unk_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def check_tokenizer_roundtrip(tokenizer, saved_dir: str | os.PathLike, texts: Sequence[str]) -> None:
    """Reload ``saved_dir`` with AutoTokenizer and require identical ids and decoding.

    Raises:
        RuntimeError: naming the first text whose tokenization differs.
    """
    from transformers import AutoTokenizer

    again = AutoTokenizer.from_pretrained(saved_dir)
    for t in texts:
        a, b = tokenizer(t)["input_ids"], again(t)["input_ids"]
        if a != b or again.decode(b) != t:
            raise RuntimeError(f"reloaded tokenizer differs on {t!r}: {a} vs {b}")
    msgs = [{"role": "user", "content": texts[0]}]
    if tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True) != again.apply_chat_template(
        msgs, tokenize=False, add_generation_prompt=True
    ):
        raise RuntimeError("reloaded tokenizer renders the chat template differently")


# --------------------------------------------------------------------------- data


def _sft_example(cfg: TinyModelConfig, index: int, task=None) -> tuple[str, str]:
    """(question, scratchpad) for SFT example ``index``; depth drawn from ``depth_mix``."""
    u = random.Random(f"mix:{cfg.seed}:{index}").random()
    depth, acc = 1, 0.0
    for d, share in sorted(cfg.depth_mix.items()):
        acc += share
        if u < acc:
            depth = d
            break
    p, sol = _task_for(cfg, task).example(depth, index)
    return p.question, sol


def _prompt_text(tokenizer, question: str) -> str:
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
    )


def _sft_batch(tokenizer, pairs: Sequence[tuple[str, str]]):
    """Right-padded (input_ids, attention_mask, labels); loss only on the answer tokens."""
    import torch

    rows, labels = [], []
    for q, sol in pairs:
        p = tokenizer(_prompt_text(tokenizer, q), add_special_tokens=False)["input_ids"]
        c = tokenizer(sol + "<|im_end|>", add_special_tokens=False)["input_ids"]
        rows.append(p + c)
        labels.append([-100] * len(p) + c)
    n = max(map(len, rows))
    pad = tokenizer.pad_token_id
    ids = torch.full((len(rows), n), pad, dtype=torch.long)
    lab = torch.full((len(rows), n), -100, dtype=torch.long)
    mask = torch.zeros((len(rows), n), dtype=torch.long)
    for i, (r, lb) in enumerate(zip(rows, labels)):
        ids[i, : len(r)] = torch.tensor(r)
        lab[i, : len(lb)] = torch.tensor(lb)
        mask[i, : len(r)] = 1
    return ids, mask, lab


# --------------------------------------------------------------------------- eval


def evaluate_greedy(model, tokenizer, depth: int, n: int, seed: int, max_new_tokens: int = 96,
                    digits: int = 1, task=None) -> float:
    """Greedy exact-match accuracy on ``n`` problems of one depth.

    Held out: the arithmetic family with another ``seed``; for a custom ``task`` its
    ``test_example`` when it has one (``RGTask(test_share=...)``), else the indices from
    1,000,000 on (held out only if the task's examples do not repeat).
    """
    import torch

    if task is None:
        probs = [make_problem(depth, seed=seed, index=i, digits=digits)[0] for i in range(n)]
    elif hasattr(task, "test_example"):
        probs = [task.test_example(depth, i)[0] for i in range(n)]
    else:
        probs = [task.example(depth, 1_000_000 + i)[0] for i in range(n)]
    tokenizer.padding_side = "left"
    enc = tokenizer([_prompt_text(tokenizer, p.question) for p in probs], return_tensors="pt", padding=True,
                    add_special_tokens=False)
    model.eval()
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                             eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    texts = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    from composition_rl.grading.extract import last_boxed

    return sum(last_boxed(t) == p.answer for t, p in zip(texts, probs)) / n


# --------------------------------------------------------------------------- build


def build_tiny_model(
    out_dir: str | os.PathLike,
    config: TinyModelConfig | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    task=None,
) -> Path:
    """Build (or reuse) the tiny model in ``out_dir`` and return the folder.

    ``task`` replaces the SFT task (default :class:`ArithmeticTask`): any object with
    ``example(depth, index) -> (Problem, scratchpad)``.

    The folder loads with ``AutoModelForCausalLM`` / ``AutoTokenizer`` and holds
    ``build_info.json`` (config, parameter count, greedy accuracy per depth, seconds).

    Example (not run here: it trains for minutes; tests build one with few steps):
        >>> build_tiny_model("runs/tiny", TinyModelConfig(sft_steps=300))  # doctest: +SKIP
    """
    import torch

    cfg = (config or TinyModelConfig()).validate()
    key = cfg.key() if task is None else content_id(cfg.key(), repr(task))
    out = Path(out_dir)
    info_path = out / BUILD_INFO
    if info_path.exists():
        info = json.loads(info_path.read_text())
        if info.get("key") == key:
            return out
    say = log or (lambda m: None)
    t0 = time.perf_counter()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)

    tok, corpus = _tiny_tokenizer(cfg, task)
    model = _tiny_qwen(tok, cfg)
    n_params = sum(p.numel() for p in model.parameters())
    say(f"tiny Qwen2: {n_params / 1e6:.2f}M parameters, vocab {len(tok)}")

    losses = _sft(model, tok, cfg, progress, task)
    acc = {str(d): evaluate_greedy(model, tok, d, cfg.eval_n, seed=cfg.seed + 10_000, digits=cfg.digits,
                                   task=task) for d in (1, 2, 3)}
    say("greedy accuracy on held-out problems: " + ", ".join(f"depth {d} {a:.0%}" for d, a in acc.items()))

    out.mkdir(parents=True, exist_ok=True)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(out)
    tok.save_pretrained(out)
    check_tokenizer_roundtrip(tok, out, [c for c in corpus[:50]] + ["Hello, world! 12+345=357. \\boxed{357}"])
    atomic_write_json(
        info_path,
        {
            "key": key,
            "task": repr(_task_for(cfg, task)),
            "config": {**asdict(cfg), "depth_mix": {str(k): v for k, v in cfg.depth_mix.items()}},
            "params": n_params,
            "vocab_size": len(tok),
            "sft_loss_first": losses[0] if losses else None,
            "sft_loss_last": losses[-1] if losses else None,
            "greedy_accuracy": acc,
            "seconds": round(time.perf_counter() - t0, 1),
        },
    )
    return out


def _tiny_tokenizer(cfg: TinyModelConfig, task=None):
    """The tokenizer trained on 2000 SFT examples, and that corpus; raises ``RuntimeError``
    when a special token is missing or a digit is not one token."""
    # The corpus is rendered through the chat template, so role names and markup get merges.
    probe = build_tokenizer([], 256 + len(SPECIAL_TOKENS))
    corpus = []
    for i in range(2000):
        q, sol = _sft_example(cfg, i, task)
        corpus.append(_prompt_text(probe, q) + sol + "<|im_end|>\n")
    tok = build_tokenizer(corpus, cfg.vocab_size)
    for token in SPECIAL_TOKENS:
        if tok.convert_tokens_to_ids(token) is None:
            raise RuntimeError(f"special token {token} missing from the tokenizer")
    digits = [tok.convert_tokens_to_ids(str(d)) for d in range(10)]
    if tok("1234567890", add_special_tokens=False)["input_ids"] != digits[1:] + digits[:1]:
        raise RuntimeError("digits are not one token each; the pre-tokenizer is not Qwen's")
    return tok, corpus


def _tiny_qwen(tok, cfg: TinyModelConfig):
    """A freshly initialised Qwen2 of ``cfg``'s shape over ``tok``'s vocabulary."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    mcfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    return Qwen2ForCausalLM(mcfg)


def _sft(model, tok, cfg: TinyModelConfig, progress: bool, task=None) -> list[float]:
    import torch

    from composition_rl.jobs.train.step_progress import step_progress

    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.sft_lr, weight_decay=0.01)

    def lr_at(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        t = (step - cfg.warmup_steps) / max(1, cfg.sft_steps - cfg.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    losses: list[float] = []
    with step_progress("SFT warm-up", cfg.sft_steps, enabled=progress) as advance:
        for step in range(cfg.sft_steps):
            pairs = [_sft_example(cfg, step * cfg.sft_batch + j, task) for j in range(cfg.sft_batch)]
            # One forward per depth: composed examples are 2-3x longer, and padding every
            # row to the longest would more than double the cost of a step.
            buckets: dict[int, list[tuple[str, str]]] = {}
            for q, sol in pairs:
                buckets.setdefault(sol.count("="), []).append((q, sol))
            total_tokens, total_loss = 0, 0.0
            for bucket in buckets.values():
                ids, mask, labels = _sft_batch(tok, bucket)
                n = int((labels[:, 1:] != -100).sum())
                loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss * n
                loss.backward()
                total_tokens += n
                total_loss += loss.item()
            for prm in model.parameters():
                if prm.grad is not None:
                    prm.grad /= total_tokens
            loss = torch.tensor(total_loss / total_tokens)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            losses.append(round(loss.item(), 4))
            advance(f"loss {loss.item():.3f}")
    return losses
