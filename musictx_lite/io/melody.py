"""A melody from outside the corpus, made ready for a harmoniser (chapter 12): read from MIDI, MusicXML, ABC
or music21's tinyNotation, put on the 16th-note grid, and moved into the soprano's range.

Notebook: notebooks/12_harmonise.ipynb

Every melody that cannot be harmonised as it stands is refused with a ``MelodyError`` that says why, and
names the note where one is to blame: no notes, drums only, two notes at once, a note off the 16th grid (a
triplet, a grace note), a range no soprano sings, more steps than the limit. What is changed on the way
(a shift of octaves, a metre the chorales do not have) is said in ``Melody.log``.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from .midi import STEPS_PER_QUARTER, bar_steps, note_name, open_midi

SOPRANO = (60, 81)            # the lowest and highest soprano notes of the official split's training chorales
MAX_STEPS = 64 * 16           # 64 bars of 4/4: the longest melody harmonised in one call
FILES = (".mid", ".midi", ".xml", ".musicxml", ".mxl", ".abc")   # the kinds of file read_notes reads


class MelodyError(ValueError):
    """A melody that cannot be harmonised as it is; the message says why."""


@dataclass
class Note:
    start: Fraction             # in quarter notes from the start of the first bar (before an upbeat: a whole bar)
    end: Fraction
    pitch: int


@dataclass
class Melody:
    """A melody on the 16th grid: ``pitches`` (steps,) MIDI pitch per step, -1 for a rest, after moving it
    ``shift`` semitones; ``onsets`` (steps,) True where a note starts; ``log`` what was done to it."""

    pitches: np.ndarray
    onsets: np.ndarray
    shift: int = 0
    metre: str | None = None
    log: list[str] = field(default_factory=list)
    pickup: int = 0             # the 16th steps before the first barline (an upbeat), in ``metre`` (4/4 if None)


def _q(x) -> Fraction:
    return Fraction(x).limit_denominator(960)


def notes_from_midi(path: Path, track: int | None = None) -> tuple[list[Note], str | None]:
    """The notes of one monophonic line of a MIDI file, in quarter notes, and its first time signature."""
    try:
        pm = open_midi(path)
    except ValueError as e:
        raise MelodyError(str(e)) from e
    if not any(i.notes for i in pm.instruments):
        raise MelodyError(f"{path} holds no notes")
    lines = [i for i in pm.instruments if i.notes and not i.is_drum]
    if not lines:
        raise MelodyError(f"{path} holds drums only: no line with pitches to harmonise")
    if track is None and len(lines) > 1:
        raise MelodyError(f"{path} has {len(lines)} tracks with notes; choose the melody's with --track "
                          f"(0 to {len(lines) - 1}: " + ", ".join(f"{k} {i.name or 'unnamed'}"
                                                                  for k, i in enumerate(lines)) + ")")
    k = track or 0
    if not 0 <= k < len(lines):
        raise MelodyError(f"{path} has {len(lines)} tracks with notes; --track {k} is not one of 0 to "
                          f"{len(lines) - 1}")
    quarter = pm.resolution                                     # ticks per quarter note
    notes = [Note(_q(Fraction(pm.time_to_tick(n.start), quarter)), _q(Fraction(pm.time_to_tick(n.end), quarter)),
                  n.pitch) for n in sorted(lines[k].notes, key=lambda n: (n.start, n.pitch))]
    ts = pm.time_signature_changes
    return notes, (f"{ts[0].numerator}/{ts[0].denominator}" if ts else None)


def notes_from_music21(source: str, what: str) -> tuple[list[Note], str | None]:
    """The notes of the first part of a score music21 can read (MusicXML, ABC, or ``tinyNotation: ...``)."""
    import music21

    try:
        score = music21.converter.parse(source)
    except Exception as e:  # music21 raises many types for text it cannot read
        raise MelodyError(f"{what} is not a melody music21 can read: {type(e).__name__}: {e}") from e
    parts = getattr(score, "parts", None)
    part = parts[0] if parts else score
    flat = part.flatten()
    measures = part.getElementsByClass("Measure")
    pad = _q(measures[0].paddingLeft) if measures else Fraction(0)  # an upbeat bar: its missing start
    notes = []
    for el in flat.notesAndRests:
        if el.duration.isGrace:
            raise MelodyError(f"a grace note ({el.pitches[0].nameWithOctave if el.pitches else '?'} at quarter "
                              f"{float(el.offset):g}) has no place on the 16th-note grid: remove it")
        if el.isRest:
            continue
        start = _q(el.getOffsetInHierarchy(part)) if parts else _q(el.offset)
        if el.isChord:
            raise MelodyError(f"a chord ({' '.join(p.nameWithOctave for p in el.pitches)}) at quarter "
                              f"{float(start):g}: a melody is one line, one note at a time")
        start += pad                                              # from here on, 0 is a barline
        end, pitch = start + _q(el.quarterLength), int(el.pitch.midi)
        tied = el.tie is not None and el.tie.type in ("continue", "stop")
        if tied and notes and notes[-1].pitch == pitch and notes[-1].end == start:
            notes[-1].end = end                                   # the rest of a note tied over a bar line
        else:
            notes.append(Note(start, end, pitch))
    ts = flat.getElementsByClass("TimeSignature")
    return notes, (ts[0].ratioString if ts else None)


def _names_a_file(text: str) -> bool:
    """Does ``text`` name a file (one that exists, or with a suffix and no spaces), or is it a melody?"""
    suffix = Path(text).suffix.lower()
    if suffix in FILES or (suffix and not any(c.isspace() for c in text.strip())):
        return True
    try:
        return Path(text).exists()
    except OSError:                                            # a long melody is no file's name
        return False


TUPLETS = ("trip", "quad")                       # the bracket states music21's tinyNotation knows
_STATE, _LATE_OCTAVE = re.compile(r"(\w+)\{"), re.compile(r"[a-g](#+|-+|n)('+)")


class _Reading:
    """music21's tinyNotation converter, told to note which tokens gave it nothing (music21 skips a token
    it cannot read without a word: ``C,4``, ``x9``, ``d3``)."""

    def __new__(cls, body: str):
        from music21 import tinyNotation

        class Reading(tinyNotation.Converter):
            def parseOne(self, i: int, t: str):
                before = len(self.stream._elements)          # coreAppend adds here (.elements is cached)
                super().parseOne(i, t)
                core = re.sub(r"\w+\{|[~}]|=[A-Za-z0-9]*|_.*", "", t)    # what is left besides states, ids
                if core and len(self.stream._elements) == before:
                    self.skipped.append(t)

        reading = Reading(body)
        reading.skipped = []
        return reading


def tiny_notation_notes(body: str) -> list[str]:
    """What music21 would not take as written in tinyNotation ``body``, as lines for ``Melody.log``: tokens it
    skips, and notes whose octave marks it drops (``c#'`` is C#4: it reads them before the accidental only,
    ``c'#`` is C#5). A chord (``chord{...}``, ``<c' e' g'>``) is refused: music21 would read it as notes one
    after another, which is not what was written."""
    tokens = body.split()
    for k, tok in enumerate(tokens, 1):
        state = _STATE.search(tok)
        if (state and state.group(1) not in TUPLETS) or "<" in tok or ">" in tok:
            raise MelodyError(f'the tinyNotation melody has "{tok}" (token {k}): a chord is not a melody, one '
                              "note at a time (tinyNotation knows no chord; music21 would play its notes one "
                              "after another)")
    reading = _Reading(body)
    try:
        with contextlib.redirect_stderr(io.StringIO()):         # music21's warnings: said here instead
            reading.parse()
    except Exception:  # noqa: BLE001 -- text music21 cannot read: read_notes refuses it, in its words
        return []
    out = [f"not tinyNotation, skipped: {' '.join(reading.skipped)}"] if reading.skipped else []
    for tok in tokens:
        if (m := _LATE_OCTAVE.search(tok)) and tok not in reading.skipped:
            letter, acc, marks = m.group(0)[0], m.group(1), m.group(2)
            name = letter.upper() + acc.replace("-", "b").replace("n", "")
            out.append(f'"{tok}" reads as {name}4: octave marks go before the accidental ({letter}{marks}{acc} '
                       f"is {name}{4 + len(marks)})")
    return out


def read_notes(source: str | os.PathLike, track: int | None = None) -> tuple[list[Note], str | None]:
    """The notes of a melody: a path to MIDI (.mid, .midi), MusicXML (.xml, .musicxml, .mxl) or ABC (.abc),
    or tinyNotation text (``"4/4 c'4 d' e' f' g'2"``, or with its ``tinyNotation:`` prefix)."""
    text = str(source)
    if not text.strip():
        raise MelodyError("the melody is empty")
    if text.lstrip().startswith("tinyNotation:") or not _names_a_file(text):   # "c4. d8 e2" is a melody
        body = text.split("tinyNotation:", 1)[-1].strip()
        if not body:
            raise MelodyError("the melody is empty")
        return notes_from_music21("tinyNotation: " + body, "the tinyNotation melody")
    path = Path(text)
    if not path.is_file():
        raise MelodyError(f"{path} not found")
    suffix = path.suffix.lower()
    if suffix in (".mid", ".midi"):
        return notes_from_midi(path, track)
    if suffix in (".xml", ".musicxml", ".mxl", ".abc"):
        if path.stat().st_size == 0:
            raise MelodyError(f"{path} is empty")
        return notes_from_music21(str(path), str(path))
    raise MelodyError(f"{path}: unknown kind of file {suffix!r}; give MIDI, MusicXML, ABC or tinyNotation")


def to_grid(notes: list[Note], max_steps: int = MAX_STEPS) -> tuple[np.ndarray, np.ndarray, int]:
    """(pitches, onsets), each (steps,), of one line of notes quantised to the nearest 16th from the first
    note, -1 where no note sounds, and how many notes quantising moved. A note that quantising would lose
    (shorter than a 16th, or starting on the 16th of the note before) is refused by name."""
    if not notes:
        raise MelodyError("the melody holds no notes")
    for k, (a, b) in enumerate(zip(notes, notes[1:])):
        if b.start < a.end:
            raise MelodyError(f"notes {k + 1} and {k + 2} ({note_name(a.pitch)} and {note_name(b.pitch)}, at quarter "
                              f"{float(b.start):g}) sound together: a melody is one line, one note at a time")
    origin, moved = notes[0].start, 0
    grid = [(round((n.start - origin) * STEPS_PER_QUARTER), round((n.end - origin) * STEPS_PER_QUARTER))
            for n in notes]                                                   # (start, end) in 16ths
    for k, (n, (a, b)) in enumerate(zip(notes, grid)):
        moved += (a, b) != ((n.start - origin) * STEPS_PER_QUARTER, (n.end - origin) * STEPS_PER_QUARTER)
        if b <= a or (k and a < grid[k - 1][1]):
            raise MelodyError(f"note {k + 1} ({note_name(n.pitch)} at quarter {float(n.start):g}, "
                              f"{float(n.end - n.start):g} quarters long) does not fit the 16th-note grid: "
                              "the harmoniser writes 16ths, and this rhythm is finer")
    n_steps = grid[-1][1]
    if n_steps > max_steps:
        raise MelodyError(f"the melody is {n_steps} 16th steps long; the limit is {max_steps} "
                          f"({max_steps // 16} bars of 4/4): harmonise it in parts")
    pitches, onsets = np.full(n_steps, -1, dtype=np.int64), np.zeros(n_steps, dtype=bool)
    for n, (a, b) in zip(notes, grid):
        pitches[a:b], onsets[a] = n.pitch, True
    return pitches, onsets, moved


def fit_range(pitches: np.ndarray, transpose: int | None = None, span: tuple[int, int] = SOPRANO) -> int:
    """The semitones to move ``pitches`` into ``span``: ``transpose`` if given (and it fits), else the whole
    octaves that fit, the smallest move first; a melody that no octave fits is refused with the shifts that
    would."""
    sounding = pitches[pitches >= 0]
    lo, hi = int(sounding.min()), int(sounding.max())
    name = f"{note_name(span[0])}-{note_name(span[1])}"
    if hi - lo > span[1] - span[0]:
        raise MelodyError(f"the melody spans {hi - lo} semitones ({note_name(lo)} to {note_name(hi)}), more than "
                          f"the soprano's {span[1] - span[0]} ({name}): no transposition fits")
    fits = range(span[0] - lo, span[1] - hi + 1)                        # every shift that fits
    if transpose is not None:
        if transpose not in fits:
            raise MelodyError(f"moved {transpose:+d} semitones the melody ({note_name(lo)} to {note_name(hi)}) "
                              f"leaves the soprano's range {name}; shifts that fit: {fits.start:+d} to "
                              f"{fits.stop - 1:+d}")
        return transpose
    octaves = [s for s in fits if s % 12 == 0]
    if not octaves:
        raise MelodyError(f"no whole octave moves the melody ({note_name(lo)} to {note_name(hi)}) into the "
                          f"soprano's range {name}; give a transposition: from {fits.start:+d} to "
                          f"{fits.stop - 1:+d} semitones fit")
    return min(octaves, key=abs)


def read_melody(source: str | os.PathLike, track: int | None = None, transpose: int | None = None,
                max_steps: int = MAX_STEPS) -> Melody:
    """A melody ready to harmonise (``read_notes``, ``to_grid``, ``fit_range``), with what was done to it."""
    text = str(source)
    tiny = text.strip() and (text.lstrip().startswith("tinyNotation:") or not _names_a_file(text))
    said = tiny_notation_notes(text.split("tinyNotation:", 1)[-1]) if tiny else []
    notes, metre = read_notes(source, track)
    pitches, onsets, moved = to_grid(notes, max_steps)
    shift = fit_range(pitches, transpose)
    pitches = np.where(pitches >= 0, pitches + shift, -1)
    bars = len(pitches) / 16
    log = [f"{len(notes)} note{'s' * (len(notes) != 1)}, {len(pitches)} 16th steps ({bars:g} bar"
           f"{'s' * (bars != 1)} of 4/4)"]
    if moved:
        log.append(f"{moved} of them moved to the nearest 16th")
    if shift:
        how = "as asked" if transpose is not None else f"{shift // 12:+d} octave{'s' * (abs(shift) > 12)}"
        log.append(f"moved {shift:+d} semitones ({how}) into the soprano's range "
                   f"{note_name(SOPRANO[0])}-{note_name(SOPRANO[1])}")
    if metre not in (None, "4/4"):
        log.append(f"its metre is {metre}; the chorales the harmoniser learnt from are in 4/4, and it reads the "
                   "melody step by step, so its bar lines are not the model's: expect cadences out of place")
    log += said
    bar = Fraction(bar_steps(metre or "4/4"), STEPS_PER_QUARTER)         # quarters; read_notes' 0 is a barline
    into = notes[0].start % bar
    pickup = round((bar - into) * STEPS_PER_QUARTER) % round(bar * STEPS_PER_QUARTER) if into else 0
    return Melody(pitches, onsets, shift, metre, log, pickup)
