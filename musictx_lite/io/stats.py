"""Musical statistics: numbers for "sounds more like Bach", for generated and real chorales.

Notebook: notebooks/11_comparison.ipynb

Every function reads (steps, 4) pitch grids, S A T B, MIDI numbers on the 16th
grid with -1 for rest, as ``decode`` returns them. ``chorale_stats`` gives one
row of numbers for a list of grids (a model's samples, or Bach's held-out
chorales), each computed by one small function here:

- ``crossings``: the share of adjacent voice pairs sounding crossed (``crossings``);
- ``parallel_fifths`` / ``parallel_octaves``: parallels per voice-pair motion (``parallels``);
- ``out_of_range``: the share of notes outside their voice's range (``RANGES``);
- ``above_bass_distance``: the total-variation distance between the histogram of
  intervals above the bass and Bach's (``pitch_class_histogram``);
- rhythm and metre, the first thing a listener hears: where in the beat notes
  start (on the beat, on the half beat, on an odd 16th: ``onset_positions``),
  and how long they last (``note_lengths``).

``repeat_lags`` measures how far back a chorale repeats itself (what a context
must hold to copy it, chapter 11's recipe).

``stats_intervals`` gives each statistic a bootstrap interval over pieces, so
that Bach's reference row (his whole validation set) comes with its spread.
"""
from __future__ import annotations

from functools import lru_cache
from itertools import combinations

import numpy as np

from .midi import notes_of

# Standard SATB ranges, MIDI numbers, inclusive: S C4-G5, A G3-D5, T C3-G4, B E2-C4.
RANGES = {"soprano": (60, 79), "alto": (55, 74), "tenor": (48, 67), "bass": (40, 60)}
FIFTH, OCTAVE = 7, 0          # perfect intervals, in semitones mod 12 (octave: unisons and compound octaves too)


def _grids(grids) -> list[np.ndarray]:
    """One grid or a list of grids -> a list of (steps, 4) int arrays."""
    if isinstance(grids, np.ndarray) and grids.ndim == 2:
        grids = [grids]
    out = [np.asarray(g, dtype=np.int64) for g in grids]
    for g in out:
        if g.ndim != 2 or g.shape[1] != 4:
            raise ValueError(f"expected (steps, 4) pitch grids, got shape {g.shape}")
    return out


def crossings(grid: np.ndarray) -> tuple[int, int]:
    """(adjacent voice pairs crossed, adjacent voice pairs with both voices sounding), over every step.

    The pairs are S-A, A-T and T-B; a pair is crossed when the lower voice sounds above the upper
    one. Chapter 5 (``voice_stats``), chapter 9 and chapter 11 (``stats``) count crossings this way.
    """
    g = np.asarray(grid)
    upper, lower = g[:, :-1], g[:, 1:]
    both = (upper >= 0) & (lower >= 0)
    return int((lower > upper)[both].sum()), int(both.sum())


def voice_stats(pitches: np.ndarray) -> dict[str, float]:
    """How a grid's voices move, in three numbers that chapters 0, 1 and 5 compare with Bach:

    ``moves``: the share of 16th steps at which a sounding voice changes pitch (all voices pooled);
    ``leap``: the mean size, in semitones, of those changes;
    ``crossings``: the share of adjacent voice pairs (S-A, A-T, T-B), both sounding, where the lower
    voice sounds above the upper one.

    ``pitches`` is one grid, or a list of grids (pieces) pooled without joining them.
    """
    grids = [np.asarray(g) for g in pitches] if isinstance(pitches, (list, tuple)) else [np.asarray(pitches)]
    steps, crossed, pairs = [], 0, 0
    for g in grids:
        both = (g[1:] >= 0) & (g[:-1] >= 0)
        steps.append(np.abs(np.diff(g, axis=0))[both])
        c, n = crossings(g)
        crossed, pairs = crossed + c, pairs + n
    step = np.concatenate(steps)
    return {"moves": float((step > 0).mean()) if step.size else 0.0,
            "leap": float(step[step > 0].mean()) if (step > 0).any() else 0.0,
            "crossings": crossed / pairs if pairs else 0.0}


def harmony_changes(grid: np.ndarray) -> np.ndarray:
    """The grid's chords with immediate repeats dropped: (changes, 4).

    A held or repeated chord is one harmony; a new row starts wherever any
    voice changes (a new pitch, or a rest starting or ending).
    """
    g = np.asarray(grid)
    if len(g) == 0:
        return g
    keep = np.r_[True, (g[1:] != g[:-1]).any(axis=1)]
    return g[keep]


