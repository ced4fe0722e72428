"""The performance-event codec of chapter 13 (Oore et al. 2018): hand-made cases with their exact events,
decode's tolerance, and the round trip on the shared piano sample."""
import numpy as np
import pytest

from musictx_lite.io import performance as P
from musictx_lite.io.performance import BOS, NOTE_OFF, NOTE_ON, PAD, TIME_SHIFT, VELOCITY

ON = lambda p: NOTE_ON + p            # noqa: E731  (the events by name, as the paper writes them)
OFF = lambda p: NOTE_OFF + p          # noqa: E731
SHIFT = lambda n: TIME_SHIFT + n - 1  # noqa: E731  (n ticks of 10 ms)
VEL = lambda b: VELOCITY + b          # noqa: E731  (velocity bin b)


def notes(*rows) -> np.ndarray:
    return np.array(rows, dtype=np.float64).reshape(-1, 4)


def by_onset_and_pitch(x: np.ndarray) -> np.ndarray:
    """Notes in the order ``quantised`` writes them: by onset tick, then pitch."""
    return x[np.lexsort((x[:, 2], np.rint(x[:, 0] / P.TICK)))]


def test_vocabulary_layout():
    assert (PAD, BOS, NOTE_ON, NOTE_OFF, TIME_SHIFT, VELOCITY, P.VOCAB_SIZE) == (0, 1, 2, 130, 258, 358, 390)
    assert P.TICK == 0.01 and P.MAX_SHIFT == 100
    np.testing.assert_array_equal(P.velocity_bin([0, 1, 3, 4, 80, 83, 84, 127, 200]), [0, 0, 0, 1, 20, 20, 21, 31, 31])
    b = np.arange(32)
    np.testing.assert_array_equal(P.velocity_bin(P.bin_velocity(b)), b)       # the middle of a bin is in it
    assert P.describe([BOS, VEL(20), ON(60), SHIFT(12), OFF(61), PAD]) == [
        "BOS", "VEL 82", "ON C4", "SHIFT 120ms", "OFF C#4", "PAD"]


def test_note_names_follow_the_key_the_note_ons_suggest():
    c_sharp_minor = [ON(61), ON(64), ON(68), OFF(61), ON(63), ON(73)]      # C# E G# then D#: not Eb
    assert P.describe(c_sharp_minor) == ["ON C#4", "ON E4", "ON G#4", "OFF C#4", "ON D#4", "ON C#5"]
    c_minor = [ON(60), ON(63), ON(67), ON(70), ON(68)]                     # C Eb G Bb Ab: flats
    assert P.describe(c_minor) == ["ON C4", "ON Eb4", "ON G4", "ON Bb4", "ON Ab4"]
    assert P.describe([ON(61)], centre=-4) == ["ON Db4"]                   # a given key wins
    assert P.describe([OFF(60), SHIFT(3)]) == ["OFF C4", "SHIFT 30ms"]     # no note-on: C major


def test_single_note():
    assert P.encode(notes([0.0, 0.5, 60, 80])).tolist() == [BOS, VEL(20), ON(60), SHIFT(50), OFF(60)]
    # a late start shifts first; a note shorter than a tick still lasts one
    assert P.encode(notes([0.123, 0.125, 64, 1])).tolist() == [BOS, SHIFT(12), VEL(0), ON(64), SHIFT(1), OFF(64)]
    assert P.encode(notes()).tolist() == [BOS]


def test_velocity_event_only_when_the_bin_changes():
    x = notes([0.0, 0.5, 60, 80], [0.5, 1.0, 62, 83], [1.0, 1.2, 64, 100])     # 80 and 83: both bin 20
    assert P.encode(x).tolist() == [BOS, VEL(20), ON(60), SHIFT(50), OFF(60), ON(62), SHIFT(50), OFF(62),
                                    VEL(25), ON(64), SHIFT(20), OFF(64)]
    # two notes of one chord, the second louder: a velocity event between them, lower pitch first
    assert P.encode(notes([0, 0.1, 67, 40], [0, 0.1, 60, 100])).tolist() == [
        BOS, VEL(25), ON(60), VEL(10), ON(67), SHIFT(10), OFF(60), OFF(67)]


