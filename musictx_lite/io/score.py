"""Reading the music: a pitch grid as a four-part score (MusicXML, SVG).

Notebooks: every chapter that shows chorales, prompts or generated music (from
notebooks/00_music_as_tokens.ipynb on).

A grid (steps, 4), S A T B, MIDI numbers on a 16th-note grid, -1 rest (see
``midi.py``), becomes a score in 4/4 (or the ``metre`` given) on two staves: soprano and alto on a treble
staff (stems up, down), tenor and bass on a bass staff (stems up, down). music21
builds the score and writes MusicXML; verovio engraves it as SVG. The key
signature and the spelling of black keys (F# or Gb) are guessed from the notes:
the grid has neither. Nor does it know an upbeat: step 0 is the first beat of bar
1 unless ``pickup`` says how many steps come before the first barline (most Bach
chorales start with a quarter-note upbeat, ``pickup=4``).
"""
from __future__ import annotations

import html
import os
import re
import zlib
from pathlib import Path

import numpy as np

from ..files import atomic_write
from .audio import download_link
from .midi import STEPS_PER_QUARTER, bar_steps, notes_of
from .spelling import key_centre, key_of, spelling
from .tokens import VOICES

STEPS_PER_BAR = 4 * STEPS_PER_QUARTER        # 4/4


STEMS = ("up", "down", "up", "down")         # S A T B
MUSICXML_MIME = "application/vnd.recordare.musicxml+xml"


def _music21():
    try:
        import music21
    except ImportError as e:
        raise ImportError("scores need music21: pip install 'music21>=9,<11'") from e
    return music21


def _verovio():
    try:
        import verovio
    except ImportError as e:
        raise ImportError("drawing scores needs verovio: pip install 'verovio>=5.4,<6'") from e
    return verovio


def _checked(pitches: np.ndarray, onsets: np.ndarray | None, pickup: int = 0, metre: str = "4/4"
             ) -> tuple[np.ndarray, np.ndarray | None]:
    """The grid (and onsets) as arrays, or a ValueError that says what is wrong."""
    bar = bar_steps(metre)
    if not isinstance(pickup, (int, np.integer)) or not 0 <= pickup < bar:
        raise ValueError(f"pickup is the number of 16th steps before the first barline, "
                         f"0 to {bar - 1}; got {pickup!r}")
    # torch tensors, on any device, as numpy arrays
    pitches, onsets = (x.detach().cpu().numpy() if hasattr(x, "detach") else x for x in (pitches, onsets))
    pitches = np.asarray(pitches)
    if pitches.ndim != 2 or pitches.shape[1] != 4:
        raise ValueError(f"a score needs a (steps, 4) pitch grid (S A T B), got shape {pitches.shape}")
    if len(pitches) == 0:
        raise ValueError("the pitch grid is empty: there is nothing to write as a score")
    if not np.issubdtype(pitches.dtype, np.integer):
        if not np.issubdtype(pitches.dtype, np.floating) or not np.array_equal(pitches, np.round(pitches)):
            raise ValueError(f"pitches must be whole MIDI numbers, got dtype {pitches.dtype}")
        pitches = pitches.astype(np.int64)
    bad = (pitches != -1) & ((pitches < 0) | (pitches > 127))
    if bad.any():
        t, v = np.argwhere(bad)[0]
        raise ValueError(f"pitches must be MIDI numbers 0..127 or -1 for a rest; "
                         f"{VOICES[v]} has {pitches[t, v]} at step {t}")
    if onsets is not None:
        onsets = np.asarray(onsets)
        if onsets.shape != pitches.shape:
            raise ValueError(f"onsets must have the pitch grid's shape {pitches.shape}, got {onsets.shape}")
    return pitches, onsets


def _spell(midi: int, centre: float):
    """A music21 Pitch for a MIDI number, spelt nearest ``centre`` on the line of fifths (C=0, G=1, F=-1)."""
    letter, alter, octave = spelling(midi, centre)
    p = _music21().pitch.Pitch(letter + ("#" * alter if alter > 0 else "-" * -alter))
    p.octave = octave
    assert p.midi == midi, (midi, p)
    return p


