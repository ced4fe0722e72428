"""Chapter 12's exercise checkers: cross-attention by hand (12.1), a greedy sampler that keeps the melody (12.2),
a probe of what the harmoniser's encoder and decoder see (12.3).

Notebook: notebooks/12_harmonise.ipynb
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch
import torch.nn as nn

from ...engine.sample import generate
from ...io.tokens import BOS, HOLD, MASK, N_SPECIAL, PAD, REST, VOCAB_SIZE
from ...models.config import ModelConfig
from ...models.harmoniser import CrossAttention, melody_steps
from ...models.registry import build_model
from ...models.tasks import MELODY, NEXT_TOKEN
from .. import grading

__all__ = ["check_12_1", "check_12_2", "check_12_3"]

BANNED = (PAD, BOS, HOLD, MASK)          # what ``generate`` never samples


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


def _cross_cases():
    """check_12_1's cases, drawn in this order from one seeded generator: ((B, T, S, C, n_heads), dtype, atol,
    x (B, T, C), memory (B, S, C), [Wq, Wk, Wv] (C, C) each)."""
    g = torch.Generator().manual_seed(0)
    for (B, T, S, C, nh), dtype, atol in (((2, 7, 5, 8, 2), torch.float64, 1e-6),
                                          ((1, 4, 9, 12, 3), torch.float64, 1e-6),
                                          ((3, 6, 6, 8, 1), torch.float64, 1e-6),
                                          ((2, 5, 3, 16, 4), torch.float32, 1e-4)):
        x = torch.randn(B, T, C, generator=g, dtype=dtype)
        memory = torch.randn(B, S, C, generator=g, dtype=dtype)
        Ws = [2 * torch.randn(C, C, generator=g, dtype=dtype) / math.sqrt(C) for _ in range(3)]   # peaked weights
        yield (B, T, S, C, nh), dtype, atol, x, memory, Ws


@torch.no_grad()
def _cross_mistakes(case: int, x, memory, Ws, nh: int) -> dict[str, torch.Tensor]:
    """The outputs of a student's likely mistakes, by the package's CrossAttention (its relative term off), except
    the softmax over the queries, which the book's reference computed and stored for the first case (where that
    mistake fails)."""
    (_, T, C), S = x.shape, memory.shape[1]
    Wq, Wk, Wv = Ws
    steps = melody_steps(torch.arange(T))
    hs = C // nh
    cross = _package_cross(Wq, Wk, Wv, nh)
    # query i with a causal mask sees the melody's steps 0..i: the package's layer on that prefix of the memory
    causal = torch.cat([cross(x[:, i: i + 1], steps[i: i + 1], memory[:, : i + 1]) for i in range(T)], dim=1)
    known = {"a causal mask": causal,
             "no 1/sqrt(d) scale": _package_cross(Wq * math.sqrt(hs), Wk, Wv, nh)(x, steps, memory),
             "1/sqrt(C), the model's width, instead of the head size's": _package_cross(
                 Wq * math.sqrt(hs / C), Wk, Wv, nh)(x, steps, memory),
             "one head as wide as the model: n_heads unused": _package_cross(Wq, Wk, Wv, 1)(x, steps, memory)}
    if case == 0:
        known["a softmax over the queries, not the keys"] = torch.tensor(
            grading.expected(12)["softmax_over_queries"], dtype=x.dtype)
    if S != T:
        known["keys and values from x, not from the memory"] = cross(x, steps, x)
    return known


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
    for case, ((B, T, S, C, nh), dtype, atol, x, memory, Ws) in enumerate(_cross_cases()):
        with torch.no_grad():
            ref = _package_cross(*Ws, nh)(x, melody_steps(torch.arange(T)), memory)
        shown = f"(B, T, S, C, n_heads) = ({B}, {T}, {S}, {C}, {nh})"
        got = grading.tensor("the output", grading.call(f"your function with {shown}", cross_attention,
                                                        x.clone(), memory.clone(), *[W.clone() for W in Ws], nh))
        if tuple(got.shape) == (B, S, C) and S != T:
            raise grading.Fail(f"with {shown} the output has shape {tuple(got.shape)}, the memory's: the queries "
                               f"come from x, one per raster token, so the output is (B, T, C) = {(B, T, C)}")
        grading.close(f"with {shown} ({str(dtype)[6:]}) the output", got, ref, atol,
                      ref="CrossAttention without its relative term and W_O", known=_cross_mistakes(case, x, memory,
                                                                                                 Ws, nh))
    return ("equals the package's CrossAttention (relative term and W_O off) for 4 shapes with T != S and T = S, "
            "float64 and float32")


def _overwritten(model: nn.Module, soprano: torch.Tensor) -> torch.Tensor:
    """The wrong sampler: the model writes its own soprano too, and the melody replaces it at the end."""
    out = torch.as_tensor(generate(model, np.array([BOS]), len(soprano), top_k=1, cache=False))
    out[1::4] = soprano
    return out


class _RasterOnly(nn.Module):
    """A harmoniser seen by ``generate`` as a plain decoder: it is called as ``model(idx)``, so its encoder reads
    the melody in the raster so far, not the whole melody."""

    task = NEXT_TOKEN

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model, self.context = model, model.context

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.model(idx)


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
        elif model.task is MELODY and torch.equal(got, torch.as_tensor(generate(
                _RasterOnly(model), np.array([BOS]), S, top_k=1, forced=forced, cache=False))):
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


def _probe_cases():
    """check_12_3's cases: (t, a random 15-step raster), the rasters drawn in this order from one seeded generator."""
    g = torch.Generator().manual_seed(0)
    return [(t, _random_raster(15, g)) for t in (4, 9)]


