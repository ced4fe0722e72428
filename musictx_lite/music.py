"""Listening and looking: pitch grid <-> MIDI, piano rolls and audio.

Notebook: notebooks/00_music_as_tokens.ipynb

A pitch grid is (steps, 4), S A T B, MIDI numbers on a 16th-note grid, -1 rest.
Consecutive equal pitches become one held note unless ``onsets`` says a new note
starts there (the plain grid cannot tell; see ``tokens``).
"""
from __future__ import annotations

import base64
import contextlib
import html
import io
import os
import sys
from pathlib import Path

import numpy as np

from .data import atomic_write
from .tokens import VOICES

TEMPO = 90.0            # quarter notes per minute
STEPS_PER_QUARTER = 4
COLORS = ("#d62728", "#2ca02c", "#1f77b4", "#9467bd")   # S A T B
PROGRAM = 19            # General MIDI church organ
SOUNDFONT = "TimGM6mb"  # the General MIDI soundfont bundled with pretty_midi: FluidSynth's, here
PEAK = 0.9              # audio is scaled to this peak: no clipping


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
    pretty_midi = _pretty_midi()

    step = 60.0 / tempo / STEPS_PER_QUARTER    # seconds per 16th
    pm = pretty_midi.PrettyMIDI(initial_tempo=tempo)
    for name, notes in zip(VOICES, notes_of(pitches, onsets)):
        inst = pretty_midi.Instrument(program=program, name=name)
        inst.notes = [pretty_midi.Note(velocity=80, pitch=p, start=s * step, end=e * step) for s, e, p in notes]
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


def read_midi(path: str | os.PathLike) -> np.ndarray:
    """Read a four-voice MIDI file into a pitch grid; clear errors for bad files."""
    pretty_midi = _pretty_midi()

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
    return atomic_write(path, grid_to_midi(pitches, onsets, tempo).write)


def note_name(pitch: int) -> str:
    """MIDI number -> scientific pitch name: 60 -> 'C4' (middle C), 74 -> 'D5'."""
    names = ("C", "C#", "D", "Eb", "E", "F", "F#", "G", "Ab", "A", "Bb", "B")
    return f"{names[int(pitch) % 12]}{int(pitch) // 12 - 1}"


def crossings(grid: np.ndarray) -> tuple[int, int]:
    """(adjacent voice pairs crossed, adjacent voice pairs with both voices sounding), over every step.

    The pairs are S-A, A-T and T-B; a pair is crossed when the lower voice sounds above the upper
    one. Chapter 5 (``voice_stats``), chapter 9 and chapter 11 (``stats``) count crossings this way.
    """
    g = np.asarray(grid)
    upper, lower = g[:, :-1], g[:, 1:]
    both = (upper >= 0) & (lower >= 0)
    return int((lower > upper)[both].sum()), int(both.sum())


def voice_stats(pitches: np.ndarray) -> dict[str, float]:
    """How a grid's voices move, in three numbers that chapters 0, 1 and 5 compare with Bach:

    ``moves``: the share of 16th steps at which a sounding voice changes pitch (all voices pooled);
    ``leap``: the mean size, in semitones, of those changes;
    ``crossings``: the share of adjacent voice pairs (S-A, A-T, T-B), both sounding, where the lower
    voice sounds above the upper one.

    ``pitches`` is one grid, or a list of grids (pieces) pooled without joining them.
    """
    grids = [np.asarray(g) for g in pitches] if isinstance(pitches, (list, tuple)) else [np.asarray(pitches)]
    steps, crossed, pairs = [], 0, 0
    for g in grids:
        both = (g[1:] >= 0) & (g[:-1] >= 0)
        steps.append(np.abs(np.diff(g, axis=0))[both])
        c, n = crossings(g)
        crossed, pairs = crossed + c, pairs + n
    step = np.concatenate(steps)
    return {"moves": float((step > 0).mean()) if step.size else 0.0,
            "leap": float(step[step > 0].mean()) if (step > 0).any() else 0.0,
            "crossings": crossed / pairs if pairs else 0.0}


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
    # outside the axes, to the right: a legend inside would cover the highest notes
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False, handlelength=1.2)
    if title:
        ax.set_title(title)
    return ax


def _quiet_import_fluidsynth():
    """``import fluidsynth`` (pyfluidsynth) without its stdout: it prints where it found the library
    when $CI is set, which would land in the book's pages."""
    with contextlib.redirect_stdout(io.StringIO()):
        import fluidsynth
    return fluidsynth


