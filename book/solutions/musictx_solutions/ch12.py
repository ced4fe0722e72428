"""Chapter 12 exercises: cross-attention by hand, a greedy sampler that keeps the melody, and a probe of
what the harmoniser's encoder and decoder see.

Notebook: notebooks/12_harmonise.ipynb
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ...device import evaluating, to_model
from ...engine.harmonise import harmonise, melody_tokens
from ...engine.sample import generate
from ...io.data import Piece
from ...io.midi import note_name
from ...io.tokens import BOS, HOLD, MASK, N_SPECIAL, PAD, REST, VOCAB_SIZE, decode, encode
from ...models.config import ModelConfig
from ...models.harmoniser import CrossAttention, melody_steps
from ...models.registry import build_model
from ...models.tasks import MELODY
from . import grading

__all__ = ["cross_attention", "harmonise_greedy", "future_moves", "exercise_12_1", "exercise_12_2", "exercise_12_3",
           "check_12_1", "check_12_2", "check_12_3"]

BANNED = (PAD, BOS, HOLD, MASK)          # what ``generate`` never samples


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
    late = _overwritten(model, torch.as_tensor(soprano)).numpy()      # the soprano written in after the fact
    lower = np.ones(len(tokens), dtype=bool)
    lower[0::4] = False                                               # BOS, then the sopranos: not compared
    differ = int((late[lower] != tokens[lower]).sum())
    print("why greedy: top_k=1 keeps one token, whose renormalised probability is 1, so every draw returns it "
          "whatever the seed")
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


# ----------------------------------------------------------------------------- checkers

def _package_cross(Wq: torch.Tensor, Wk: torch.Tensor, Wv: torch.Tensor, n_heads: int, L: int = 4) -> CrossAttention:
    """The package's CrossAttention with these row-vector weights, its relative term zero and W_O the identity."""
    C = Wq.shape[0]
    cross = CrossAttention(ModelConfig(n_embd=C, n_heads=n_heads), L).to(Wq.dtype).eval()
    with torch.no_grad():
        cross.q.weight.copy_(Wq.T)                                    # nn.Linear computes x W^T
        cross.kv.weight.copy_(torch.cat([Wk.T, Wv.T]))
        cross.rel.E.zero_()
        cross.proj.weight.copy_(torch.eye(C, dtype=Wq.dtype))
        cross.proj.bias.zero_()
    return cross


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


