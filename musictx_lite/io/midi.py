"""Pitch grids <-> MIDI: notes, files, and the names of pitches.

Notebook: notebooks/00_music_as_tokens.ipynb

A pitch grid is (steps, 4), S A T B, MIDI numbers on a 16th-note grid, -1 rest.
Consecutive equal pitches become one held note unless ``onsets`` says a new note
starts there (the plain grid cannot tell; see ``tokens``). Hearing a grid is
``audio``'s; seeing it, ``score`` (engraved) and ``classroom.plots.piano_roll``.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from pathlib import Path

import numpy as np

from ..files import atomic_write
from .tokens import VOICES

TEMPO = 90.0            # quarter notes per minute
STEPS_PER_QUARTER = 4
PROGRAM = 19            # General MIDI church organ


def bar_steps(metre: str = "4/4") -> int:
    """16th steps in a bar of ``metre`` ("3/4": 12, "6/8": 12, "2/2": 16), or a ValueError."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(metre))
    if not m or int(m.group(2)) not in (1, 2, 4, 8, 16) or not 1 <= int(m.group(1)) <= 32:
        raise ValueError(f"a metre is N/D with D 1, 2, 4, 8 or 16 (\"3/4\", \"6/8\"), got {metre!r}")
    return int(m.group(1)) * 16 // int(m.group(2))


def beat_steps(metre: str = "4/4") -> int:
    """16th steps in a beat of ``metre``: a quarter in 2/4, 3/4, 4/4; a dotted quarter in 6/8, 9/8, 12/8 (compound
    metres); a half in 2/2 and 3/2."""
    bar_steps(metre)                                                # a bad metre fails here
    num, den = (int(x) for x in metre.split("/"))
    return 6 if den == 8 and num % 3 == 0 else max(16 // den, 1)


def notes_of(pitches: np.ndarray, onsets: np.ndarray | None = None) -> list[list[tuple[int, int, int]]]:
    """Per voice, the list of (start_step, end_step, pitch) notes in a grid."""
    pitches = np.asarray(pitches)
    out = []
    for v in range(pitches.shape[1]):
        notes, start = [], None
        for t, p in enumerate(list(pitches[:, v]) + [-1]):
            new = onsets is not None and t < len(pitches) and bool(onsets[t, v])
            if start is not None and (p != pitches[start, v] or new):
                notes.append((start, t, int(pitches[start, v])))
                start = None
            if start is None and p >= 0:
                start = t
        out.append(notes)
    return out


def grid_to_midi(pitches: np.ndarray, onsets: np.ndarray | None = None, tempo: float = TEMPO,
                 program: int = PROGRAM, metre: str | None = None, pickup: int = 0):
    """Pitch grid -> ``pretty_midi.PrettyMIDI`` with one instrument per voice. With ``metre`` ("3/4"), the file
    has that time signature, and a ``pickup`` (the 16th steps before the first barline) starts late in bar 1,
    so that the file's barlines fall where the music's do."""
    pretty_midi = _pretty_midi()

    step = 60.0 / tempo / STEPS_PER_QUARTER    # seconds per 16th
    pm = pretty_midi.PrettyMIDI(initial_tempo=tempo)
    lead = 0
    if metre is not None:
        bar = bar_steps(metre)
        num, den = (int(x) for x in metre.split("/"))
        if not 0 <= pickup < bar:
            raise ValueError(f"pickup is 0 to {bar - 1} 16th steps in {metre}, got {pickup}")
        lead = (bar - pickup) % bar                                 # the rest before an upbeat
        pm.time_signature_changes.append(pretty_midi.TimeSignature(num, den, 0.0))
    for name, notes in zip(VOICES, notes_of(pitches, onsets)):
        inst = pretty_midi.Instrument(program=program, name=name)
        inst.notes = [pretty_midi.Note(velocity=80, pitch=p, start=(s + lead) * step, end=(e + lead) * step)
                      for s, e, p in notes]
        pm.instruments.append(inst)
    return pm


def midi_to_grid(pm) -> np.ndarray:
    """``PrettyMIDI`` with four voices -> (steps, 4) pitch grid on the 16th grid.

    Instruments named soprano, alto, tenor and bass (as ``write_midi`` names
    them) keep those voices; otherwise they are ordered by mean pitch, highest
    first. Timing is quantised in ticks, so it does not depend on the tempo.
    """
    insts = [i for i in pm.instruments if i.notes and not i.is_drum]
    if not insts:
        raise ValueError("MIDI file contains no notes")
    if len(insts) != 4:
        raise ValueError(f"expected 4 voices (instruments with notes), found {len(insts)}")
    names = [i.name.strip().lower() for i in insts]
    if sorted(names) == sorted(VOICES):
        insts.sort(key=lambda i: VOICES.index(i.name.strip().lower()))
    else:
        insts.sort(key=lambda i: -np.mean([n.pitch for n in i.notes]))
    per_step = pm.resolution / STEPS_PER_QUARTER
    q = lambda sec: int(round(pm.time_to_tick(sec) / per_step))  # noqa: E731
    n_steps = max(q(n.end) for i in insts for n in i.notes)
    grid = np.full((n_steps, 4), -1, dtype=np.int64)
    for v, inst in enumerate(insts):
        for n in inst.notes:
            grid[q(n.start):q(n.end), v] = n.pitch
    return grid


def open_midi(path: str | os.PathLike):
    """A MIDI file as ``PrettyMIDI``; clear errors for a missing, empty or unreadable file."""
    pretty_midi = _pretty_midi()

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"MIDI file {path} not found")
    if path.stat().st_size == 0:
        raise ValueError(f"{path} is empty, not a MIDI file")
    try:
        return pretty_midi.PrettyMIDI(str(path))
    except Exception as e:  # mido and pretty_midi raise many types for bad bytes
        raise ValueError(f"{path} is not a readable MIDI file: {type(e).__name__}: {e}") from e


