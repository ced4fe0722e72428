"""musictx_lite.io.score: grids as four-part scores (music21 builds, verovio engraves)."""
import base64
import re
import sys

import music21
import numpy as np
import pytest
import torch

from musictx_lite import load_data
from musictx_lite.io import score
from musictx_lite.io.midi import notes_of

S, A, T, B = range(4)


def hand_grid() -> tuple[np.ndarray, np.ndarray]:
    """40 steps (2.5 bars of 4/4) of S A T B with held notes over barlines, re-strikes, rests."""
    g = np.full((40, 4), -1)
    on = np.zeros((40, 4), dtype=bool)

    def note(v, start, end, p):
        g[start:end, v] = p
        on[start, v] = True

    note(S, 0, 12, 72); note(S, 12, 20, 74); note(S, 20, 24, 74); note(S, 28, 40, 76)  # noqa: E702
    note(A, 0, 8, 64); note(A, 8, 16, 65); note(A, 16, 32, 67); note(A, 32, 37, 64); note(A, 37, 40, 62)  # noqa: E702
    note(T, 0, 16, 55); note(T, 20, 40, 57)  # noqa: E702
    note(B, 0, 4, 48); note(B, 4, 8, 48); note(B, 8, 40, 43)  # noqa: E702
    return g, on


# notes as written: S 72 dotted half; 74 tied over bar 1|2; 74 again (re-struck); rest; 76 tied over 2|3.
# A: 64 over 5 sixteenths = a quarter tied to a 16th. B: 43 from beat 3 of bar 1 to bar 3, two ties.
WRITTEN = {S: 6, A: 6, T: 3, B: 5}


def voice_notes(parts) -> list[list[tuple[int, int, int]]]:
    """Per voice (staff by staff, voice ids in order), (start, end, midi) in 16th steps, ties joined."""
    out = []
    for part in parts:
        measures = list(part.getElementsByClass("Measure"))
        ids = sorted({v.id for m in measures for v in m.voices}, key=str)
        assert len(ids) == 2, f"each staff holds two voices, got {ids}"
        for vid in ids:
            notes = []
            for m in measures:
                for v in m.voices:
                    if v.id != vid:
                        continue
                    for n in v.notes:
                        start = round((m.offset + n.offset) * 4)
                        end = start + round(n.quarterLength * 4)
                        if n.tie is not None and n.tie.type in ("stop", "continue"):
                            assert notes and notes[-1][1] == start and notes[-1][2] == n.pitch.midi
                            notes[-1] = (notes[-1][0], end, notes[-1][2])
                        else:
                            notes.append((start, end, n.pitch.midi))
            out.append(notes)
    return out


def test_to_stream_keeps_every_note_of_notes_of():
    g, on = hand_grid()
    sc = score.to_stream(g, on, title="hand")
    staves = list(sc.parts)
    assert len(staves) == 2
    assert [type(st.recurse().getElementsByClass("Clef").first()).__name__ for st in staves] == \
        ["TrebleClef", "BassClef"]
    assert voice_notes(staves) == notes_of(g, on)
    # the re-strike is two notes; without onsets the held 74 and the repeated 48 are one note each
    assert voice_notes(score.to_stream(g).parts) == notes_of(g)
    assert notes_of(g)[S][1] == (12, 24, 74) and notes_of(g)[B][0] == (0, 8, 48)
    # three whole bars (the last filled with rests), 4 quarters in every voice of every bar
    for st in staves:
        measures = list(st.getElementsByClass("Measure"))
        assert [m.number for m in measures] == [1, 2, 3]
        for m in measures:
            assert [sum(n.quarterLength for n in v.notesAndRests) for v in m.voices] == [4.0, 4.0]
    # how many notes are written (ties over barlines, 5/16 split), and stems: S T up, A B down
    by_voice = [[n for m in st.getElementsByClass("Measure") for v in m.voices if v.id == vid for n in v.notes]
                for st in staves for vid in ("1", "2")]
    assert [len(v) for v in by_voice] == [WRITTEN[v] for v in (S, A, T, B)]
    assert [{n.stemDirection for n in v} for v in by_voice] == [{"up"}, {"down"}, {"up"}, {"down"}]
    tied = [(n.measureNumber, n.tie.type) for n in by_voice[S] if n.tie is not None]
    assert tied == [(1, "start"), (2, "stop"), (2, "start"), (3, "stop")]
    assert sc.metadata.title == "hand"


