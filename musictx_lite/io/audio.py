"""Hearing a pitch grid: FluidSynth where it is installed, else an additive organ; a player with the
MIDI to download. Chapter 13's performances play as a piano (``play_notes``).

Notebook: notebooks/00_music_as_tokens.ipynb (every chapter plays what it generates)
"""
from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import numpy as np

from .midi import PROGRAM, STEPS_PER_QUARTER, TEMPO, _pretty_midi, _quiet_import_fluidsynth, grid_to_midi

SOUNDFONT = "TimGM6mb"  # the General MIDI soundfont bundled with pretty_midi: FluidSynth's, here
PEAK = 0.9              # audio is scaled to this peak: no clipping


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


# The additive piano of ``piano``: harmonics 1-6 of every note, each decaying faster than the one below
# (seconds for the fundamental to fall by 1/e), and the damper's release after the note ends.
PIANO_HARMONICS = {1: 1.0, 2: 0.5, 3: 0.25, 4: 0.15, 5: 0.08, 6: 0.05}
PIANO_DECAY, PIANO_RELEASE = 1.2, 0.12


def piano(pm, fs: int) -> np.ndarray:
    """Mono audio of a ``PrettyMIDI`` by additive synthesis, a piano-like sound without FluidSynth: each
    note a sum of decaying harmonics (``PIANO_HARMONICS``), struck at its velocity, damped over
    ``PIANO_RELEASE`` after its end."""
    audio = np.zeros(int(np.ceil((pm.get_end_time() + PIANO_RELEASE) * fs)) + 1)
    for inst in pm.instruments:
        for note in inst.notes:
            f0 = 440.0 * 2 ** ((note.pitch - 69) / 12)
            length = note.end - note.start
            t = np.arange(int((length + PIANO_RELEASE) * fs)) / fs                # (samples,)
            damp = np.clip(1 - (t - length) / PIANO_RELEASE, 0, 1) * np.clip(t / 0.003, 0, 1)
            decay = PIANO_DECAY * (261.6 / f0) ** 0.5                            # high notes die sooner
            wave = sum(a * np.exp(-t * k / decay) * np.sin(2 * np.pi * k * f0 * t)
                       for k, a in PIANO_HARMONICS.items() if k * f0 < fs / 2)
            start = int(round(note.start * fs))
            audio[start: start + len(t)] += (note.velocity / 127) ** 1.5 * damp * wave
    return audio


def _render(pm, fs: int) -> tuple[np.ndarray, int, str, str]:
    """(audio, rate, synth, note): FluidSynth with pretty_midi's bundled soundfont where it works,
    else the additive ``organ`` (the ``piano`` for a piano track); ``note`` says in words which one
    played and why."""
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
                program = pm.instruments[0].program if pm.instruments else PROGRAM
                instrument = _pretty_midi().program_to_instrument_name(program).lower()
                return (_normalised(audio), rate, "fluidsynth",
                        f"FluidSynth, General MIDI {instrument} ({SOUNDFONT} soundfont bundled with pretty_midi)")
            problem = "FluidSynth rendered silence"
    if pm.instruments and pm.instruments[0].program == 0:               # General MIDI's grand piano
        return _normalised(piano(pm, fs)), int(fs), "piano", f"additive piano, not FluidSynth: {problem} (see Setup)"
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
    """A player for (the first ``seconds`` of) a pitch grid, with its MIDI to download; given a
    ``Performance`` (chapter 13), its notes as a piano (``play_notes``).

    Shows as an audio player, a link that downloads the MIDI of exactly what plays (as ``name``) and
    a line saying which synthesiser played: FluidSynth with a General MIDI organ if pyfluidsynth and
    the FluidSynth library are installed, else an organ-like additive synthesis (``organ``). Clips are
    short, mono and at a low sample rate so that book pages stay small. A performance plays from its first
    note.
    """
    if hasattr(pitches, "notes") and hasattr(pitches, "tokens"):     # a performance (chapter 13), from its
        notes = np.asarray(pitches.notes, dtype=np.float64).reshape(-1, 4).copy()   # first note: a recording's
        if len(notes):                                                # silence before it is not music
            notes[:, :2] -= notes[:, 0].min()
        return play_notes(notes, seconds, fs, name)
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


def play_notes(notes: np.ndarray, seconds: float = 20.0, fs: int = 8000, name: str = "performance.mid") -> Clip:
    """A player for (the first ``seconds`` of) a performance, notes (n, 4) [start s, end s, pitch, velocity]
    (chapter 13), as a piano, with its MIDI to download."""
    from .performance import to_midi

    notes = np.asarray(notes, dtype=np.float64).reshape(-1, 4)
    notes = notes[notes[:, 0] < seconds].copy()
    if len(notes) == 0:
        raise ValueError(f"nothing to play: no note starts in the first {seconds:g} s")
    notes[:, 1] = np.minimum(notes[:, 1], seconds)
    pm = to_midi(notes)
    buf = io.BytesIO()
    pm.write(buf)
    audio, rate, synth, note = _render(pm, fs)
    return Clip(audio, rate, synth, note, buf.getvalue(), _midi_name(name))