def parallels(grid: np.ndarray) -> dict[str, int]:
    """Parallel fifths and octaves between every pair of voices, and the motions they are counted among.

    Over consecutive harmony changes (``harmony_changes``) a, b and every pair of
    voices i, j (six pairs): a *voice-pair motion* is one where both voices
    sound in a and in b and both change pitch. It is a parallel fifth (octave)
    when both move in the same direction and the interval |a_i - a_j| mod 12
    and |b_i - b_j| mod 12 are both 7 (both 0: octaves, unisons and compound
    octaves). Contrary or oblique motion, a repeated chord, and motion into a
    perfect interval from another interval are not counted.

    Returns {"fifths": n, "octaves": n, "motions": n}; the rate of parallels
    is fifths / motions (octaves / motions).
    """
    h = harmony_changes(grid)
    a, b = h[:-1], h[1:]                                         # (changes - 1, 4): from, to
    fifths = octaves = motions = 0
    for i, j in combinations(range(4), 2):
        move_i, move_j = b[:, i] - a[:, i], b[:, j] - a[:, j]
        both = (a[:, i] >= 0) & (a[:, j] >= 0) & (b[:, i] >= 0) & (b[:, j] >= 0) & (move_i != 0) & (move_j != 0)
        same = both & (np.sign(move_i) == np.sign(move_j))
        before, after = np.abs(a[:, i] - a[:, j]) % 12, np.abs(b[:, i] - b[:, j]) % 12
        fifths += int((same & (before == FIFTH) & (after == FIFTH)).sum())
        octaves += int((same & (before == OCTAVE) & (after == OCTAVE)).sum())
        motions += int(both.sum())
    return {"fifths": fifths, "octaves": octaves, "motions": motions}


def out_of_range(grid: np.ndarray) -> tuple[int, int]:
    """(notes outside their voice's range in ``RANGES``, all notes) of a grid.

    A note is a run of one pitch in one voice (``midi.notes_of``), so a long
    note counts once, like a short one.
    """
    outside = total = 0
    for (lo, hi), notes in zip(RANGES.values(), notes_of(grid)):
        pitches = np.array([p for _, _, p in notes])
        outside += int(((pitches < lo) | (pitches > hi)).sum())
        total += len(pitches)
    return outside, total


def pitch_class_histogram(grids, above_bass: bool = True) -> np.ndarray:
    """(12,) the share of each pitch class over every 16th step of ``grids`` (one grid or a list), sums to 1.

    With ``above_bass`` (the default, and what ``chorale_stats`` uses), the
    pitch classes of soprano, alto and tenor are counted as intervals above the
    bass sounding at the same step, (p - bass) mod 12: 0 octave, 4 major third,
    7 fifth, 6 tritone... This is key-free: the chorales are in many keys, and a
    raw histogram (``above_bass=False``: p mod 12 of all four voices) measures
    which keys a set of pieces is in as much as how it sounds. The intervals
    above the bass measure the harmony itself (consonant thirds, fifths and
    sixths against dissonant seconds, sevenths and tritones) without guessing
    any key. Steps where the bass rests are skipped. A longer note weighs more.
    """
    counts = np.zeros(12)
    for g in _grids(grids):
        if above_bass:
            upper, bass = g[:, :3], g[:, 3:]
            pcs = ((upper - bass) % 12)[(upper >= 0) & (bass >= 0)]
        else:
            pcs = g[g >= 0] % 12
        counts += np.bincount(pcs, minlength=12)
    if counts.sum() == 0:
        raise ValueError("no sounding notes to count" + (" above a sounding bass" if above_bass else ""))
    return counts / counts.sum()


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    """Total-variation distance 1/2 sum |p - q| of two histograms, in [0, 1]: 0 equal, 1 disjoint.

    It is the largest difference in probability that p and q give to any set of bins.
    """
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    return float(0.5 * np.abs(p / p.sum() - q / q.sum()).sum())


@lru_cache(maxsize=1)
def bach_histogram() -> np.ndarray:
    """The default reference: ``pitch_class_histogram`` of the embedded training chorales."""
    from .data import load_chorales

    return pitch_class_histogram([p.pitches for p in load_chorales().train])


def note_lengths(grid: np.ndarray) -> np.ndarray:
    """The length in 16th steps of every note of a grid (a note: a run of one pitch, ``midi.notes_of``)."""
    return np.array([end - start for notes in notes_of(grid) for start, end, _ in notes], dtype=np.int64)


