"""Piano performances as events: the vocabulary of Oore et al. (2018) and the Music Transformer.

Notebook: notebooks/13_piano.ipynb

A performance is a list of notes, each a row (start, end, pitch, velocity), times in seconds.
The sustain pedal (MIDI controller 64, down at 64 and above) is applied first: a key released
while the pedal is down sounds on until the pedal comes up, or until the same key is struck
again (``performance_notes``). ``encode`` then writes the notes as events, one token each:

- NOTE_ON p, 128 of them: key p goes down;
- NOTE_OFF p, 128: key p comes up;
- TIME_SHIFT n, 100: time moves on by n x 10 ms, n = 1..100 (a longer gap takes several);
- VELOCITY b, 32: the loudness of the note-ons that follow, b = velocity // 4, written only
  when it changes.

After PAD and BOS (the raster's tokens 0 and 1, so the training loop is the same), that is
2 + 388 = 390 tokens. Times are rounded to the 10 ms grid, so an onset moves by at most 5 ms;
``decode`` reads events back into notes and ``to_midi`` writes them as one piano track.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .midi import _pretty_midi, open_midi

PAD, BOS = 0, 1
NOTE_ON = 2                      # NOTE_ON + p, p = 0..127
NOTE_OFF = NOTE_ON + 128         # NOTE_OFF + p
TIME_SHIFT = NOTE_OFF + 128      # TIME_SHIFT + n - 1: n ticks of 10 ms, n = 1..100
VELOCITY = TIME_SHIFT + 100      # VELOCITY + b: velocity bin b = 0..31
VOCAB_SIZE = VELOCITY + 32       # 390
TICK = 0.01                      # seconds per time-shift unit
MAX_SHIFT = 100                  # ticks in the longest single shift: 1 s
PEDAL = 64                       # the sustain pedal's controller number
CODEC_VERSION = 3                # cached encodings carry it; change it when the events change


def velocity_bin(velocity) -> np.ndarray:
    """MIDI velocity 1..127 -> bin 0..31 (32 bins of 4)."""
    return np.clip(np.asarray(velocity) // 4, 0, 31)


def bin_velocity(b) -> np.ndarray:
    """Bin 0..31 -> the velocity in the middle of the bin (2, 6, ..., 126): its bin is b again."""
    return np.asarray(b) * 4 + 2


def sustained(notes: np.ndarray, pedal: list[tuple[float, int]]) -> np.ndarray:
    """Notes (n, 4) [start, end, pitch, velocity] with the sustain pedal applied.

    ``pedal``: (time, value) control changes of controller 64. A note whose key comes up while the
    pedal is down ends when the pedal next comes up (if it never does, at its last change); a note
    of the same key struck again ends there first (a key has one hammer and one damper, however many
    strings: it sounds one note at a time)."""
    notes = notes[np.argsort(notes[:, 0], kind="stable")].copy()
    pedal = sorted(pedal)
    if pedal:
        times = np.array([t for t, _ in pedal])
        down = np.array([v >= 64 for _, v in pedal])
        # the pedal's state just after each change, and the next time it comes up
        ups = times[~down]
        for i, end in enumerate(notes[:, 1]):
            k = np.searchsorted(times, end, side="right") - 1
            if k >= 0 and down[k]:
                later = ups[ups > end]
                notes[i, 1] = later[0] if len(later) else max(end, times[-1])
    return _restrike(notes)


def _restrike(notes: np.ndarray) -> np.ndarray:
    """The same key struck again ends the note before it (notes sorted by start); of two strikes of a key
    at the same time, the longer is kept."""
    order = np.lexsort((notes[:, 1], notes[:, 0], notes[:, 2]))  # by pitch, start, then end
    n = notes[order]
    same = n[1:, 2] == n[:-1, 2]
    cut = same & (n[1:, 0] < n[:-1, 1])
    n[:-1, 1] = np.where(cut, n[1:, 0], n[:-1, 1])
    out = n[np.argsort(order, kind="stable")]
    return out[out[:, 1] > out[:, 0]] if len(out) else out


@dataclass
class Performance:
    """One performance: ``notes`` (n, 4) [start s, end s, pitch, velocity] with the pedal applied,
    and its events ``tokens`` (BOS first). ``piece`` names the music, so splits keep every
    performance of a piece together."""

    name: str
    notes: np.ndarray
    tokens: np.ndarray
    piece: str = ""
    source: str = ""

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def seconds(self) -> float:
        return float(self.notes[:, 1].max()) if len(self.notes) else 0.0


def performance_notes(pm) -> np.ndarray:
    """The notes (n, 4) of every non-drum instrument of a ``PrettyMIDI``, each with its own sustain
    pedal applied, merged and sorted by start."""
    parts = []
    for inst in pm.instruments:
        if inst.is_drum or not inst.notes:
            continue
        notes = np.array([[n.start, n.end, n.pitch, n.velocity] for n in inst.notes], dtype=np.float64)
        pedal = sorted((c.time, c.value) for c in inst.control_changes if c.number == PEDAL)
        parts.append(sustained(notes, pedal))
    if not parts:
        return np.zeros((0, 4))
    notes = np.concatenate(parts)
    return _restrike(notes[np.argsort(notes[:, 0], kind="stable")])


def quantised(notes: np.ndarray) -> np.ndarray:
    """Notes (n, 4) as integer rows [on tick, off tick, pitch, velocity bin] on the 10 ms grid, in the
    order ``encode`` writes them: every note at least one tick long, a key struck twice in one tick
    kept once (the louder, sounding as long as either), a note ending where the same key starts again."""
    if len(notes) == 0:
        return np.zeros((0, 4), dtype=np.int64)
    q = np.column_stack([np.rint(notes[:, 0] / TICK), np.rint(notes[:, 1] / TICK),
                         notes[:, 2], velocity_bin(notes[:, 3])]).astype(np.int64)
    q = q[np.lexsort((-q[:, 3], q[:, 0], q[:, 2]))]            # by pitch, onset, loudest first
    keep = np.ones(len(q), bool)
    keep[1:] = ~((q[1:, 2] == q[:-1, 2]) & (q[1:, 0] == q[:-1, 0]))
    ends = np.maximum.reduceat(q[:, 1], np.flatnonzero(keep))      # the key sounds while either strike does
    q = q[keep]
    q[:, 1] = ends
    q[:, 1] = np.maximum(q[:, 1], q[:, 0] + 1)
    same = q[1:, 2] == q[:-1, 2]                                  # the next note of the same key
    q[:-1, 1] = np.where(same, np.minimum(q[:-1, 1], q[1:, 0]), q[:-1, 1])
    return q[np.lexsort((q[:, 2], q[:, 0]))]


def encode(notes: np.ndarray) -> np.ndarray:
    """Notes (n, 4) in seconds -> events (1-D int64), BOS first: at each 10 ms tick the note-offs, then
    the note-ons (a velocity event before a note-on whose bin differs from the last one)."""
    q = quantised(notes)
    # (tick, 0 = off / 1 = on, pitch, velocity bin), in the order they are written
    ev = np.concatenate([np.column_stack([q[:, 1], np.zeros(len(q), np.int64), q[:, 2], q[:, 3]]),
                         np.column_stack([q[:, 0], np.ones(len(q), np.int64), q[:, 2], q[:, 3]])])
    ev = ev[np.lexsort((ev[:, 2], ev[:, 1], ev[:, 0]))]
    out, now, vel = [BOS], 0, -1
    for tick, on, pitch, b in ev.tolist():
        gap = tick - now
        while gap > 0:
            n = min(gap, MAX_SHIFT)
            out.append(TIME_SHIFT + n - 1)
            gap -= n
        now = tick
        if on:
            if b != vel:
                out.append(VELOCITY + b)
                vel = b
            out.append(NOTE_ON + pitch)
        else:
            out.append(NOTE_OFF + pitch)
    return np.array(out, dtype=np.int64)


def decode(tokens) -> np.ndarray:
    """Events -> notes (n, 4) [start s, end s, pitch, velocity], sorted by start. Tolerant of what a
    sampler writes: a note-off without its note-on is skipped, a note-on of a sounding key ends the
    note before it, a note still sounding at the end ends there (at least one tick after it began),
    and PAD and BOS are ignored. The velocity before any velocity event is 64's bin."""
    now, vel, sounding, notes = 0, int(bin_velocity(16)), {}, []
    for t in np.asarray(tokens, dtype=np.int64).reshape(-1).tolist():
        if TIME_SHIFT <= t < VELOCITY:
            now += t - TIME_SHIFT + 1
        elif VELOCITY <= t < VOCAB_SIZE:
            vel = int(bin_velocity(t - VELOCITY))
        elif NOTE_ON <= t < NOTE_OFF:
            p = t - NOTE_ON
            if p in sounding and sounding[p][0] < now:
                notes.append((sounding[p][0], now, p, sounding[p][1]))
            sounding[p] = (now, vel)
        elif NOTE_OFF <= t < TIME_SHIFT:
            p = t - NOTE_OFF
            if p in sounding:
                start, v = sounding.pop(p)
                if now > start:
                    notes.append((start, now, p, v))
                else:                                   # off in the tick of its on: not yet sounded
                    sounding[p] = (start, v)
    notes += [(s, max(now, s + 1), p, v) for p, (s, v) in sounding.items()]
    out = np.array(sorted(notes), dtype=np.float64).reshape(-1, 4)
    out[:, :2] *= TICK
    return out


