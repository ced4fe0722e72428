"""Judging a harmonisation as a teacher of harmony does: the rules of four-part writing, the chords, the key and
the cadence, each a count per piece, pooled over pieces, with a bootstrap interval (chapter 12).

Notebook: notebooks/12_harmonise.ipynb

Every function reads (steps, 4) grids, S A T B, MIDI pitches on the 16th grid, -1 for rest; the soprano is the
melody, given, so what is judged is what was added under it. The statistics (``HARMONY_STATS``), each a rate:

- ``parallel_fifths``, ``parallel_octaves``: consecutive fifths (octaves, unisons) by similar motion, per
  voice-pair motion (``stats.parallels``: both voices of a pair sound in two consecutive chords and both move);
- ``contrary_fifths``, ``contrary_octaves``: the same perfect interval reached again by contrary motion;
- ``crossings``: adjacent voice pairs sounding crossed, per pair sounding (``stats.crossings``);
- ``out_of_range``: alto, tenor and bass notes outside their range (``stats.RANGES``), per note;
- ``spacing``: steps where the alto is more than an octave below the soprano or the tenor more than an octave
  below the alto, per step where both voices of the pair sound;
- ``complete_chords``: quarter-note beats whose four voices sound a complete triad or seventh chord
  (``stats.complete_chord``), per beat with all four sounding;
- ``outside_key``: alto, tenor and bass notes whose pitch class is outside the key (``key_of``, the melody's, by
  the Krumhansl-Schmuckler key finder): the major scale, or the minor with its raised sixth and seventh, per note;
- ``final_complete``: the last chord with all four voices sounding is a complete major or minor triad;
- ``final_root``: ... and its root is that of ``reference``'s final chord (Bach's, for the same melody; or the
  tonic of the melody's key, for a new tune);
- ``final_quality``: ... and its quality (major, minor) is the reference's too: his Picardy thirds count.
"""
from __future__ import annotations

import numpy as np

from .midi import notes_of
from .stats import RANGES, TRIADS, complete_chord, crossings, harmony_changes, parallels

HARMONY_STATS = ("parallel_fifths", "parallel_octaves", "contrary_fifths", "contrary_octaves", "crossings",
                 "out_of_range", "spacing", "complete_chords", "outside_key", "final_complete", "final_root",
                 "final_quality")
HEADS = {"parallel_fifths": "par. 5ths", "parallel_octaves": "par. 8ves", "contrary_fifths": "contr. 5ths",
         "contrary_octaves": "contr. 8ves", "crossings": "crossed", "out_of_range": "range", "spacing": "spacing",
         "complete_chords": "complete", "outside_key": "off key", "final_complete": "final full",
         "final_root": "final root", "final_quality": "final qual."}
# each statistic: (numerator, denominator) of the per-piece counts below
RATIO = {"parallel_fifths": ("fifths", "motions"), "parallel_octaves": ("octaves", "motions"),
         "contrary_fifths": ("contrary_fifths", "motions"), "contrary_octaves": ("contrary_octaves", "motions"),
         "crossings": ("crossed", "pairs"), "out_of_range": ("outside", "notes"), "spacing": ("wide", "spaced"),
         "complete_chords": ("complete", "beats"), "outside_key": ("off_key", "notes"),
         "final_complete": ("final_complete", "finals"), "final_root": ("final_root", "finals"),
         "final_quality": ("final_quality", "finals")}
COUNTS = tuple(dict.fromkeys(k for pair in RATIO.values() for k in pair))
MAJOR, MINOR = (0, 2, 4, 5, 7, 9, 11), (0, 2, 3, 5, 7, 8, 9, 10, 11)   # minor: natural, raised 6th and 7th


def final_chord(grid: np.ndarray) -> tuple[int | None, str | None, bool]:
    """(root pitch class, quality, complete) of the last chord in which all four voices sound. Complete: its
    pitch classes are exactly a major or minor triad's, and that gives the root and quality. Otherwise the
    bass is taken as the root, and the quality is the third above it where one sounds (None where none does)."""
    g = np.asarray(grid)
    full = np.flatnonzero((g >= 0).all(1))
    if len(full) == 0:
        return None, None, False
    chord = g[full[-1]]
    pcs = {int(p) % 12 for p in chord}
    for quality in ("major", "minor"):
        for root in range(12):
            if pcs == {(root + i) % 12 for i in TRIADS[quality]}:
                return root, quality, True
    root = int(chord[3]) % 12
    third = {4: "major", 3: "minor"}
    quality = next((third[i] for i in (4, 3) if (root + i) % 12 in pcs), None)
    return root, quality, False


