"""A performance's grammar, as masks over the next event (chapter 13).

Notebook: notebooks/13_piano.ipynb

Chapter 12 keeps a harmoniser to the rules of four-part writing by masking the tokens they forbid
(``engine.rules``). A piano performance has a grammar of its own, and a pianist's limits; a sampler left to itself
writes a NOTE_OFF for a key that is not down, or holds a key for half a minute. ``Keys`` follows the events as
``io.performance.decode`` reads them (a NOTE_OFF in the tick of its NOTE_ON is not yet a release; a NOTE_ON of a
key already down re-strikes it: the note before ends and a new one begins, which is how a pianist repeats a
pedalled note, so it is allowed), and each rule says which next events it allows:

- ``Keyboard``: a NOTE_ON only for a key a piano has, A0 to C8 (MIDI 21 to 108; the codec has all 128);
- ``ReleaseDown``: a NOTE_OFF only for a key that is down (and has sounded for at least a tick);
- ``MaxHold``: no key held longer than ``seconds``: a time shift may not carry the oldest key past it, and once
  the oldest is due, only the NOTE_OFF of a due key may come;
- ``MaxKeys``: at most ``keys`` keys down at once: a NOTE_ON of a new key waits for a release;
- ``Loudness``: no note softer or louder than the prompt's mean velocity moved by the drifts the real performances
  show between their openings and later: a velocity outside is masked, and a NOTE_ON waits for one inside.

``generate_events`` also releases every key still down at the end. The limits come from real performances with
the pedal folded into the notes the codec's way (``limits_of``; the shipped record says which). A dead end (no
event allowed) drops rules in ``RELAX_ORDER`` until one is, and is counted.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..io.performance import NOTE_OFF, NOTE_ON, TICK, TIME_SHIFT, VELOCITY, VOCAB_SIZE, bin_velocity

EVENT = np.arange(VOCAB_SIZE)
IS_ON = (EVENT >= NOTE_ON) & (EVENT < NOTE_OFF)
IS_OFF = (EVENT >= NOTE_OFF) & (EVENT < TIME_SHIFT)
IS_SHIFT = (EVENT >= TIME_SHIFT) & (EVENT < VELOCITY)
SHIFT_TICKS = np.where(IS_SHIFT, EVENT - TIME_SHIFT + 1, 0)        # (V,): ticks each time shift moves
IS_VELOCITY = EVENT >= VELOCITY
RELAX_ORDER = ("loudness", "keys", "hold", "release", "keyboard")
PIANO = (21, 108)                     # A0 and C8: a piano's 88 keys
LIMITS = Path(__file__).parents[1] / "pretrained" / "piano-grammar.json"   # python -m scripts.piano_grammar


@dataclass
class Keys:
    """Where a performance stands after its events: the tick, each key down with the tick it went down, and the
    velocity bin the next NOTE_ON takes (64's before any velocity event, as ``decode`` reads it)."""
    now: int = 0
    down: dict[int, int] = field(default_factory=dict)
    vel: int = 16

    def push(self, token: int) -> None:
        t = int(token)
        if t >= VELOCITY:
            self.vel = t - VELOCITY
        elif TIME_SHIFT <= t < VELOCITY:
            self.now += t - TIME_SHIFT + 1
        elif NOTE_ON <= t < NOTE_OFF:
            self.down[t - NOTE_ON] = self.now                        # a new key, or a re-strike
        elif NOTE_OFF <= t < TIME_SHIFT and self.down.get(t - NOTE_OFF, self.now) < self.now:
            del self.down[t - NOTE_OFF]                              # in the tick of its NOTE_ON: not yet

    @classmethod
    def after(cls, tokens) -> "Keys":
        keys = cls()
        for t in np.asarray(tokens).reshape(-1):
            keys.push(t)
        return keys


class Keyboard:
    """A NOTE_ON only for one of a piano's 88 keys, A0 to C8."""
    name = "keyboard"

    def allowed(self, keys: Keys) -> np.ndarray:
        ok = ~IS_ON.copy()
        ok[NOTE_ON + PIANO[0]:NOTE_ON + PIANO[1] + 1] = True
        return ok


class ReleaseDown:
    """A NOTE_OFF only for a key that is down and has sounded at least a tick."""
    name = "release"

    def allowed(self, keys: Keys) -> np.ndarray:
        ok = ~IS_OFF.copy()
        for p, since in keys.down.items():
            if since < keys.now:
                ok[NOTE_OFF + p] = True
        return ok


class MaxHold:
    """No key down longer than ``seconds``: shifts that would carry the oldest key past it are banned, and once it
    is due only the NOTE_OFF of a due key may come."""
    name = "hold"

    def __init__(self, seconds: float):
        if not seconds > 0:
            raise ValueError(f"the longest hold must be > 0 seconds, got {seconds}")
        self.ticks = max(1, round(seconds / TICK))

    def allowed(self, keys: Keys) -> np.ndarray:
        if not keys.down:
            return np.ones(VOCAB_SIZE, dtype=bool)
        left = self.ticks - (keys.now - min(keys.down.values()))     # ticks the oldest key may still sound
        if left > 0:
            return ~IS_SHIFT | (SHIFT_TICKS <= left)
        ok = np.zeros(VOCAB_SIZE, dtype=bool)                       # due: release it (them) first
        for p, since in keys.down.items():
            if keys.now - since >= self.ticks and since < keys.now:
                ok[NOTE_OFF + p] = True
        return ok


class MaxKeys:
    """At most ``keys`` keys down at once: a NOTE_ON of a key not down waits for a release (a re-strike of a key
    already down is allowed: it adds none)."""
    name = "keys"

    def __init__(self, keys: int):
        if keys < 1:
            raise ValueError(f"at least one key must be allowed down, got {keys}")
        self.keys = keys

    def allowed(self, keys: Keys) -> np.ndarray:
        if len(keys.down) < self.keys:
            return np.ones(VOCAB_SIZE, dtype=bool)
        ok = ~IS_ON.copy()
        for p in keys.down:
            ok[NOTE_ON + p] = True
        return ok


class Loudness:
    """Velocities between ``low`` and ``high`` only: a velocity event outside is masked, and while the current
    velocity is outside, a NOTE_ON waits for a velocity event."""
    name = "loudness"

    def __init__(self, low: float, high: float):
        if not low < high:
            raise ValueError(f"the loudness band must have low < high, got {low} and {high}")
        v = bin_velocity(np.arange(VOCAB_SIZE - VELOCITY))                  # each bin's velocity
        self.inside = (v >= low) & (v <= high)
        if not self.inside.any():
            raise ValueError(f"no velocity bin lies between {low} and {high}")

    def allowed(self, keys: Keys) -> np.ndarray:
        ok = np.ones(VOCAB_SIZE, dtype=bool)
        ok[VELOCITY:] = self.inside
        if not self.inside[keys.vel]:
            ok &= ~IS_ON
        return ok


def shipped_limits() -> dict:
    """The limits measured on the real performances of the project's piano sample, as the package ships them."""
    return json.loads(LIMITS.read_text())["limits"]


def performance_rules(limits: dict | None = None, prompt_velocity: float | None = None, hold: str = "note_s_p999",
                      keys: str = "keys_down_p995") -> tuple:
    """The grammar with the limits of a record (``limits_of``; None: the shipped limits): the 99.9th percentile
    of the real notes' lengths and the 99.5th of the keys down, not the single longest pedal wash of the sample
    (its maxima: ``hold="longest_note_s", keys="most_keys_down"``); with the prompt's mean velocity, the loudness
    band its drifts allow (``drift_min``, ``drift_max``)."""
    limits = shipped_limits() if limits is None else limits
    rules = (Keyboard(), ReleaseDown(), MaxHold(limits[hold]), MaxKeys(limits[keys]))
    if prompt_velocity is not None and np.isfinite(prompt_velocity):
        rules += (Loudness(prompt_velocity + limits["drift_min"], prompt_velocity + limits["drift_max"]),)
    return rules


@dataclass
class Grammar:
    """The rules applied event by event, with the dead ends counted: which rules each dead end dropped."""
    rules: tuple
    keys: Keys = field(default_factory=Keys)
    dropped: Counter = field(default_factory=Counter)
    dead_ends: int = 0
    masked: int = 0

    def mask(self, usable: np.ndarray) -> np.ndarray:
        """(V,) what every rule allows among ``usable``; at a dead end, rules dropped in ``RELAX_ORDER``."""
        self.masked += 1
        active = list(self.rules)
        ok = usable.copy()
        for r in active:
            ok &= r.allowed(self.keys)
        if ok.any():
            return ok
        self.dead_ends += 1
        for name in RELAX_ORDER + tuple(r.name for r in self.rules if r.name not in RELAX_ORDER):
            if not any(r.name == name for r in active):
                continue
            active = [r for r in active if r.name != name]
            self.dropped[name] += 1
            ok = usable.copy()
            for r in active:
                ok &= r.allowed(self.keys)
            if ok.any():
                return ok
        return usable.copy()

    def push(self, token: int) -> None:
        self.keys.push(token)

    def release_all(self) -> list[int]:
        """The events that end the performance with no key down: a tick if a key went down in this one (a
        release in the tick of its NOTE_ON is not one), then each key's NOTE_OFF, lowest first."""
        if not self.keys.down:
            return []
        out = [TIME_SHIFT] if max(self.keys.down.values()) >= self.keys.now else []
        out += [NOTE_OFF + p for p in sorted(self.keys.down)]
        for t in out:
            self.push(t)
        return out


def limits_of(notes_by_piece: list[np.ndarray]) -> dict:
    """The limits of real performances (notes (n, 4) [start s, end s, pitch, velocity], the pedal folded in):
    the longest note, its 99.9th percentile, the most keys down at once, and the notes per second."""
    lengths = np.concatenate([n[:, 1] - n[:, 0] for n in notes_by_piece])
    down = np.concatenate([keys_down(n) for n in notes_by_piece])
    seconds = sum(float(n[:, 1].max() - n[:, 0].min()) for n in notes_by_piece if len(n))
    return {"longest_note_s": float(lengths.max()), "note_s_p999": float(np.quantile(lengths, 0.999)),
            "most_keys_down": int(down.max(initial=0)), "keys_down_p999": int(np.ceil(np.quantile(down, 0.999))),
            "keys_down_p995": int(np.ceil(np.quantile(down, 0.995))),
            "notes_per_s": float(len(lengths) / seconds), "pieces": len(notes_by_piece)}


def keys_down(notes: np.ndarray) -> np.ndarray:
    """(events,) how many notes sound after each start or end, in time order (an end before a start at a tie)."""
    if len(notes) == 0:
        return np.zeros(0, dtype=np.int64)
    t = np.concatenate([notes[:, 0], notes[:, 1]])
    step = np.concatenate([np.ones(len(notes), np.int64), -np.ones(len(notes), np.int64)])
    order = np.lexsort((step, t))
    return np.cumsum(step[order])