@grading.checker
def check_12_1(cross_attention: Callable) -> str:
    """Exercise 12.1: cross-attention, the queries from the raster and the keys and values from the melody.

    ``cross_attention(x, memory, Wq, Wk, Wv, n_heads)``: your function. x (B, T, C), memory (B, S, C),
    Wq, Wk, Wv (C, C) used as row vectors (Q = x Wq, K = memory Wk, V = memory Wv); per head
    softmax(Q K^T / sqrt(d)) V with d = C / n_heads and no mask; returns the heads side by side (B, T, C),
    before any W_O.

    Checks: equal to the package's ``CrossAttention`` with the same weights, its relative term zero and its
    W_O the identity, within 1e-6, for float64 (B, T, S, C, n_heads) = (2, 7, 5, 8, 2), (1, 4, 9, 12, 3),
    (3, 6, 6, 8, 1), and within 1e-4 for float32 (2, 5, 3, 16, 4). Returns True or False.
    """
    g = torch.Generator().manual_seed(0)
    for (B, T, S, C, nh), dtype, atol in (((2, 7, 5, 8, 2), torch.float64, 1e-6),
                                          ((1, 4, 9, 12, 3), torch.float64, 1e-6),
                                          ((3, 6, 6, 8, 1), torch.float64, 1e-6),
                                          ((2, 5, 3, 16, 4), torch.float32, 1e-4)):
        x = torch.randn(B, T, C, generator=g, dtype=dtype)
        memory = torch.randn(B, S, C, generator=g, dtype=dtype)
        Ws = [2 * torch.randn(C, C, generator=g, dtype=dtype) / math.sqrt(C) for _ in range(3)]   # peaked weights
        with torch.no_grad():
            ref = _package_cross(*Ws, nh)(x, melody_steps(torch.arange(T)), memory)
        args = (x, memory, *Ws, nh)
        known = {"a causal mask": _cross_variant(*args, causal=True),
                 "no 1/sqrt(d) scale": _cross_variant(*args, scale=1.0),
                 "1/sqrt(C), the model's width, instead of the head size's": _cross_variant(*args, scale=math.sqrt(C)),
                 "one head as wide as the model: n_heads unused": _cross_variant(*args, heads=1),
                 "a softmax over the queries, not the keys": _cross_variant(*args, dim=-2)}
        if S != T:
            known["keys and values from x, not from the memory"] = _cross_variant(*args, kv_from_x=True)
        shown = f"(B, T, S, C, n_heads) = ({B}, {T}, {S}, {C}, {nh})"
        got = grading.tensor("the output", grading.call(f"your function with {shown}", cross_attention,
                                                        x.clone(), memory.clone(), *[W.clone() for W in Ws], nh))
        if tuple(got.shape) == (B, S, C) and S != T:
            raise grading.Fail(f"with {shown} the output has shape {tuple(got.shape)}, the memory's: the queries "
                               f"come from x, one per raster token, so the output is (B, T, C) = {(B, T, C)}")
        grading.close(f"with {shown} ({str(dtype)[6:]}) the output", got, ref, atol,
                      ref="CrossAttention without its relative term and W_O", known=known)
    return ("equals the package's CrossAttention (relative term and W_O off) for 4 shapes with T != S and T = S, "
            "float64 and float32")


def _overwritten(model: nn.Module, soprano: torch.Tensor) -> torch.Tensor:
    """The wrong sampler: the model writes its own soprano too, and the melody replaces it at the end."""
    out = torch.as_tensor(generate(model, np.array([BOS]), len(soprano), top_k=1, cache=False))
    out[1::4] = soprano
    return out


