"""Chapter 11's musical statistics: hand-made grids with known counts, and Bach against a shuffle."""
import numpy as np
import pytest

from musictx_lite.io.stats import (
    RANGES,
    chorale_stats,
    harmony_changes,
    out_of_range,
    parallels,
    pitch_class_histogram,
    total_variation,
)

A = [67, 64, 60, 48]          # G4 E4 C4 C3: soprano and tenor a fifth apart


def grid(*rows) -> np.ndarray:
    return np.array(rows, dtype=np.int64)


def test_a_parallel_fifth_is_counted_once_however_long_the_chords_are():
    g = grid(A, A, [69, 64, 62, 48], [69, 64, 62, 48])      # S and T up a tone, a fifth apart; A, B hold
    assert len(harmony_changes(g)) == 2
    assert parallels(g) == {"fifths": 1, "octaves": 0, "motions": 1}
    compound = grid([79, 64, 60, 48], [81, 64, 62, 48])     # a twelfth (19 semitones) to a twelfth
    assert parallels(compound) == {"fifths": 1, "octaves": 0, "motions": 1}
    down = grid([69, 64, 62, 48], A)
    assert parallels(down)["fifths"] == 1


def test_parallel_octaves_and_unisons():
    assert parallels(grid([72, 64, 55, 48], [74, 64, 55, 50])) == {"fifths": 0, "octaves": 1, "motions": 1}
    unison = grid([72, 60, 60, 48], [72, 62, 62, 48])       # A and T in unison, both up
    assert parallels(unison) == {"fifths": 0, "octaves": 1, "motions": 1}
    # S, A and B all up a tone over the held tenor: S-B octaves, A-B fifths, S-A a compound fourth (not counted)
    three = grid([72, 55, 64, 48], [74, 57, 64, 50])
    assert parallels(three) == {"fifths": 1, "octaves": 1, "motions": 3}


def test_what_is_not_a_parallel():
    contrary = grid(A, [72, 64, 53, 48])                    # fifth to twelfth, S up and T down
    assert parallels(contrary) == {"fifths": 0, "octaves": 0, "motions": 1}
    repeated = grid(A, A, A, A)                             # a fifth held or repeated: no motion at all
    assert parallels(repeated) == {"fifths": 0, "octaves": 0, "motions": 0}
    direct = grid([64, 67, 59, 48], [67, 67, 60, 48])       # a fourth into a fifth by similar motion
    assert parallels(direct) == {"fifths": 0, "octaves": 0, "motions": 1}
    oblique = grid(A, [67, 64, 62, 48])                     # only T moves
    assert parallels(oblique)["motions"] == 0
    rest = grid(A, [-1, 64, 62, 48], [69, 64, 64, 48])      # S rests between the fifths: no motion of S-T
    assert parallels(rest) == {"fifths": 0, "octaves": 0, "motions": 0}


def test_chorale_stats_rates_are_per_voice_pair_motion():
    g = grid(A, [69, 64, 62, 48], [72, 64, 53, 48])         # a parallel fifth, then contrary fifths
    s = chorale_stats(g)
    assert s["parallel_fifths"] == 0.5 and s["parallel_octaves"] == 0.0
    pooled = chorale_stats([g, grid(A, A)])                 # pooled over the list: no new motion
    assert pooled["parallel_fifths"] == 0.5


def test_crossings_and_range():
    crossed = grid([60, 64, 55, 48], [72, 64, 55, 48])      # alto above soprano at the first step
    assert chorale_stats(crossed)["crossings"] == pytest.approx(1 / 6)
    assert RANGES["soprano"] == (60, 79) and RANGES["bass"] == (40, 60)
    assert out_of_range(grid([79, 74, 67, 40], [60, 55, 48, 60])) == (0, 8)   # the edges are inside
    assert out_of_range(grid([80, 54, 47, 61])) == (4, 4)                      # one past every edge
    high = grid([84, 64, 55, 48], [84, 64, 55, 48], [72, 64, 55, 48])          # one long C6: one note
    assert out_of_range(high) == (1, 5)
    assert chorale_stats(high)["out_of_range"] == pytest.approx(0.2)


def test_interval_histogram_distance():
    octaves = grid([72, 60, 48, 36], [74, 62, 50, 38])      # every upper voice an octave class above the bass
    fifths = grid([67, 55, 67, 48], [69, 57, 69, 50])       # every upper voice a fifth class above it
    h = pitch_class_histogram(octaves)
    assert h[0] == 1.0 and pitch_class_histogram(fifths)[7] == 1.0
    assert total_variation(h, pitch_class_histogram(fifths)) == 1.0
    assert chorale_stats(octaves, reference_pcs=h)["above_bass_distance"] == 0.0
    assert chorale_stats(fifths, reference_pcs=h)["above_bass_distance"] == 1.0
    half = grid([72, 60, 48, 36], [67, 55, 67, 48])
    assert total_variation(pitch_class_histogram(half), h) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="12-bin"):
        chorale_stats(octaves, reference_pcs=np.ones(7))


