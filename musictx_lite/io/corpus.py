"""Folders of MIDI files as data sets of performances: bad files skipped, splits by piece, a cache.

Notebook: notebooks/13_piano.ipynb

``load_folder`` reads every ``.mid``/``.midi`` file under a folder with ``performance``'s codec.
A file that cannot serve is skipped with a warning (``SkippedFile``) and counted, never fatal:
unreadable or corrupt, empty, drums only, or longer than ``max_hours``. Every file is read once:
its notes and events are cached by the sha256 of its bytes (``cache_root() / "performance"``).

Splits are by piece, never inside one: every performance of a piece lands in the same split, so a
model is never scored on music it trained on. A folder's pieces are its files, ordered by a hash of
their names; ``load_piano_sample`` reads the project's shared sample (one piece, three versions:
``pairs.csv``), ``load_maestro`` MAESTRO v3 with its official split (``maestro``).
"""
from __future__ import annotations

import csv
import hashlib
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import settings
from ..files import atomic_write
from .data import SPLITS, Splits
from .performance import CODEC_VERSION, Performance, read_performance

MAX_HOURS = 2.0                 # a longer file is a recording left running, not a performance
MIDI_SUFFIXES = (".mid", ".midi")


class SkippedFile(UserWarning):
    """A MIDI file left out of a data set, and why."""


@dataclass
class Performances(Splits):
    """The train, valid and test performances of a folder, and the files left out (path, why)."""

    skipped: list[tuple[str, str]] = field(default_factory=list)

    def summary(self) -> str:
        rows = []
        for s in SPLITS:
            ps = self[s]
            hours = sum(p.seconds for p in ps) / 3600
            rows.append(f"{s:5s}: {len(ps):4d} performances, {len(set(p.piece for p in ps)):4d} pieces, "
                        f"{sum(len(p) for p in ps):9,d} events, {hours:5.2f} hours")
        rows.append(f"skipped: {len(self.skipped)} files")
        return f"{self.source}\n" + "\n".join(rows)


def _cache_dir() -> Path:
    return settings.cache_dir() / "performance" / f"v{CODEC_VERSION}"


def read_cached(path: str | os.PathLike, piece: str = "", cache: bool = True) -> Performance:
    """``read_performance``, its notes and events kept in the cache by the sha256 of the file's bytes."""
    path = Path(path)
    name = path.stem
    if not cache:
        return read_performance(path, piece)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    target = _cache_dir() / f"{digest}.npz"
    if target.exists():
        try:
            with np.load(target, allow_pickle=False) as z:
                return Performance(name, z["notes"], z["tokens"], piece or name, str(path))
        except (OSError, ValueError, KeyError):
            target.unlink(missing_ok=True)                  # a damaged cache entry is read again
    perf = read_performance(path, piece)
    target.parent.mkdir(parents=True, exist_ok=True)

    def save(tmp: str) -> None:
        with open(tmp, "wb") as f:
            np.savez(f, notes=perf.notes, tokens=perf.tokens.astype(np.int16))

    atomic_write(target, save)
    return perf


def read_all(paths: list[tuple[Path, str]], max_hours: float = MAX_HOURS, cache: bool = True,
             ) -> tuple[list[Performance], list[tuple[str, str]]]:
    """Read (path, piece) pairs; a file that fails or runs over ``max_hours`` is skipped with a
    ``SkippedFile`` warning. Returns the performances and the (path, why) of those skipped."""
    good, skipped = [], []
    for path, piece in paths:
        try:
            perf = read_cached(path, piece, cache)
            if perf.seconds > max_hours * 3600:
                raise ValueError(f"{path} lasts {perf.seconds / 3600:.1f} hours (more than {max_hours:g})")
        except (ValueError, OSError) as e:
            why = str(e).replace(f"{path}: ", "").replace(f"{path} ", "")
            skipped.append((str(path), why))
            warnings.warn(f"skipped {path}: {why}", SkippedFile, stacklevel=2)
            continue
        good.append(perf)
    return good, skipped


