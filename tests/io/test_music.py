import base64
import html
import io
import os
import re
import subprocess
import sys
import wave

import numpy as np
import pytest

from musictx_lite.classroom import plots
from musictx_lite.io import audio, midi


def test_midi_round_trip(tmp_path, chorales):
    for p in chorales.valid[:5]:
        path = midi.write_midi(p.pitches, tmp_path / "x.mid")
        np.testing.assert_array_equal(midi.read_midi(path), p.pitches[: len(midi.read_midi(path))])
        # trailing rests are not stored in MIDI; everything up to the last note is
        last = max(np.nonzero(p.pitches >= 0)[0]) + 1
        assert len(midi.read_midi(path)) == last


def test_onsets_split_repeated_notes(chorales):
    p = chorales.train[0]
    merged = sum(len(v) for v in midi.notes_of(p.pitches))
    split = sum(len(v) for v in midi.notes_of(p.pitches, p.onsets))
    assert split == int(p.onsets.sum()) and split > merged
    pm = midi.grid_to_midi(p.pitches, p.onsets)
    assert [i.name for i in pm.instruments] == ["soprano", "alto", "tenor", "bass"]
    assert sum(len(i.notes) for i in pm.instruments) == split


def test_notes_of_merges_held_pitches():
    g = np.array([[60, 50, 45, 40], [60, 50, 45, -1], [62, 50, -1, 41]])
    notes = midi.notes_of(g)
    assert notes[0] == [(0, 2, 60), (2, 3, 62)]
    assert notes[1] == [(0, 3, 50)]
    assert notes[3] == [(0, 1, 40), (2, 3, 41)]


@pytest.mark.parametrize("content, match", [(b"", "empty"), (b"RIFF1234WAVEfmt garbage" * 4, "not a readable MIDI"),
                                            (b"MThd\x00\x00\x00\x06\x00\x01", "not a readable MIDI")])
def test_bad_midi_files(tmp_path, content, match):
    path = tmp_path / "bad.mid"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=match):
        midi.read_midi(path)


def test_midi_with_wrong_voice_count(tmp_path):
    import pretty_midi

    pm = pretty_midi.PrettyMIDI()
    inst = pretty_midi.Instrument(0)
    inst.notes.append(pretty_midi.Note(velocity=80, pitch=60, start=0, end=1))
    pm.instruments.append(inst)
    pm.write(str(tmp_path / "one.mid"))
    with pytest.raises(ValueError, match="expected 4 voices"):
        midi.read_midi(tmp_path / "one.mid")
    pretty_midi.PrettyMIDI().write(str(tmp_path / "none.mid"))
    with pytest.raises(ValueError, match="no notes"):
        midi.read_midi(tmp_path / "none.mid")
    with pytest.raises(FileNotFoundError):
        midi.read_midi(tmp_path / "missing.mid")


def fluidsynth_importable() -> bool:
    """Independently of ``music``: do pyfluidsynth and the FluidSynth library load here?"""
    try:
        import fluidsynth
    except Exception:
        return False
    return hasattr(fluidsynth, "Synth")


def high_band_share(audio, rate, hz=2000):
    """Share of spectral magnitude above ``hz``: sines at chorale pitches have none, an organ some."""
    spec = np.abs(np.fft.rfft(audio))
    return spec[np.fft.rfftfreq(len(audio), 1 / rate) > hz].sum() / spec.sum()


MIDI_LINK = re.compile(r'<a download="([^"]+)" href="data:audio/midi;base64,([A-Za-z0-9+/=]+)">')


def test_play_is_short_and_low_rate(chorales):
    clip = audio.play(chorales.train[0].pitches, seconds=5)
    with wave.open(io.BytesIO(clip.data)) as w:
        rate, seconds, channels = w.getframerate(), w.getnframes() / w.getframerate(), w.getnchannels()
    assert rate == clip.rate == 8000 and channels == 1
    assert 4 < seconds < 6.5                                      # 5 s of music plus the release of the last note
    assert len(clip._repr_html_()) < 150_000                      # 5 s, base64 WAV + MIDI + markup
    with pytest.raises(ValueError, match="nothing to play"):
        audio.play(np.full((8, 4), -1))
    with pytest.raises(ValueError, match="nothing to play"):
        audio.play(np.full((400, 4), -1), name="rests")


