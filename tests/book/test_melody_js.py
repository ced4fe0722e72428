"""book/play/melody.js, the in-browser reader of tinyNotation melodies, agrees with
musictx_lite.io.melody.read_melody: the same grid, onsets, shift, metre and log for every melody of the
table, and the same refusal (word for word where the message is melody.py's own) for every melody that
cannot be harmonised.

The script runs in Debian's headless Chromium (driven by Playwright; its own browser download is never
used), loaded from a file:// page. Without Chromium these tests skip, except in CI, where they fail.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from musictx_lite.io.melody import MAX_STEPS, SOPRANO, MelodyError, read_melody
from musictx_lite.io.midi import note_name

from test_offline import script_page

ROOT = Path(__file__).resolve().parents[2]
MELODY_JS = ROOT / "book" / "play" / "melody.js"
PAGE = f'<!doctype html><meta charset="utf-8"><body><script src="{MELODY_JS.as_uri()}"></script>'
M21 = "the tinyNotation melody is not a melody music21 can read: "      # read_melody's music21 refusals

# what the page returns: the melody, or the error's class and message
PARSE = """([text, opts]) => {
  try {
    return {melody: MusictxMelody.parse(text, opts)};
  } catch (e) {
    return {error: e.message, name: e.name, ours: e instanceof MusictxMelody.MelodyError && e instanceof Error};
  }
}"""

ODE = "4/4 e4 e f g g f e d c c d e e4. d8 d2"
# (id, tinyNotation without its prefix, transpose)
GOOD = [
    ("ode to joy", ODE, None),
    ("ode to joy, 16 bars", " ".join([ODE, ODE.replace("e4. d8 d2", "d4. c8 c2")] * 4), None),
    ("one note", "g2", None),
    ("twinkle", "c4 c g g a a g2 f4 f e e d d c2", None),
    ("frere jacques", "c4 d e c c d e c e f g2 e4 f g2 g8 a g f e4 c g8 a g f e4 c c G c2 c4 G c2", None),
    ("greensleeves 3/4", "3/4 a4 c'2 d'4 e'4. f'8 e'4 d'2 b4 g4. a8 b4 c'2 a4 a4. g#8 a4 b2 g#4 e2", None),
    ("amazing grace: leading rest, an octave up", "3/4 r2 G4 c2 e8 c e2 d4 c2 A4 G2 G4 c2 e8 c e2 d8 e g2.", None),
    ("rests", "c4 r d r8 e8 r4 f2 r1", None),
    ("ties", "c2~ c4 d4 e1~ e2 r2 g2~ g8 f e d", None),
    ("a chain of ties", "c8~ c~ c d e4~ e", None),
    ("a tie to another pitch", "c4~ d e~ r e", None),
    ("dotted rhythms", "4/4 c4. d8 e4.. f16 g2. r4 a8. b16 c'2", None),
    ("accidentals", "c4 c# d e- e f# g## a-- bn c'", None),
    ("octave marks", "a' g' e' c' g c' e' a'", None),
    ("bass clef letters: an octave up", "C4 E G c E2 C", None),
    ("two octaves up", "CC4 DD EE CC", None),
    ("an octave down, where two octaves fit too", "c''4 d'' e'' c'' e''2", None),
    ("explicit transposition", "c4 d e f g2", 2),
    ("6/8", "6/8 c8 d e f4 g8 a4. g", None),
    ("2/4 with an eighth-note triplet, moved to the grid", "2/4 trip{c8 d e} f4 g", None),
    ("250 eighth-note triplets: exact thirds over 62 bars", " ".join(["trip{c8 d e}"] * 250), None),
    ("quad{} eighths, moved to the grid", "quad{c8 d e f} g2", None),
    ("a time signature after the first note: 4/4", "c4 3/4 d e f", None),
    ("a skipped token before the time signature", "x 3/4 c d e", None),
    ("an ABC-style octave mark, skipped and said", "4/4 C,4 c'4 d'4 e'4", None),
    ("accidentals after the octave marks, and before (said)", "c'4 g#' c'# e-'' d'n bn'", None),
    ("tokens music21 skips (d3, x9)", "c4 d3 e x9 f", None),
    ("editorial accidentals leave the pitch", "f4 f(#) g b(-)", None),
    ("modifiers", "g4=lastG e_la c*red* d", None),
    ("a whole-bar note", "3/4 c2 d4 e0 f4", None),
]
BAD = [
    ("empty", "", None),
    ("only blanks", "   ", None),
    ("only rests", "r4 r r2", None),
    ("only tokens music21 skips", "x9 h $", None),
    ("a 16th-note triplet", "trip{c16 d e} f4", None),
    ("32nd notes", "c32 d e f g4", None),
    ("32nds that land on one 16th", "c8. d32 e32 f4", None),
    ("a 256th at quarter 1.140625 (Python's ties-to-even 1.14062)", "c4 d32~ d256 e256 f4", None),
    ("no octave fits", "g4 c' e' g' c''", None),
    ("too wide for a soprano", "CC4 c''", None),
    ("beyond MIDI's top, folded down by music21", "c" + "'" * 8 + " d", None),
    ("too long", "c1 " * 65, None),
    ("transposed out of range", "c4 d e f g2", -3),
    ("transposed by nothing, out of range", "C4 D E", 0),
    ("a time signature music21 refuses", "0/4 c4 d", None),
    ("a time signature over 0", "3/0 c", None),
    ("a tie from a time signature", "3/4~ c d", None),
    ("a time signature in a triplet", "trip{c8 3/4 d e}", None),
    ("five flats", "c----- d", None),
    ("a tie closed on nothing", "c4 ~ }", None),
    ("a chord", "chord{c'4 e' g'}", None),
    ("a chord in angle brackets", "d'4 <c' e' g'>4 d'", None),
]


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    yield from script_page(tmp_path_factory.mktemp("melody"), PAGE, "window.MusictxMelody !== undefined")


def js(page, text: str, transpose: int | None = None, max_steps: int | None = None) -> dict:
    opts = {"transpose": transpose} if max_steps is None else {"transpose": transpose, "maxSteps": max_steps}
    return page.evaluate(PARSE, [text, opts])


def python(text: str, transpose: int | None = None, max_steps: int = MAX_STEPS) -> dict:
    try:
        m = read_melody("tinyNotation: " + text, transpose=transpose, max_steps=max_steps)
    except MelodyError as e:
        return {"error": str(e)}
    return {"pitches": m.pitches.tolist(), "onsets": m.onsets.tolist(), "shift": m.shift, "metre": m.metre,
            "log": m.log, "notes": int(m.log[0].split()[0]), "pickup": m.pickup}


def assert_same(page, text, transpose=None, max_steps=None):
    """The JS result of text, with and without its tinyNotation: prefix, equals read_melody's."""
    want = python(text, transpose, max_steps or MAX_STEPS)
    for given in ("tinyNotation: " + text, text):
        got = js(page, given, transpose, max_steps)
        if "error" in want:
            assert "error" in got, f"{given!r}: Python refuses ({want['error']}) but the JS reads {got['melody']}"
            assert got["ours"] and got["name"] == "MelodyError", got
            if want["error"].startswith(M21):            # music21's own words: both refuse, the JS by token
                assert got["error"].startswith(M21), (given, got["error"])
                assert "\n" not in got["error"] and '"' in got["error"], got["error"]
            else:                                        # melody.py's words: the same message
                assert got["error"] == want["error"], given
        else:
            assert "melody" in got, f"{given!r}: the JS refuses ({got.get('error')}) but Python reads it"
            m = got["melody"]
            for field in ("pitches", "onsets", "shift", "metre", "log", "notes", "pickup"):
                assert m[field] == want[field], f"{given!r}: {field} differs"
    return want