def _order(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def split_by_piece(perfs: list[Performance], valid: float = 0.1, test: float = 0.1
                   ) -> dict[str, list[Performance]]:
    """Train, valid and test performances, whole pieces to each: the pieces ordered by a hash of their
    names, the first ``test`` of them to test, the next ``valid`` to valid (at least one each when
    there are three pieces or more), the rest to train."""
    if not (0 <= valid < 1 and 0 <= test < 1 and valid + test < 1):
        raise ValueError(f"valid and test must be fractions in [0, 1) summing below 1, got {valid}, {test}")
    pieces = sorted({p.piece for p in perfs}, key=_order)
    n = len(pieces)
    n_test = max(round(test * n), 1 if n >= 3 and test > 0 else 0)
    n_valid = max(round(valid * n), 1 if n >= 3 and valid > 0 else 0)
    where = {pc: "test" if i < n_test else "valid" if i < n_test + n_valid else "train"
             for i, pc in enumerate(pieces)}
    return {s: [p for p in perfs if where[p.piece] == s] for s in SPLITS}


def midi_files(folder: str | os.PathLike) -> list[Path]:
    """Every MIDI file under ``folder``, sorted; an error if the folder is missing or holds none."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder")
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in MIDI_SUFFIXES and p.is_file())
    if not files:
        raise ValueError(f"{folder} holds no .mid or .midi files")
    return files


def load_folder(folder: str | os.PathLike, valid: float = 0.1, test: float = 0.1, max_hours: float = MAX_HOURS,
                cache: bool = True) -> Performances:
    """Every MIDI file under ``folder`` as performances, split by piece (each file its own piece)."""
    folder = Path(folder)
    files = midi_files(folder)
    perfs, skipped = read_all([(p, str(p.relative_to(folder).with_suffix(""))) for p in files], max_hours, cache)
    if not perfs:
        raise ValueError(f"none of the {len(files)} MIDI files in {folder} could be read "
                         f"(first: {skipped[0][0]}: {skipped[0][1]})")
    return Performances(**split_by_piece(perfs, valid, test), source=f"{folder} ({len(files)} MIDI files)",
                        skipped=skipped)


VERSIONS = {"maestro": "Maestro", "giantmidi": "GiantMIDI-Piano", "scores": "GroundTruth"}   # pairs.csv columns


def sample_root() -> Path | None:
    """The project's shared piano sample (``MUSICTX_PIANO_PATH``, else ../shared/data/piano beside the
    checkout or the working directory), or None when it is not on this machine."""
    env = settings.piano_path()
    if env:
        return Path(env) if (Path(env) / "pairs.csv").exists() else None
    checkout = Path(__file__).resolve().parents[2]
    for base in (checkout.parent, Path.cwd().parent):
        p = base / "shared" / "data" / "piano"
        if (p / "pairs.csv").exists():
            return p
    return None


def load_piano_sample(versions: tuple[str, ...] = ("giantmidi",), root: str | os.PathLike | None = None,
                      valid: float = 0.1, test: float = 0.1, cache: bool = True) -> Performances:
    """The shared sample: 52 pieces, each as a MAESTRO performance (``maestro``, CC BY-NC-SA), another
    performer's transcribed recording (``giantmidi``, CC BY) and a score (``scores``). Split by piece:
    the versions of one piece are always in the same split. A sample of about 4 hours per version,
    not a training set for a good model."""
    root = Path(root) if root is not None else sample_root()
    if root is None or not (root / "pairs.csv").exists():
        raise FileNotFoundError("the piano sample is not on this machine (../shared/data/piano, or set "
                                "MUSICTX_PIANO_PATH); in Colab, use load_maestro()")
    unknown = set(versions) - set(VERSIONS)
    if unknown or not versions:
        raise ValueError(f"versions must be some of {sorted(VERSIONS)}, got {list(versions)}")
    with open(root / "pairs.csv", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    paths = [(root / v / row[VERSIONS[v]], row["Name"]) for v in versions for row in rows]
    perfs, skipped = read_all(paths, cache=cache)
    for p in perfs:
        p.name = f"{Path(p.source).parent.name}/{p.name}"
    return Performances(**split_by_piece(perfs, valid, test), skipped=skipped,
                        source=f"the shared piano sample ({' + '.join(versions)}; a sample, not MAESTRO)")
