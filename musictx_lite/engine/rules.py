"""Rules as masks: the rules of four-part writing applied while a harmonisation is sampled (chapter 12).

Notebook: notebooks/12_harmonise.ipynb

A language model is kept to a format by masking: before each token is drawn, the tokens the format forbids get
probability zero, and the rest share what is left. The same idea keeps a harmoniser to the rules a first-year
student learns. Each rule looks at the pitches written so far, (B, t + 1, 4) with the voices above the one being
written already in row t, and says which tokens voice ``v`` (alto 1, tenor 2, bass 3) may take next: a boolean
mask (B, VOCAB_SIZE). ``sample.generate`` draws only among the tokens every rule allows.

- ``VoiceRange``: a pitch inside the voice's range (``io.stats.RANGES``, the standard SATB ranges), and a rest
  only where the melody rests;
- ``NoCrossing``: not above the nearest sounding voice over it at this step;
- ``NoParallels``: no consecutive fifth or octave (unisons and compound octaves too) with a voice already written
  at this step, by similar or by contrary motion: both voices move, and the perfect interval between them repeats;
- ``Spacing``: alto within an octave of the soprano, tenor within an octave of the alto;
- ``CompleteChord``: on the beats, a bass that makes the chord a complete triad or seventh where one can;
- ``InKey``: inside the melody's key (``io.harmony.key_of``), up to the final chord;
- ``Cadence``: under the melody's last note, a complete root-position triad on it, held.

``HARMONY`` holds the first four, the rules of voice leading; ``harmony_rules(melody)`` adds the last three, about
the chords, the key and the cadence, two of which read the melody.

Masking changes the distribution the model samples: it is the model's distribution renormalised over what the
rules allow at each token, not the model conditioned on the rules holding over the whole piece (a token that
keeps the rules now may lead to a worse chord later). Drawing several harmonisations and keeping the likeliest
(``engine.harmonise``) repairs part of that.

A dead end (every token banned: no pitch keeps all the rules) drops rules in ``RELAX_ORDER`` until a token is
left; ``Relaxed`` counts each drop.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..io.harmony import key_of, scale
from ..io.midi import beat_steps, notes_of
from ..io.stats import FIFTH, OCTAVE, RANGES, complete_chord
from ..io.tokens import LOWEST, N_SPECIAL, REST, VOCAB_SIZE

PITCHES = np.arange(VOCAB_SIZE) - N_SPECIAL + LOWEST              # (V,): the pitch of each token (specials: junk)
IS_PITCH = np.arange(VOCAB_SIZE) >= N_SPECIAL                      # (V,)
INTERVAL = np.abs(np.arange(128)[:, None] - PITCHES[None]) % 12    # (128, V): interval class, pitch to token


@lru_cache(maxsize=None)
def _completing(upper: tuple[int, ...]) -> np.ndarray:
    """(12,) the bass pitch classes that make the pitch classes ``upper`` a complete triad or seventh chord."""
    return np.array([complete_chord([*upper, pc]) for pc in range(12)])


def _above(grid: np.ndarray, v: int) -> np.ndarray:
    """(B,) the pitch of the nearest sounding voice above voice ``v`` at the last step (-1: none sounds)."""
    row = grid[:, -1, :v]                                          # (B, v): the voices written at this step
    out = np.full(len(grid), -1)
    for u in range(v):                                             # the lowest sounding one wins
        out = np.where(row[:, u] >= 0, row[:, u], out)
    return out


class VoiceRange:
    """Voice ``v`` stays inside its range (``ranges``: name -> (low, high), MIDI, inclusive, S A T B order); it
    rests only where the melody rests."""
    name = "range"

    def __init__(self, ranges: dict[str, tuple[int, int]] = RANGES):
        self.ranges = list(ranges.values())
        self.inside = [IS_PITCH & (PITCHES >= lo) & (PITCHES <= hi) for lo, hi in self.ranges]   # (V,) each

    def allowed(self, grid: np.ndarray, v: int) -> np.ndarray:
        ok = np.tile(self.inside[v], (len(grid), 1))                # (B, V)
        ok[:, REST] = grid[:, -1, 0] < 0                            # a rest under a rest of the melody
        return ok


class NoCrossing:
    """Voice ``v`` is not above the nearest sounding voice over it at this step."""
    name = "crossing"

    def allowed(self, grid: np.ndarray, v: int) -> np.ndarray:
        above = _above(grid, v)[:, None]                            # (B, 1)
        return ~IS_PITCH | (above < 0) | (PITCHES <= above)         # (B, V)


class Spacing:
    """The alto within ``octave`` semitones of the soprano, the tenor within them of the alto (the bass is free)."""
    name = "spacing"

    def __init__(self, octave: int = 12):
        self.octave = octave

    def allowed(self, grid: np.ndarray, v: int) -> np.ndarray:
        ok = np.ones((len(grid), VOCAB_SIZE), bool)
        if v in (1, 2):
            upper = grid[:, -1, v - 1][:, None]                     # (B, 1)
            ok &= ~IS_PITCH | (upper < 0) | (PITCHES >= upper - self.octave)
        return ok


class NoParallels:
    """No consecutive fifths or octaves between voice ``v`` and a voice ``u`` above it, by similar or contrary
    motion: where u moves from step t - 1 to t, voice v may not move to the pitch that repeats the fifth (octave,
    unison) that u and v made at t - 1. The judge counts the same motions: ``io.stats.parallels`` the similar
    ones, ``io.harmony.contrary_parallels`` the contrary ones."""
    name = "parallels"

    def allowed(self, grid: np.ndarray, v: int) -> np.ndarray:
        ok = np.ones((len(grid), VOCAB_SIZE), bool)
        if grid.shape[1] < 2:
            return ok
        prev, now = grid[:, -2], grid[:, -1]                        # (B, 4) each
        for u in range(v):
            before = np.abs(prev[:, u] - prev[:, v]) % 12           # (B,): the interval at t - 1
            moves = (prev[:, u] >= 0) & (prev[:, v] >= 0) & (now[:, u] >= 0) & (now[:, u] != prev[:, u])
            perfect = moves & ((before == FIFTH) | (before == OCTAVE))
            if not perfect.any():                                   # the common case: nothing to ban
                continue
            again = INTERVAL[now[:, u]] == before[:, None]          # (B, V): the same interval class again
            ok &= ~(perfect[:, None] & again & IS_PITCH & (PITCHES != prev[:, v, None]))
        return ok


def final_note(melody: np.ndarray) -> tuple[int, int, int]:
    """(first step, last step, pitch) of the melody's last note: where the final chord sounds."""
    notes = notes_of(np.asarray(melody)[:, None])[0]
    if not notes:
        raise ValueError("the melody has no notes")
    start, end, pitch = notes[-1]
    return start, end - 1, pitch


