"""Harmonise a melody: the soprano given, the alto, tenor and bass sampled (chapter 12).

Notebook: notebooks/12_harmonise.ipynb

Both of chapter 12's autoregressive ways run through ``sample.generate``, with every soprano token
``forced``: chapter 8's causal decoder, which sees the melody only up to the step it writes, and the
encoder-decoder (``models.harmoniser``), to which ``generate`` gives the melody of each window, its
future included. The third way, Coconet's, draws all three voices at once and redraws them by Gibbs
sampling (``models.coconet.gibbs_harmonise``).
"""
from __future__ import annotations

import numpy as np
import torch.nn as nn

from ..io.tokens import BOS, HIGHEST, LOWEST, decode, encode
from ..models.coconet import INFILL, gibbs_harmonise
from .rules import HARMONY, Relaxed, harmony_rules
from .sample import generate


def melody_tokens(melody: np.ndarray) -> np.ndarray:
    """The soprano tokens (steps,) of a melody of MIDI pitches (steps,), -1 for a rest."""
    melody = np.asarray(melody, dtype=np.int64)
    sounding = melody[melody >= 0]
    if melody.ndim != 1 or len(melody) == 0:
        raise ValueError(f"a melody is a non-empty line of pitches (steps,), got shape {melody.shape}")
    if len(sounding) and (sounding.min() < LOWEST or sounding.max() > HIGHEST):
        raise ValueError(f"the melody's pitches {sounding.min()}-{sounding.max()} leave the model's range "
                         f"{LOWEST}-{HIGHEST}")
    grid = np.repeat(melody[:, None], 4, axis=1)                   # any pitches under it: only S is read
    return encode(grid)[1::4]


# the rules harmonise applies, by name: all of them (the four of voice leading, complete chords on the beats, the
# key, the cadence), the four alone, or none (plain sampling); and the defaults of harmonise, the command line and
# the Play page for the samplers that draw one token at a time (Gibbs sampling takes neither)
RULE_SETS = ("all", "four", "none")
DEFAULT_RULES, DEFAULT_CANDIDATES = "all", 1       # chosen by chapter 12's study (scripts/rules_study.py)


def rules_for(rules, melody: np.ndarray, metre: str | None = None, pickup: int = 0) -> tuple | None:
    """The rules that ``rules`` names for ``melody`` (in ``metre``, ``pickup`` steps before its first barline):
    "all" (``harmony_rules``), "four" (``HARMONY``), "none" or None (no rules), or a sequence of rules, as it is."""
    if rules is None or rules == "none":
        return None
    if isinstance(rules, str):
        if rules not in RULE_SETS:
            raise ValueError(f"rules must be one of {', '.join(RULE_SETS)} (or a list of rules), got {rules!r}")
        return harmony_rules(melody, metre=metre, pickup=pickup) if rules == "all" else HARMONY
    return tuple(rules)


def harmonise(model: nn.Module, melody: np.ndarray, temperature: float = 1.0, seed: int | None = 0,
              top_k: int | None = None, n_iter: int = 64, rules="default", candidates: int | None = None,
              info: dict | None = None, metre: str | None = None, pickup: int = 0) -> np.ndarray:
    """Alto, tenor and bass under ``melody`` (steps,) MIDI pitches: the (steps, 4) grid, its soprano the
    melody as given. A Coconet model (``models.coconet``) draws them by Gibbs sampling in ``n_iter`` steps;
    the others, one token at a time: then ``rules`` ("all", "four", "none", a list of rules: ``rules_for``;
    "default": ``DEFAULT_RULES``) mask what each token may be, and ``candidates`` harmonisations (None:
    ``DEFAULT_CANDIDATES``) are drawn as one batch, the one the model finds likeliest kept (the sum of its alto,
    tenor and bass log-probabilities, unmasked, at temperature 1). ``info``, a dict, receives what happened: each
    candidate's log-probability, the one chosen, the tokens masked and the dead ends. ``metre`` and ``pickup``
    (``io.melody.Melody``'s) place the beats on which the rules ask for complete chords."""
    soprano = melody_tokens(melody)
    if model.task is INFILL:
        if top_k is not None or rules not in ("default", None, "none") or candidates not in (None, 1):
            raise ValueError("top_k, rules and candidates are for the samplers that draw one token at a time; "
                             "Gibbs sampling has none of them")
        tokens = gibbs_harmonise(model, soprano, n_iter, temperature, seed)
        return _checked(decode(tokens), melody)
    named = DEFAULT_RULES if rules == "default" else rules
    rules = rules_for(named, melody, metre, pickup)
    candidates = DEFAULT_CANDIDATES if candidates is None else candidates
    if not (isinstance(candidates, int) and candidates >= 1):
        raise ValueError(f"candidates must be a whole number >= 1, got {candidates!r}")
    forced = np.full(4 * len(soprano), -1)
    forced[0::4] = soprano
    scores, relaxed = [], Relaxed()
    tokens = generate(model, np.array([BOS]), len(soprano), temperature, top_k, seed, forced=forced, rules=rules,
                      batch=candidates, relaxed=relaxed, scores=scores)
    logp = scores[0].numpy()                                         # (candidates,)
    best = int(np.argmax(logp))
    if candidates > 1:
        tokens = tokens[best]
    if info is not None:
        name = (named or "none") if isinstance(named, str) or named is None else "custom"
        info.update(logp=logp.tolist(), chosen=best, masked=relaxed.tokens, dead_ends=relaxed.dead_ends,
                    dropped=dict(relaxed.dropped), rules=name)
    return _checked(decode(tokens), melody)


def grid_onsets(grid: np.ndarray, melody_onsets: np.ndarray | None = None) -> np.ndarray:
    """(steps, 4) where the notes of a harmonised ``grid`` start: on each change of pitch, and in the soprano
    where the melody's notes start (``Melody.onsets``, (steps,)), so that its repeated notes are struck again."""
    grid = np.asarray(grid)
    onsets = np.vstack([np.ones((1, 4), bool), grid[1:] != grid[:-1]]) & (grid >= 0)
    if melody_onsets is not None:
        onsets[:, 0] = np.asarray(melody_onsets, dtype=bool)
    return onsets


def _checked(grid: np.ndarray, melody: np.ndarray) -> np.ndarray:
    assert (grid[:, 0] == np.asarray(melody)).all()                 # the melody, exactly
    return grid