def test_intervals_above_the_bass_ignore_the_key(chorales):
    g = chorales.valid[0].pitches
    up = np.where(g >= 0, g + 6, -1)                        # the same chorale a tritone higher
    np.testing.assert_allclose(pitch_class_histogram(up), pitch_class_histogram(g))
    raw = total_variation(pitch_class_histogram(up, above_bass=False), pitch_class_histogram(g, above_bass=False))
    assert raw > 0.3                                        # the raw histogram moves with the key
    assert chorale_stats(up)["above_bass_distance"] == pytest.approx(chorale_stats(g)["above_bass_distance"])


def test_bach_has_few_parallels_and_a_shuffle_many(chorales):
    bach = [p.pitches for p in chorales.valid]
    rng = np.random.default_rng(0)
    shuffled = [g[rng.permutation(len(g))] for g in bach]   # Bach's own chords in a random order
    voices = [np.stack([g[rng.permutation(len(g)), v] for v in range(4)], 1) for g in bach]
    s, c, v = chorale_stats(bach), chorale_stats(shuffled), chorale_stats(voices)
    assert s["parallel_fifths"] + s["parallel_octaves"] < 0.005
    assert c["parallel_fifths"] > 5 * s["parallel_fifths"] and c["parallel_octaves"] > 5 * s["parallel_octaves"]
    assert s["crossings"] < 0.02 and v["crossings"] > 2 * s["crossings"]
    assert s["out_of_range"] < 0.02
    assert s["above_bass_distance"] < 0.05 < 0.2 < v["above_bass_distance"]     # each voice shuffled alone: no harmony


def test_bad_input():
    with pytest.raises(ValueError, match=r"\(steps, 4\)"):
        chorale_stats([np.zeros((3, 3), dtype=int)])
    with pytest.raises(ValueError, match="no grids"):
        chorale_stats([])
    with pytest.raises(ValueError, match="no sounding"):
        pitch_class_histogram(grid([-1, -1, -1, -1]))


def test_onset_positions_count_where_notes_start():
    from musictx_lite.io.stats import onset_positions

    # soprano: a half note, then four 16ths; the other voices rest
    g = np.full((12, 4), -1)
    g[0:8, 0] = 60
    g[8:12, 0] = [62, 64, 65, 67]
    got = onset_positions(g)
    assert got["onsets"] == 5 and got["on_beat"] == pytest.approx(2 / 5)
    assert got["half_beat"] == pytest.approx(1 / 5) and got["odd_16th"] == pytest.approx(2 / 5)
    assert got["off_beat"] == pytest.approx(3 / 5)
    shifted = onset_positions(g, start=1)                # one step later in its piece: every position moves
    assert shifted["on_beat"] == pytest.approx(1 / 5) and shifted["odd_16th"] == pytest.approx(3 / 5)
    with pytest.raises(ValueError, match="no notes"):
        onset_positions(np.full((4, 4), -1))


def test_bootstrap_interval_brackets_the_pooled_value_and_narrows_with_more_pieces():
    from musictx_lite.io.stats import bootstrap_interval, onset_positions

    rng = np.random.default_rng(0)
    grids = [rng.integers(60, 64, (32, 4)) for _ in range(40)]
    stat = lambda gs: onset_positions(gs)["odd_16th"]
    lo, hi = bootstrap_interval(grids, stat, n=200)
    assert lo <= stat(grids) <= hi
    lo2, hi2 = bootstrap_interval(grids[:8], stat, n=200)
    assert hi2 - lo2 > hi - lo
    assert bootstrap_interval([grids[0]], stat, n=50) == (stat([grids[0]]), stat([grids[0]]))


def test_rhythm_rows_count_onsets_and_lengths():
    from musictx_lite.io.stats import STATS, note_lengths, onset_positions

    g = np.full((12, 4), -1)
    g[0:8, 0] = 60                                       # soprano: a half note, then four 16ths
    g[8:12, 0] = [62, 64, 65, 67]
    g[:, 3] = 48                                         # bass: one note 12 steps long
    assert sorted(note_lengths(g).tolist()) == [1, 1, 1, 1, 8, 12]
    s = chorale_stats(g)
    assert list(s) == list(STATS)
    assert s["sixteenths"] == pytest.approx(4 / 6) and s["mean_length"] == pytest.approx(24 / 6)
    on = onset_positions(g, start=3)
    got = chorale_stats(g, start=3)
    assert all(got[k] == pytest.approx(on[k]) for k in ("on_beat", "half_beat", "odd_16th"))
    assert got["on_beat"] != pytest.approx(s["on_beat"])           # the metre moves with the start


