"""Music as tokens: the raster-scan vocabulary of the Music Transformer.

Notebook: notebooks/00_music_as_tokens.ipynb

A chorale is a (steps, 4) grid of MIDI pitches, soprano/alto/tenor/bass, on a
16th-note grid, with -1 for rest. ``encode`` reads it in raster order,
S A T B of step 0, then S A T B of step 1, ..., one token per pitch or rest,
after a BOS token. So the previous note of the same voice is always 4 tokens
back, and the token at position p (after BOS) belongs to voice (p - 1) mod 4.

The plain encoding cannot tell a held note from a repeated one: both are the
same pitch on consecutive steps. With ``onsets`` given, ``encode(hold=True)``
writes HOLD where a voice sustains its previous note, and ``decode`` gives the
onsets back.
"""
from __future__ import annotations

import numpy as np

PAD, BOS, REST, HOLD, MASK = 0, 1, 2, 3, 4   # MASK hides a note to be filled in (chapter 2)
N_SPECIAL = 5
LOWEST, HIGHEST = 36, 84          # C2 .. C6; the chorales span 36..81
VOCAB_SIZE = N_SPECIAL + HIGHEST - LOWEST + 1   # 54
VOICES = ("soprano", "alto", "tenor", "bass")


def encode(pitches: np.ndarray, onsets: np.ndarray | None = None, hold: bool = False) -> np.ndarray:
    """(steps, 4) pitch grid -> 1-D int64 tokens: BOS, then S A T B per step.

    With ``hold=True`` (needs ``onsets``), a pitch that continues the voice's
    previous note becomes HOLD.
    """
    pitches = np.asarray(pitches)
    if pitches.ndim != 2 or pitches.shape[1] != 4:
        raise ValueError(f"expected a (steps, 4) pitch grid, got shape {pitches.shape}")
    sounding = pitches >= 0
    if ((pitches < -1) | (sounding & ((pitches < LOWEST) | (pitches > HIGHEST)))).any():
        bad = sorted(set(pitches[(pitches < -1) | (sounding & ((pitches < LOWEST) | (pitches > HIGHEST)))].tolist()))
        raise ValueError(f"pitches {bad} are outside the vocabulary range {LOWEST}..{HIGHEST} (or -1 for rest)")
    tok = np.where(sounding, pitches - LOWEST + N_SPECIAL, REST).astype(np.int64)
    if hold:
        if onsets is None:
            raise ValueError("hold=True needs onsets")
        prev = np.vstack([np.full((1, 4), -2), pitches[:-1]])
        tok[sounding & ~np.asarray(onsets, bool) & (pitches == prev)] = HOLD
    return np.concatenate([[BOS], tok.reshape(-1)])


def decode(tokens: np.ndarray, return_onsets: bool = False, hold: bool = False):
    """Tokens -> (steps, 4) pitch grid (and onsets). Inverse of ``encode``.

    A leading BOS is skipped and a trailing incomplete step dropped. HOLD repeats
    the voice's previous pitch without a new onset; PAD and BOS inside the
    sequence (a badly trained sampler) and MASK decode as rests. Onsets come from the
    tokens with ``hold=True``; otherwise a note starts wherever the pitch changes.
    """
    tokens = np.asarray(tokens, dtype=np.int64).reshape(-1)
    if len(tokens) and tokens[0] == BOS:
        tokens = tokens[1:]
    tokens = tokens[: len(tokens) // 4 * 4].reshape(-1, 4)        # (steps, 4)
    pitches = np.where(tokens >= N_SPECIAL, tokens - N_SPECIAL + LOWEST, -1)
    onsets = tokens >= N_SPECIAL
    for t in range(len(tokens)):                                   # HOLD continues the previous step
        held = tokens[t] == HOLD
        pitches[t, held] = pitches[t - 1, held] if t > 0 else -1
    if not return_onsets:
        return pitches
    if not hold:
        prev = np.vstack([np.full((1, 4), -2), pitches[:-1]])
        onsets = (pitches >= 0) & (pitches != prev)
    return pitches, onsets & (pitches >= 0)
