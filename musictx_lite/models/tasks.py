"""What a model learns: the next-token task (chapters 1, 3-11): training crops, and
validation NLL on whole pieces. Chapter 2's fill-in task lives in ``fill.py``; chapter 13's
performances (``EVENTS``) are the same task on another vocabulary, with their own crops.

Notebook: notebooks/01_attention_in_rnns.ipynb (first used there).

A task gives the training loop its batches (``sampler``) and its score
(``evaluate``); a model names its task (``model.task``), so the loop itself
knows nothing about models or tasks. Loss and NLL are in nats per token,
averaged over every pitch/rest token of the pieces (BOS and padding are never
targets), so every model in the book and the baselines of chapter 0 are
measured on the same targets.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..device import evaluating, model_device, to_model  # noqa: F401 (evaluating: also read from here)
from ..io import performance
from ..io.data import Piece
from ..io.tokens import HIGHEST, LOWEST, N_SPECIAL, PAD, VOICES, encode

WINDOW_TOKENS = 2048    # evaluate_nll's batch of context windows, in tokens


def sequence(piece) -> np.ndarray:
    """The tokens of a piece: a chorale's raster (``encode``), a performance's events (chapter 13)."""
    tokens = getattr(piece, "tokens", None)
    return encode(piece.pitches) if tokens is None else np.asarray(tokens, dtype=np.int64)


def token_nll(model: nn.Module, x: torch.Tensor, y: torch.Tensor, soft: torch.Tensor | None = None) -> torch.Tensor:
    """Summed NLL (nats) of targets ``y`` given inputs ``x``, both (B, T); PAD targets are ignored.

    With ``soft`` (B, T, V), target distributions (zero rows at PAD; ``distil.SoftCrops``), the sum is
    the cross-entropy -sum_v soft[v] log p(v) of each target instead."""
    logits = model(x)                                                   # (B, T, V)
    if soft is not None:
        return -(soft * F.log_softmax(logits.float(), -1)).sum()
    return F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), ignore_index=PAD, reduction="sum")


class Crops:
    """Random training crops of ``length`` tokens, starting on a step boundary.

    A crop's input starts at token 4k of ``encode(piece)``: BOS when k = 0, and
    for k >= 1 the bass of step k - 1, which stands where BOS would be. Either
    way input position p holds voice (p - 1) mod 4, as in whole-piece evaluation.

    With ``transpose``, each crop is moved by a random number of semitones, drawn
    uniformly from every shift that keeps its whole chorale inside the vocabulary
    (LOWEST..HIGHEST): the same music in another key, the augmentation of the
    paper-level recipe (chapter 11).
    """

    def __init__(self, pieces: list[Piece], length: int, seed: int = 0, transpose: bool = False):
        self.length, self.transpose = length, transpose
        self.seqs = [torch.as_tensor(encode(p.pitches)) for p in pieces]
        self.n_starts = torch.tensor([max(1, (len(s) - 1 - length) // 4 + 1) for s in self.seqs], dtype=torch.float)
        self.shifts = [shift_range(p.pitches) for p in pieces]      # (lowest, highest) shift per piece
        self.gen = torch.Generator().manual_seed(seed)

    def draw(self, batch_size: int) -> list[tuple[int, int, int]]:
        """(piece, k, shift) of each crop of a batch: the crop starts at token 4k of that piece."""
        which = torch.multinomial(self.n_starts, batch_size, replacement=True, generator=self.gen)
        crops = []
        for i in which.tolist():
            k = int(torch.randint(int(self.n_starts[i]), (1,), generator=self.gen))
            shift = 0
            if self.transpose:
                lo, hi = self.shifts[i]
                shift = lo + int(torch.randint(hi - lo + 1, (1,), generator=self.gen))
            crops.append((i, k, shift))
        return crops

    def batch(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, y), each (B, length); y is x shifted by one, PAD beyond a piece's end."""
        xy = torch.full((batch_size, self.length + 1), PAD, dtype=torch.long)
        for b, (i, k, shift) in enumerate(self.draw(batch_size)):
            chunk = transposed(self.seqs[i][4 * k: 4 * k + self.length + 1], shift)
            xy[b, : len(chunk)] = chunk
        return xy[:, :-1], xy[:, 1:]


