"""Sampling music from a trained model: temperature, top-k, a prompt, and a key/value cache.

Notebooks: notebooks/01_attention_in_rnns.ipynb (first used there);
notebooks/11_comparison.ipynb (the cache, and what sampling costs);
notebooks/13_piano.ipynb (``generate_events``: a performance continued).

Re-encoding runs the model over the whole window for every new token. With a
cache the model sees the prompt once and then one token per step: a decoder
keeps each layer's keys and values (``DecoderCache``), an LSTM its state. Both
give the same logits, to float precision; the cache is used wherever the model
has one (``model.cacheable``): every model that ``build_model`` makes, or that
``models.cache.with_cache`` extended, whose mixers are causal.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn

from ..device import evaluating, model_device, to_model
from ..io.data import Piece
from ..io.performance import TICK
from ..io.tokens import BOS, HOLD, MASK, PAD, VOCAB_SIZE, encode
from ..models.tasks import EVENTS, MELODY, NEXT_TOKEN
from .grammar import Grammar, Keys
from .rules import Guard, Relaxed, check_rules


def prompt_from(piece: Piece, n_steps: int) -> np.ndarray:
    """The tokens of the first ``n_steps`` 16th steps of a piece, BOS included."""
    return encode(piece.pitches[:n_steps])


def window_start(n_tokens: int, start: int, context: int | None, align: int = 4) -> int:
    """Where the model's window begins, once it holds ``n_tokens`` tokens and began at ``start``.

    When the window outgrows the context it slides forward by about half a
    context, to a multiple of ``align``: 4 for the raster (a step boundary: the
    voices stay aligned), 1 for performance events (chapter 13).
    It keeps ``start`` otherwise, so a cache stays valid until the next slide.
    """
    if context is not None and context < align:
        raise ValueError(f"a context of {context} tokens holds less than one step of {align} tokens; "
                         f"at least {align} needed")
    if context is None or n_tokens - start <= context:
        return start
    keep = max(align, context // 2)                                  # tokens of history kept
    return -(-(n_tokens - keep) // align) * align                    # ceil to a multiple of align


def check_sampling(temperature: float, top_k: int | None) -> float:
    """A clear error for a temperature or top-k that makes no sense; the temperature as float32 holds it.

    float32 holds temperatures from 1.2e-38 to 3.4e38; beyond them the distribution is, to float32's
    precision, the argmax or uniform already, and a temperature outside would overflow to 0 or inf (NaN)."""
    if not (temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be at least 1 (None: no limit), got {top_k}")
    f32 = torch.finfo(torch.float32)
    return min(max(temperature, f32.tiny), f32.max)


def draw(logits: torch.Tensor, banned, top_k: int | None, t: float, gen: torch.Generator) -> torch.Tensor:
    """One token (1,) from next-token logits (V,), or one per row (B, 1) from (B, V): ``banned`` tokens never,
    only the ``top_k`` likeliest (None: all), at temperature ``t``. The largest logit is subtracted before
    dividing, so a tiny temperature tends to the argmax instead of overflowing to inf (and NaN probabilities)."""
    logits = logits.clone()
    logits[..., list(banned)] = float("-inf")
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]))[0][..., -1:]
        logits[logits < kth] = float("-inf")
    logits = (logits - logits.max(-1, keepdim=True)[0]) / t
    return torch.multinomial(torch.softmax(logits, -1).cpu(), 1, generator=gen)


@torch.no_grad()
def generate(model: nn.Module, prompt: np.ndarray | None = None, n_steps: int = 64, temperature: float = 1.0,
             top_k: int | None = None, seed: int | None = 0, banned: tuple[int, ...] = (PAD, BOS, HOLD, MASK),
             cache: bool = True, trace: list | None = None, forced: np.ndarray | None = None,
             rules=None, batch: int = 1, relaxed: Relaxed | None = None, scores: list | None = None) -> np.ndarray:
    """Continue ``prompt`` (tokens, BOS first) by ``n_steps`` steps of 4 tokens; return all tokens.

    Tokens in ``banned`` are never sampled. A model with a finite ``context``
    sees a window of the last tokens (``window_start``). ``cache=False``
    re-encodes the window for every token; the default uses the model's cache
    when it has one. ``trace``, a list, receives each step's logits (V,).
    ``forced`` (chapter 12) fixes tokens instead of sampling them: entry i, where
    it is not -1, is the i-th token after the prompt (a melody's notes, every
    fourth token, leave the voices under it to the model). A harmoniser
    (``models.harmoniser``) must be given the soprano of every step so: it reads
    the melody of each window, the future included, once per window.

    Chapter 12's additions: ``rules`` (``engine.rules``, e.g. ``HARMONY``) mask each
    sampled token to those the rules allow, dead ends counted in ``relaxed``;
    ``batch`` draws that many continuations at once, (batch, T) returned;
    ``scores``, a list, receives (batch,) the log-probability the model, unmasked
    and at temperature 1, gives the tokens it sampled (forced ones left out).
    """
    if getattr(model, "task", None) not in (NEXT_TOKEN, MELODY):
        task = getattr(getattr(model, "task", None), "name", "none")
        raise ValueError(f"{type(model).__name__} does not continue a sequence: its task is {task!r} "
                         f"(chapter 2's fill-in), not the next token")
    t = check_sampling(temperature, top_k)
    if n_steps < 0:
        raise ValueError(f"n_steps must be >= 0, got {n_steps}")
    if forced is not None:
        forced = np.asarray(forced, dtype=np.int64)
        if forced.ndim != 1 or len(forced) > 4 * n_steps or ((forced < -1) | (forced >= VOCAB_SIZE)).any():
            raise ValueError(f"forced must hold at most {4 * n_steps} tokens, each -1 (free) or a token id "
                             f"below {VOCAB_SIZE}")
    prompt = np.asarray([BOS] if prompt is None else prompt, dtype=np.int64)
    if prompt.ndim != 1 or len(prompt) == 0:
        raise ValueError(f"the prompt must be a non-empty sequence of tokens (BOS first), got shape {prompt.shape}")
    ctx = getattr(model, "context", None)
    if ctx is not None and ctx < 4:
        raise ValueError(f"the model's context is {ctx} tokens, less than one step of 4 voices")
    if ctx is not None and len(prompt) > ctx:
        raise ValueError(f"prompt has {len(prompt)} tokens but the model's context is {ctx}; "
                         f"use a shorter prompt (at most {(ctx - 1) // 4} steps)")
    melody = None                                                    # a harmoniser reads the whole melody
    if model.task is MELODY:
        if forced is None or len(forced) != 4 * n_steps or (forced[0::4] < 0).any() or len(prompt) % 4 != 1:
            raise ValueError("a harmoniser is given the melody: forced must hold the soprano of every step to "
                             "generate (every fourth token, from the first), after a prompt of whole steps")
        melody = to_model(model, np.r_[prompt, forced][1::4])[None].repeat(batch, 1)   # (B, steps)
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    guard = Guard(check_rules(rules), prompt, n_steps, batch, relaxed) if rules else None
    usable = ~np.isin(np.arange(VOCAB_SIZE), list(banned))             # (V,): what may be drawn at all
    use_cache = cache and getattr(model, "cacheable", False)
    device = model_device(model)
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed if seed is not None else int(torch.randint(2**31, (1,))))
    idx = to_model(model, prompt)[None].repeat(batch, 1)             # (B, T)
    total = torch.zeros(batch)                                       # (B,): the sampled tokens' log-probability
    start, state = 0, None                                           # the window is idx[:, start:]
    with evaluating(model):
        for _ in range(4 * n_steps):
            new_start = window_start(idx.shape[1], start, ctx)
            if new_start != start:                                   # the window slid: the cache is stale
                start, state = new_start, None
            if melody is not None and not use_cache:                 # the window's steps of the melody
                logits = model(idx[:, start:], melody=melody[:, start // 4: start // 4 + -(-ctx // 4)])
            elif melody is not None and state is None:               # the melody read once per window
                state = model.new_cache(melody[:, start // 4: start // 4 + -(-ctx // 4)])
                logits = model(idx[:, start:], cache=state)
            elif not use_cache:
                logits = model(idx[:, start:])                       # (B, T, V): the whole window again
            elif state is None:
                state = model.new_cache()
                logits = model(idx[:, start:], cache=state)          # the window once
            else:
                logits = model(idx[:, -1:], cache=state)             # (B, 1, V): the newest token only
            logits = logits[:, -1].float().cpu()                     # (B, V)
            if trace is not None:
                trace.append((logits[0] / t))
            i = idx.shape[1] - len(prompt)                           # the i-th token after the prompt
            given = forced is not None and i < len(forced) and forced[i] >= 0
            masked = logits
            if guard is not None and not given:                      # only what the rules allow
                masked = logits.masked_fill(~torch.from_numpy(guard.mask(usable)), float("-inf"))
            nxt = draw(masked, banned, top_k, t, gen) if batch > 1 else draw(masked[0], banned, top_k, t, gen)[None]
            if given:
                nxt = torch.full((batch, 1), int(forced[i]))         # given, not sampled
            elif scores is not None:
                total += torch.log_softmax(logits, -1).gather(1, nxt)[:, 0]
            if guard is not None:
                guard.push(nxt[:, 0].numpy())
            idx = torch.cat([idx, nxt.to(device)], dim=1)            # (B, T + 1)
    if scores is not None:
        scores.append(total)
    return idx[0].cpu().numpy() if batch == 1 else idx.cpu().numpy()


@torch.no_grad()
def generate_events(model: nn.Module, prompt: np.ndarray | None = None, n_events: int = 512,
                    temperature: float = 1.0, top_k: int | None = None, seed: int | None = 0,
                    rules: tuple | None = None, info: dict | None = None,
                    seconds: float | None = None) -> np.ndarray:
    """Continue a performance (chapter 13): ``prompt`` events (BOS first; None: BOS alone) and ``n_events``
    more, sampled one at a time with the model's cache; return all of them. The window slides by half a
    context when it is full, as ``generate``'s does; PAD and BOS are never sampled.

    With ``rules`` (``engine.grammar``: ``performance_rules(limits)``), each event is drawn among those the rules
    allow, and the keys still down at the end are released (their NOTE_OFFs follow the ``n_events``). With
    ``seconds``, sampling stops once the continuation spans that much time (``n_events`` at the most). ``info``
    receives the dead ends, the rules they dropped, the events released at the end, and the model's own
    log-probability of the events it drew (unmasked, at temperature 1): what the rules cost."""
    if getattr(model, "task", None) is not EVENTS:
        raise ValueError(f"{type(model).__name__} does not model performance events (chapter 13's piano models do)")
    t = check_sampling(temperature, top_k)
    if n_events < 0:
        raise ValueError(f"n_events must be >= 0, got {n_events}")
    prompt = np.asarray([BOS] if prompt is None else prompt, dtype=np.int64)
    if prompt.ndim != 1 or len(prompt) == 0 or prompt.min() < 0 or prompt.max() >= model.cfg.vocab_size:
        raise ValueError(f"the prompt must be a non-empty sequence of event tokens (0..{model.cfg.vocab_size - 1})")
    ctx = model.context
    if len(prompt) > ctx:
        prompt = prompt[-ctx:]                                       # the window keeps the newest events
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed if seed is not None else int(torch.randint(2**31, (1,))))
    idx = to_model(model, prompt)[None]                              # (1, T)
    start, state, logp = 0, None, 0.0
    grammar = Grammar(tuple(rules), Keys.after(prompt)) if rules else None
    keys = grammar.keys if grammar is not None else Keys.after(prompt)    # where the performance has got to
    end = None if seconds is None else keys.now + round(seconds / TICK)
    usable = ~np.isin(np.arange(model.cfg.vocab_size), (PAD, BOS))
    drawn = 0
    with evaluating(model):
        for _ in range(n_events):
            if end is not None and keys.now >= end:
                break
            new_start = window_start(idx.shape[1], start, ctx, align=1)
            if new_start != start:                                   # the window slid: the cache is stale
                start, state = new_start, None
            if state is None:
                state = model.new_cache()
                logits = model(idx[:, start:], cache=state)
            else:
                logits = model(idx[:, -1:], cache=state)             # (1, 1, V): the newest event only
            logits = logits[0, -1].float().cpu()                     # (V,)
            masked = logits
            if grammar is not None:                                  # only what the grammar allows
                masked = logits.masked_fill(~torch.from_numpy(grammar.mask(usable)), float("-inf"))
            nxt = draw(masked, (PAD, BOS), top_k, t, gen)
            logp += float(torch.log_softmax(logits, -1)[nxt])
            if grammar is not None:
                grammar.push(int(nxt))
            else:
                keys.push(int(nxt))
            drawn += 1
            idx = torch.cat([idx, nxt.to(model_device(model))[None]], dim=1)
    out = idx[0].cpu().numpy()
    released = grammar.release_all() if grammar is not None else []
    if info is not None:
        info.update(logp=logp, drawn=drawn, released_at_end=len(released), left_down=len(keys.down),
                    dead_ends=grammar.dead_ends if grammar else 0, dropped=dict(grammar.dropped) if grammar else {},
                    masked=grammar.masked if grammar else 0)
    return np.concatenate([out, np.asarray(released, dtype=out.dtype)]) if released else out
