import numpy as np
import pytest

from musictx_lite import music


def test_midi_round_trip(tmp_path, chorales):
    for p in chorales.valid[:5]:
        path = music.write_midi(p.pitches, tmp_path / "x.mid")
        np.testing.assert_array_equal(music.read_midi(path), p.pitches[: len(music.read_midi(path))])
        # trailing rests are not stored in MIDI; everything up to the last note is
        last = max(np.nonzero(p.pitches >= 0)[0]) + 1
        assert len(music.read_midi(path)) == last


def test_onsets_split_repeated_notes(chorales):
    p = chorales.train[0]
    merged = sum(len(v) for v in music.notes_of(p.pitches))
    split = sum(len(v) for v in music.notes_of(p.pitches, p.onsets))
    assert split == int(p.onsets.sum()) and split > merged
    pm = music.grid_to_midi(p.pitches, p.onsets)
    assert [i.name for i in pm.instruments] == ["soprano", "alto", "tenor", "bass"]
    assert sum(len(i.notes) for i in pm.instruments) == split


def test_notes_of_merges_held_pitches():
    g = np.array([[60, 50, 45, 40], [60, 50, 45, -1], [62, 50, -1, 41]])
    notes = music.notes_of(g)
    assert notes[0] == [(0, 2, 60), (2, 3, 62)]
    assert notes[1] == [(0, 3, 50)]
    assert notes[3] == [(0, 1, 40), (2, 3, 41)]


@pytest.mark.parametrize("content, match", [(b"", "empty"), (b"RIFF1234WAVEfmt garbage" * 4, "not a readable MIDI"),
                                            (b"MThd\x00\x00\x00\x06\x00\x01", "not a readable MIDI")])
def test_bad_midi_files(tmp_path, content, match):
    path = tmp_path / "bad.mid"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=match):
        music.read_midi(path)


def test_midi_with_wrong_voice_count(tmp_path):
    import pretty_midi

    pm = pretty_midi.PrettyMIDI()
    inst = pretty_midi.Instrument(0)
    inst.notes.append(pretty_midi.Note(velocity=80, pitch=60, start=0, end=1))
    pm.instruments.append(inst)
    pm.write(str(tmp_path / "one.mid"))
    with pytest.raises(ValueError, match="expected 4 voices"):
        music.read_midi(tmp_path / "one.mid")
    pretty_midi.PrettyMIDI().write(str(tmp_path / "none.mid"))
    with pytest.raises(ValueError, match="no notes"):
        music.read_midi(tmp_path / "none.mid")
    with pytest.raises(FileNotFoundError):
        music.read_midi(tmp_path / "missing.mid")


def test_play_is_short_and_low_rate(chorales):
    import io
    import wave

    audio = music.play(chorales.train[0].pitches, seconds=5)
    with wave.open(io.BytesIO(audio.data)) as w:
        rate, seconds = w.getframerate(), w.getnframes() / w.getframerate()
    assert rate in (8000, 16000)
    assert 4 < seconds < 6.5                                      # 5 s of music plus the release of the last note
    with pytest.raises(ValueError, match="nothing to play"):
        music.play(np.full((8, 4), -1))


def test_piano_roll_draws_every_note(chorales):
    import matplotlib.pyplot as plt

    p = chorales.train[1].pitches[:64]
    ax = music.piano_roll(p)
    assert len(ax.patches) == sum(len(v) for v in music.notes_of(p))
    plt.close("all")
