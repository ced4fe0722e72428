"""Spelling MIDI numbers in a key: every number in every key is spelt as itself, a key's scale as written."""
import music21
import numpy as np

from musictx_lite.io.midi import note_name
from musictx_lite.io.spelling import key_centre, key_of, spelling


def test_every_midi_number_spelt_in_every_key_names_the_same_key():
    for centre in np.arange(-7.5, 12.0, 0.5):
        for pitch in range(128):
            letter, alter, octave = spelling(pitch, centre)
            assert abs(alter) <= 2
            p = music21.pitch.Pitch(letter + ("#" * alter if alter > 0 else "-" * -alter))
            p.octave = octave                                    # (a name such as "D--1" would not parse)
            assert p.midi == pitch
    assert [note_name(p, 7.5) for p in (61, 63, 64, 72)] == ["C#4", "D#4", "E4", "B#4"]   # C sharp minor: B# leads
    assert [note_name(p, -3.5) for p in (61, 63, 70)] == ["Db4", "Eb4", "Bb4"]             # B flat minor
    assert note_name(60, 11.5) == "B#3" and note_name(71, -6.5) == "Cb5"                   # the octave is the letter's


def test_key_of_weighs_how_long_each_pitch_sounds():
    k = key_of([61, 64, 68, 63, 66], [4, 2, 2, 1, 1])            # C# minor's tonic triad, long
    assert (k.tonic.name, k.mode) == ("C#", "minor") and key_centre(k) == 7.5
    assert key_of([]).name == "C major"