def test_a_gap_over_one_second_takes_several_shifts():
    x = notes([0.0, 0.1, 60, 64], [1.6, 1.7, 62, 64])                           # a gap of 150 ticks
    assert P.encode(x).tolist() == [BOS, VEL(16), ON(60), SHIFT(10), OFF(60), SHIFT(100), SHIFT(50), ON(62),
                                    SHIFT(10), OFF(62)]
    long = P.encode(notes([0.0, 3.0, 60, 64]))                                   # 300 ticks held: three shifts
    assert long.tolist() == [BOS, VEL(16), ON(60), SHIFT(100), SHIFT(100), SHIFT(100), OFF(60)]


def test_offs_come_before_ons_in_one_tick():
    x = notes([0.0, 0.5, 72, 64], [0.5, 1.0, 60, 64], [0.5, 1.0, 72, 64])      # 72 ends as 60 and 72 start
    assert P.encode(x).tolist() == [BOS, VEL(16), ON(72), SHIFT(50), OFF(72), ON(60), ON(72), SHIFT(50),
                                    OFF(60), OFF(72)]


def test_pedal_held_over_a_key_release_extends_the_note():
    x = notes([0.0, 0.5, 60, 64], [0.0, 0.1, 64, 64], [0.3, 1.9, 67, 64])
    pedal = [(0.2, 127), (1.5, 0)]
    # 60 comes up under the pedal: it sounds to 1.5; 64 came up before the pedal, 67 after it
    np.testing.assert_allclose(P.sustained(x, pedal), notes([0, 1.5, 60, 64], [0, 0.1, 64, 64], [0.3, 1.9, 67, 64]))
    np.testing.assert_allclose(P.sustained(x, []), x)                                      # no pedal: as played
    # a value of 63 is up, 64 is down; the pedal is read from MIDI controller 64, not any other
    np.testing.assert_allclose(P.sustained(notes([0, 0.5, 60, 64]), [(0.2, 63), (1.0, 0)]), notes([0, 0.5, 60, 64]))
    np.testing.assert_allclose(P.sustained(notes([0, 0.5, 60, 64]), [(0.2, 64), (1.0, 0)]), notes([0, 1.0, 60, 64]))
    pm = P.to_midi(x)
    import pretty_midi

    pm.instruments[0].control_changes = [pretty_midi.ControlChange(P.PEDAL, 127, 0.2),
                                         pretty_midi.ControlChange(67, 127, 0.4),      # the soft pedal: ignored
                                         pretty_midi.ControlChange(P.PEDAL, 0, 1.5)]
    np.testing.assert_allclose(by_onset_and_pitch(P.performance_notes(pm)),
                               notes([0, 1.5, 60, 64], [0, 0.1, 64, 64], [0.3, 1.9, 67, 64]))


def test_a_key_struck_again_under_the_pedal_ends_the_earlier_note():
    x = notes([0.0, 0.3, 60, 64], [0.8, 1.0, 60, 90])
    got = P.sustained(x, [(0.1, 127), (2.0, 0)])
    np.testing.assert_allclose(got, notes([0.0, 0.8, 60, 64], [0.8, 2.0, 60, 90]))
    assert P.encode(got).tolist() == [BOS, VEL(16), ON(60), SHIFT(80), OFF(60), VEL(22), ON(60), SHIFT(100),
                                      SHIFT(20), OFF(60)]
    # a pedal that never comes up leaves the note as long as it was
    np.testing.assert_allclose(P.sustained(notes([0, 0.3, 60, 64]), [(0.1, 127)]), notes([0, 0.3, 60, 64]))


def test_two_strikes_of_one_key_in_one_tick_are_kept_once_the_louder():
    x = notes([0.0, 0.5, 60, 50], [0.003, 0.4, 60, 90])
    assert P.quantised(x).tolist() == [[0, 50, 60, 22]]
    assert P.encode(x).tolist() == [BOS, VEL(22), ON(60), SHIFT(50), OFF(60)]
    # through the pedal's restrike rule first (as read_performance does), the louder first strike is cut at the
    # second one, 4 ms later; the note must still sound as long as the key does, not shrink to one tick
    pm = P.to_midi(notes([0.0, 0.5, 60, 90], [0.004, 0.4, 60, 50]))
    assert P.quantised(P.performance_notes(pm)).tolist() == [[0, 40, 60, 22]]
    # strikes in neighbouring ticks are two notes, the first ending where the second begins
    assert P.quantised(notes([0.0, 0.5, 60, 50], [0.016, 0.4, 60, 90])).tolist() == [[0, 2, 60, 12], [2, 40, 60, 22]]


