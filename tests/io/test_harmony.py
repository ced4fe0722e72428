"""io/harmony.py: each statistic of a harmonisation on a small hand-made fixture whose counts are known, and the
pooled rates and their intervals."""
import numpy as np
import pytest

from musictx_lite.io import harmony as H

C4, D4, E4, F4, G4, A4, B4, C5, D5 = 60, 62, 64, 65, 67, 69, 71, 72, 74


def grid(*rows):
    return np.array(rows, dtype=np.int64)


def test_parallels_by_similar_and_contrary_motion_are_told_apart():
    g = grid([C5, G4, E4, 48],
             [74, G4, E4, 50],           # S and B up a tone: an octave to an octave, similar motion
             [C5, G4, E4, 60],           # S down, B up: an octave again, by contrary motion
             [C5, A4, E4, 62])           # A and B up: G4/C4 (a fifth) to A4/D4, similar motion
    c = dict(zip(H.COUNTS, H.piece_counts(g, (0, "major"), (0, "major"))))
    assert (c["fifths"], c["octaves"], c["motions"]) == (1, 1, 3)     # similar motion only; held voices: no motion
    assert (c["contrary_fifths"], c["contrary_octaves"]) == (0, 1)
    assert H.contrary_parallels(g) == {"fifths": 0, "octaves": 1}


def test_crossings_range_and_spacing():
    g = grid([C5, 57, 59, 40],           # alto below tenor: crossed A-T; S-A 72-57 = 15 > 12: wide
             [C5, 55, 52, 38])           # bass 38 < 40: out of range; S-A 17: wide
    c = dict(zip(H.COUNTS, H.piece_counts(g, (0, "major"), (0, "major"))))
    assert (c["crossed"], c["pairs"]) == (1, 6)
    assert (c["outside"], c["notes"]) == (1, 6)                       # alto 57, 55; tenor 59, 52; bass 40, 38
    assert (c["wide"], c["spaced"]) == (2, 4)


def test_complete_chords_on_beats_and_the_key():
    g = grid([C5, G4, E4, 48],           # beat: C major, complete
             [B4, G4, D4, 43],           # off the beat: not counted
             [B4, G4, D4, 43],
             [B4, G4, D4, 43],
             [C5, 66, E4, 48])           # beat: F# in the alto: C, F#, E, C is no chord; F# is off C major's key
    c = dict(zip(H.COUNTS, H.piece_counts(g, (0, "major"), (0, "major"))))
    assert (c["complete"], c["beats"]) == (1, 2)
    assert (c["off_key"], c["notes"]) == (1, 8)                       # alto G4, F#4; tenor E4, D4, E4; bass C, G, C
    assert H.scale(9, "minor") == {9, 11, 0, 2, 4, 5, 6, 7, 8}        # A minor with F# and G#


def test_the_final_chord_its_root_and_its_quality_against_the_reference():
    major_end = grid([D5, A4, 66, 50], [C5, G4, E4, 48])
    assert H.final_chord(major_end) == (0, "major", True)
    c = dict(zip(H.COUNTS, H.piece_counts(major_end, (9, "minor"), (0, "minor"))))
    assert (c["final_complete"], c["final_root"], c["final_quality"]) == (1, 1, 0)   # his was minor
    bare = grid([C5, G4, G4, 48])                                    # no third: incomplete, the bass as root
    assert H.final_chord(bare) == (0, None, False)
    assert H.final_chord(grid([C5, 63, G4, 48], [-1, -1, -1, -1])) == (0, "minor", True)   # trailing rests


def test_rates_and_intervals_pool_pieces():
    a = H.piece_counts(grid([C5, G4, E4, 48], [74, A4, D4, 50]), (0, "major"), (0, "major"))
    b = H.piece_counts(grid([C5, G4, E4, 48], [B4, G4, D4, 43]), (0, "major"), (0, "major"))
    stats = H.harmony_stats(np.stack([a, b]), n=200)
    motions = (a + b)[H.COUNTS.index("motions")]
    assert stats["parallel_fifths"]["value"] == pytest.approx(1 / motions)
    for row in stats.values():
        assert row["low"] <= row["value"] <= row["high"] or row["low"] == row["high"]
    with pytest.raises(ValueError, match="at least one piece"):
        H.harmony_stats(np.zeros((0, len(H.COUNTS))))


def test_known_tunes_are_found_in_any_key():
    tune = np.repeat([60, 62, 64, 65, 67, 65, 64, 62, 60, 62, 64, 62, 60, -1], 4)
    other = np.repeat([60, 64, 67, 72, 67, 64, 60, 64, 67, 72, 67, 64, 60], 4)
    assert H.known_tunes([tune], [tune + np.where(tune >= 0, 5, 0), other]) == [True, False]


def test_key_of_a_melody():
    scale_tune = np.repeat([60, 62, 64, 65, 67, 69, 71, 72, 67, 64, 60], 4)
    assert H.key_of(scale_tune) == (0, "major")
    with pytest.raises(ValueError, match="no notes"):
        H.key_of(np.full(8, -1))


def test_key_of_agrees_with_music21s_key_analysis_on_chorale_melodies(chorales):
    """The key finder is music21's default one (Aarden-Essen weights), written out so that the Play page's
    JavaScript can do the same: on the embedded chorales' melodies both name the same key."""
    from music21 import note, stream

    from musictx_lite.io.midi import notes_of

    pieces = (chorales.train + chorales.valid)[:25]
    for piece in pieces:
        s = stream.Stream()
        for a, b, p in notes_of(piece.pitches[:, :1])[0]:
            s.append(note.Note(p, quarterLength=(b - a) / 4))
        k = s.analyze("key")
        assert H.key_of(piece.pitches[:, 0]) == (k.tonic.pitchClass, k.mode), piece.name