def _pretty_midi():
    """``import pretty_midi``; the first time, import pyfluidsynth quietly before pretty_midi does."""
    if "pretty_midi" not in sys.modules:
        fluidsynth_problem()
    import pretty_midi

    return pretty_midi


def fluidsynth_problem() -> str | None:
    """Why FluidSynth cannot play here, or ``None`` when pyfluidsynth and the FluidSynth library load.

    The Python module ``fluidsynth`` comes from the PyPI package ``pyfluidsynth``, which needs the
    system library libfluidsynth (Debian/Ubuntu: ``apt-get install fluidsynth``; macOS: ``brew install
    fluid-synth``). See the Setup page.
    """
    try:
        fluidsynth = _quiet_import_fluidsynth()
    except ModuleNotFoundError as e:
        if e.name == "fluidsynth":
            return "FluidSynth is not installed"
        return f"pyfluidsynth cannot be imported ({type(e).__name__}: {e})"
    except ImportError as e:   # pyfluidsynth: "Couldn't find the FluidSynth library."
        if "library" in str(e):
            return "pyfluidsynth is installed but the FluidSynth library (libfluidsynth) is not"
        return f"pyfluidsynth cannot be imported ({type(e).__name__}: {e})"
    except Exception as e:     # e.g. OSError from loading a broken libfluidsynth
        return f"the FluidSynth library cannot be loaded ({type(e).__name__}: {e})"
    if not hasattr(fluidsynth, "Synth"):
        return "the installed `fluidsynth` module is not pyfluidsynth"
    return None


def _normalised(audio: np.ndarray) -> np.ndarray:
    """Mono float32 audio scaled to a peak of ``PEAK``: loud, but no clipping."""
    audio = np.asarray(audio, dtype=np.float64)
    return (audio * (PEAK / np.abs(audio).max())).astype(np.float32)


# The additive organ of ``organ``: the relative loudness of harmonics 1, 2, 3, 4, 6 and 8 of every note
# (like an organ's 8', 4', 2 2/3', 2', 1 1/3' and 1' stops), and its envelope in seconds.
HARMONICS = {1: 1.0, 2: 0.55, 3: 0.35, 4: 0.3, 6: 0.15, 8: 0.1}
ATTACK, RELEASE = 0.015, 0.08


def organ(pm, fs: int) -> np.ndarray:
    """Mono audio of a ``pretty_midi.PrettyMIDI`` by additive synthesis, an organ-like sound without
    FluidSynth: each note is a sum of sines at its harmonics (``HARMONICS``, those below fs / 2),
    faded in over ``ATTACK`` and out over ``RELEASE`` after its end, so notes start and stop without
    clicks. Loudness follows the note's velocity."""
    audio = np.zeros(int(np.ceil((pm.get_end_time() + RELEASE) * fs)) + 1)
    for inst in pm.instruments:
        for note in inst.notes:
            f0 = 440.0 * 2 ** ((note.pitch - 69) / 12)
            length = note.end - note.start
            t = np.arange(int((length + RELEASE) * fs)) / fs                     # (samples,)
            env = np.minimum(np.clip(t / ATTACK, 0, 1), np.clip(1 - (t - length) / RELEASE, 0, 1))
            wave = sum(a * np.sin(2 * np.pi * k * f0 * t) for k, a in HARMONICS.items() if k * f0 < fs / 2)
            start = int(round(note.start * fs))
            audio[start: start + len(t)] += note.velocity / 127 * env * wave
    return audio


def _render(pm, fs: int) -> tuple[np.ndarray, int, str, str]:
    """(audio, rate, synth, note): FluidSynth with pretty_midi's bundled soundfont where it works,
    else the additive ``organ``; ``note`` says in words which one played and why."""
    problem = fluidsynth_problem()
    if problem is None:
        rate = int(min(max(fs, 8000), 96000))      # FluidSynth's range of sample rates
        try:
            with np.errstate(invalid="ignore", divide="ignore"):   # pretty_midi divides by the peak
                audio = np.asarray(pm.fluidsynth(fs=rate), dtype=np.float64)
        except Exception as e:
            problem = f"FluidSynth failed ({type(e).__name__}: {e})"
        else:
            if audio.size and np.isfinite(audio).all() and np.abs(audio).max() > 0:
                instrument = _pretty_midi().program_to_instrument_name(PROGRAM).lower()
                return (_normalised(audio), rate, "fluidsynth",
                        f"FluidSynth, General MIDI {instrument} ({SOUNDFONT} soundfont bundled with pretty_midi)")
            problem = "FluidSynth rendered silence"
    return _normalised(organ(pm, fs)), int(fs), "organ", f"additive organ, not FluidSynth: {problem} (see Setup)"