# What ``chorale_stats`` reports, in its order: harmony and voicing, then rhythm.
STATS = ("crossings", "parallel_fifths", "parallel_octaves", "out_of_range", "above_bass_distance",
         "on_beat", "half_beat", "odd_16th", "sixteenths", "mean_length")
HARMONY, RHYTHM = STATS[:5], STATS[5:]
# Short column heads for tables of ``STATS``.
HEADS = {"crossings": "crossed", "parallel_fifths": "par. 5ths", "parallel_octaves": "par. 8ves",
         "out_of_range": "out of range", "above_bass_distance": "above bass", "on_beat": "on beat",
         "half_beat": "half beat", "odd_16th": "odd 16th", "sixteenths": "16th notes", "mean_length": "mean len."}
# One piece's counts, from which every statistic of a set of pieces is a ratio of sums (or, for the
# histogram, a distance of summed counts): what lets ``stats_intervals`` resample pieces cheaply.
_COUNTS = ("fifths", "octaves", "motions", "crossed", "pairs", "outside", "notes",
           "at_0", "at_1", "at_2", "at_3", "sixteenths", "steps") + tuple(f"above_bass_{i}" for i in range(12))


def _onset_counts(grid: np.ndarray, start: int) -> np.ndarray:
    """(4,) note onsets of a grid by position in the beat, (start + t) mod 4 (``midi.notes_of``)."""
    counts = np.zeros(4)
    for voice in notes_of(grid):
        for t0, _, _ in voice:
            counts[(start + t0) % 4] += 1
    return counts


def _piece_counts(grid: np.ndarray, start: int) -> np.ndarray:
    """(len(_COUNTS),) the counts of one grid whose first step is step ``start`` of its piece."""
    par = parallels(grid)
    crossed, pairs = crossings(grid)
    outside, notes = out_of_range(grid)
    onsets = _onset_counts(grid, start)
    lengths = note_lengths(grid)
    upper, bass = grid[:, :3], grid[:, 3:]
    above = np.bincount(((upper - bass) % 12)[(upper >= 0) & (bass >= 0)], minlength=12)
    return np.r_[par["fifths"], par["octaves"], par["motions"], crossed, pairs, outside, notes,
                 onsets, (lengths == 1).sum(), lengths.sum(), above].astype(float)


def _rates(c: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """(..., len(STATS)) the statistics of summed counts ``c`` (..., len(_COUNTS))."""
    k = {name: c[..., i] for i, name in enumerate(_COUNTS)}
    div = lambda a, b: a / np.maximum(b, 1)
    above = c[..., len(_COUNTS) - 12:]
    above = above / np.maximum(above.sum(-1, keepdims=True), 1)
    onsets = k["at_0"] + k["at_1"] + k["at_2"] + k["at_3"]
    return np.stack([div(k["crossed"], k["pairs"]), div(k["fifths"], k["motions"]), div(k["octaves"], k["motions"]),
                     div(k["outside"], k["notes"]), 0.5 * np.abs(above - ref / ref.sum()).sum(-1),
                     div(k["at_0"], onsets), div(k["at_2"], onsets), div(k["at_1"] + k["at_3"], onsets),
                     div(k["sixteenths"], k["notes"]), div(k["steps"], k["notes"])], axis=-1)


def _counts(grids, start: int, reference_pcs) -> tuple[np.ndarray, np.ndarray]:
    grids = _grids(grids)
    if not grids:
        raise ValueError("no grids to measure")
    ref = bach_histogram() if reference_pcs is None else np.asarray(reference_pcs, dtype=float)
    if ref.shape != (12,):
        raise ValueError(f"reference_pcs must be a 12-bin histogram, got shape {ref.shape}")
    counts = np.stack([_piece_counts(g, start) for g in grids])           # (pieces, counts)
    if counts[:, _COUNTS.index("notes")].sum() == 0:
        raise ValueError("no notes to measure")
    if counts[:, -12:].sum() == 0:
        raise ValueError("no sounding notes to count above a sounding bass")
    return counts, ref


def chorale_stats(grids, reference_pcs: np.ndarray | None = None, start: int = 0) -> dict[str, float]:
    """One row of musical statistics (``STATS``) for a list of grids (or one grid).

    The grids are pooled: each rate is a total count over all of them divided
    by a total, so a long piece weighs more than a short one. Step ``t`` of a
    grid is step ``start + t`` of its piece (a continuation after a prompt).

    Harmony and voicing:

    - ``crossings``: the share of adjacent voice pairs, both sounding, that are crossed (``crossings``);
    - ``parallel_fifths``, ``parallel_octaves``: parallels per voice-pair motion (see ``parallels``);
    - ``out_of_range``: the share of notes outside their voice's textbook range in ``RANGES`` (Bach
      himself goes outside now and then: compare with his rate, not with 0);
    - ``above_bass_distance``: the total-variation distance, in [0, 1], between the pooled histogram
      of the intervals of the upper voices above the bass (``pitch_class_histogram``) and
      ``reference_pcs`` (a 12-bin histogram of the same kind; default: Bach's training chorales,
      ``bach_histogram``). Few notes give a noisy histogram and a larger distance: compare sets of
      similar total length.

    Rhythm and metre (``onset_positions``, ``note_lengths``):

    - ``on_beat``, ``half_beat``, ``odd_16th``: the shares of note onsets on the quarter-note beat, on
      its half, and on the 16ths between;
    - ``sixteenths``: the share of notes one 16th long; ``mean_length``: the mean note length in 16ths.
    """
    counts, ref = _counts(grids, start, reference_pcs)
    return dict(zip(STATS, _rates(counts.sum(0), ref).tolist()))


def stats_intervals(grids, reference_pcs: np.ndarray | None = None, start: int = 0, n: int = 1000,
                    level: float = 0.95, seed: int = 0) -> dict[str, tuple[float, float]]:
    """``bootstrap_interval`` for every statistic of ``chorale_stats`` at once: resample the pieces
    with replacement ``n`` times and keep the central ``level`` share of each statistic. It says how
    much a pooled row depends on which pieces were measured (not how a model varies across seeds)."""
    counts, ref = _counts(grids, start, reference_pcs)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(counts), (n, len(counts)))                   # (n, pieces)
    values = _rates(counts[idx].sum(1), ref)                               # (n, stats)
    lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return {name: (float(a), float(b)) for name, a, b in zip(STATS, lo, hi)}


