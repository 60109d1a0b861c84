"""Build a tiny random-init Qwen2 chat model and tokenizer on disk, offline, in seconds.

The tokenizer is a byte-level BPE trained on a few sentences with Qwen2's own
pre-tokenizer (split regex + ByteLevel) and NFC normaliser, because transformers 5 rebuilds
any ``model_type: qwen2`` tokenizer with that pre-tokenizer whatever the file says; using
the same one keeps encode/decode consistent. The chat template is Qwen's ChatML. The model
is random: its output is nonsense, which is the point of testing checks against it.
"""

from __future__ import annotations

from pathlib import Path

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

QWEN2_SPLIT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""

CORPUS = [
    "What is the sum of the values of n for which |2n - 7| = 3? The answer is 7.",
    'Return JSON: {"v1": "7", "definition": "the sum", "constant": "5", "rewritten": "<VAR>"}',
    "Let X be the number of apples. Y is 6 less than X. Simplify 2((5p + 1) - 2p * 4).",
    "\\frac{3}{4} \\sqrt{2} (3,-1) 0123456789 $x^2 + y^2 = 25$ \\boxed{12}",
]


def build_tiny_qwen(out: str | Path, seed: int = 0) -> Path:
    """Write a tiny Qwen2ForCausalLM + tokenizer to ``out`` and return the path."""
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tk = Tokenizer(models.BPE())
    tk.normalizer = normalizers.NFC()
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tk.train_from_iterator(CORPUS * 4, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    fast.chat_template = CHATML
    fast.save_pretrained(out)
    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=tk.get_vocab_size(),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=2048,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    Qwen2ForCausalLM(cfg).save_pretrained(out)
    return out