# Aarden and Essen's key profiles (the weights music21's ``analyze("key")`` uses; humdrum's keycor): how strongly
# each scale degree, from the tonic up, belongs to a major (minor) key
AARDEN_MAJOR = (17.7661, 0.145624, 14.9265, 0.160186, 19.8049, 11.3587, 0.291248, 22.062, 0.145624, 8.15494,
                0.232998, 4.95122)
AARDEN_MINOR = (18.2648, 0.737619, 14.0499, 16.8599, 0.702494, 14.4362, 0.702494, 18.6161, 4.56621, 1.93186,
                7.37619, 1.75623)


def key_of(melody: np.ndarray) -> tuple[int, str]:
    """(tonic pitch class, "major" or "minor") of a melody (steps,) of MIDI pitches, -1 for rest: the
    Krumhansl-Schmuckler key finder with Aarden and Essen's profiles. The melody's pitch classes, each weighted by
    the steps it sounds, are correlated (Pearson) with each of the 24 profiles rotated to its tonic; the best
    correlation wins, the lower pitch class and then major on a tie. The Play page's JavaScript does the same."""
    melody = np.asarray(melody)
    sounding = melody[melody >= 0]
    if len(sounding) == 0:
        raise ValueError("a melody with no notes has no key")
    hist = np.bincount(sounding % 12, minlength=12).astype(float)
    best, out = -np.inf, (0, "major")
    for tonic in range(12):
        for mode, profile in (("major", AARDEN_MAJOR), ("minor", AARDEN_MINOR)):
            r = np.corrcoef(hist, np.roll(profile, tonic))[0, 1] if hist.std() > 0 else 0.0
            if r > best + 1e-12:
                best, out = r, (tonic, mode)
    return out


def scale(tonic: int, mode: str) -> set[int]:
    """The pitch classes that are in the key: the major scale, or the minor with raised sixth and seventh."""
    return {(tonic + i) % 12 for i in (MAJOR if mode == "major" else MINOR)}


def spacing(grid: np.ndarray) -> tuple[int, int]:
    """(steps where S-A or A-T is wider than an octave, counted per pair; pairs with both voices sounding)."""
    g = np.asarray(grid)
    upper, lower = g[:, :2], g[:, 1:3]                               # S-A, A-T
    both = (upper >= 0) & (lower >= 0)
    return int(((upper - lower) > 12)[both].sum()), int(both.sum())


def contrary_parallels(grid: np.ndarray) -> dict[str, int]:
    """Fifths and octaves reached again by contrary motion: consecutive chords (as ``stats.parallels``), a pair
    of voices that both move, in opposite directions, from a fifth (octave, unison) to the same interval class."""
    h = harmony_changes(grid)
    a, b = h[:-1], h[1:]
    out = {"fifths": 0, "octaves": 0}
    for i in range(4):
        for j in range(i + 1, 4):
            mi, mj = b[:, i] - a[:, i], b[:, j] - a[:, j]
            both = (a[:, i] >= 0) & (a[:, j] >= 0) & (b[:, i] >= 0) & (b[:, j] >= 0) & (mi * mj < 0)
            before, after = np.abs(a[:, i] - a[:, j]) % 12, np.abs(b[:, i] - b[:, j]) % 12
            out["fifths"] += int((both & (before == 7) & (after == 7)).sum())
            out["octaves"] += int((both & (before == 0) & (after == 0)).sum())
    return out


