"""Sampling music from a trained model: temperature, top-k, and a prompt.

Notebook: notebooks/01_attention_in_rnns.ipynb (first used there).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

from .data import Piece
from .tokens import BOS, HOLD, MASK, PAD, encode
from .device import model_device, to_model
from .tasks import NEXT_TOKEN, evaluating


def prompt_from(piece: Piece, n_steps: int) -> np.ndarray:
    """The tokens of the first ``n_steps`` 16th steps of a piece, BOS included."""
    return encode(piece.pitches[:n_steps])


@torch.no_grad()
def generate(model: nn.Module, prompt: np.ndarray | None = None, n_steps: int = 64, temperature: float = 1.0,
             top_k: int | None = None, seed: int | None = 0, banned: tuple[int, ...] = (PAD, BOS, HOLD, MASK)) -> np.ndarray:
    """Continue ``prompt`` (tokens, BOS first) by ``n_steps`` steps of 4 tokens; return all tokens.

    Tokens in ``banned`` are never sampled. A model with a finite ``context``
    sees the last window of it, cut on a step boundary so that voices stay aligned.
    """
    if getattr(model, "task", None) is not NEXT_TOKEN:
        raise ValueError(f"{type(model).__name__} fills in notes; it does not continue a sequence")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    prompt = np.asarray([BOS] if prompt is None else prompt, dtype=np.int64)
    ctx = getattr(model, "context", None)
    if ctx is not None and len(prompt) > ctx:
        raise ValueError(f"prompt has {len(prompt)} tokens but the model's context is {ctx}; "
                         f"use a shorter prompt (at most {(ctx - 1) // 4} steps)")
    device = model_device(model)
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed if seed is not None else int(torch.randint(2**31, (1,))))
    idx = to_model(model, prompt)[None]                              # (1, T)
    with evaluating(model):
        for _ in range(4 * n_steps):
            window = idx
            if ctx is not None and idx.shape[1] > ctx:
                start = -(-(idx.shape[1] - ctx) // 4) * 4             # a multiple of 4: voices stay aligned
                window = idx[:, start:]
            logits = model(window)[0, -1].float() / temperature      # (V,)
            logits[list(banned)] = float("-inf")
            if top_k is not None:
                kth = torch.topk(logits, min(top_k, logits.numel()))[0][-1]
                logits[logits < kth] = float("-inf")
            nxt = torch.multinomial(torch.softmax(logits, -1).cpu(), 1, generator=gen)
            idx = torch.cat([idx, nxt.to(device)[None]], dim=1)
    return idx[0].cpu().numpy()
