"""Chapter 2 exercises: self-attention.

Notebook: notebooks/02_self_attention.ipynb
"""
from __future__ import annotations

import math
import textwrap

import torch
import torch.nn as nn
import torch.nn.functional as F

from musictx_lite.io.data import Splits, load_data
from musictx_lite.io.tokens import VOICES
from musictx_lite.models.fill import all_steps, fill_logits
from .ch0 import same_voice_nll

__all__ = ["exercise_2_1", "exercise_2_2", "exercise_2_3"]


def exercise_2_1(widths=(16, 64, 256, 1024), T: int = 32, seed: int = 0) -> dict[int, tuple[float, float]]:
    """Mean entropy (nats) of softmax rows of random scores, scaled and unscaled, per d_k."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for d in widths:
        q, k = torch.randn(T, d, generator=g), torch.randn(T, d, generator=g)
        ent = []
        for scale in (math.sqrt(d), 1.0):
            w = F.softmax(q @ k.T / scale, -1)
            ent.append(float(-(w * torch.log(w.clamp_min(1e-30))).sum(-1).mean()))
        out[d] = (ent[0], ent[1])
        print(f"d_k = {d:5d}: entropy scaled {ent[0]:.2f}, unscaled {ent[1]:.2f} (uniform: {math.log(T):.2f})")
    return out


def _fill_nll(model: nn.Module, steps: torch.Tensor, voice: int) -> float:
    """Mean NLL of ``voice`` hidden in every step (the model may live on any device)."""
    return F.cross_entropy(fill_logits(model, steps, voice)[:, voice], steps[:, voice]).item()


def exercise_2_2(model: nn.Module, data: Splits | None = None) -> dict[str, float]:
    """Validation NLL of a fill-in model, per hidden voice."""
    data = data or load_data()
    steps = all_steps(data.valid)
    out = {name: _fill_nll(model, steps, v) for v, name in enumerate(VOICES)}
    print("  ".join(f"{k}: {v:.3f}" for k, v in out.items()), "(nats/note)")
    hard = max(out, key=out.get)
    alone = same_voice_nll(data)                     # exercise 0.2: each voice from its own previous step
    hard0 = max(alone, key=alone.get)
    if hard == hard0:
        why = (f"Hardest to fill in: the {hard}, as for exercise 0.2's same-voice predictor: its notes are the "
               f"least predictable both from its own line (exercise 0.2) and from the other three voices of the "
               f"step (this model).")
    else:
        why = (f"Hardest to fill in: the {hard}; exercise 0.2's same-voice predictor found the {hard0} hardest. "
               f"They measure different things: that predictor sees only the voice's own previous step, where "
               f"the {hard0} moves most; this model sees the other three voices of the same step, and the chord "
               f"they sound pins some voices down more than others: the {hard} is the one they leave most open.")
    print(textwrap.fill(why, 88))
    return out


def exercise_2_3(model: nn.Module, data: Splits | None = None) -> tuple[float, float]:
    """Mean fill-in NLL before and after swapping the soprano and bass voice vectors."""
    data = data or load_data()
    steps = all_steps(data.valid)
    before = sum(_fill_nll(model, steps, v) for v in range(4)) / 4
    saved = model.voice_emb.data.clone()
    model.voice_emb.data[[0, 3]] = saved[[3, 0]]
    after = sum(_fill_nll(model, steps, v) for v in range(4)) / 4
    model.voice_emb.data.copy_(saved)
    print(f"NLL {before:.3f} -> {after:.3f} nats/note with soprano and bass roles swapped")
    return before, after