def opening(notes: np.ndarray, seconds: float | None = None, n_notes: int | None = None) -> np.ndarray:
    """A performance's opening, to prompt a continuation: from its first note, moved to time 0, its first
    ``seconds`` of music or (instead) its first ``n_notes`` notes; a note still sounding at the cut ends there.
    Silence before the first note is not music: a prompt that began there would hold less than it says."""
    if (seconds is None) == (n_notes is None):
        raise ValueError("give the opening's length as seconds or as n_notes, one of them")
    if len(notes) == 0:
        return np.zeros((0, 4))
    out = notes[np.argsort(notes[:, 0], kind="stable")].copy()
    out[:, :2] -= out[0, 0]
    if n_notes is not None:
        if n_notes < 1:
            raise ValueError(f"n_notes must be at least 1, got {n_notes}")
        out = out[:n_notes]
        cut = out[:, 0].max() + TICK if len(out) else 0.0
    else:
        if not seconds > 0:
            raise ValueError(f"seconds must be > 0, got {seconds}")
        out, cut = out[out[:, 0] < seconds], seconds
    out[:, 1] = np.minimum(out[:, 1], np.maximum(cut, out[:, 0] + TICK))
    return out


def to_midi(notes: np.ndarray, program: int = 0):
    """Notes (n, 4) -> ``PrettyMIDI`` with one piano track (the pedal is already in the notes' ends)."""
    pretty_midi = _pretty_midi()
    pm = pretty_midi.PrettyMIDI()
    inst = pretty_midi.Instrument(program=program, name="piano")
    inst.notes = [pretty_midi.Note(velocity=int(np.clip(v, 1, 127)), pitch=int(p), start=float(s), end=float(e))
                  for s, e, p, v in notes]
    pm.instruments.append(inst)
    return pm