def read_midi(path: str | os.PathLike) -> np.ndarray:
    """Read a four-voice MIDI file into a pitch grid; clear errors for bad files."""
    pm = open_midi(path)
    try:
        return midi_to_grid(pm)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from e


def write_midi(pitches: np.ndarray, path: str | os.PathLike, onsets: np.ndarray | None = None,
               tempo: float = TEMPO, metre: str | None = None, pickup: int = 0) -> Path:
    """Write a pitch grid as a MIDI file (atomically: no half-written file on error); ``metre`` and ``pickup``
    as in ``grid_to_midi``."""
    return atomic_write(path, grid_to_midi(pitches, onsets, tempo, metre=metre, pickup=pickup).write)


def note_name(pitch: int, centre: float | None = None) -> str:
    """MIDI number -> scientific pitch name: 60 -> 'C4' (middle C), 74 -> 'D5'. A black key is spelt
    nearest ``centre`` on the line of fifths (``io.spelling``: 63 is 'D#4' in C sharp minor, 'Eb4' in C minor);
    without a key, as C#, Eb, F#, Ab and Bb."""
    if centre is None:
        names = ("C", "C#", "D", "Eb", "E", "F", "F#", "G", "Ab", "A", "Bb", "B")
        return f"{names[int(pitch) % 12]}{int(pitch) // 12 - 1}"
    from .spelling import spelling

    letter, alter, octave = spelling(pitch, centre)
    return f"{letter}{'#' * alter if alter > 0 else 'b' * -alter}{octave}"


def _quiet_import_fluidsynth():
    """``import fluidsynth`` (pyfluidsynth) without its stdout: it prints where it found the library
    when $CI is set, which would land in the book's pages."""
    with contextlib.redirect_stdout(io.StringIO()):
        import fluidsynth
    return fluidsynth


def _pretty_midi():
    """``import pretty_midi``; the first time, import pyfluidsynth quietly before pretty_midi does."""
    if "pretty_midi" not in sys.modules:
        with contextlib.suppress(Exception):    # why it fails is fluidsynth_problem()'s to say (audio)
            _quiet_import_fluidsynth()
    import pretty_midi

    return pretty_midi