class Cadence:
    """Under the melody's last note, a complete root-position triad, held: its root the melody's last note, or the
    tonic where that note is the major third of a major ``key`` (tonic, mode) (a folk tune ending on its third);
    the bass on the root, alto and tenor completing the chord with the soprano. The third is major (``picardy``,
    the default: Bach ends 74 of the 77 test chorales on a major chord, minor ones with a Picardy third), or, with
    ``picardy=False``, minor too where the minor third is in the key. Bach's final chord has the melody's last note
    as its root in all but a few chorales (chapter 12 counts them)."""
    name = "cadence"

    def __init__(self, melody: np.ndarray, key: tuple[int, str] | None = None, picardy: bool = True):
        self.start, self.end, pitch = final_note(melody)
        last = pitch % 12
        self.root = key[0] if key is not None and key[1] == "major" and last == (key[0] + 4) % 12 else last
        minor = (self.root + 3) % 12
        in_key = scale(*key) if key is not None else {minor}
        self.thirds = [(self.root + 4) % 12] + ([minor] if not picardy and minor in in_key else [])
        self.chords = [{self.root, third, (self.root + 7) % 12} for third in self.thirds]   # the triads allowed

    def allowed(self, grid: np.ndarray, v: int) -> np.ndarray:
        ok = np.ones((len(grid), VOCAB_SIZE), bool)
        t = grid.shape[1] - 1
        if not self.start <= t <= self.end:
            return ok
        if t > self.start:                                           # the final chord is held
            ok &= PITCHES == grid[:, -2, v, None]
            return ok
        if v == 3:
            return ok & IS_PITCH & (PITCHES % 12 == self.root)
        for b, row in enumerate(grid[:, -1]):                        # a chord tone that leaves the chord completable
            written = {int(p) % 12 for p in row[:v] if p >= 0}
            fits = [pc for pc in range(12) if any(
                written <= chord and pc in chord and len(chord - written - {pc, self.root}) <= 2 - v
                for chord in self.chords)]
            ok[b] &= IS_PITCH & np.isin(PITCHES % 12, fits)
        return ok


class InKey:
    """Alto, tenor and bass inside the key (``io.harmony.scale``: the major scale, or the minor with its raised
    sixth and seventh), up to the final chord, where ``Cadence`` rules (a Picardy third is chromatic)."""
    name = "key"

    def __init__(self, tonic: int, mode: str, until: int | None = None):
        self.pcs, self.until = sorted(scale(tonic, mode)), until
        self.inside = ~IS_PITCH | np.isin(PITCHES % 12, self.pcs)   # (V,)

    def allowed(self, grid: np.ndarray, v: int) -> np.ndarray:
        t = grid.shape[1] - 1
        if self.until is not None and t >= self.until:
            return np.ones((len(grid), VOCAB_SIZE), bool)
        return np.tile(self.inside, (len(grid), 1))


class CompleteChord:
    """On each beat (step ``offset`` + ``every`` k: quarter notes from step 0 by default), the bass completes a
    triad or a seventh chord with the soprano, alto and tenor (``io.stats.complete_chord``) where some pitch class
    can; elsewhere it is free."""
    name = "chord"

    def __init__(self, offset: int = 0, every: int = 4):
        self.offset, self.every = offset, every

    def allowed(self, grid: np.ndarray, v: int) -> np.ndarray:
        ok = np.ones((len(grid), VOCAB_SIZE), bool)
        t = grid.shape[1] - 1
        if v != 3 or (t - self.offset) % self.every:
            return ok
        for b, upper in enumerate(grid[:, -1, :3]):
            if (upper < 0).any():
                continue
            fits = _completing(tuple(sorted({int(p) % 12 for p in upper})))
            if fits.any():
                ok[b] = ~IS_PITCH | fits[PITCHES % 12]
        return ok


