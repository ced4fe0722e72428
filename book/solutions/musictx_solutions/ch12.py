"""Chapter 12 exercises: cross-attention by hand, a greedy sampler that keeps the melody, and a probe of
what the harmoniser's encoder and decoder see.

Notebook: notebooks/12_harmonise.ipynb
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from musictx_lite.classroom.checks.ch12 import (
    BANNED,
    _cross_cases,
    _overwritten,
    _package_cross,
    _probe_cases,
    _tiny,
)
from musictx_lite.device import evaluating, to_model
from musictx_lite.engine.harmonise import harmonise, melody_tokens
from musictx_lite.engine.sample import generate
from musictx_lite.io.data import Piece
from musictx_lite.io.midi import note_name
from musictx_lite.io.tokens import BOS, N_SPECIAL, REST, decode, encode
from musictx_lite.models.harmoniser import melody_steps
from musictx_lite.models.tasks import MELODY

__all__ = ["cross_attention", "harmonise_greedy", "future_moves", "exercise_12_1", "exercise_12_2", "exercise_12_3"]


def cross_attention(x: torch.Tensor, memory: torch.Tensor, Wq: torch.Tensor, Wk: torch.Tensor, Wv: torch.Tensor,
                    n_heads: int) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d)) V per head, with row vectors: Q = x Wq from the raster x (B, T, C), K = memory Wk
    and V = memory Wv from the encoder's output (B, S, C); W* (C, C), d = C / n_heads, no mask. Returns the
    heads side by side (B, T, C), before W_O."""
    B, T, C = x.shape
    S, hs = memory.shape[1], C // n_heads
    q = (x @ Wq).view(B, T, n_heads, hs).transpose(1, 2)              # (B, nh, T, hs): one query per token
    k = (memory @ Wk).view(B, S, n_heads, hs).transpose(1, 2)         # (B, nh, S, hs): one key per melody step
    v = (memory @ Wv).view(B, S, n_heads, hs).transpose(1, 2)         # (B, nh, S, hs)
    w = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(hs), dim=-1)    # (B, nh, T, S): no mask, rows sum to 1
    return (w @ v).transpose(1, 2).reshape(B, T, C)                   # (B, T, C)