def test_decode_reads_the_hand_made_events_back():
    tokens = [BOS, VEL(20), ON(60), SHIFT(50), OFF(60), ON(62), SHIFT(50), OFF(62), VEL(25), ON(64), SHIFT(20),
              OFF(64)]
    np.testing.assert_allclose(P.decode(tokens), notes([0, 0.5, 60, 82], [0.5, 1.0, 62, 82], [1.0, 1.2, 64, 102]))


def test_decode_is_tolerant_of_a_samplers_mistakes():
    # a note-off without its note-on is skipped
    np.testing.assert_allclose(P.decode([BOS, OFF(60), VEL(20), ON(62), SHIFT(10), OFF(62), OFF(62)]),
                               notes([0, 0.1, 62, 82]))
    # PAD and BOS anywhere are ignored; the velocity before any velocity event is 64's bin (66)
    np.testing.assert_allclose(P.decode([PAD, BOS, ON(60), PAD, SHIFT(5), BOS, OFF(60), PAD]), notes([0, 0.05, 60, 66]))
    # a note still sounding at the end ends there, at least one tick after it began
    np.testing.assert_allclose(P.decode([BOS, ON(60), SHIFT(10), ON(64), SHIFT(30)]),
                               notes([0, 0.4, 60, 66], [0.1, 0.4, 64, 66]))
    np.testing.assert_allclose(P.decode([BOS, SHIFT(3), ON(60)]), notes([0.03, 0.04, 60, 66]))
    # a note-on of a sounding key ends the note before it
    np.testing.assert_allclose(P.decode([ON(60), SHIFT(10), ON(60), SHIFT(10), OFF(60)]),
                               notes([0, 0.1, 60, 66], [0.1, 0.2, 60, 66]))
    # an off in the tick of its on has not sounded yet: the note goes on
    np.testing.assert_allclose(P.decode([ON(60), OFF(60), SHIFT(5)]), notes([0, 0.05, 60, 66]))
    assert P.decode([]).shape == (0, 4) and P.decode([BOS, PAD, SHIFT(7)]).shape == (0, 4)


def random_notes(rng, n=400, seconds=30.0) -> np.ndarray:
    start = rng.uniform(0, seconds, n)
    return np.column_stack([start, start + rng.exponential(0.3, n) + 1e-3, rng.integers(21, 109, n),
                            rng.integers(1, 128, n)])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_decode_encode_round_trip_on_random_notes(seed):
    x = random_notes(np.random.default_rng(seed))
    q = P.quantised(x)
    tokens = P.encode(x)
    assert tokens[0] == BOS and tokens[1:].min() >= NOTE_ON
    assert tokens.max() < P.VOCAB_SIZE and tokens.dtype == np.int64
    y = by_onset_and_pitch(P.decode(tokens))
    assert len(y) == len(q) and len(q) > 300
    np.testing.assert_array_equal(np.rint(y[:, :2] / P.TICK), q[:, :2])          # onsets and offsets, tick for tick
    np.testing.assert_array_equal(y[:, 2], q[:, 2])
    np.testing.assert_array_equal(P.velocity_bin(y[:, 3]), q[:, 3])
    # each decoded onset within 5 ms of its played onset (the kept, louder strike where a key was struck twice)
    kept = x[np.lexsort((-x[:, 3], x[:, 2], np.rint(x[:, 0] / P.TICK)))]
    first = np.ones(len(kept), bool)
    first[1:] = (np.diff(np.rint(kept[:, 0] / P.TICK)) != 0) | (np.diff(kept[:, 2]) != 0)
    kept = kept[first]
    assert np.abs(y[:, 0] - kept[:, 0]).max() <= 0.005 + 1e-9
    np.testing.assert_array_equal(P.velocity_bin(kept[:, 3]), q[:, 3])
    np.testing.assert_array_equal(P.encode(P.decode(tokens)), tokens)                  # events -> notes -> same events


def test_write_and_read_a_performance(tmp_path):
    x = notes([0.0, 0.5, 60, 80], [0.5, 1.0, 60, 80], [0.25, 2.5, 64, 100], [1.0, 1.01, 108, 3])
    path = P.write_performance(x, tmp_path / "sub" / "p.mid")
    perf = P.read_performance(path, piece="my piece")
    assert (perf.name, perf.piece, perf.source) == ("p", "my piece", str(path))
    np.testing.assert_array_equal(perf.tokens, P.encode(x))
    assert perf.seconds == pytest.approx(2.5, abs=3e-3) and len(perf) == len(perf.tokens)
    assert P.read_performance(path).piece == "p"
    assert sorted(q.name for q in tmp_path.joinpath("sub").iterdir()) == ["p.mid"]      # no part file left
    pm = P.to_midi(x)
    assert len(pm.instruments) == 1 and pm.instruments[0].program == 0 and not pm.instruments[0].is_drum