@torch.no_grad()
def _greedy_raster_only(model: nn.Module, soprano: torch.Tensor) -> torch.Tensor:
    """``harmonise_greedy`` calling ``model(idx)`` alone: for a harmoniser, the melody only up to the present."""
    idx = torch.tensor([[BOS]])
    with evaluating(model):
        for i in range(4 * len(soprano)):
            if i % 4 == 0:
                nxt = soprano[i // 4].view(1, 1)
            else:
                logits = model(to_model(model, idx))[0, -1].float().cpu()
                logits[list(BANNED)] = float("-inf")
                nxt = logits.argmax().view(1, 1)
            idx = torch.cat([idx, nxt], dim=1)
    return idx[0]


def _tiny(name: str, seed: int) -> nn.Module:
    """A small random model of ``build_model(name)`` on the CPU, its weights spread so its logits have clear maxima."""
    torch.manual_seed(seed)
    model = build_model(name, ModelConfig(n_embd=16, n_heads=2, n_layers=2, context=64)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
    return model


@grading.checker
def check_12_2(harmonise_greedy: Callable, model: nn.Module | None = None) -> str:
    """Exercise 12.2: a greedy sampler that keeps the melody.

    ``harmonise_greedy(model, soprano)``: your function. ``soprano`` is a 1-D LongTensor of soprano tokens
    (S,) on the CPU, one per step; it returns the raster (1 + 4 S,), BOS first, written one token at a time:
    every fourth token the soprano as given (forced), and each alto, tenor and bass the argmax of the model's
    next-token logits given every token before it, with PAD, BOS, HOLD and MASK banned (what ``generate``
    never samples). A tensor, array or list, on any device.

    ``model``: yours (a causal decoder, the trained ``relative``; a harmoniser if your function passes it the
    whole melody, ``model(idx, melody=...)``), or by default a small random ``relative`` on the CPU. Checks,
    for melodies of 12 and 3 steps (a rest in each): BOS first, the soprano kept exactly, no banned token,
    and the tokens equal to ``generate(model, [BOS], S, top_k=1, forced=...)`` (greedy: top_k = 1 leaves the
    argmax alone), with or without the cache. Returns True or False.
    """
    model = _tiny("relative", 0) if model is None else model
    if 48 > model.context:
        raise grading.Fail(f"the model's context is {model.context} tokens; the check needs 48 (12 steps)")
    g = torch.Generator().manual_seed(0)
    soprano = torch.randint(29, 51, (12,), generator=g)              # MIDI 60..81, the soprano's range
    soprano[7] = REST
    for sop in (soprano, torch.tensor([40, REST, 38])):
        S = len(sop)
        got = grading.tensor("the result", grading.call(f"your function on a melody of {S} steps",
                                                        harmonise_greedy, model, sop.clone())).long().flatten()
        if len(got) == 4 * S and (got[0::4] == sop).all():
            raise grading.Fail(f"for {S} steps your function returns {len(got)} tokens, without BOS: return BOS, "
                               f"then S A T B per step ({1 + 4 * S} tokens)")
        if len(got) != 1 + 4 * S:
            raise grading.Fail(f"for {S} steps your function returns {len(got)} tokens, expected 1 + 4 S = "
                               f"{1 + 4 * S}: BOS, then S A T B per step")
        if got[0] != BOS:
            raise grading.Fail(f"the first token is {int(got[0])}, expected BOS = {BOS}")
        wrong = (got[1::4] != sop).nonzero()
        if len(wrong):
            s = int(wrong[0])
            raise grading.Fail(f"the soprano of step {s} is token {int(got[1 + 4 * s])}, the melody's is "
                               f"{int(sop[s])}: force every soprano token")
        banned = torch.isin(got[1:], torch.tensor(BANNED)).nonzero()
        if len(banned):
            p = 1 + int(banned[0])
            name = {PAD: "PAD", BOS: "BOS", HOLD: "HOLD", MASK: "MASK"}[int(got[p])]
            raise grading.Fail(f"token {p} is {name} ({int(got[p])}), which generate never samples: set the "
                               f"logits of PAD, BOS, HOLD and MASK to -inf before the argmax")
        forced = np.full(4 * S, -1)
        forced[0::4] = sop.numpy()
        refs = [torch.as_tensor(generate(model, np.array([BOS]), S, top_k=1, forced=forced, cache=c))
                for c in (False, True)]
        if any(torch.equal(got, r) for r in refs):
            continue
        p = int((got != refs[0]).nonzero()[0])
        why = ""
        if model.task is not MELODY and torch.equal(got, _overwritten(model, sop)):
            why = ("; it matches a raster whose soprano the model wrote itself, replaced by the melody afterwards: "
                   "force each soprano token before the model writes the voices under it")
        elif model.task is MELODY and torch.equal(got, _greedy_raster_only(model, sop)):
            why = ("; it matches the greedy raster of a harmoniser that read only the melody so far: a harmoniser "
                   "reads the whole melody, model(idx, melody=soprano[None])")
        raise grading.Fail(f"for {S} steps, token {p} is {int(got[p])}, expected {int(refs[0][p])} (the argmax "
                           f"given the tokens before it, as generate(top_k=1) picks){why}")
    return ("BOS first, the soprano kept, no banned token, equal to generate(top_k=1, forced=...) for melodies "
            "of 12 and 3 steps")


def _random_raster(steps: int, g: torch.Generator) -> torch.Tensor:
    """BOS and ``steps`` steps of random pitch tokens, the soprano in MIDI 60..81 (a semitone up stays in range)."""
    x = torch.randint(N_SPECIAL, VOCAB_SIZE, (steps, 4), generator=g)
    x[:, 0] = torch.randint(29, 51, (steps,), generator=g)
    return torch.cat([torch.tensor([BOS]), x.flatten()])


@torch.no_grad()
def _probe_variants(model: nn.Module, tokens: torch.Tensor, t: int) -> dict[str, tuple[str, float]]:
    """Numbers a wrong probe returns: (which of the two, value) per mistake."""
    x = to_model(model, tokens)[None]
    p = 4 * (t + 1) + 1
    x2 = x.clone()
    x2[:, p::4] = torch.where(x[:, p::4] >= N_SPECIAL, x[:, p::4] + 1, x[:, p::4])
    with evaluating(model):
        m, m2 = model.encode(x[:, 1::4]), model.encode(x2[:, 1::4])
        y, y2 = model(x), model(x2, melody=x[:, 1::4])
        return {"the encoder's outputs of every step, the changed ones too": ("encoder", (m2 - m).abs().max().item()),
                "the encoder's outputs of steps 0..t + 1: step t + 1 changed": (
                    "encoder", (m2 - m)[:, : t + 2].abs().max().item()),
                "the mean absolute change, not the largest": ("encoder", (m2 - m)[:, : t + 1].abs().mean().item()),
                "the full model, whose memory follows the new melody: hold the memory of the old one": (
                    "decoder", (model(x2) - y)[:, :p].abs().max().item()),
                "positions 0..p, position p the changed token itself: stop before it": (
                    "decoder", (y2 - y)[:, : p + 1].abs().max().item())}


@grading.checker
def check_12_3(probe: Callable, model: nn.Module | None = None) -> str:
    """Exercise 12.3: what the harmoniser's encoder and decoder see of the melody's future.

    ``probe(model, tokens, t)``: your function. ``model`` is a Harmoniser, ``tokens`` a raster (1 + 4 S,),
    BOS first, a 1-D LongTensor on the CPU, ``t`` a step. It raises every soprano note after step t by a
    semitone (tokens 4 (t + 1) + 1, 4 (t + 2) + 1, ... up by one; a rest stays a rest) and returns two
    numbers, each the largest absolute change: (1) of the encoder's outputs ``model.encode(melody)`` (1, S, C)
    at steps 0..t; (2) of the logits at positions 0 .. 4 (t + 1) (those before the first changed token) when
    the model reads the changed raster with the old melody's memory, ``model(new, melody=old_melody)``.

    ``model``: yours (the trained harmoniser, on its device), or by default a small random one on the CPU.
    Checks, for t = 4 and 9 on random 15-step rasters: (1) equals the reference ``exercises.ch12.future_moves``
    (relative 1e-3) and is > 0; (2) is below 1e-5. Returns True or False.
    """
    model = _tiny("harmoniser", 0) if model is None else model
    if model.task is not MELODY:
        raise grading.Fail(f"{type(model).__name__} has no encoder: pass a Harmoniser (build_model('harmoniser', ...))")
    g = torch.Generator().manual_seed(0)
    for t in (4, 9):
        tokens = _random_raster(15, g)
        enc_ref, _ = future_moves(model, tokens, t)
        got = grading.numbers("the result (encoder, decoder)",
                              grading.call(f"your probe with t = {t}", probe, model, tokens.clone(), t), 2)
        for which, value in zip(("encoder", "decoder"), got):
            ok = (math.isclose(value, enc_ref, rel_tol=1e-3, abs_tol=1e-6) if which == "encoder" else
                  abs(value) < 1e-5)
            if ok:
                continue
            why = next((f" (it matches {name})" for name, (w, v) in _probe_variants(model, tokens, t).items()
                        if w == which and math.isclose(value, v, rel_tol=1e-3, abs_tol=1e-7)), "")
            if which == "encoder":
                raise grading.Fail(f"with t = {t} your encoder number is {value:.4g}, the encoder's outputs of steps "
                                   f"0..{t} move by {enc_ref:.4g}{why}")
            raise grading.Fail(f"with t = {t} your decoder number is {value:.4g}, expected 0: with the old memory, "
                               f"the logits before token {4 * (t + 1) + 1} cannot move in a causal decoder{why}")
    return (f"the encoder's earlier outputs move (by {enc_ref:.3g} at t = 9), the decoder's logits with the old "
            "memory do not")
