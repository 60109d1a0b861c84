"""A tiny random-init Qwen2 model and tokenizer, built offline in about a second.

Its output is nonsense, but generation is real: the rollout, profile and eval tests and
``benchmarks/rollout_throughput.py`` run actual batched sampling through it. The tokenizer
is a byte-level BPE trained with the ``tokenizers`` library using Qwen2's own pre-tokenizer
(transformers 5 rebuilds any Qwen2 tokenizer with that one on load, so another would change
tokenization between save and load), with a ChatML chat template.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_CORPUS = [
    "What is 1+1? The answer is \\boxed{2}.",
    "Please reason step by step, and put your final answer within \\boxed{}.",
    "Let X be the answer. Y is 6 less than X. Compute 2Y + 3 = 17, so the answer is 17.",
    "The sum of the roots is 7, and the product of the roots is 12.",
]


def build_tiny_qwen(
    out_dir: str | Path,
    seed: int = 0,
    hidden: int = 64,
    layers: int = 2,
    max_positions: int = 1024,
    corpus: list[str] | None = None,
) -> Path:
    """Write a tiny Qwen2ForCausalLM + Qwen2 tokenizer with a chat template to ``out_dir``."""
    import torch
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, trainers
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    out = Path(out_dir)
    tok = Tokenizer(
        BPE(unk_token=None, continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False)
    )
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=384,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator((corpus or _CORPUS) * 20, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    cfg = Qwen2Config(
        vocab_size=tok.get_vocab_size(),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg)
    model.generation_config.eos_token_id = fast.eos_token_id
    model.generation_config.pad_token_id = fast.pad_token_id
    model.save_pretrained(out)
    return out
