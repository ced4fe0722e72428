"""Chapter 12's melodies from outside the corpus: every format read to the same grid, and every melody that
cannot be harmonised refused with a message that says why."""
import re

import numpy as np
import pytest

from musictx_lite.io.melody import SOPRANO, MelodyError, fit_range, read_melody, read_notes, to_grid


def _midi(path, *lines, drums=False, resolution=480):
    """A MIDI file with one instrument per line of (start, end, pitch) in quarter notes, at 120 bpm."""
    import pretty_midi

    pm = pretty_midi.PrettyMIDI(resolution=resolution, initial_tempo=120)
    for k, notes in enumerate(lines):
        inst = pretty_midi.Instrument(0, is_drum=drums, name=f"line {k}")
        inst.notes = [pretty_midi.Note(80, p, s / 2, e / 2) for s, e, p in notes]    # 0.5 s per quarter
        pm.instruments.append(inst)
    pm.write(str(path))
    return path


TUNE = "4/4 c'4 d'8 e' f'4 g' a'2 r4 g'16 f' e' d' c'1"          # three bars


def test_tiny_notation_reads_to_the_16th_grid():
    m = read_melody(TUNE)
    c5, d5, e5, f5, g5, a5 = 72, 74, 76, 77, 79, 81
    want = [c5] * 4 + [d5] * 2 + [e5] * 2 + [f5] * 4 + [g5] * 4 + [a5] * 8 + [-1] * 4 + [g5, f5, e5, d5] + [c5] * 16
    np.testing.assert_array_equal(m.pitches, want)
    assert m.onsets.sum() == 11 and m.onsets[0] and not m.onsets[1]
    assert m.shift == 0 and m.metre == "4/4" and m.log[0] == "11 notes, 48 16th steps (3 bars of 4/4)"
    assert read_melody("tinyNotation: " + TUNE).pitches.tolist() == want          # with its prefix
    # a dot in the text is a dotted note, not a file's suffix; an empty melody says so
    assert read_melody("c'4. d'8 e'2").pitches.tolist() == [72] * 6 + [74] * 2 + [76] * 8
    for empty in ("", "   ", "tinyNotation:"):
        with pytest.raises(MelodyError, match="the melody is empty"):
            read_melody(empty)
    with pytest.raises(MelodyError, match="tune.txt not found"):                  # a file's name stays one
        read_melody("tune.txt")


def test_every_format_reads_the_same_melody(tmp_path):
    want = read_melody(TUNE).pitches
    notes, _ = read_notes(TUNE)
    lines = [(float(n.start), float(n.end), n.pitch) for n in notes]
    np.testing.assert_array_equal(read_melody(_midi(tmp_path / "t.mid", lines)).pitches, want)
    import music21

    score = music21.converter.parse("tinyNotation: " + TUNE)
    xml = score.write("musicxml", fp=str(tmp_path / "t.musicxml"))
    np.testing.assert_array_equal(read_melody(xml).pitches, want)
    abc = tmp_path / "t.abc"
    abc.write_text("X:1\nT:tune\nM:4/4\nL:1/16\nK:C\nc4 d2 e2 f4 g4 | a8 z4 gfed | c16 |\n")
    np.testing.assert_array_equal(read_melody(abc).pitches, want)


def test_a_melody_is_moved_by_octaves_or_as_asked():
    low = read_melody("4/4 c4 d e f g2")                                     # C4..G4: in range
    assert low.shift == 0
    lower = read_melody("4/4 C4 D E F G2")                                   # C3..G3: an octave up
    assert lower.shift == 12 and "moved +12 semitones (+1 octave)" in lower.log[-1]
    np.testing.assert_array_equal(lower.pitches, low.pitches)
    asked = read_melody("4/4 C4 D E F G2", transpose=14)
    assert asked.shift == 14 and "(as asked)" in asked.log[-1]
    assert fit_range(np.array([SOPRANO[0] - 25, SOPRANO[0] - 20])) == 36     # the one octave shift that fits
    assert fit_range(np.array([SOPRANO[0] - 12, SOPRANO[0] - 10])) == 12     # +12 and +24 fit: the smaller


@pytest.mark.parametrize("melody,needles", [
    ("4/4 c4 trip{d16 e f} g2", ["does not fit the 16th-note grid", "note 3 (E4"]),
    ("4/4 c''4 d e f g2 C1", ["spans", "no transposition fits"]),
    ("tinyNotation:", ["the melody is empty"]),
    ("4/4 r1", ["holds no notes"]),
])
def test_melodies_that_cannot_be_harmonised_say_why(melody, needles):
    with pytest.raises(MelodyError) as e:
        read_melody(melody)
    assert all(n in str(e.value) for n in needles), str(e.value)
    assert "\n" not in str(e.value)


def test_no_octave_fits_names_the_shifts_that_would():
    with pytest.raises(MelodyError, match=r"no whole octave moves the melody .* give a transposition: from "):
        fit_range(np.array([SOPRANO[0] - 6, SOPRANO[1] - 8]))                # spans 19: shifts +6..+8 fit
    with pytest.raises(MelodyError, match=r"moved \+20 semitones .* shifts that fit: \+6 to \+8"):
        fit_range(np.array([SOPRANO[0] - 6, SOPRANO[1] - 8]), transpose=20)


