"""Chapter 7 exercises: the size of the relative tables, RoPE is relative, ALiBi's reach.

Notebook: notebooks/07_relative_positions.ipynb
"""
from __future__ import annotations

import math

import torch

from musictx_lite.models.config import ModelConfig
from musictx_lite.models.relative import ALiBi, Rotary

__all__ = ["exercise_7_1", "exercise_7_2", "exercise_7_3"]


def exercise_7_1(L: int = 2048, k: int = 16, d_model: int = 512,
                 heads: int = 8) -> dict[str, tuple[int, int] | int]:
    """Per layer: parameters and float32 bytes of the gathered tensors, Shaw vs Music Transformer.

    For the Music Transformer also the bytes of its relative logits, one (L, L) matrix per head.
    """
    hs = d_model // heads
    shaw = (2 * (2 * k + 1) * hs, 2 * L * L * hs * 4)      # a^K, a^V tables; (L, L, hs) x 2
    mt = (heads * L * hs, heads * L * hs * 4)               # E^r per head; no (L, L, hs) tensor
    logits = heads * L * L * 4                              # S^rel: (nh, L, L), the skew's
    print(f"L = {L}, k = {k}, D = {d_model}, {heads} heads (head size d = {hs}), one layer:")
    mib = 2**20
    print(f"  {'Shaw:':<26s}{shaw[0]:>10,d} parameters, {shaw[1] / mib:>9,.1f} MiB gathered, "
          "2 x (L, L, d)")
    print(f"  {'Music Transformer (skew):':<26s}{mt[0]:>10,d} parameters, {mt[1] / mib:>9,.1f} MiB "
          f"for E^r, {heads} x (L, d)")
    print(f"  {'':<26s}{'':>10s}{'':13s}{logits / mib:>9,.1f} MiB of relative logits, "
          f"{heads} x (L, L)")
    assert shaw[0] == 2 * (2 * k + 1) * hs and mt[0] == heads * L * hs
    assert shaw[1] == 2 * L * L * hs * 4 and logits == heads * L * L * 4
    print("Shaw: parameters grow with k, memory with L^2 d.")
    print("Music Transformer: parameters and E^r grow with L d, relative logits with L^2")
    print("  (one (L, L) matrix per head, the size of the attention scores).")
    return {"shaw": shaw, "music transformer": mt, "relative logits": logits}


def exercise_7_2(T: int = 12, shift: int = 5, seed: int = 0) -> tuple[float, float]:
    """RoPE scores do not change when every position moves by ``shift``; learned positions do."""
    torch.manual_seed(seed)
    cfg = ModelConfig(n_embd=16, n_heads=2, context=T + shift)
    rot = Rotary(cfg)
    q, k = torch.randn(1, 1, T, 8), torch.randn(1, 1, T, 8)       # (B, nh, T, hs)
    pad = torch.zeros(1, 1, shift, 8)
    s0 = rot(q) @ rot(k).transpose(-2, -1)                          # (1, 1, T, T)
    q2, k2 = torch.cat([pad, q], -2), torch.cat([pad, k], -2)       # same vectors, positions + shift
    s1 = (rot(q2) @ rot(k2).transpose(-2, -1))[..., shift:, shift:]  # (1, 1, T, T)
    rope_change = (s1 - s0).abs().max().item()
    pos = torch.nn.Embedding(T + shift, 8)                          # learned absolute positions
    x = torch.randn(T, 8)
    a0 = (x + pos.weight[:T]) @ (x + pos.weight[:T]).T              # (T, T)
    a1 = (x + pos.weight[shift:]) @ (x + pos.weight[shift:]).T      # (T, T)
    abs_change = (a1 - a0).abs().max().item()
    print(f"shift every position by {shift}: largest change of a score")
    print(f"  RoPE:                      {rope_change:.2e}")
    print(f"  learned absolute positions: {abs_change:.2f}")
    assert rope_change < 1e-4 and abs_change > 0.1
    return rope_change, abs_change


def exercise_7_3(context: int, n_heads: int = 4, level: float = -5.0) -> dict[str, list]:
    """ALiBi: the distance at which each head's penalty m_h (j - i) reaches ``level``, against ``context``,
    the length the chapter trains at (its farthest key is context - 1 tokens back)."""
    slopes = ALiBi(ModelConfig(n_embd=16 * n_heads, n_heads=n_heads)).slopes.tolist()
    reach = [-level / m for m in slopes]
    far = context - 1                                               # the farthest key a query sees
    kept = [math.exp(-m * far) for m in slopes]                     # its weight factor e^(-m (L - 1))
    beyond = [h for h, r in enumerate(reach, 1) if r > far]
    print(f"ALiBi, {n_heads} heads: the distance where the penalty reaches {level:g}, against the context "
          f"L = {context}")
    print(f"(the farthest key, L - 1 = {far} tokens back = {far / 4:.1f} steps of 4 voices)")
    for h, (m, r, k) in enumerate(zip(slopes, reach, kept), 1):
        where = "beyond the context" if r > far else "inside the context"
        share = f"{k:.1%}" if k >= 1e-3 else f"{k:.1e}"
        print(f"  head {h}: slope {m:.4f}, {r:7.1f} tokens = {r / 4:6.1f} steps: {where}; "
              f"the key {far} back keeps {share}")
    assert all(a > b for a, b in zip(reach[1:], reach[:-1]))
    assert abs(reach[0] - (-level) * 2 ** (8 / n_heads)) < 1e-6
    assert all((k > math.exp(level)) == (h in beyond) for h, k in enumerate(kept, 1))
    print(f"a penalty of {level:g} leaves a key e^{level:g} = {math.exp(level):.1%} of the weight it had at "
          "distance 0")
    inside = [h for h in range(1, n_heads + 1) if h not in beyond]
    names = lambda hs: ", ".join(map(str, hs))
    if inside:
        print(f"heads {names(inside)}: inside a {context}-token crop, every key farther back than the head's "
              "reach keeps less than that")
    if beyond:
        print(f"heads {names(beyond)}: the penalty stays above {level:g} over the whole context, so they see "
              "all of it")
    return {"reach": reach, "kept": kept, "beyond": beyond}