def _key(pitches: np.ndarray):
    """The key the notes of a pitch grid suggest (``key_of``, each pitch weighted by its steps)."""
    sounding = pitches[pitches >= 0]
    return key_of(sounding, np.full(sounding.shape, 1.0 / STEPS_PER_QUARTER))


def _voice_measures(notes: list[tuple[int, int, int]], n_steps: int, stem: str, centre: float, pad: int,
                    metre: str = "4/4"):
    """One voice's notes (start, end, pitch) -> music21 measures in ``metre``, tied across barlines.

    The grid starts ``pad`` steps into bar 1: bar 1 is then an upbeat bar, numbered 0.
    """
    m21 = _music21()
    s = m21.stream.Stream()
    s.insert(0, m21.meter.TimeSignature(metre))
    if pad:                                          # a rest of its own, removed below
        s.insert(0, m21.note.Rest(quarterLength=pad / STEPS_PER_QUARTER))
    t = pad
    for start, end, p in [(a + pad, b + pad, p) for a, b, p in notes] + [(n_steps, n_steps, None)]:
        if start > t:                                # rests fill the gaps
            s.insert(t / STEPS_PER_QUARTER, m21.note.Rest(quarterLength=(start - t) / STEPS_PER_QUARTER))
        if p is not None:
            n = m21.note.Note(_spell(p, centre), quarterLength=(end - start) / STEPS_PER_QUARTER)
            n.stemDirection = stem
            s.insert(start / STEPS_PER_QUARTER, n)
        t = end
    measures = s.makeMeasures()
    measures.makeTies(inPlace=True)                  # notes over a barline: tied halves
    measures.splitAtDurations(recurse=True)          # 5/16 etc.: a quarter tied to a 16th
    measures = list(measures.getElementsByClass("Measure"))
    if pad:                                          # the upbeat bar: only what comes after the pad
        first, shift = measures[0], pad / STEPS_PER_QUARTER
        for e in list(first.notesAndRests):
            if e.offset < shift:
                first.remove(e)
            else:
                first.setElementOffset(e, e.offset - shift)
        first.paddingLeft = shift
    for i, m in enumerate(measures):
        m.number = i if pad else i + 1
    return measures


def _accidentals(staff, sharps: int) -> None:
    """Which notes of a staff show their accidental: engraving rules, both voices together.

    An accidental holds for its line or space (letter and octave) to the end of the bar, in both
    voices of the staff; a note tied over the barline repeats none; a line that had another
    accidental in the previous bar gets a courtesy one.
    """
    m21 = _music21()
    in_key = {p.step: p.alter for p in m21.key.KeySignature(sharps).alteredPitches}
    before: dict = {}
    for m in staff.getElementsByClass("Measure"):
        now: dict = {}
        notes = sorted(((n.offset, v.id, n) for v in m.voices for n in v.notes), key=lambda e: e[:2])
        for _, _, n in notes:
            p = n.pitch
            line = (p.step, p.octave)
            expected = now.get(line, in_key.get(p.step, 0.0))
            tied = n.tie is not None and n.tie.type in ("stop", "continue")
            show = not tied and (p.alter != expected or before.get(line, p.alter) != p.alter)
            if p.accidental is None and show:
                p.accidental = m21.pitch.Accidental("natural")
            if p.accidental is not None:
                p.accidental.displayStatus = show
            if not tied:                          # after a tie, the next note restates its accidental
                now[line] = p.alter
        before = now
    staff.streamStatus.accidentals = True