def test_play_shows_a_player_a_midi_link_of_what_plays_and_the_synth(chorales, tmp_path):
    p = chorales.train[0]
    clip = audio.play(p.pitches, p.onsets, seconds=8, name="bach")
    steps = int(8 * midi.TEMPO / 60 * midi.STEPS_PER_QUARTER)
    np.testing.assert_array_equal(clip.pitches, p.pitches[:steps])
    page = clip._repr_html_()
    assert page.count("<audio") == 1 and 'src="data:audio/wav;base64,' in page
    links = MIDI_LINK.findall(page)
    assert len(links) == 1 and links[0][0] == "bach.mid"
    data = base64.b64decode(links[0][1], validate=True)
    assert data == clip.midi_bytes and data[:4] == b"MThd"
    (tmp_path / "bach.mid").write_bytes(data)
    played = p.pitches[:steps]
    last = max(np.nonzero((played >= 0).any(axis=1))[0]) + 1       # trailing rests are not stored in MIDI
    np.testing.assert_array_equal(midi.read_midi(tmp_path / "bach.mid"), played[:last])
    # the repeated notes that onsets split are separate notes in the download too
    import pretty_midi

    pm = pretty_midi.PrettyMIDI(io.BytesIO(data))
    assert sum(len(i.notes) for i in pm.instruments) == sum(len(v) for v in midi.notes_of(played, p.onsets[:steps]))

    # the note names the synthesiser that actually played
    if fluidsynth_importable():
        assert clip.synth == "fluidsynth"
        assert clip.note == "FluidSynth, General MIDI church organ (TimGM6mb soundfont bundled with pretty_midi)"
    else:
        assert clip.synth == "organ"
        assert clip.note.startswith("additive organ, not FluidSynth: ") and "see Setup" in clip.note
    assert f"Sound: {html.escape(clip.note)}" in page
    bundle = clip._repr_mimebundle_()
    assert bundle["text/html"] == page and clip.note in bundle["text/plain"] and clip.note in repr(clip)
    assert np.isfinite(clip.audio).all() and 0 < np.abs(clip.audio).max() <= 1
    assert np.abs(clip.audio).max() == pytest.approx(audio.PEAK, rel=1e-4)   # normalised, no clipping


@pytest.mark.parametrize("name, file", [("musictx.mid", "musictx.mid"), ("chorale 3", "chorale 3.mid"),
                                        ("../up/x.MIDI", "x.MIDI"), ('a"b', "a&quot;b.mid")])
def test_midi_download_name(chorales, name, file):
    page = audio.play(chorales.train[0].pitches, seconds=2, name=name)._repr_html_()
    assert MIDI_LINK.findall(page)[0][0] == file
    assert audio.play(chorales.train[0].pitches, seconds=2).name == "musictx.mid"


def test_organ_fallback_when_fluidsynth_cannot_be_imported(chorales, monkeypatch):
    import pretty_midi  # noqa: F401  (imported before the block, as in a notebook that already played)

    p = chorales.train[0].pitches
    monkeypatch.setitem(sys.modules, "fluidsynth", None)           # import fluidsynth -> ModuleNotFoundError
    assert audio.fluidsynth_problem() == "FluidSynth is not installed"
    clip = audio.play(p, seconds=5)
    assert clip.synth == "organ" and clip.rate == 8000
    assert clip.note == "additive organ, not FluidSynth: FluidSynth is not installed (see Setup)"
    assert f"Sound: {html.escape(clip.note)}" in clip._repr_html_()
    organ = audio.organ(midi.grid_to_midi(p[: len(clip.pitches)]), 8000)
    np.testing.assert_allclose(clip.audio, organ * audio.PEAK / np.abs(organ).max(), atol=1e-6)
    assert high_band_share(clip.audio, clip.rate) > 0.05            # harmonics, where sines have ~0.01

    def no_library():
        raise ImportError("Couldn't find the FluidSynth library.")  # pyfluidsynth without libfluidsynth

    monkeypatch.setattr(audio, "_quiet_import_fluidsynth", no_library)
    clip = audio.play(p, seconds=2)
    assert clip.synth == "organ" and "FluidSynth library (libfluidsynth) is not" in clip.note