def piece_counts(grid: np.ndarray, key: tuple[int, str], reference: tuple[int | None, str | None],
                 start: int = 0, every: int = 4) -> np.ndarray:
    """(len(COUNTS),) the counts of one harmonisation: ``key`` (tonic, mode) for the notes outside it,
    ``reference`` (root, quality) for its final chord; step t of the grid is step start + t of its piece, and a
    beat falls where start + t is a multiple of ``every`` (``io.midi.beat_steps``: 4 in 4/4 and 3/4, 6 in 6/8;
    a melody with an upbeat of p steps: start = -p)."""
    g = np.asarray(grid, dtype=np.int64)
    par, con = parallels(g), contrary_parallels(g)
    crossed, pairs = crossings(g)
    wide, spaced = spacing(g)
    voices, ranges, in_key = notes_of(g), list(RANGES.values()), scale(*key)
    added = [(ranges[v], voices[v]) for v in (1, 2, 3)]                 # alto, tenor, bass: (range, notes)
    outside = sum(not lo <= p <= hi for (lo, hi), notes in added for *_, p in notes)
    off_key = sum(p % 12 not in in_key for _, notes in added for *_, p in notes)
    beats = g[(start + np.arange(len(g))) % every == 0]
    full = beats[(beats >= 0).all(1)]
    root, quality, complete = final_chord(g)
    complete = complete and quality in ("major", "minor")
    c = {"fifths": par["fifths"], "octaves": par["octaves"], "motions": par["motions"],
         "contrary_fifths": con["fifths"], "contrary_octaves": con["octaves"], "crossed": crossed, "pairs": pairs,
         "outside": outside, "notes": sum(len(notes) for _, notes in added), "wide": wide, "spaced": spaced,
         "complete": sum(complete_chord(r) for r in full), "beats": len(full), "off_key": off_key,
         "final_complete": complete, "final_root": complete and root == reference[0],
         "final_quality": complete and root == reference[0] and quality == reference[1], "finals": 1}
    return np.array([float(c[k]) for k in COUNTS])


def rates(counts: np.ndarray) -> dict[str, float]:
    """The statistics of summed counts (len(COUNTS),)."""
    c = dict(zip(COUNTS, counts))
    return {s: float(c[a] / max(c[b], 1)) for s, (a, b) in RATIO.items()}


def harmony_stats(counts: np.ndarray, n: int = 1000, level: float = 0.95, seed: int = 0) -> dict[str, dict]:
    """Each statistic of per-piece counts (pieces, len(COUNTS)), pooled, with a percentile bootstrap interval over
    pieces: {stat: {"value": v, "low": lo, "high": hi}}."""
    counts = np.asarray(counts, dtype=float)
    if counts.ndim != 2 or len(counts) == 0:
        raise ValueError("harmony_stats needs the counts of at least one piece, (pieces, counts)")
    rng = np.random.default_rng(seed)
    sums = counts[rng.integers(0, len(counts), (n, len(counts)))].sum(1)     # (n, counts)
    boot = np.stack([[rates(s)[k] for k in HARMONY_STATS] for s in sums])   # (n, stats)
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2], axis=0)
    whole = rates(counts.sum(0))
    return {k: {"value": whole[k], "low": float(lo[i]), "high": float(hi[i])} for i, k in enumerate(HARMONY_STATS)}


def known_tunes(train: list[np.ndarray], pieces: list[np.ndarray], n_intervals: int = 12) -> list[bool]:
    """For each of ``pieces`` (melodies, (steps,) MIDI pitches, -1 for rest), is its tune one of the training
    melodies': do its first ``n_intervals`` intervals between successive notes (in any key: intervals are
    transposition-invariant) open a training melody too?"""
    def opening(melody):
        notes = [p for _, _, p in notes_of(np.asarray(melody)[:, None])[0]]
        return tuple(np.diff(notes)[:n_intervals])

    seen = {opening(m) for m in train}
    return [opening(m) in seen for m in pieces]


def format_rows(rows: dict[str, dict], keys=HARMONY_STATS) -> str:
    """A table: one row per setting (name -> ``harmony_stats``), each statistic in percent with its interval."""
    lines = [f"{'':>24s} " + " ".join(f"{HEADS[k]:>19s}" for k in keys)]
    for name, row in rows.items():
        cells = [f"{100 * row[k]['value']:6.2f} [{100 * row[k]['low']:5.2f},{100 * row[k]['high']:6.2f}]"
                 for k in keys]
        lines.append(f"{name:>24s} " + " ".join(f"{c:>19s}" for c in cells))
    return "\n".join(lines)
