"""Where a model runs, and how: pick the best device, bring tensors to the model's device, and
evaluate in eval mode (``evaluating``).

Notebook: notebooks/01_attention_in_rnns.ipynb (first used there); book/using.md.

``train()`` moves a model to CUDA on Colab (MPS on Apple silicon). From then on,
every tensor fed to the model must be on that device too, or PyTorch stops with
"Expected all tensors to be on the same device". The analysis helpers of the
package (attention weights, fill-in logits, the causality probes, the
exercises) all go through ``to_model``, and hand their results back on the CPU.
"""
from __future__ import annotations

import contextlib

import numpy as np
import torch
import torch.nn as nn

from . import settings


def pick_device() -> torch.device:
    """cuda, then mps, then cpu (``MUSICTX_DEVICE`` overrides)."""
    if settings.device() is not None:
        return torch.device(settings.device())
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def model_device(model: nn.Module) -> torch.device:
    """The device of the model's parameters (CPU for a model without any)."""
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def to_model(model: nn.Module, x) -> torch.Tensor:
    """``x`` (a tensor, a NumPy array or a list of tokens) as a tensor on the model's device."""
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(x)
    return torch.as_tensor(x).to(model_device(model))


@contextlib.contextmanager
def evaluating(model: nn.Module):
    """Put ``model`` in eval mode for a block, and restore its mode afterwards, even on error."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)