def onset_positions(grids, start: int = 0) -> dict[str, float]:
    """Where notes start in the beat, pooled over ``grids``: shares of all note onsets.

    A quarter-note beat is 4 steps of the 16th grid, and step ``t`` of a grid is
    step ``start + t`` of its piece (a continuation after a prompt of ``start``
    steps). An onset (the first step of a note, ``midi.notes_of``: a pitch
    repeated without a break is one note) falls ``on_beat`` at (start + t) mod 4 = 0,
    on the ``half_beat`` at 2, and on an ``odd_16th`` at 1 or 3; ``off_beat`` is
    half beats and odd 16ths together. Also ``onsets``, their number.
    """
    counts = sum((_onset_counts(g, start) for g in _grids(grids)), np.zeros(4))
    n = counts.sum()
    if n == 0:
        raise ValueError("no notes to measure")
    return {"on_beat": float(counts[0] / n), "half_beat": float(counts[2] / n),
            "odd_16th": float((counts[1] + counts[3]) / n), "off_beat": float((counts[1] + counts[2] + counts[3]) / n),
            "onsets": int(n)}


def repeat_lags(grids, bar: int = 16, edges=(32, 64, 128)) -> dict[str, float]:
    """How far back a chorale repeats itself: what a model's context must hold to copy it.

    Step ``t`` *continues a repeat at lag L* when the bar before it and the step itself,
    steps t - bar .. t in all four voices, are the same as steps t - L - bar .. t - L.
    Each step counts once, at its nearest such L. The result is the share of all steps
    (pooled over ``grids``) whose nearest L falls in each bin of ``edges`` (in 16ths:
    ``"1-32"``, ``"33-64"``, ...), and ``"none"`` for steps that continue no repeat. A
    token model sees 4 tokens per step, so a context of C tokens looks C / 4 steps back.
    """
    bins = [f"{lo + 1}-{hi}" for lo, hi in zip((0, *edges), edges)] + [f">{edges[-1]}"]
    counts, total = np.zeros(len(bins)), 0
    for g in _grids(grids):
        n = len(g)
        total += n
        nearest = np.zeros(n, dtype=int)                        # 0: no repeat found yet
        for L in range(1, n - bar):
            same = np.concatenate([np.zeros(L, bool), (g[L:] == g[:-L]).all(1)])   # step t equals step t - L
            run = np.concatenate([[0], np.cumsum(same)])
            t = np.arange(L + bar, n)                           # steps with a whole bar before t - L
            hit = run[t + 1] - run[t - bar] == bar + 1           # steps t - bar .. t all equal
            nearest[t[hit & (nearest[t] == 0)]] = L
        found = nearest[nearest > 0]
        counts += np.bincount(np.searchsorted(edges, found), minlength=len(bins))
    if total == 0:
        raise ValueError("no steps to measure")
    return {**{b: float(c / total) for b, c in zip(bins, counts)}, "none": float(1 - counts.sum() / total)}