@torch.no_grad()
def harmonise_greedy(model: nn.Module, soprano) -> torch.Tensor:
    """The raster (1 + 4 S,) of a melody's soprano tokens (S,): BOS, then per step the soprano as given and the
    alto, tenor and bass, each the argmax of the model's next-token logits (PAD, BOS, HOLD, MASK banned) given
    every token before it. The whole raster must fit in the model's context (no sliding window). A causal
    decoder reads the raster only; a harmoniser also reads the whole melody (``melody=``). On the CPU."""
    soprano = to_model(model, soprano).long()                         # (S,)
    if 4 * len(soprano) > model.context:
        raise ValueError(f"{len(soprano)} steps do not fit a context of {model.context} tokens")
    melody = soprano[None] if model.task is MELODY else None          # (1, S): the harmoniser's encoder reads it
    idx = to_model(model, [BOS])[None]                                # (1, 1)
    with evaluating(model):
        for i in range(4 * len(soprano)):
            if i % 4 == 0:                                            # a soprano token: given, never sampled
                nxt = soprano[i // 4].view(1, 1)
            else:                                                     # alto, tenor, bass: the model's best
                logits = (model(idx) if melody is None else model(idx, melody=melody))[0, -1].float()   # (V,)
                logits[list(BANNED)] = float("-inf")
                nxt = logits.argmax().view(1, 1)
            idx = torch.cat([idx, nxt], dim=1)                        # (1, i + 2)
    return idx[0].cpu()                                               # (1 + 4 S,)


@torch.no_grad()
def future_moves(model: nn.Module, tokens, t: int) -> tuple[float, float]:
    """Raise every soprano note after step ``t`` of the raster ``tokens`` (1 + 4 S,) by a semitone (rests stay)
    and return how far (max abs) (1) the encoder's outputs of steps 0..t move and (2) the logits of the
    positions before the first changed token move when the decoder reads the changed raster with the
    memory of the old melody. The encoder sees the future: (1) > 0. The decoder is causal: (2) = 0."""
    x = to_model(model, tokens)[None]                                 # (1, T): BOS, then S A T B per step
    p = 4 * (t + 1) + 1                                               # the first changed token: soprano of t + 1
    x2 = x.clone()
    x2[:, p::4] = torch.where(x[:, p::4] >= N_SPECIAL, x[:, p::4] + 1, x[:, p::4])   # a semitone up
    with evaluating(model):
        m, m2 = model.encode(x[:, 1::4]), model.encode(x2[:, 1::4])   # (1, S, C) each
        encoder = (m2[:, : t + 1] - m[:, : t + 1]).abs().max().item()
        y = model(x)                                                  # (1, T, V)
        y2 = model(x2, melody=x[:, 1::4])                             # the changed raster, the old memory
        decoder = (y2[:, :p] - y[:, :p]).abs().max().item()
    return encoder, decoder


def exercise_12_1(C: int = 8, n_heads: int = 2, T: int = 7, S: int = 5) -> float:
    torch.manual_seed(0)
    x, memory = torch.randn(2, T, C, dtype=torch.float64), torch.randn(2, S, C, dtype=torch.float64)
    Wq, Wk, Wv = (torch.randn(C, C, dtype=torch.float64) / math.sqrt(C) for _ in range(3))
    cross = _package_cross(Wq, Wk, Wv, n_heads, L=S)                 # its relative term and W_O switched off
    steps = melody_steps(torch.arange(T))                             # the melody step of each query
    mine = cross_attention(x, memory, Wq, Wk, Wv, n_heads)
    gap = (mine - cross(x, steps, memory)).abs().max().item()
    assert gap < 1e-10
    print(f"cross_attention equals the package's CrossAttention (relative term and W_O off): max gap {gap:.1e}")
    print(f"queries: {T} raster tokens; keys and values: {S} melody steps; each head's weights are ({T}, {S}), "
          "not square")
    memory2 = memory.clone()
    memory2[:, -1] += 1.0                                             # change the melody's last step only
    moved = (cross_attention(x, memory2, Wq, Wk, Wv, n_heads) - mine).abs().amax(dim=(0, 2))   # (T,)
    assert (moved > 0).all()
    print(f"change the memory's last step: every query's output moves (no mask), the first by {moved[0]:.2e}")
    with torch.no_grad():
        cross.rel.E.normal_(generator=torch.Generator().manual_seed(1))
    rel = (cross(x, steps, memory) - mine).abs().max().item()
    print(f"with the relative term on, the package's output moves by {rel:.2f}: S^rel tells a token which "
          "step of the melody is its own")
    print(f"why ({T}, {S}): a row per query, a raster token, and a column per key, a melody step; the two "
          "sequences differ in length (a chorale's raster holds 4 tokens per melody step)")
    print("why no mask: the melody is given whole before sampling starts and none of it is sampled, so no "
          "token can see an answer it must predict; the raster's own future stays hidden by the causal "
          "self-attention, and the keys and values here come from the melody alone")
    return gap


def exercise_12_2(model: nn.Module, melody: np.ndarray, n_show: int = 8) -> np.ndarray:
    steps = min(len(melody), model.context // 4)                      # the whole raster in one window
    melody = np.asarray(melody)[:steps]
    soprano = melody_tokens(melody)                                   # (steps,)
    tokens = harmonise_greedy(model, soprano).numpy()
    assert (tokens[1::4] == soprano).all()
    forced = np.full(4 * steps, -1)
    forced[0::4] = soprano
    ref = generate(model, np.array([BOS]), steps, top_k=1, forced=forced, cache=False)
    assert np.array_equal(tokens, ref)
    grid = decode(tokens)                                             # (steps, 4) MIDI pitches
    print(f"{steps} steps: the soprano is the melody, token for token; the greedy raster equals "
          "generate(top_k=1, forced=...) re-encoding the window")
    same = np.array_equal(grid, harmonise(model, melody, top_k=1, rules="none", candidates=1))
    print(f"harmonise(model, melody, top_k=1, rules=\"none\"), which samples with the cache, gives "
          f"{'the same grid' if same else 'another grid (a near tie of two logits decided by rounding)'}")
    print("why greedy: top_k=1 keeps one token, whose renormalised probability is 1, so every draw returns it "
          "whatever the seed")
    if model.task is not MELODY:                                      # a decoder can write its own soprano
        late = _overwritten(model, torch.as_tensor(soprano)).numpy()  # the soprano written in after the fact
        lower = np.ones(len(tokens), dtype=bool)
        lower[0::4] = False                                           # BOS, then the sopranos: not compared
        differ = int((late[lower] != tokens[lower]).sum())
        print(f"why the soprano first: the alto of a step is predicted from the tokens before it, its soprano "
              f"among them; let the model write its own soprano and put the melody in afterwards, and "
              f"{differ} of the {int(lower.sum())} alto, tenor and bass tokens differ: they were chosen under "
              "another melody")
    show = lambda p: "rest" if p < 0 else note_name(p)
    for v, name in enumerate(("S", "A", "T", "B")):
        print(f"{name}: " + " ".join(f"{show(p):>4s}" for p in grid[:n_show, v]))
    return grid


def exercise_12_3(model: nn.Module, piece: Piece, n_steps: int = 16, t: int = 8) -> dict:
    tokens = torch.as_tensor(encode(piece.pitches[:n_steps]))         # (1 + 4 n_steps,)
    encoder, decoder = future_moves(model, tokens, t)
    p = 4 * (t + 1) + 1
    x = to_model(model, tokens)[None]
    x2 = x.clone()
    x2[:, p::4] = torch.where(x[:, p::4] >= N_SPECIAL, x[:, p::4] + 1, x[:, p::4])
    x3 = x.clone()
    x3[:, p + 1] = REST if x[0, p + 1] != REST else N_SPECIAL         # the alto of step t + 1 instead
    with evaluating(model), torch.no_grad():
        y = model(x)
        full = (model(x2)[:, :p] - y[:, :p]).abs().max().item()       # the memory follows the new melody
        alto = (model(x3)[:, : p + 1] - y[:, : p + 1]).abs().max().item()
    out = {"encoder": encoder, "decoder": decoder, "full": full, "alto": alto}
    print(f"the soprano after step {t} a semitone up (tokens {p}, {p + 4}, ...):")
    print(f"  the encoder's outputs of steps 0..{t} move by {encoder:.2e}: it sees the melody's future")
    print(f"  the logits of positions 0..{p - 1} move by {full:.2e} through the new memory, and by {decoder:.2e} "
          "with the old memory: the decoder itself is causal")
    print(f"the alto of step {t + 1} changed instead (token {p + 1}): the logits before it move by {alto:.2e}")
    print(f"which is zero: the decoder's move with the old memory ({decoder:.1e}). Its self-attention is "
          "causal, so positions before the change never read the changed tokens, and the memory it reads is "
          "the old melody's")
    print(f"the path when the memory follows: the encoder has no mask, so every step's memory moves with the "
          f"melody's future; each raster position reads the memory through cross-attention's keys and values "
          f"(the {full:.1e} above), whereas a changed alto reaches no earlier position ({alto:.1e})")
    return out


# ----------------------------------------------------------------------------- what the checkers compare with

def _cross_variant(x, memory, Wq, Wk, Wv, n_heads, causal=False, kv_from_x=False, scale=None, heads=None, dim=-1):
    """``cross_attention`` with one of a student's likely mistakes."""
    nh = heads or n_heads
    B, T, C = x.shape
    src = x if kv_from_x else memory
    S, hs = src.shape[1], C // nh
    q = (x @ Wq).view(B, T, nh, hs).transpose(1, 2)
    k, v = ((src @ W).view(B, S, nh, hs).transpose(1, 2) for W in (Wk, Wv))
    scores = q @ k.transpose(-2, -1) / (math.sqrt(hs) if scale is None else scale)
    if causal:
        scores = scores.masked_fill(~torch.ones(T, S, dtype=torch.bool).tril(), float("-inf"))
    return (F.softmax(scores, dim=dim) @ v).transpose(1, 2).reshape(B, T, C)


@torch.no_grad()
def _probe_variants(model: nn.Module, tokens: torch.Tensor, t: int) -> dict[str, float]:
    """The numbers a wrong probe returns, by the keys of ``checks.ch12.PROBE_MISTAKES``."""
    x = to_model(model, tokens)[None]
    p = 4 * (t + 1) + 1
    x2 = x.clone()
    x2[:, p::4] = torch.where(x[:, p::4] >= N_SPECIAL, x[:, p::4] + 1, x[:, p::4])
    with evaluating(model):
        m, m2 = model.encode(x[:, 1::4]), model.encode(x2[:, 1::4])
        y, y2 = model(x), model(x2, melody=x[:, 1::4])
        return {"every_step": (m2 - m).abs().max().item(),
                "one_step_more": (m2 - m)[:, : t + 2].abs().max().item(),
                "mean": (m2 - m)[:, : t + 1].abs().mean().item(),
                "memory_follows": (model(x2) - y)[:, :p].abs().max().item(),
                "changed_token": (y2 - y)[:, : p + 1].abs().max().item()}


def expected() -> dict:
    """What the checkers compare with (``musictx_solutions.expected``): check_12_1's softmax over the queries (a
    mistake) on its first case (2, 7, 8), and check_12_3's numbers on its small random harmoniser, for t = 4 and 9:
    ``future_moves`` and the wrong probes' (``_probe_variants``)."""
    (_, _, _, _, nh), _, _, x, memory, Ws = next(_cross_cases())
    over_queries = _cross_variant(x, memory, *Ws, nh, dim=-2)
    with torch.random.fork_rng(devices=[]):
        model = _tiny("harmoniser", 0)
    probe = []
    for t, tokens in _probe_cases():
        encoder, decoder = future_moves(model, tokens, t)
        probe.append({"t": t, "encoder": encoder, "decoder": decoder, "mistakes": _probe_variants(model, tokens, t)})
    return {"softmax_over_queries": over_queries.tolist(), "probe": probe}