def test_musicxml_parses_back_to_two_staves_of_two_voices(tmp_path):
    g, on = hand_grid()
    path = tmp_path / "out" / "hand.musicxml"
    text = score.to_musicxml(g, on, path=path)
    assert text.lstrip().startswith("<?xml") and "<score-partwise" in text
    assert path.read_text(encoding="utf-8") == text
    assert not list(path.parent.glob("*.part"))                   # the temporary file is gone
    back = music21.converter.parse(text, format="musicxml")
    assert len(back.parts) == 2                                    # one piano-style part, two staves
    assert voice_notes(back.parts) == notes_of(g, on)


def test_spelling_follows_the_key():
    # G major: F# (not Gb) with the key signature, no accidental printed on it
    g = np.array([[67, 62, 59, 43]] * 4 + [[66, 62, 57, 50]] * 4 + [[67, 62, 59, 43]] * 8)
    sc = score.to_stream(g)
    assert sc.parts[0].recurse().getElementsByClass("KeySignature").first().sharps == 1
    f_sharp = [n for n in sc.parts[0].recurse().notes if n.pitch.midi == 66]
    assert [n.pitch.name for n in f_sharp] == ["F#"]
    assert not f_sharp[0].pitch.accidental.displayStatus
    # an accidental holds for the bar in both voices of a staff: alto's F# then soprano's F natural
    g = np.array([[72, 66, 55, 48]] * 4 + [[65, 62, 55, 48]] * 4 + [[64, 60, 55, 48]] * 8)
    notes = {n.pitch.nameWithOctave: n for n in score.to_stream(g).parts[0].recurse().notes}
    assert notes["F#4"].pitch.accidental.displayStatus and notes["F4"].pitch.accidental.displayStatus


def test_torch_grids_are_accepted():
    g, on = hand_grid()
    assert voice_notes(score.to_stream(torch.tensor(g), torch.tensor(on)).parts) == notes_of(g, on)


def test_real_chorale_round_trip():
    piece = load_data().valid[0]
    g = piece.pitches[:64]
    on = None if piece.onsets is None else piece.onsets[:64]
    assert voice_notes(score.to_stream(g, on).parts) == notes_of(g, on)
    # with a quarter-note upbeat: bar 0 holds the first 4 steps, every note keeps its time
    sc = score.to_stream(g, on, pickup=4)
    measures = list(sc.parts[0].getElementsByClass("Measure"))
    assert [m.number for m in measures] == list(range(5))          # 4 + 60 steps: upbeat, 4 bars
    assert measures[0].paddingLeft == 3.0 and measures[1].offset == 1.0
    assert [sum(n.quarterLength for n in v.notesAndRests) for v in measures[0].voices] == [1.0, 1.0]
    assert voice_notes(sc.parts) == notes_of(g, on)
    back = music21.converter.parse(score.to_musicxml(g, on, pickup=4), format="musicxml")
    assert voice_notes(back.parts) == notes_of(g, on)


@pytest.fixture(scope="module")
def verovio():
    import verovio  # a dependency (pyproject.toml): never skipped

    return verovio


def test_svg_draws_every_written_note(verovio):
    g, on = hand_grid()
    picture = score.svg(g, on)
    assert picture.startswith("<svg") and picture.rstrip().endswith("</svg>")
    assert picture.count('class="note"') == sum(WRITTEN.values())
    assert 'viewBox="0 0 800 ' in picture and "max-width:800px" in picture
    assert picture.count('class="rest"') >= 2                      # S and T rest in bar 2
    # one bar: the four voices' notes in bar 1 only
    assert score.svg(g, on, max_bars=1).count('class="note"') == 2 + 2 + 1 + 3
    assert "hand grid" in score.svg(g, on, title="hand grid")
    # the same music, the same picture; another score gets other ids (inline SVGs share a page)
    assert score.svg(g, on) == picture
    ids = set(re.findall(r' id="([^"]+)"', picture))
    assert ids and not ids & set(re.findall(r' id="([^"]+)"', score.svg(g[:16], on[:16])))