PROBE_MISTAKES = {                       # the numbers of a wrong probe, stored for the small random harmoniser
    "every_step": ("encoder", "the encoder's outputs of every step, the changed ones too"),
    "one_step_more": ("encoder", "the encoder's outputs of steps 0..t + 1: step t + 1 changed"),
    "mean": ("encoder", "the mean absolute change, not the largest"),
    "memory_follows": ("decoder", "the full model, whose memory follows the new melody: hold the memory of the old "
                                  "one"),
    "changed_token": ("decoder", "positions 0..p, position p the changed token itself: stop before it"),
}


def _probe_numbers(probe: Callable, model: nn.Module, tokens: torch.Tensor, t: int) -> list[float]:
    return grading.numbers("the result (encoder, decoder)",
                           grading.call(f"your probe with t = {t}", probe, model, tokens.clone(), t), 2)


def _decoder_fail(t: int, value: float, why: str = "") -> grading.Fail:
    return grading.Fail(f"with t = {t} your decoder number is {value:.4g}, expected 0: with the old memory, the "
                        f"logits before token {4 * (t + 1) + 1} cannot move in a causal decoder{why}")


@grading.checker
def check_12_3(probe: Callable, model: nn.Module | None = None) -> str:
    """Exercise 12.3: what the harmoniser's encoder and decoder see of the melody's future.

    ``probe(model, tokens, t)``: your function. ``model`` is a Harmoniser, ``tokens`` a raster (1 + 4 S,),
    BOS first, a 1-D LongTensor on the CPU, ``t`` a step. It raises every soprano note after step t by a
    semitone (tokens 4 (t + 1) + 1, 4 (t + 2) + 1, ... up by one; a rest stays a rest) and returns two
    numbers, each the largest absolute change: (1) of the encoder's outputs ``model.encode(melody)`` (1, S, C)
    at steps 0..t; (2) of the logits at positions 0 .. 4 (t + 1) (those before the first changed token) when
    the model reads the changed raster with the old melody's memory, ``model(new, melody=old_melody)``.

    Checks, for t = 4 and 9 on random 15-step rasters, on a small random harmoniser on the CPU: (1) equals
    what the book's reference solution computed (stored, relative 1e-3) and is > 0; (2) is below 1e-5.
    ``model``: yours too if you pass it (the trained harmoniser, on its device), on the same rasters: there
    (1) must be > 0 (no number is stored for it) and (2) below 1e-5. Returns True or False.
    """
    if model is not None and model.task is not MELODY:
        raise grading.Fail(f"{type(model).__name__} has no encoder: pass a Harmoniser (build_model('harmoniser', ...))")
    tiny, stored = _tiny("harmoniser", 0), grading.expected(12)["probe"]
    for (t, tokens), want in zip(_probe_cases(), stored):
        enc_ref = want["encoder"]
        for which, value in zip(("encoder", "decoder"), _probe_numbers(probe, tiny, tokens, t)):
            ok = (math.isclose(value, enc_ref, rel_tol=1e-3, abs_tol=1e-6) if which == "encoder" else
                  abs(value) < 1e-5)
            if ok:
                continue
            why = next((f" (it matches {name})" for key, (w, name) in PROBE_MISTAKES.items()
                        if w == which and math.isclose(value, want["mistakes"][key], rel_tol=1e-3, abs_tol=1e-7)), "")
            if which == "encoder":
                raise grading.Fail(f"with t = {t} your encoder number is {value:.4g}, the encoder's outputs of steps "
                                   f"0..{t} move by {enc_ref:.4g}{why}")
            raise _decoder_fail(t, value, why)
    for t, tokens in _probe_cases() if model is not None else ():
        encoder, decoder = _probe_numbers(probe, model, tokens, t)
        if not encoder > 1e-6:
            raise grading.Fail(f"on your model with t = {t} your encoder number is {encoder:.4g}: the encoder has no "
                               f"mask, so raising the melody after step {t} moves its outputs of steps 0..{t}")
        if not abs(decoder) < 1e-5:
            raise _decoder_fail(t, decoder, " (on your model)")
    return (f"the encoder's earlier outputs move (by {enc_ref:.3g} at t = 9), the decoder's logits with the old "
            "memory do not" + (", on the small random harmoniser and on yours" if model is not None else ""))