def bootstrap_interval(grids, stat, n: int = 1000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """A percentile bootstrap interval for ``stat(grids) -> float`` over pieces: resample the grids (pieces)
    with replacement ``n`` times, and return the central ``level`` share of the values. It says how much a
    pooled statistic depends on which pieces were measured."""
    grids = _grids(grids)
    if not grids:
        raise ValueError("no grids to resample")
    rng = np.random.default_rng(seed)
    values = [stat([grids[i] for i in rng.integers(0, len(grids), len(grids))]) for _ in range(n)]
    lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def format_table(rows: dict[str, dict], keys=STATS, intervals: dict[str, dict] | None = None) -> str:
    """A table of ``chorale_stats`` rows (name -> row) for the statistics ``keys``: rates in percent (two
    decimals: Bach's rare events are a few hundredths of a percent),
    the distance to three decimals, lengths in 16ths. ``intervals`` (name -> ``stats_intervals``) adds a
    line under a row with its 95% interval."""
    def cell(k, v):
        return f"{v:.3f}" if k == "above_bass_distance" else f"{v:.2f}" if k == "mean_length" else f"{v:.2%}"

    lines = [f"{'':24s}" + "".join(f"{HEADS[k]:>13s}" for k in keys)]
    for name, row in rows.items():
        lines.append(f"{name[:24]:24s}" + "".join(f"{cell(k, row[k]):>13s}" for k in keys))
        if intervals and name in intervals:
            ci = intervals[name]
            lines.append(f"{'  95% interval':24s}"
                         + "".join(f"{cell(k, ci[k][0]).rstrip('%') + '-' + cell(k, ci[k][1]):>13s}" for k in keys))
    return "\n".join(lines)


# Complete chords, as pitch-class sets above their root: the four triads and five seventh chords of common
# practice. A chord is complete when every one of its tones sounds (in four voices: a triad with one tone
# doubled, or a seventh chord with none).
TRIADS = {"major": (0, 4, 7), "minor": (0, 3, 7), "diminished": (0, 3, 6), "augmented": (0, 4, 8)}
SEVENTHS = {"dominant 7th": (0, 4, 7, 10), "major 7th": (0, 4, 7, 11), "minor 7th": (0, 3, 7, 10),
            "half-diminished 7th": (0, 3, 6, 10), "diminished 7th": (0, 3, 6, 9)}
_CHORDS = {frozenset((r + i) % 12 for i in shape) for shape in (*TRIADS.values(), *SEVENTHS.values())
           for r in range(12)}


def complete_chord(pitches) -> bool:
    """Do the sounding ``pitches`` (MIDI numbers, -1 for rest) form a complete triad or seventh chord
    (``TRIADS``, ``SEVENTHS``): their pitch classes exactly one such chord's, in any inversion and spacing?"""
    pcs = frozenset(int(p) % 12 for p in pitches if p >= 0)
    return pcs in _CHORDS


def chord_counts(grid: np.ndarray, start: int = 0) -> tuple[int, int]:
    """(beats whose four voices sound a complete triad or seventh chord, beats with all four sounding), over
    the quarter-note beats of a grid whose step t is step start + t of its piece ((start + t) mod 4 = 0)."""
    g = np.asarray(grid)
    beats = g[(start + np.arange(len(g))) % 4 == 0]
    full = beats[(beats >= 0).all(1)]
    return sum(complete_chord(row) for row in full), len(full)


def complete_chords(grids, start: int = 0) -> float:
    """The share of beats, pooled over ``grids``, on which the four voices sound a complete triad or seventh
    chord (``chord_counts``): a harmonic statistic that the voice-leading ones above do not see. A beat with
    a voice resting is not counted; a passing dissonance on the beat, an incomplete chord (a triad without
    its fifth, a seventh without its fifth) and a suspension count as not complete."""
    hit, n = np.sum([chord_counts(g, start) for g in _grids(grids)], axis=0)
    if n == 0:
        raise ValueError("no beat with all four voices sounding")
    return float(hit / n)