def test_svg_of_a_real_chorale(verovio):
    piece = load_data().valid[0]
    on = None if piece.onsets is None else piece.onsets[:64]
    written = sum(len(list(st.recurse().notes)) for st in score.to_stream(piece.pitches[:64], on).parts)
    picture = score.svg(piece.pitches[:64], on, width=700)
    assert picture.count('class="note"') == written > 4 * 4
    assert 'viewBox="0 0 700 ' in picture


def test_show_has_the_score_and_a_musicxml_download(verovio):
    g, on = hand_grid()
    view = score.show(g, on, title="A <hand> grid", name="prompt", max_bars=1)
    page = view._repr_html_()
    assert "<svg" in page and page.count('class="note"') == 8
    assert "A &lt;hand&gt; grid" in page and "first 1 of 3 bars" in page
    link = re.search(r'<a download="([^"]+)" href="data:([^;]+);base64,([^"]+)"', page)
    assert link and link.group(1) == "prompt.musicxml" and link.group(2) == score.MUSICXML_MIME
    xml = base64.b64decode(link.group(3)).decode("utf-8")          # the whole grid, not just bar 1
    assert voice_notes(music21.converter.parse(xml, format="musicxml").parts) == notes_of(g, on)
    assert view._repr_mimebundle_()["text/html"] == page and "3 bars" in repr(view)
    # an upbeat of 4 steps: the upbeat bar (steps 0-3) and bar 1 (4-19) are drawn; notes written
    # S: 72 tied over the upbeat's barline, 74; A: 64 tied, 65, 67; T: 55 tied; B: 48, 48, 43
    page = score.show(g, on, max_bars=1, pickup=4)._repr_html_()
    assert page.count('class="note"') == 3 + 4 + 2 + 3 and "first 1 of 3 bars" in page


@pytest.mark.parametrize("bad, message", [
    (np.zeros((8, 3), dtype=int), r"\(steps, 4\) pitch grid"),
    (np.zeros(8, dtype=int), r"\(steps, 4\) pitch grid"),
    (np.zeros((0, 4), dtype=int), "empty"),
    (np.full((8, 4), 128), "0..127 or -1.*soprano has 128 at step 0"),
    (np.array([[60, 55, 52, 48], [60, 55, -2, 48]]), "tenor has -2 at step 1"),
    (np.full((4, 4), 60.5), "whole MIDI numbers"),
])
def test_bad_grids_are_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        score.to_stream(bad)
    with pytest.raises(ValueError, match=message):
        score.to_musicxml(bad)


def test_bad_arguments_are_refused(verovio):
    g, on = hand_grid()
    with pytest.raises(ValueError, match="onsets must have the pitch grid's shape"):
        score.to_stream(g, on[:10])
    with pytest.raises(ValueError, match="max_bars must be at least 1"):
        score.svg(g, max_bars=0)
    with pytest.raises(ValueError, match="width must be at least"):
        score.svg(g, width=50)
    for pickup in (-1, 16, 2.5):
        with pytest.raises(ValueError, match="pickup is the number of 16th steps before the first barline"):
            score.to_stream(g, pickup=pickup)


def test_missing_engraver_says_how_to_install(monkeypatch):
    g, _ = hand_grid()
    monkeypatch.setitem(sys.modules, "verovio", None)              # import verovio -> ImportError
    with pytest.raises(ImportError, match=r"pip install 'verovio"):
        score.svg(g)
    with pytest.raises(ImportError, match=r"pip install 'verovio"):
        score.show(g)
    monkeypatch.setitem(sys.modules, "music21", None)
    with pytest.raises(ImportError, match=r"pip install 'music21"):
        score.to_stream(g)

