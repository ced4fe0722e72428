"""What a training step computes in: float32, or autocast to bfloat16 or float16 with float32 weights.

Notebook: notebooks/11_paper.ipynb (the recipe); ``training.train`` uses it in every chapter.

On CUDA: bf16 from Ampere on (compute capability 8.0), whose tensor cores have it; fp16 with a
gradient scaler before that. A T4 (7.5, Colab's free GPU) answers yes to
``torch.cuda.is_bf16_supported()`` but emulates bf16 without tensor cores, slower than the fp16 its
tensor cores compute. On a CPU: bf16 only where asked (``TrainConfig.cpu_bf16``) and where the CPU
has it in hardware; elsewhere oneDNN emulates it, several times slower than float32.
"""
from __future__ import annotations

import contextlib
import warnings

import torch


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bf16 in hardware (AVX-512 or AMX, as oneDNN asks). On an AVX2 CPU oneDNN
    emulates it, slower than float32, and has no bf16 LSTM at all."""
    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    try:
        return bool(check()) if check is not None else False
    except RuntimeError:
        return False


def precision(device: torch.device | str, cpu_bf16: bool = False) -> str:
    """What ``train`` computes in on ``device``: 'bfloat16', 'float16' (autocast, float32 weights) or
    'float32'."""
    device = torch.device(device)
    if device.type == "cpu":
        return "bfloat16" if cpu_bf16 and cpu_has_bf16() else "float32"
    if device.type != "cuda" or not torch.cuda.is_available():
        return "float32"
    major, _ = torch.cuda.get_device_capability(device)
    return "bfloat16" if major >= 8 else "float16"


def amp(device: torch.device | str, cpu_bf16: bool = False) -> tuple:
    """``(autocast, scaler)`` for ``device``: ``autocast()`` opens the context a forward pass runs in, and
    ``scaler`` is a ``torch.amp.GradScaler``, enabled for float16 only. Disabled, its ``scale(loss)`` is
    the loss, its ``step(opt)`` is ``opt.step()`` and ``unscale_`` and ``update`` do nothing: one loop
    serves every precision."""
    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(precision(device, cpu_bf16))
    kind = torch.device(device).type
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # a CPU build's scaler warns that CUDA is missing
        scaler = torch.amp.GradScaler("cuda", enabled=dtype == torch.float16)
    if dtype is None:
        return contextlib.nullcontext, scaler
    return (lambda: torch.autocast(kind, dtype=dtype)), scaler