def write_performance(notes: np.ndarray, path: str | os.PathLike):
    """Write notes as a one-track piano MIDI file (atomically)."""
    from ..files import atomic_write

    return atomic_write(path, to_midi(notes).write)


def read_performance(path: str | os.PathLike, piece: str = "") -> Performance:
    """A MIDI file as a ``Performance``; clear errors for a missing, unreadable or noteless file."""
    pm = open_midi(path)
    notes = performance_notes(pm)
    if len(notes) == 0:
        drums = any(i.is_drum and i.notes for i in pm.instruments)
        raise ValueError(f"{path} has {'only drum' if drums else 'no'} notes")
    name = os.path.splitext(os.path.basename(path))[0]
    return Performance(name, notes, encode(notes), piece or name, str(path))


def describe(tokens, centre: float | None = None) -> list[str]:
    """Events as readable words: ``ON C4``, ``OFF C4``, ``SHIFT 120ms``, ``VEL 80``. A black key is spelt in
    the key that the events' note-ons suggest (``io.spelling.key_of``: D#4, not Eb4, in C sharp minor), or nearest
    ``centre`` on the line of fifths when it is given (``io.spelling``)."""
    from .midi import note_name

    tokens = np.asarray(tokens).reshape(-1)
    if centre is None:
        from .spelling import key_centre, key_of

        centre = key_centre(key_of(tokens[(tokens >= NOTE_ON) & (tokens < NOTE_OFF)] - NOTE_ON))
    words = []
    for t in tokens.tolist():
        if t == PAD or t == BOS:
            words.append("PAD" if t == PAD else "BOS")
        elif t < NOTE_OFF:
            words.append(f"ON {note_name(t - NOTE_ON, centre)}")
        elif t < TIME_SHIFT:
            words.append(f"OFF {note_name(t - NOTE_OFF, centre)}")
        elif t < VELOCITY:
            words.append(f"SHIFT {10 * (t - TIME_SHIFT + 1)}ms")
        else:
            words.append(f"VEL {int(bin_velocity(t - VELOCITY))}")
    return words