HARMONY = (VoiceRange(), NoCrossing(), NoParallels(), Spacing())   # the rules of four-part writing
RELAX_ORDER = ("chord", "spacing", "key", "parallels", "crossing", "cadence", "range")   # a dead end drops these first


def harmony_rules(melody: np.ndarray, key: tuple[int, str] | None = None, cadence: bool = True,
                  in_key: bool = True, chords: bool = True, metre: str | None = None, pickup: int = 0) -> tuple:
    """Every rule for harmonising ``melody``: ``HARMONY``, complete chords on the beats of its ``metre`` (4/4 by
    default; ``pickup``: the steps before its first barline) (``CompleteChord``), the key (``key``: (tonic, mode),
    by default the melody's, ``io.harmony.key_of``) and the final chord (``Cadence``)."""
    every = beat_steps(metre or "4/4")
    rules, key = list(HARMONY) + ([CompleteChord(pickup % every, every)] if chords else []), key or key_of(melody)
    start = final_note(melody)[0]
    if in_key:
        rules.append(InKey(*key, until=start if cadence else None))
    if cadence:
        rules.append(Cadence(melody, key))
    return tuple(rules)


@dataclass
class Relaxed:
    """What the rules did in one sampling run: tokens masked, and each rule dropped at a dead end."""
    tokens: int = 0
    dropped: Counter = field(default_factory=Counter)

    @property
    def dead_ends(self) -> int:
        return sum(self.dropped.values())


def check_rules(rules) -> tuple:
    """``rules`` as a tuple of rules, each with a ``name`` in ``RELAX_ORDER`` and an ``allowed`` method."""
    rules = tuple(rules or ())
    for r in rules:
        if getattr(r, "name", None) not in RELAX_ORDER or not callable(getattr(r, "allowed", None)):
            raise ValueError(f"{r!r} is not a rule: rules have a name in {RELAX_ORDER} and an allowed(grid, v) "
                             f"method (engine.rules)")
    return rules


def rule_mask(rules, grid: np.ndarray, v: int, usable: np.ndarray, relaxed: Relaxed | None = None) -> np.ndarray:
    """(B, V) the tokens voice ``v`` may take after ``grid`` (B, t + 1, 4): every rule's mask and ``usable``
    (B, V), the tokens the sampler may draw at all. Where that leaves nothing, the rules are dropped one by one
    in ``RELAX_ORDER`` for that candidate alone, each drop counted in ``relaxed``."""
    masks = {r.name: r.allowed(grid, v) for r in rules}             # name -> (B, V)
    ok = usable.copy()
    for m in masks.values():
        ok &= m
    stuck = ~ok.any(-1)                                             # (B,)
    for b in np.flatnonzero(stuck):
        kept = dict(masks)
        for name in RELAX_ORDER:
            if name not in kept:
                continue
            del kept[name]
            if relaxed is not None:
                relaxed.dropped[name] += 1
            row = usable[b].copy()
            for m in kept.values():
                row &= m[b]
            if row.any():
                break
        ok[b] = row
    if relaxed is not None:
        relaxed.tokens += len(grid)
    return ok


class Guard:
    """The rules' view of one sampling run (``sample.generate``): the pitches written so far, (B, steps, 4), kept
    as the tokens arrive, and the mask for the next token."""

    def __init__(self, rules: tuple, prompt: np.ndarray, n_steps: int, batch: int, relaxed: Relaxed | None = None):
        if (len(prompt) - 1) % 4:
            raise ValueError("rules read whole steps: the prompt must be BOS and whole steps of 4 tokens")
        self.rules, self.relaxed = rules, relaxed
        steps = (len(prompt) - 1) // 4 + n_steps
        self.grid = np.full((batch, steps, 4), -1)
        self.j = 0                                                   # tokens written after BOS
        for token in prompt[1:]:
            self.push(np.full(batch, token))

    def mask(self, usable: np.ndarray) -> np.ndarray:
        """(B, V) the tokens the rules allow next (``usable``, (V,): those the sampler may draw at all)."""
        t, v = divmod(self.j, 4)
        if v == 0:                                                   # the soprano: the melody, not the rules'
            return np.broadcast_to(usable, (len(self.grid), VOCAB_SIZE)).copy()
        return rule_mask(self.rules, self.grid[:, : t + 1], v, np.broadcast_to(usable, (len(self.grid), VOCAB_SIZE)),
                         self.relaxed)

    def push(self, tokens: np.ndarray) -> None:
        """The next token of each candidate, (B,)."""
        t, v = divmod(self.j, 4)
        self.grid[:, t, v] = np.where(tokens >= N_SPECIAL, tokens - N_SPECIAL + LOWEST, -1)
        self.j += 1