def test_read_performance_errors(tmp_path):
    import pretty_midi

    with pytest.raises(FileNotFoundError):
        P.read_performance(tmp_path / "missing.mid")
    (tmp_path / "empty.mid").write_bytes(b"")
    with pytest.raises(ValueError, match="empty"):
        P.read_performance(tmp_path / "empty.mid")
    pretty_midi.PrettyMIDI().write(str(tmp_path / "none.mid"))
    with pytest.raises(ValueError, match="has no notes"):
        P.read_performance(tmp_path / "none.mid")
    pm = pretty_midi.PrettyMIDI()
    drums = pretty_midi.Instrument(0, is_drum=True)
    drums.notes.append(pretty_midi.Note(velocity=90, pitch=36, start=0, end=0.2))
    pm.instruments.append(drums)
    pm.write(str(tmp_path / "drums.mid"))
    with pytest.raises(ValueError, match="only drum notes"):
        P.read_performance(tmp_path / "drums.mid")


def test_every_non_drum_instrument_is_merged(tmp_path):
    import pretty_midi

    pm = P.to_midi(notes([0.0, 1.0, 60, 64]))
    left = pretty_midi.Instrument(0)
    left.notes.append(pretty_midi.Note(velocity=64, pitch=60, start=0.5, end=2.0))      # the same key again
    left.notes.append(pretty_midi.Note(velocity=64, pitch=48, start=0.0, end=1.0))
    drums = pretty_midi.Instrument(0, is_drum=True)
    drums.notes.append(pretty_midi.Note(velocity=90, pitch=36, start=0, end=0.2))
    pm.instruments += [left, drums]
    np.testing.assert_allclose(by_onset_and_pitch(P.performance_notes(pm)),
                               notes([0, 1, 48, 64], [0, 0.5, 60, 64], [0.5, 2, 60, 64]))


ROUND_TRIP_FILES = {"maestro": slice(None, None, 3), "giantmidi": slice(None, None, 8), "scores": slice(None, None, 8)}


@pytest.mark.slow
@pytest.mark.parametrize("version", ROUND_TRIP_FILES)
def test_round_trip_on_the_shared_performances(version, piano_path, tmp_path):
    files = sorted((piano_path / version).glob("*.mid"))[ROUND_TRIP_FILES[version]]
    assert len(files) >= 7
    total, worst = 0, 0.0
    for path in files:
        perf = P.read_performance(path)
        q = P.quantised(perf.notes)
        got = by_onset_and_pitch(P.decode(perf.tokens))
        assert len(got) == len(q), path
        # the played notes in the order quantised keeps them: by onset tick and pitch, the louder of a key's
        # strikes within one tick
        x = perf.notes[np.lexsort((-perf.notes[:, 3], perf.notes[:, 2], np.rint(perf.notes[:, 0] / P.TICK)))]
        ticks = np.rint(x[:, 0] / P.TICK)
        first = np.ones(len(x), bool)
        first[1:] = (np.diff(ticks) != 0) | (np.diff(x[:, 2]) != 0)
        x = x[first]
        assert len(x) == len(q), path
        err = np.abs(got[:, 0] - x[:, 0]).max()
        assert err <= 0.005 + 1e-9, path
        np.testing.assert_array_equal(got[:, 2], x[:, 2], err_msg=str(path))
        np.testing.assert_array_equal(P.velocity_bin(got[:, 3]), P.velocity_bin(x[:, 3]), err_msg=str(path))
        np.testing.assert_array_equal(P.velocity_bin(got[:, 3]), q[:, 3], err_msg=str(path))
        # the decoded notes written as MIDI and read back: the same events
        out = P.write_performance(got, tmp_path / "out.mid")
        np.testing.assert_array_equal(P.read_performance(out).tokens, perf.tokens, err_msg=str(path))
        total, worst = total + len(q), max(worst, err)
    print(f"\n{version}: {len(files)} files, {total:,d} notes, max onset error {1000 * worst:.2f} ms")
    assert total > 1000