def test_the_additive_organ_has_its_harmonics_and_no_clicks():
    import pretty_midi

    pm = pretty_midi.PrettyMIDI()
    inst = pretty_midi.Instrument(0)
    inst.notes.append(pretty_midi.Note(velocity=127, pitch=57, start=0.5, end=1.5))   # A3, 220 Hz, one second
    pm.instruments.append(inst)
    fs = 16000
    sound = audio.organ(pm, fs)
    assert len(sound) >= int((1.5 + audio.RELEASE) * fs)
    assert np.abs(sound[: int(0.5 * fs)]).max() == 0                         # silence before the note
    end = sound[int((1.5 + audio.RELEASE) * fs) - 2:]                        # the end of its release
    assert end.size and np.abs(end).max() < 0.01 * np.abs(sound).max()
    # the attack: the envelope grows from 0 over ATTACK seconds, no jump at the onset
    onset = int(0.5 * fs)
    assert np.abs(sound[onset: onset + 8]).max() < 0.1 * np.abs(sound).max()
    # the spectrum of the sustained part: peaks at k * 220 Hz with the HARMONICS' amplitudes
    sustain = sound[int(0.6 * fs): int(1.4 * fs)]
    spec = np.abs(np.fft.rfft(sustain)) / len(sustain) * 2
    freqs = np.fft.rfftfreq(len(sustain), 1 / fs)
    for k, a in audio.HARMONICS.items():
        assert spec[np.argmin(np.abs(freqs - 220 * k))] == pytest.approx(a, rel=0.02), k
    assert spec[np.argmin(np.abs(freqs - 220 * 5))] < 0.01                   # no 5th harmonic
    # harmonics at or above fs / 2 are left out: no aliasing
    assert np.isfinite(audio.organ(pm, 1000)).all()
    low = np.abs(np.fft.rfft(audio.organ(pm, 1000)[600:1300]))
    assert low[np.argmin(np.abs(np.fft.rfftfreq(700, 1 / 1000) - 440))] > 0   # 2nd harmonic (440 < 500) kept


@pytest.mark.parametrize("render, reason", [("raise", "FluidSynth failed (RuntimeError: no soundfont)"),
                                            ("zeros", "FluidSynth rendered silence"),
                                            ("nan", "FluidSynth rendered silence")])
def test_organ_fallback_when_fluidsynth_fails(chorales, monkeypatch, render, reason):
    import pretty_midi

    def fake(self, fs=None, **kw):
        if render == "raise":
            raise RuntimeError("no soundfont")
        return np.full(int(fs), 0.0 if render == "zeros" else np.nan)

    monkeypatch.setattr(audio, "fluidsynth_problem", lambda: None)
    monkeypatch.setattr(pretty_midi.PrettyMIDI, "fluidsynth", fake)
    clip = audio.play(chorales.train[0].pitches, seconds=2)
    assert clip.synth == "organ" and clip.note == f"additive organ, not FluidSynth: {reason} (see Setup)"
    assert np.isfinite(clip.audio).all() and np.abs(clip.audio).max() > 0


def test_fluidsynth_sounds_like_an_organ(chorales):
    if audio.fluidsynth_problem() is not None:
        pytest.skip(f"no FluidSynth here: {audio.fluidsynth_problem()}")
    p = chorales.train[0].pitches
    clip = audio.play(p, seconds=5)
    assert clip.synth == "fluidsynth" and clip.rate == 8000
    assert np.isfinite(clip.audio).all() and np.sqrt(np.mean(clip.audio ** 2)) > 0.05
    sine = midi.grid_to_midi(clip.pitches).synthesize(fs=8000)
    n = min(len(sine), len(clip.audio))
    assert abs(np.corrcoef(sine[:n], clip.audio[:n])[0, 1]) < 0.5
    assert high_band_share(clip.audio, clip.rate) > 0.1             # an organ's harmonics (sines: ~0.01)


def test_pyfluidsynth_prints_nothing_into_pages():
    """pyfluidsynth prints where it found the library when $CI is set; book pages must not show it."""
    code = ("import numpy as np; from musictx_lite.io import audio; "
            "g = np.array([[72, 67, 64, 48]] * 8); print(audio.play(g, seconds=1).synth)")
    env = {**os.environ, "CI": "true"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() in ("fluidsynth", "organ")
    assert out.stdout.strip() == ("fluidsynth" if fluidsynth_importable() else "organ")


def test_piano_roll_draws_every_note(chorales):
    import matplotlib.pyplot as plt

    p = chorales.train[1].pitches[:64]
    ax = plots.piano_roll(p)
    assert len(ax.patches) == sum(len(v) for v in midi.notes_of(p))
    plt.close("all")


def test_named_voices_keep_their_order_even_when_they_cross(tmp_path):
    from musictx_lite import read_midi, write_midi

    grid = np.array([[72, 55, 60, 48]] * 8)          # the tenor sits above the alto all along
    back = read_midi(write_midi(grid, tmp_path / "crossed.mid"))
    np.testing.assert_array_equal(back, grid)


def test_a_performance_plays_from_its_first_note_not_the_recordings_silence():
    import pretty_midi

    from musictx_lite.io import audio
    from musictx_lite.io import performance as perf

    notes = np.array([[3.9, 4.4, 60, 70], [4.5, 5.0, 64, 60], [30.0, 31.0, 67, 80]])
    clip = audio.play(perf.Performance("p", notes, perf.encode(notes), "p", "p.mid"), seconds=20)
    got = pretty_midi.PrettyMIDI(io.BytesIO(clip.midi_bytes)).instruments[0].notes
    assert [(round(n.start, 3), round(n.end, 3), n.pitch) for n in got] == [(0.0, 0.5, 60), (0.6, 1.1, 64)]
