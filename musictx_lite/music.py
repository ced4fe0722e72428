"""Listening and looking: pitch grid <-> MIDI, piano rolls and audio.

Notebook: notebooks/00_music_as_tokens.ipynb

A pitch grid is (steps, 4), S A T B, MIDI numbers on a 16th-note grid, -1 rest.
Consecutive equal pitches become one held note unless ``onsets`` says a new note
starts there (the plain grid cannot tell; see ``tokens``).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from .tokens import VOICES

TEMPO = 90.0            # quarter notes per minute
STEPS_PER_QUARTER = 4
COLORS = ("#d62728", "#2ca02c", "#1f77b4", "#9467bd")   # S A T B
PROGRAM = 19            # General MIDI church organ


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
                 program: int = PROGRAM):
    """Pitch grid -> ``pretty_midi.PrettyMIDI`` with one instrument per voice."""
    import pretty_midi

    step = 60.0 / tempo / STEPS_PER_QUARTER    # seconds per 16th
    pm = pretty_midi.PrettyMIDI(initial_tempo=tempo)
    for name, notes in zip(VOICES, notes_of(pitches, onsets)):
        inst = pretty_midi.Instrument(program=program, name=name)
        inst.notes = [pretty_midi.Note(velocity=80, pitch=p, start=s * step, end=e * step) for s, e, p in notes]
        pm.instruments.append(inst)
    return pm


def midi_to_grid(pm) -> np.ndarray:
    """``PrettyMIDI`` with four voices -> (steps, 4) pitch grid on the 16th grid.

    Instruments are ordered by mean pitch, highest first (S A T B). Timing is
    quantised in ticks, so it does not depend on the tempo.
    """
    insts = [i for i in pm.instruments if i.notes and not i.is_drum]
    if not insts:
        raise ValueError("MIDI file contains no notes")
    if len(insts) != 4:
        raise ValueError(f"expected 4 voices (instruments with notes), found {len(insts)}")
    insts.sort(key=lambda i: -np.mean([n.pitch for n in i.notes]))
    per_step = pm.resolution / STEPS_PER_QUARTER
    q = lambda sec: int(round(pm.time_to_tick(sec) / per_step))  # noqa: E731
    n_steps = max(q(n.end) for i in insts for n in i.notes)
    grid = np.full((n_steps, 4), -1, dtype=np.int64)
    for v, inst in enumerate(insts):
        for n in inst.notes:
            grid[q(n.start):q(n.end), v] = n.pitch
    return grid


def read_midi(path: str | os.PathLike) -> np.ndarray:
    """Read a four-voice MIDI file into a pitch grid; clear errors for bad files."""
    import pretty_midi

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"MIDI file {path} not found")
    if path.stat().st_size == 0:
        raise ValueError(f"{path} is empty, not a MIDI file")
    try:
        pm = pretty_midi.PrettyMIDI(str(path))
    except Exception as e:  # mido and pretty_midi raise many types for bad bytes
        raise ValueError(f"{path} is not a readable MIDI file: {type(e).__name__}: {e}") from e
    try:
        return midi_to_grid(pm)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from e


def write_midi(pitches: np.ndarray, path: str | os.PathLike, onsets: np.ndarray | None = None,
               tempo: float = TEMPO) -> Path:
    """Write a pitch grid as a MIDI file (atomically: no half-written file on error)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".mid.part")
    os.close(fd)
    try:
        grid_to_midi(pitches, onsets, tempo).write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def piano_roll(pitches: np.ndarray, onsets: np.ndarray | None = None, ax=None, title: str | None = None,
               start: int = 0, alpha: float = 0.85):
    """Plot a pitch grid as a piano roll, one colour per voice; x in quarter notes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(10, 3.2))
    for name, color, notes in zip(VOICES, COLORS, notes_of(pitches, onsets)):
        bars = [((start + s) / STEPS_PER_QUARTER, (e - s) / STEPS_PER_QUARTER) for s, e, _ in notes]
        for (x, w), (_, _, p) in zip(bars, notes):
            ax.add_patch(plt.Rectangle((x, p - 0.4), w - 0.03, 0.8, color=color, alpha=alpha, lw=0))
        ax.plot([], [], color=color, lw=6, label=name)  # legend handle
    sounding = np.asarray(pitches)[np.asarray(pitches) >= 0]
    lo, hi = (sounding.min(), sounding.max()) if sounding.size else (48, 72)
    ax.set_xlim(start / STEPS_PER_QUARTER, (start + len(pitches)) / STEPS_PER_QUARTER)
    ax.set_ylim(lo - 2, hi + 2)
    ax.set_xlabel("time (quarter notes)")
    ax.set_ylabel("MIDI pitch")
    ax.legend(loc="upper right", ncol=4, fontsize=8, frameon=False)
    if title:
        ax.set_title(title)
    return ax


def synthesize(pitches: np.ndarray, onsets: np.ndarray | None = None, fs: int = 8000,
               tempo: float = TEMPO) -> tuple[np.ndarray, int]:
    """Audio samples for a grid: FluidSynth with pretty_midi's soundfont if available, else sine waves."""
    pm = grid_to_midi(pitches, onsets, tempo)
    try:
        import fluidsynth  # noqa: F401  (pyfluidsynth and the system library)

        return pm.fluidsynth(fs=max(fs, 16000)), max(fs, 16000)
    except Exception:
        return pm.synthesize(fs=fs), fs


def play(pitches: np.ndarray, onsets: np.ndarray | None = None, seconds: float = 20.0, fs: int = 8000,
         tempo: float = TEMPO):
    """An ``IPython.display.Audio`` player for (the first ``seconds`` of) a pitch grid.

    Clips are short and at a low sample rate so that book pages stay small.
    """
    from IPython.display import Audio

    steps = int(seconds * tempo / 60 * STEPS_PER_QUARTER)
    pitches = np.asarray(pitches)[:steps]
    if not (pitches >= 0).any():
        raise ValueError("nothing to play: the grid has no sounding notes")
    audio, rate = synthesize(pitches, None if onsets is None else onsets[:steps], fs, tempo)
    return Audio(audio, rate=rate)