@pytest.mark.parametrize("text,transpose", [c[1:] for c in GOOD], ids=[c[0] for c in GOOD])
def test_a_good_melody_reads_as_in_python(page, text, transpose):
    want = assert_same(page, text, transpose)
    assert "pitches" in want, f"the table says {text!r} is a good melody, but Python refuses: {want}"


@pytest.mark.parametrize("text,transpose", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_a_bad_melody_is_refused_as_in_python(page, text, transpose):
    want = assert_same(page, text, transpose)
    assert "error" in want, f"the table says {text!r} is refused, but Python reads it"


def test_the_table_covers_what_it_says(page):
    """The table exercises each part of the reader: shifts both ways, metres, the grid, the checks."""
    got = {name: python(text, tr) for name, text, tr in GOOD + BAD}
    assert got["amazing grace: leading rest, an octave up"]["shift"] == 12
    assert got["two octaves up"]["shift"] == 24 and got["an octave down, where two octaves fit too"]["shift"] == -12
    assert got["explicit transposition"]["shift"] == 2 and "(as asked)" in got["explicit transposition"]["log"][-1]
    assert got["6/8"]["metre"] == "6/8" and got["greensleeves 3/4"]["metre"] == "3/4"
    assert got["a time signature after the first note: 4/4"]["metre"] == "4/4"
    assert "moved to the nearest 16th" in got["2/4 with an eighth-note triplet, moved to the grid"]["log"][1]
    assert got["ties"]["notes"] == 7 and got["a chain of ties"]["notes"] == 3
    errors = " | ".join(v["error"] for v in got.values() if "error" in v)
    for words in ("the melody is empty", "holds no notes", "does not fit the 16th-note grid", "no whole octave",
                  "no transposition fits", "16th steps long; the limit is 1024", "shifts that fit", M21):
        assert words in errors, words


def test_the_step_limit_can_be_set(page):
    assert_same(page, "c1 d1", max_steps=16)              # 32 steps: refused with the given limit
    assert_same(page, "c1 d1", max_steps=32)


def test_names_and_constants_match_the_package(page):
    names = page.evaluate("() => Array.from({length: 128}, (_, p) => MusictxMelody.noteName(p))")
    assert names == [note_name(p) for p in range(128)]
    assert page.evaluate("() => [MusictxMelody.SOPRANO, MusictxMelody.MAX_STEPS]") == [list(SOPRANO), MAX_STEPS]


def test_skipped_tokens_are_listed(page):
    """music21 drops a token it cannot read without a word; the JS says which, for the page to show."""
    got = js(page, "c4 d3 e x9 f")["melody"]
    assert got["ignored"] == ["d3", "x9"] and got["notes"] == 3


def test_every_pitch_written_by_tiny_name_reads_back_as_itself(page):
    """The page's keyboard types ``tinyName``: every key, C2 to C7, reads back as its pitch in the JS and in
    music21 (``read_notes``), and no log line says it was not taken as written."""
    from musictx_lite.io.melody import read_notes

    names = page.evaluate("() => Array.from({length: 61}, (_, k) => MusictxMelody.tinyName(36 + k))")
    assert names[:2] == ["CC", "CC#"] and names[24:26] == ["c", "c#"] and names[37] == "c'#"
    for pitch, name in zip(range(36, 97), names):
        notes, _ = read_notes(f"tinyNotation: {name}4")
        assert [n.pitch for n in notes] == [pitch], name
        got = js(page, f"{name}4")["melody"]
        assert got["pitches"][0] - got["shift"] == pitch and len(got["log"]) <= 2, (name, got["log"])