def synthesize(pitches: np.ndarray, onsets: np.ndarray | None = None, fs: int = 8000,
               tempo: float = TEMPO) -> tuple[np.ndarray, int]:
    """(audio, rate) for a grid: FluidSynth with pretty_midi's soundfont if available, else the additive organ."""
    audio, rate, _, _ = _render(grid_to_midi(pitches, onsets, tempo), fs)
    return audio, rate


class Clip:
    """What :func:`play` returns: a player, a MIDI download link and a note saying what played.

    Attributes: ``audio`` (mono float32 samples, peak ``PEAK``), ``rate`` (samples per second),
    ``synth`` (``"fluidsynth"`` or ``"organ"``), ``note`` (that, in words), ``midi_bytes`` (a MIDI
    file of exactly what plays), ``name`` (its download file name), ``pitches`` (the grid played)
    and ``data`` (the WAV file's bytes, as in ``IPython.display.Audio``).
    """

    def __init__(self, audio: np.ndarray, rate: int, synth: str, note: str, midi_bytes: bytes,
                 name: str = "musictx.mid", pitches: np.ndarray | None = None):
        from IPython.display import Audio

        self.audio, self.rate, self.synth, self.note = audio, int(rate), synth, note
        self.midi_bytes, self.name, self.pitches = midi_bytes, name, pitches
        self.data = Audio(audio, rate=self.rate, normalize=False).data    # 16-bit mono WAV

    @property
    def seconds(self) -> float:
        return len(self.audio) / self.rate

    def _repr_html_(self) -> str:
        from IPython.display import Audio

        player = Audio(data=self.data)._repr_html_()     # <audio> with the WAV as a base64 data URI
        link = download_link(self.midi_bytes, self.name, "audio/midi", "Download the MIDI")
        return (f'<div class="musictx-clip">{player}\n<div style="font-size:85%">'
                f'{link} &middot; Sound: {html.escape(self.note)}</div></div>')

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/html": self._repr_html_(), "text/plain": repr(self)}

    def __repr__(self) -> str:
        return (f"<musictx clip: {self.seconds:.1f} s at {self.rate} Hz; sound: {self.note}; "
                f"MIDI {self.name}, {len(self.midi_bytes)} bytes>")


def download_link(data: bytes, name: str, mime: str, label: str) -> str:
    """An <a> that downloads ``data`` as the file ``name``, from a base64 data: URI (no server needed)."""
    name = html.escape(name, quote=True)
    return (f'<a download="{name}" href="data:{mime};base64,{base64.b64encode(data).decode("ascii")}">'
            f'{html.escape(label)} ({name})</a>')


def _midi_name(name: str) -> str:
    name = Path(str(name)).name or "musictx.mid"
    return name if name.lower().endswith((".mid", ".midi")) else name + ".mid"


def play(pitches: np.ndarray, onsets: np.ndarray | None = None, seconds: float = 20.0, fs: int = 8000,
         tempo: float = TEMPO, name: str = "musictx.mid") -> Clip:
    """A player for (the first ``seconds`` of) a pitch grid, with its MIDI to download.

    Shows as an audio player, a link that downloads the MIDI of exactly what plays (as ``name``) and
    a line saying which synthesiser played: FluidSynth with a General MIDI organ if pyfluidsynth and
    the FluidSynth library are installed, else an organ-like additive synthesis (``organ``). Clips are short, mono and at a low sample
    rate so that book pages stay small.
    """
    steps = int(seconds * tempo / 60 * STEPS_PER_QUARTER)
    pitches = np.asarray(pitches)[:steps]
    if not (pitches >= 0).any():
        raise ValueError("nothing to play: the grid has no sounding notes")
    onsets = None if onsets is None else np.asarray(onsets)[:steps]
    pm = grid_to_midi(pitches, onsets, tempo)
    buf = io.BytesIO()
    pm.write(buf)
    audio, rate, synth, note = _render(pm, fs)
    return Clip(audio, rate, synth, note, buf.getvalue(), _midi_name(name), pitches)