def test_crossings_are_one_count_for_every_chapter(chorales):
    from musictx_lite.io.stats import crossings, voice_stats

    assert crossings(grid([60, 64, 55, 48], [72, 64, 55, 48])) == (1, 6)
    assert crossings(grid([60, -1, 55, 48])) == (0, 1)                  # only T-B has both voices
    bach = [p.pitches for p in chorales.valid]
    assert voice_stats(bach)["crossings"] == pytest.approx(chorale_stats(bach)["crossings"])


def test_stats_intervals_bracket_every_pooled_statistic_and_narrow_with_more_pieces(chorales):
    from musictx_lite.io.stats import STATS, bootstrap_interval, stats_intervals

    bach = [p.pitches for p in chorales.valid]
    row, ci = chorale_stats(bach), stats_intervals(bach, n=300)
    assert list(ci) == list(STATS)
    for k in STATS:
        assert ci[k][0] <= row[k] <= ci[k][1], k
    few = stats_intervals(bach[:5], n=300)
    assert few["on_beat"][1] - few["on_beat"][0] > ci["on_beat"][1] - ci["on_beat"][0]
    # the same resampling as the generic bootstrap over pieces, up to the resampling noise
    lo, hi = bootstrap_interval(bach, lambda gs: chorale_stats(gs)["crossings"], n=300)
    assert abs(lo - ci["crossings"][0]) < 0.5 * (hi - lo) and abs(hi - ci["crossings"][1]) < 0.5 * (hi - lo)
    one = stats_intervals([bach[0]], n=20)
    assert all(one[k] == pytest.approx((chorale_stats([bach[0]])[k],) * 2) for k in STATS)
    with pytest.raises(ValueError, match="no notes"):
        chorale_stats([np.full((4, 4), -1)])


def test_format_table_prints_rates_in_percent_and_intervals_under_their_row():
    from musictx_lite.io.stats import HARMONY, RHYTHM, format_table

    g = grid(A, [69, 64, 62, 48], [72, 64, 53, 48])
    row = chorale_stats(g)
    ci = {k: (0.25, 0.75) for k in row}
    text = format_table({"one": row}, HARMONY, {"one": ci}).splitlines()
    assert len(text) == 3 and text[0].split() == ["crossed", "par.", "5ths", "par.", "8ves", "out", "of",
                                                  "range", "above", "bass"]
    assert text[1].split()[1:3] == ["0.00%", "50.00%"] and text[2].split()[-1] == "0.250-0.750"
    assert text[2].split()[2] == "25.00-75.00%"
    assert format_table({"one": row}, RHYTHM).splitlines()[1].split()[-1] == f"{row['mean_length']:.2f}"


def test_repeat_lags_find_a_bar_that_comes_back():
    """20 steps copied 50 steps later: the steps whose whole bar before them is copied too (4 of them)
    continue a repeat at lag 50; every other step continues none."""
    from musictx_lite.io.stats import repeat_lags

    g = np.stack([np.arange(100) % 97 + 30 + v for v in (30, 20, 10, 0)], axis=1)   # no step repeats
    g[60:80] = g[10:30]
    lags = repeat_lags([g])
    assert lags["33-64"] == pytest.approx(4 / 100) and lags["none"] == pytest.approx(96 / 100)
    assert lags["1-32"] == lags["65-128"] == lags[">128"] == 0
    g[76] = -1                                              # break the copy: steps 76-79 lose it
    assert repeat_lags([g])["none"] == 1
    held = np.tile(np.array([[67, 64, 60, 48]]), (40, 1))  # one chord held: every step repeats its neighbour
    assert repeat_lags([held])["1-32"] == pytest.approx(23 / 40)   # steps 17..39 (a bar before t - 1)


@pytest.mark.parametrize("chord, complete", [
    ((60, 64, 67, 48), True),            # C major, root doubled in the bass
    ((67, 64, 60, 52), True),            # C major, first inversion
    ((71, 65, 62, 55), True),            # G7, complete
    ((72, 64, 60, 48), False),           # C and E only: the fifth is missing
    ((69, 65, 60, 50), True),            # D F A C: D minor 7th
    ((68, 65, 62, 47), True),            # B D F Ab: diminished 7th
    ((61, 60, 59, 58), False),           # a cluster
    ((72, 67, 64, -1), True),            # the sounding notes are read (chord_counts skips a beat with a rest)
])
def test_complete_chord_names_the_triads_and_seventh_chords(chord, complete):
    from musictx_lite.io.stats import complete_chord

    assert complete_chord(chord) == complete


def test_chord_counts_read_only_the_beats_with_all_four_voices():
    from musictx_lite.io.stats import chord_counts, complete_chords

    grid = np.array([[72, 67, 64, 48]] * 4 + [[72, 65, 64, 48]] * 4 + [[72, 67, 64, -1]] * 4)
    assert chord_counts(grid) == (1, 2)          # beat 0 complete, beat 1 (C F E C) not, beat 2 has a rest
    assert chord_counts(grid, start=1) == (1, 2)  # beats at steps 3 and 7: one of each
    assert complete_chords([grid, grid[:4]]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        complete_chords([grid[8:]])