def to_stream(pitches: np.ndarray, onsets: np.ndarray | None = None, title: str | None = None, *,
              pickup: int = 0, metre: str = "4/4"):
    """A pitch grid as a ``music21.stream.Score``: two staves (S+A treble, T+B bass), two voices each.

    Notes come from :func:`musictx_lite.io.music.notes_of` (held notes and re-strikes as in ``play``);
    ``metre`` (4/4: 16 steps a bar), the last bar filled with rests, notes over barlines tied. ``pickup``:
    the steps before the first barline (an upbeat bar, numbered 0), 0 to a bar less one step.
    """
    m21 = _music21()
    pitches, onsets = _checked(pitches, onsets, pickup, metre)
    bar = bar_steps(metre)
    pad = (bar - pickup) % bar                                       # the upbeat bar's missing start
    n_steps = -(-(pad + len(pitches)) // bar) * bar                  # whole bars
    k = _key(pitches)
    centre = key_centre(k)
    voices = [_voice_measures(notes, n_steps, stem, centre, pad, metre)
              for notes, stem in zip(notes_of(pitches, onsets), STEMS)]

    score = m21.stream.Score()
    score.metadata = m21.metadata.Metadata(title=title or "", composer="")
    staves = []
    for (upper, lower), (name, clef) in zip([(voices[0], voices[1]), (voices[2], voices[3])],
                                            [("SA", m21.clef.TrebleClef()), ("TB", m21.clef.BassClef())]):
        staff = m21.stream.PartStaff(id=name)
        organ = m21.instrument.PipeOrgan()          # the sound of play(); fixed ids: the same MusicXML each time
        organ.partId, organ.instrumentId, organ.partName, organ.partAbbreviation = "P1", "I1", "", ""
        staff.insert(0, organ)
        for i, (mu, ml) in enumerate(zip(upper, lower)):
            m = m21.stream.Measure(number=mu.number)
            m.paddingLeft = mu.paddingLeft
            if i == 0:
                m.insert(0, clef)
                m.insert(0, m21.key.KeySignature(k.sharps))
                m.insert(0, m21.meter.TimeSignature(metre))
            for vid, src in (("1", mu), ("2", ml)):
                v = m21.stream.Voice(id=vid)
                for n in src.notesAndRests:
                    v.insert(n.offset, n)
                m.insert(0, v)
            staff.append(m)
        staff.makeBeams(inPlace=True)
        staff[-1].rightBarline = m21.bar.Barline("final")
        _accidentals(staff, k.sharps)
        staves.append(staff)
        score.insert(0, staff)
    score.insert(0, m21.layout.StaffGroup(staves, symbol="brace", barTogether=True))
    return score


def _xml(score) -> str:
    """A score from :func:`to_stream` as MusicXML text (the score is already notated: no second pass)."""
    exporter = _music21().musicxml.m21ToXml.GeneralObjectExporter(score)
    exporter.makeNotation = False
    return exporter.parse().decode("utf-8")


def to_musicxml(pitches: np.ndarray, onsets: np.ndarray | None = None, path: str | os.PathLike | None = None,
                title: str | None = None, *, pickup: int = 0, metre: str = "4/4") -> str:
    """A pitch grid as MusicXML text (see :func:`to_stream`); also written to ``path`` (atomically) if given."""
    text = _xml(to_stream(pitches, onsets, title, pickup=pickup, metre=metre))
    if path is not None:
        atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return text


def _engrave(xml: str, width: int, header: bool, seed: int) -> str:
    """MusicXML text -> one SVG page, at most ``width`` px wide, as tall as its systems.

    ``seed`` fixes the SVG's ids: the same picture for the same music, and different ids for
    different scores on one page (inline SVGs share the page's id space).
    """
    verovio = _verovio()
    scale = 40                                   # verovio's zoom, percent: a staff ~30 px high
    tk = verovio.toolkit()
    tk.setOptions({
        "pageWidth": int(width * 100 / scale), "pageHeight": 60000, "scale": scale,
        "adjustPageHeight": True, "pageMarginTop": 20, "pageMarginBottom": 20,
        "pageMarginLeft": 20, "pageMarginRight": 20,
        "header": "auto" if header else "none", "footer": "none", "breaks": "auto",
        "svgViewBox": True, "removeIds": True, "xmlIdSeed": seed, "svgFormatRaw": True,
    })
    if not tk.loadData(xml):
        raise RuntimeError("verovio could not read the MusicXML that music21 wrote")
    picture = tk.renderToSVG(1)
    # scale with the page, but never wider than asked
    return picture.replace("<svg ", f'<svg style="max-width:{int(width)}px;width:100%;height:auto" ', 1)


def _bars(n_steps: int, pickup: int) -> int:
    """How many bars a grid fills after its upbeat (the upbeat bar is not counted)."""
    return -(-max(n_steps - pickup, 0) // STEPS_PER_BAR)


def svg(pitches: np.ndarray, onsets: np.ndarray | None = None, title: str | None = None, width: int = 800,
        max_bars: int | None = 8, *, pickup: int = 0) -> str:
    """The first ``max_bars`` bars of a grid (all if ``None``) engraved as SVG text, ``width`` px wide.

    Two staves (S+A, T+B); bars that do not fit one line go on the next. ``title``, if given, is
    written above the music; ``pickup`` as in :func:`to_stream` (an upbeat bar is drawn on top of
    ``max_bars``). Needs music21 and verovio.
    """
    _verovio()                                   # a clear ImportError before any work
    pitches, onsets = _checked(pitches, onsets, pickup)
    if width < 200:
        raise ValueError(f"width must be at least 200 px to hold a bar of four parts, got {width}")
    if max_bars is not None and max_bars < 1:
        raise ValueError(f"max_bars must be at least 1 (or None for all bars), got {max_bars}")
    cut = max_bars is not None and _bars(len(pitches), pickup) > max_bars
    if cut:
        steps = pickup + max_bars * STEPS_PER_BAR
        pitches, onsets = pitches[:steps], None if onsets is None else onsets[:steps]
    score = to_stream(pitches, onsets, title, pickup=pickup)
    if cut:                                      # the music goes on: no final barline
        for staff in score.parts:
            staff.getElementsByClass("Measure").last().rightBarline = None
    xml = _xml(score)
    seed = zlib.crc32(re.sub(r"<encoding-date>.*?</encoding-date>", "", xml).encode()) % 2**31 or 1
    return _engrave(xml, width, header=bool(title), seed=seed)


def _musicxml_name(name: str) -> str:
    name = Path(str(name)).name or "score"
    return name if name.lower().endswith((".musicxml", ".xml")) else name + ".musicxml"


class ScoreView:
    """What :func:`show` returns: the engraved score (``svg``) and a link to download ``musicxml``."""

    def __init__(self, svg: str, musicxml: str, name: str, title: str | None = None, bars: int = 0,
                 total_bars: int = 0):
        self.svg, self.musicxml, self.name, self.title = svg, musicxml, name, title
        self.bars, self.total_bars = bars, total_bars

    def _repr_html_(self) -> str:
        head = f'<div style="font-weight:bold">{html.escape(self.title)}</div>' if self.title else ""
        more = f" &middot; first {self.bars} of {self.total_bars} bars shown" if self.bars < self.total_bars else ""
        compact = re.sub(r">\n\s*<", "><", self.musicxml)      # no indentation: a third smaller
        link = download_link(compact.encode("utf-8"), self.name, MUSICXML_MIME, "Download the MusicXML")
        return (f'<div class="musictx-score">{head}{self.svg}\n'
                f'<div style="font-size:85%">{link}{more}</div></div>')

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/html": self._repr_html_(), "text/plain": repr(self)}

    def __repr__(self) -> str:
        return (f"<musictx score: {self.bars} of {self.total_bars} bars shown; "
                f"MusicXML {self.name}, {len(self.musicxml)} characters>")


def show(pitches: np.ndarray, onsets: np.ndarray | None = None, title: str | None = None, name: str = "score",
         max_bars: int | None = 8, *, pickup: int = 0) -> ScoreView:
    """The score of a grid for a notebook: the first ``max_bars`` bars as SVG (see :func:`svg`) and
    the whole grid as MusicXML to download (as ``name``.musicxml)."""
    _verovio()
    pitches, onsets = _checked(pitches, onsets, pickup)
    total = _bars(len(pitches), pickup)
    picture = svg(pitches, onsets, max_bars=max_bars, pickup=pickup)
    return ScoreView(picture, to_musicxml(pitches, onsets, title=title, pickup=pickup), _musicxml_name(name),
                     title, total if max_bars is None else min(total, max_bars), total)
