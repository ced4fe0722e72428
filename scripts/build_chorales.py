"""Rebuild ``musictx_lite/io/chorales.npz`` from the Bach chorales in music21.

Chapter 0 ("Music as tokens") describes the result. Run from the repository root::

    pip install music21
    python -m scripts.build_chorales

Each four-part chorale of ``music21.corpus.chorales.Iterator()`` becomes a
(steps, 4) array of MIDI pitches, soprano/alto/tenor/bass, on a 16th-note grid,
with -1 for rest. Onsets (where a note starts, as opposed to being held) are
kept beside the pitches so that held and repeated notes can be told apart.
Exact duplicates are dropped. The split is fixed by a seeded permutation of the
sorted chorale names: 60 % train, 20 % valid, 20 % test, the proportions of the
official JSB split.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "musictx_lite" / "io" / "chorales.npz"
STEPS_PER_QUARTER = 4  # 16th-note grid
SPLIT_SEED = 0
SPLIT_FRACTIONS = (0.6, 0.2, 0.2)  # train, valid, test


def part_to_grid(part, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """One music21 part -> (pitches (n_steps,), onsets (n_steps,)) on the 16th grid."""
    pitch = np.full(n_steps, -1, dtype=np.int16)
    onset = np.zeros(n_steps, dtype=bool)
    for n in part.flatten().notes:  # notes and chords, no rests
        start = round(float(n.offset) * STEPS_PER_QUARTER)
        end = round(float(n.offset + n.quarterLength) * STEPS_PER_QUARTER)
        if end <= start:  # grace notes and 32nds that fall between grid points
            continue
        p = max(x.midi for x in n.pitches)  # a chord in one voice: keep its top note
        pitch[start:end] = p
        tied_from_before = n.tie is not None and n.tie.type in ("stop", "continue")
        onset[start] = not tied_from_before
    return pitch, onset


def score_to_grid(score) -> tuple[np.ndarray, np.ndarray] | None:
    """A music21 score -> (pitches (T, 4), onsets (T, 4)), or None if not four parts."""
    if len(score.parts) != 4:
        return None
    n_steps = round(float(score.highestTime) * STEPS_PER_QUARTER)
    cols = [part_to_grid(p, n_steps) for p in score.parts]
    pitch, onset = np.stack([c[0] for c in cols], 1), np.stack([c[1] for c in cols], 1)
    prev = np.vstack([np.full((1, 4), -2), pitch[:-1]])
    return pitch, (pitch >= 0) & (onset | (pitch != prev))  # a tie from a different pitch is a new note


def split_of(names: list[str]) -> np.ndarray:
    """Each sorted name's split: a seeded permutation, 60 % train, 20 % valid, 20 % test."""
    order = np.random.default_rng(SPLIT_SEED).permutation(len(names))
    n_train = round(SPLIT_FRACTIONS[0] * len(names))
    n_valid = round(SPLIT_FRACTIONS[1] * len(names))
    split = np.empty(len(names), dtype="<U5")
    split[order[:n_train]] = "train"
    split[order[n_train:n_train + n_valid]] = "valid"
    split[order[n_train + n_valid:]] = "test"
    return split


def build() -> dict[str, np.ndarray]:
    """Convert every four-part chorale; return the arrays stored in ``chorales.npz``."""
    from music21 import corpus

    pieces: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    seen: set[bytes] = set()
    for name in corpus.chorales.Iterator(returnType="filename"):
        grid = score_to_grid(corpus.parse(name))
        if grid is None:
            continue
        key = grid[0].tobytes()
        if key in seen:  # the same harmonisation stored twice
            continue
        seen.add(key)
        pieces[name.split("/")[-1]] = grid

    names = sorted(pieces)
    split = split_of(names)
    lengths = [len(pieces[n][0]) for n in names]
    return {
        "names": np.array(names),
        "split": split,
        "offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        "pitches": np.concatenate([pieces[n][0] for n in names]).astype(np.int8),
        "onsets": np.concatenate([pieces[n][1] for n in names]),
    }


def main() -> None:
    arrays = build()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    tmp = OUT.with_suffix(".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    tmp.replace(OUT)
    counts = {s: int((arrays["split"] == s).sum()) for s in ("train", "valid", "test")}
    print(f"wrote {OUT} ({OUT.stat().st_size / 1024:.0f} KiB): {counts}", file=sys.stderr)


if __name__ == "__main__":
    main()