def test_bad_midi_files_are_refused(tmp_path):
    empty = tmp_path / "empty.mid"
    empty.write_bytes(b"")
    junk = tmp_path / "junk.mid"
    junk.write_bytes(b"MThd not really")
    cases = [(empty, "is empty"), (junk, "is not a readable MIDI file"),
             (_midi(tmp_path / "drums.mid", [(0, 1, 36), (1, 2, 38)], drums=True), "drums only"),
             (_midi(tmp_path / "none.mid"), "holds no notes"),
             (_midi(tmp_path / "chord.mid", [(0, 2, 60), (1, 2, 64)]), "sound together"),
             (tmp_path / "missing.mid", "not found"),
             (tmp_path / "notes.txt", "unknown kind of file")]
    (tmp_path / "notes.txt").write_text("c d e")
    for path, needle in cases:
        with pytest.raises(MelodyError, match=needle):
            read_melody(path)
    two = _midi(tmp_path / "two.mid", [(0, 1, 72), (1, 2, 74)], [(0, 2, 48)])
    with pytest.raises(MelodyError, match=r"2 tracks with notes; choose the melody's with --track \(0 to 1"):
        read_melody(two)
    assert read_melody(two, track=0).pitches.tolist() == [72] * 4 + [74] * 4
    with pytest.raises(MelodyError, match="--track 5 is not one of 0 to 1"):
        read_melody(two, track=5)


def test_performed_timing_is_quantised_and_a_rhythm_too_fine_is_refused(tmp_path):
    loose = _midi(tmp_path / "loose.mid", [(0.02, 0.98, 72), (1.01, 2.03, 74)])   # a little off the grid
    m = read_melody(loose)
    assert m.pitches.tolist() == [72] * 4 + [74] * 4 and "2 of them moved to the nearest 16th" in m.log
    fine = _midi(tmp_path / "fine.mid", [(0, 1, 72), (1, 1.1, 74), (1.1, 2, 76)])
    with pytest.raises(MelodyError, match=r"note 2 \(D5 at quarter 1.*does not fit the 16th-note grid"):
        read_melody(fine)


def test_a_melody_longer_than_the_limit_is_refused():
    with pytest.raises(MelodyError, match="the melody is 48 16th steps long; the limit is 32"):
        read_melody(TUNE, max_steps=32)
    notes, _ = read_notes(TUNE)
    assert to_grid(notes, 48)[0].shape == (48,)


def test_a_chord_in_a_score_is_refused_and_a_triplet_quantised_with_a_word(tmp_path):
    import music21

    s = music21.stream.Stream([music21.note.Note("C5", quarterLength=1), music21.chord.Chord(["E4", "G4"])])
    xml = s.write("musicxml", fp=str(tmp_path / "chord.musicxml"))
    with pytest.raises(MelodyError, match=r"a chord \(E4 G4\) at quarter 1: a melody is one line"):
        read_melody(xml)
    m = read_melody("4/4 c'4 trip{d'8 e' f'} g'2")                    # triplet eighths: 16th, 8th, 16th
    assert m.pitches.tolist() == [72] * 4 + [74, 76, 76, 77] + [79] * 8
    assert "3 of them moved to the nearest 16th" in m.log            # d ends, e starts and ends, f starts off it


def test_another_metre_is_read_and_said():
    m = read_melody("3/4 c'4 d' e' f'2.")
    assert m.metre == "3/4" and any("its metre is 3/4" in line for line in m.log)


def test_an_upbeat_is_read_from_leading_rests_an_abc_upbeat_and_a_midi_file(tmp_path):
    """The steps before the first barline: a quarter in 3/4 after two beats of rest, an eighth in 2/4, none
    when the melody starts on the barline; an ABC tune's upbeat bar; a MIDI file whose notes begin late in bar 1."""
    assert read_melody("3/4 r2 g4 c'2 e'4 d'2.").pickup == 4
    assert read_melody("2/4 r4 r8 d'8 g'4 a'").pickup == 2
    assert read_melody("3/4 c'4 d' e' f'2.").pickup == 0
    abc = tmp_path / "upbeat.abc"
    abc.write_text("X:1\nT:upbeat\nM:3/4\nL:1/4\nK:G\nD | G2 B | d2 B | A2 G | G2 |]\n")
    m = read_melody(abc)
    assert (m.metre, m.pickup, len(m.pitches)) == ("3/4", 4, 4 + 3 * 12 + 8)
    assert read_melody(_midi(tmp_path / "late.mid", [(3.0, 4.0, 67), (4.0, 6.0, 72)])).pickup == 4   # 4/4


@pytest.mark.parametrize("text,token", [("chord{c'4 e' g'}", "chord{c'4"), ("d'4 <c' e' g'>4", "<c'")])
def test_a_chord_in_tinynotation_is_refused_by_its_token(text, token):
    with pytest.raises(MelodyError, match=f'"{re.escape(token)}" \\(token \\d\\): a chord is not a melody'):
        read_melody(text)


def test_what_music21_does_not_take_as_written_is_said_by_token():
    m = read_melody("4/4 C,4 c'4 d'4 e'4")                   # an ABC octave mark: music21 skips the token
    assert m.log[-1] == "not tinyNotation, skipped: C,4" and (m.pitches >= 0).sum() == 12
    m = read_melody("c'4 g#' c'# e-'' d'")
    assert m.log[1:] == [""""g#'" reads as G#4: octave marks go before the accidental (g'# is G#5)""",
                         """"e-''" reads as Eb4: octave marks go before the accidental (e''- is Eb6)"""]
    assert m.pitches[::4].tolist() == [72, 68, 73, 63, 74]   # as music21 reads them: G#4 and Eb4
    assert read_melody("c'4 d' e'").log == ["3 notes, 12 16th steps (0.75 bars of 4/4)"]