def transposed(tokens: torch.Tensor, shift: int) -> torch.Tensor:
    """``tokens`` moved by ``shift`` semitones: pitches move, rests and BOS stay."""
    return torch.where(tokens >= N_SPECIAL, tokens + shift, tokens)


def shift_range(pitches) -> tuple[int, int]:
    """The semitone shifts (lowest, highest) that keep every sounding pitch inside LOWEST..HIGHEST."""
    sounding = pitches[pitches >= 0]
    if len(sounding) == 0:
        return 0, 0
    return int(LOWEST - sounding.min()), int(HIGHEST - sounding.max())


def windows(s: torch.Tensor, ctx: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The windows that score one token sequence ``s`` (BOS first) with a context of ``ctx``: inputs and
    targets, each (n_windows, ctx), PAD-filled. Windows start every half context (a multiple of 4); each
    scores only the targets no earlier window scored, so every target is scored once, in order."""
    stride = max(4, ctx // 2 // 4 * 4)
    xs, ys, scored = [], [], 0                          # targets s[1 : 1 + scored] are done
    for start in range(0, len(s) - 1, stride):
        y = s[start + 1: start + ctx + 1].clone()
        y[: scored - start] = PAD                       # already scored by an earlier window
        x = s[start: start + len(y)]
        xs.append(F.pad(x, (0, ctx - len(x)), value=PAD))
        ys.append(F.pad(y, (0, ctx - len(y)), value=PAD))
        scored = start + len(y)
        if scored >= len(s) - 1:
            break
    return torch.stack(xs), torch.stack(ys)


@torch.no_grad()
def evaluate_nll(model: nn.Module, pieces: list[Piece], batch_size: int = 16) -> float:
    """Validation NLL in nats per token over whole pieces (``batch_size`` pieces at a
    time for a model without a ``context``).

    Models with a finite ``context`` are scored with a sliding window (stride
    half the context), so every token sees at least half a context of history,
    in batches of at most ``WINDOW_TOKENS`` tokens: on a CPU, bigger batches
    measured slower, not faster (the shipped relative model on the valid split:
    19 s in batches of 64 windows of 256, 9 s in batches of 8).
    """
    device = model_device(model)
    seqs = sorted((torch.as_tensor(sequence(p)) for p in pieces), key=len)
    ctx = getattr(model, "context", None)
    total, count = 0.0, 0
    if ctx is None:
        with evaluating(model):
            for i in range(0, len(seqs), batch_size):
                group = seqs[i: i + batch_size]
                xy = nn.utils.rnn.pad_sequence(group, batch_first=True, padding_value=PAD).to(device)
                total += token_nll(model, xy[:, :-1], xy[:, 1:]).item()
                count += sum(len(s) - 1 for s in group)
    else:                                               # windows of the context, scored in batches
        xs, ys = [], []
        for s in seqs:
            X, Y = windows(s, ctx)
            xs.append(X)
            ys.append(Y)
            count += len(s) - 1
        X, Y = torch.cat(xs).to(device), torch.cat(ys).to(device)          # (n_windows, ctx)
        with evaluating(model):
            rows = max(1, WINDOW_TOKENS // ctx)
            for i in range(0, len(X), rows):
                total += token_nll(model, X[i: i + rows], Y[i: i + rows]).item()
    return total / count


@torch.no_grad()
def token_nlls(model: nn.Module, pieces: list[Piece]) -> list[np.ndarray]:
    """The NLL (nats) of every target of each piece, every token after BOS in order, scored as ``evaluate_nll``
    scores it (whole pieces, or its ``windows``): target i of a piece is voice i mod 4 (chapter 12 reads the
    alto, tenor and bass apart)."""
    device, ctx, out = model_device(model), getattr(model, "context", None), []
    with evaluating(model):
        for p in pieces:
            s = torch.as_tensor(sequence(p))
            X, Y = (s[None, :-1], s[None, 1:]) if ctx is None else windows(s, ctx)      # (n, T) each
            X, Y = X.to(device), Y.to(device)
            nll = F.cross_entropy(model(X).float().transpose(1, 2), Y, ignore_index=PAD, reduction="none")
            out.append(nll[Y != PAD].cpu().double().numpy())                           # row by row: in order
    return out


def voice_nlls(model: nn.Module, pieces: list[Piece]) -> dict[str, float]:
    """``token_nlls`` read voice by voice: the NLL per token of the soprano, alto, tenor and bass, and of the
    three under the melody together (``"ATB"``, what a harmoniser is scored on in chapter 12)."""
    nll = np.concatenate(token_nlls(model, pieces))
    voice = np.concatenate([np.arange(len(encode(p.pitches)) - 1) % 4 for p in pieces])
    out = {name: float(nll[voice == v].mean()) for v, name in enumerate(VOICES)}
    return {**out, "ATB": float(nll[voice > 0].mean())}


def piece_nlls(model: nn.Module, pieces: list[Piece]) -> tuple[np.ndarray, np.ndarray]:
    """Summed NLL (nats) and number of scored tokens of each piece, each scored by ``evaluate_nll``:
    what a bootstrap over pieces resamples (exercise 11.1, ``compare.compare_seeds``)."""
    counts = np.array([len(sequence(p)) - 1 for p in pieces])
    return np.array([evaluate_nll(model, [p]) for p in pieces]) * counts, counts


@torch.no_grad()
def evaluate_prefix_nll(model: nn.Module, pieces: list[Piece], max_tokens: int = 128) -> float:
    """NLL per token when each token is predicted from its prefix alone, as at generation time.

    For a causal model this equals ``evaluate_nll`` on the same tokens; a model
    that peeks at the future (chapter 3) is found out. One forward pass per
    token: use a few pieces and a short ``max_tokens``.
    """
    device = model_device(model)
    total, count = 0.0, 0
    with evaluating(model):
        for p in pieces:
            s = torch.as_tensor(encode(p.pitches)[: max_tokens + 1]).to(device)
            for t in range(1, len(s)):
                logits = model(s[None, :t])[0, -1].float()              # the prefix s[0 .. t-1] only
                total -= F.log_softmax(logits, -1)[s[t]].item()
                count += 1
    return total / count


class NextToken:
    """Predict token t + 1 from tokens 0 .. t: random crops to train, whole pieces to score."""

    name = "next"
    transposes = True                                  # its crops can be transposed (the recipe's augmentation)

    def sampler(self, pieces: list[Piece], length: int, seed: int, transpose: bool = False) -> Crops:
        return Crops(pieces, length, seed, transpose)

    def evaluate(self, model: nn.Module, pieces: list[Piece]) -> float:
        return evaluate_nll(model, pieces)


NEXT_TOKEN = NextToken()


class MelodyCrops(Crops):
    """``Crops`` whose soprano targets are PAD: the melody is given, only the alto, tenor and bass are learnt.
    Target p of a crop is its token p + 1, a soprano where p is a multiple of 4."""

    def batch(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = super().batch(batch_size)                                # views of one tensor: copy y
        y = y.clone()
        y[:, 0::4] = PAD                                                # (B, length): the soprano not scored
        return x, y


class Melody:
    """Harmonise a given melody (chapter 12): predict the alto, tenor and bass of the raster, the soprano
    given; scored by their NLL on whole pieces (``voice_nlls(...)["ATB"]``), the number chapter 12 sets
    beside a decoder's on the same tokens."""

    name = "melody"
    transposes = True

    def sampler(self, pieces: list[Piece], length: int, seed: int, transpose: bool = False) -> MelodyCrops:
        return MelodyCrops(pieces, length, seed, transpose)

    def evaluate(self, model: nn.Module, pieces: list[Piece]) -> float:
        return voice_nlls(model, pieces)["ATB"]


MELODY = Melody()


STRETCHES = (0.95, 0.975, 1.0, 1.025, 1.05)     # the paper's time stretches of the piano performances
SHIFTS = range(-3, 4)                           # ... and its transpositions, in semitones


class EventCrops:
    """Random training crops of ``length`` events of performances (chapter 13), starting at any event.

    With ``augment``, each crop comes from its performance stretched in time by one of ``STRETCHES``
    (the notes' times scaled, then encoded again: a slower or faster performance) and transposed by
    one of ``SHIFTS`` that keeps every key on the keyboard (0..127), as in the Music Transformer.
    """

    def __init__(self, pieces: list, length: int, seed: int = 0, augment: bool = False):
        self.pieces, self.length, self.augment = pieces, length, augment
        self.encoded = {(i, 1.0): torch.as_tensor(sequence(p)) for i, p in enumerate(pieces)}
        self.n_starts = torch.tensor([max(1, len(s) - 1 - length + 1) for s in self.encoded.values()],
                                     dtype=torch.float)
        self.gen = torch.Generator().manual_seed(seed)

    def events(self, i: int, stretch: float) -> torch.Tensor:
        """The events of piece ``i`` stretched by ``stretch`` (encoded once, then kept)."""
        if (i, stretch) not in self.encoded:
            notes = self.pieces[i].notes.copy()
            notes[:, :2] *= stretch
            self.encoded[i, stretch] = torch.as_tensor(performance.encode(notes))
        return self.encoded[i, stretch]

    def draw(self, batch_size: int) -> list[tuple[int, float, int, int]]:
        """(piece, stretch, start, shift) of each crop of a batch."""
        which = torch.multinomial(self.n_starts, batch_size, replacement=True, generator=self.gen)
        crops = []
        for i in which.tolist():
            stretch, shift = 1.0, 0
            if self.augment:
                stretch = STRETCHES[int(torch.randint(len(STRETCHES), (1,), generator=self.gen))]
                pitches = self.pieces[i].notes[:, 2]
                ok = [s for s in SHIFTS if 0 <= pitches.min() + s and pitches.max() + s <= 127]
                shift = ok[int(torch.randint(len(ok), (1,), generator=self.gen))]
            n = max(1, len(self.events(i, stretch)) - self.length)
            crops.append((i, stretch, int(torch.randint(n, (1,), generator=self.gen)), shift))
        return crops

    def batch(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, y), each (B, length); y is x shifted by one, PAD beyond a performance's end."""
        xy = torch.full((batch_size, self.length + 1), PAD, dtype=torch.long)
        for b, (i, stretch, start, shift) in enumerate(self.draw(batch_size)):
            chunk = self.events(i, stretch)[start: start + self.length + 1]
            xy[b, : len(chunk)] = transposed_events(chunk, shift)
        return xy[:, :-1], xy[:, 1:]


def transposed_events(tokens: torch.Tensor, shift: int) -> torch.Tensor:
    """Events moved by ``shift`` semitones: note-ons and note-offs move, time and velocity stay."""
    keys = (tokens >= performance.NOTE_ON) & (tokens < performance.TIME_SHIFT)
    return torch.where(keys, tokens + shift, tokens)


class Events:
    """Predict the next event of a piano performance (chapter 13): ``EventCrops`` to train, whole
    performances to score (``evaluate_nll``, in nats per event)."""

    name = "events"
    transposes = True                                  # the recipe's augmentation: shifts and stretches

    def sampler(self, pieces: list, length: int, seed: int, transpose: bool = False) -> EventCrops:
        return EventCrops(pieces, length, seed, augment=transpose)

    def evaluate(self, model: nn.Module, pieces: list) -> float:
        return evaluate_nll(model, pieces)


EVENTS = Events()


@torch.no_grad()
def sequence_logits(model: nn.Module, tokens) -> torch.Tensor:
    """Next-token logits (T, V) of ``model`` for one token sequence (T,), computed on the model's device
    and returned on the CPU."""
    with evaluating(model):
        return model(to_model(model, tokens)[None])[0].float().cpu()
