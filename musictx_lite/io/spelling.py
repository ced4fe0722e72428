"""Spelling pitches as a key would (chapters 0, 12, 13): MIDI numbers carry no spelling, so 63 is D#4 in
C sharp minor and Eb4 in C minor.

- ``key_of``: the key that some pitches suggest, weighted by how long each sounds (music21's key profiles);
- ``key_centre``: where that key lies on the line of fifths (C=0, G=1, F=-1);
- ``spelling``: a MIDI number's letter, alteration and octave nearest a centre, what ``io.midi.note_name``,
  ``io.performance.describe`` and the scores of ``io.score`` print.
"""
from __future__ import annotations

import numpy as np


def key_of(pitches, weights=None):
    """The key (a music21 Key) that MIDI pitches suggest, each weighted by ``weights`` (how long it sounds,
    any unit; default 1 each), by music21's key profiles (Aarden-Essen); C major for no notes."""
    import music21 as m21

    pitches = np.asarray(pitches, dtype=np.int64).reshape(-1)
    weights = np.ones(len(pitches)) if weights is None else np.asarray(weights, dtype=np.float64).reshape(-1)
    if pitches.size == 0:
        return m21.key.Key("C")
    hist = m21.stream.Stream()
    for p in np.unique(pitches):
        hist.append(m21.note.Note(int(p), quarterLength=max(float(weights[pitches == p].sum()), 1e-3)))
    return hist.analyze("key")


def key_centre(key) -> float:
    """A key's centre on the line of fifths, to spell its notes by (``spelling``): the middle of its
    scale's fifths, leaning sharp (C major 2.5, A minor 3.5, C sharp minor 7.5)."""
    return key.sharps + (3.5 if key.mode == "minor" else 2.5)


def spelling(pitch: int, centre: float) -> tuple[str, int, int]:
    """How a MIDI number is spelt nearest ``centre`` on the line of fifths (C=0, G=1, F=-1, a key's centre
    from ``key_centre``): (letter, alteration in semitones, octave); 63 -> ('D', 1, 4) in C sharp
    minor (centre 7.5), ('E', -1, 4) in C minor (centre 0.5)."""
    fifth = (int(pitch) % 12) * 7 % 12           # C#=7 (or -5 as Db), Bb=10 (or -2)
    fifth += 12 * round((centre - fifth) / 12)   # the spelling closest to the key
    letter, alter = "FCGDAEB"[(fifth + 1) % 7], (fifth + 1) // 7
    natural = {"C": 0, "D": 2, "E": 4, "F": 5, "G": 7, "A": 9, "B": 11}[letter] + alter
    return letter, alter, (int(pitch) - natural) // 12 - 1     # B#3 is MIDI 60, Cb5 is MIDI 71
