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

MAESTRO's publisher gives no checksum, so a download is checked as far as it allows: the zip opens
and every member passes its CRC-32, the CSV has MAESTRO's columns, splits and counts, and every file
it names is in the zip. The size and sha256 of what was checked go to ``maestro-v3.0.0.check.json``
beside it, to pin in ``MAESTRO_ZIP_SHA256`` and ``MAESTRO_CSV_SHA256``; once set, ``fetch`` checks them.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import tempfile
import textwrap
import urllib.request
import warnings
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import files, settings
from ..files import atomic_write
from .data import SPLITS, Splits, cache_root, fetch
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
                        f"{sum(len(p) - 1 for p in ps):9,d} events, {hours:5.2f} hours")   # the BOS not counted
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
    digest = files.sha256(path)
    target = _cache_dir() / f"{digest}.npz"
    if target.exists():
        try:
            with np.load(target, allow_pickle=False) as z:
                return Performance(name, z["notes"], z["tokens"].astype(np.int64), piece or name, str(path))
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):   # empty, cut short, bytes changed
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


# what a model trained on the sample's transcriptions must say of its data (CC BY 4.0)
ATTRIBUTION = ("trained on transcriptions from GiantMIDI-Piano (Kong et al., 2022, "
               "github.com/bytedance/GiantMIDI-Piano), CC BY 4.0: the 52 pieces of its evaluation set")
VERSIONS = {"maestro": "Maestro", "giantmidi": "GiantMIDI-Piano", "scores": "GroundTruth"}   # pairs.csv columns
KINDS = {"maestro": "real performances", "giantmidi": "transcriptions of recordings", "scores": "scores"}


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
                        source=f"the shared piano sample, {' + '.join(f'{v} ({KINDS[v]})' for v in versions)}: "
                               "a few pieces, not a whole corpus")


MAESTRO = "MAESTRO v3.0.0"
MAESTRO_DIR = "maestro-v3.0.0"                  # the zip's top folder, and the extracted one
MAESTRO_ZIP_URL = "https://storage.googleapis.com/magentadata/datasets/maestro/v3.0.0/maestro-v3.0.0-midi.zip"
MAESTRO_CSV_URL = "https://storage.googleapis.com/magentadata/datasets/maestro/v3.0.0/maestro-v3.0.0.csv"
MAESTRO_ZIP_SHA256: str | None = None           # None: the publisher gives none; see maestro-v3.0.0.check.json
MAESTRO_CSV_SHA256: str | None = None
MAESTRO_COLUMNS = ("canonical_composer", "canonical_title", "split", "year", "midi_filename", "audio_filename",
                   "duration")
MAESTRO_SPLITS = {"train": "train", "validation": "valid", "test": "test"}      # the CSV's -> ours
MAESTRO_COUNTS = {"train": 962, "valid": 137, "test": 177}                     # 1,276 performances
DOWNLOAD_TIMEOUT = 60.0         # seconds a stalled connection may wait


def _get(url: str, tmp: str) -> None:
    """``url``'s bytes into the file ``tmp``; an OSError if the connection fails or ends early."""
    with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT) as r, open(tmp, "wb") as f:
        shutil.copyfileobj(r, f, 1 << 20)
        size = r.headers.get("Content-Length")
    if size is not None and os.path.getsize(tmp) != int(size):
        raise OSError(f"the download ended after {os.path.getsize(tmp):,} of {int(size):,} bytes")


def download(url: str, target: Path, sha256: str | None = None, check=None):
    """Download ``url`` to ``target`` atomically and return ``check(path)`` (None without a check).

    With ``sha256``, ``data.fetch`` downloads and verifies it; without, the bytes land unverified but
    ``check`` runs before they do. Either way a file that fails is not kept (ValueError); a download
    that fails is an OSError naming the URL and how to fetch it by hand."""
    target = Path(target)
    result = []
    try:
        if sha256:
            if target.name != url.rsplit("/", 1)[-1]:
                raise ValueError(f"fetch names the file after the URL: {target.name} is not {url}'s name")
            path = fetch(url, sha256, target.parent)
            try:
                result.append(check(path) if check else None)
            except ValueError:
                path.unlink(missing_ok=True)
                raise
        else:
            def save(tmp: str) -> None:
                _get(url, tmp)
                try:
                    result.append(check(Path(tmp)) if check else None)
                except ValueError as e:
                    raise ValueError(f"{str(e).replace(tmp, url)}; the download was discarded") from e

            atomic_write(target, save)
    except ValueError:
        raise
    except OSError as e:
        raise OSError(f"could not download {url} ({e}); download it by hand into a folder and pass that "
                      f"folder as root=") from e
    return result[0]


def maestro_rows(path: Path) -> list[dict[str, str]]:
    """The rows of MAESTRO's CSV, checked: its columns, its splits (train, validation, test; ``split``
    becomes ours: validation -> valid), its counts (``MAESTRO_COUNTS``) and, when pinned, its sha256."""
    path = Path(path)
    if MAESTRO_CSV_SHA256 and files.sha256(path) != MAESTRO_CSV_SHA256:
        raise ValueError(f"{path} has sha256 {files.sha256(path)}, not MAESTRO_CSV_SHA256 {MAESTRO_CSV_SHA256}")
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            columns = reader.fieldnames or []
    except (UnicodeDecodeError, csv.Error) as e:
        raise ValueError(f"{path} is not a readable CSV file: {e}") from e
    missing = [c for c in MAESTRO_COLUMNS if c not in columns]
    if missing:
        raise ValueError(f"{path} lacks MAESTRO's columns {missing} (it has {columns})")
    for i, row in enumerate(rows):
        if row["split"] not in MAESTRO_SPLITS:
            raise ValueError(f"{path} row {i + 2}: split {row['split']!r} is none of {list(MAESTRO_SPLITS)}")
        if not row["midi_filename"]:
            raise ValueError(f"{path} row {i + 2} names no midi_filename")
        row["split"] = MAESTRO_SPLITS[row["split"]]
    counts = Counter(row["split"] for row in rows)
    if any(counts[s] != MAESTRO_COUNTS.get(s, 0) for s in SPLITS):
        got = ", ".join(f"{s} {counts[s]}" for s in SPLITS)
        want = ", ".join(f"{s} {MAESTRO_COUNTS.get(s, 0)}" for s in SPLITS)
        raise ValueError(f"{path} lists {len(rows):,} performances ({got}); {MAESTRO} has "
                         f"{sum(MAESTRO_COUNTS.values()):,} ({want}): not its CSV, or a damaged one")
    return rows


def check_maestro_zip(path: Path, rows: list[dict[str, str]]) -> list[str]:
    """Check MAESTRO's MIDI zip against the CSV's ``rows``: it opens, every member passes its CRC-32, every
    ``midi_filename`` is in it (under ``maestro-v3.0.0/``) and, when pinned, its sha256. Returns the checks
    passed, in words."""
    path = Path(path)
    passed = []
    if MAESTRO_ZIP_SHA256:
        got = files.sha256(path)
        if got != MAESTRO_ZIP_SHA256:
            raise ValueError(f"{path} has sha256 {got}, not MAESTRO_ZIP_SHA256 {MAESTRO_ZIP_SHA256}")
        passed.append("sha256 as pinned")
    try:
        with zipfile.ZipFile(path) as z:
            passed.append("zip opens")
            bad = z.testzip()
            names = set(z.namelist())
    except (zipfile.BadZipFile, EOFError, OSError) as e:
        raise ValueError(f"{path} is not a readable zip archive ({e})") from e
    if bad is not None:
        raise ValueError(f"{path}: member {bad} fails its CRC-32 check: the archive is corrupt")
    passed.append(f"CRC-32 of all {len(names):,} members")
    absent = [r["midi_filename"] for r in rows if f"{MAESTRO_DIR}/{r['midi_filename']}" not in names]
    if absent:
        raise ValueError(f"{path} lacks {len(absent)} of the {len(rows):,} MIDI files the CSV names "
                         f"(first: {MAESTRO_DIR}/{absent[0]})")
    return passed + [f"all {len(rows):,} MIDI files of the CSV in it"]


def extract_maestro(path: Path, folder: Path) -> Path:
    """Unzip MAESTRO's MIDI zip ``path`` into ``folder / "maestro-v3.0.0"``, atomically: the folder appears
    whole or not at all."""
    target = folder / MAESTRO_DIR
    tmp = Path(tempfile.mkdtemp(dir=folder, prefix=f".{MAESTRO_DIR}-"))
    try:
        with zipfile.ZipFile(path) as z:
            z.extractall(tmp)
        if not (tmp / MAESTRO_DIR).is_dir():
            raise ValueError(f"{path} holds no {MAESTRO_DIR}/ folder")
        os.replace(tmp / MAESTRO_DIR, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _record(folder: Path, downloaded: dict[str, Path], passed: list[str]) -> Path:
    """Write the size and sha256 of MAESTRO's ``downloaded`` files (url: path) and the checks they passed to
    ``maestro-v3.0.0.check.json``, and print them."""
    rec = {"dataset": MAESTRO, "checks": passed,
           "files": {p.name: {"url": url, "bytes": p.stat().st_size, "sha256": files.sha256(p)}
                     for url, p in downloaded.items()}}
    path = folder / f"{MAESTRO_DIR}.check.json"
    atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(rec, indent=2) + "\n"))
    print(f"{MAESTRO}, checked as far as its publisher allows (no published sha256):")
    for name, f in rec["files"].items():                  # each line within the book's column
        print(f"  {name}: {f['bytes']:,} bytes\n    sha256 {f['sha256']}")
    print(textwrap.fill(f"passed: {', '.join(passed)}; recorded in {path}", settings.WIDTH,
                        initial_indent="  ", subsequent_indent="    "))
    return path


def _first(rows: list[dict[str, str]], n: int) -> list[dict[str, str]]:
    """The first of each split's rows, ``n`` in all, shared in proportion to the splits' sizes (one to each
    split first, when ``n`` allows), in the CSV's order."""
    by = {s: [r for r in rows if r["split"] == s] for s in SPLITS}
    n = min(n, len(rows))
    share = {s: n * len(by[s]) / len(rows) for s in SPLITS}
    k = {s: int(share[s]) for s in SPLITS}
    for s in sorted(SPLITS, key=lambda s: share[s] - int(share[s]), reverse=True):   # the largest remainders
        if sum(k.values()) < n and k[s] < len(by[s]):
            k[s] += 1
    if n >= sum(1 for s in SPLITS if by[s]):
        for s in SPLITS:
            if by[s] and not k[s]:                              # one at least, from the largest share
                k[max(SPLITS, key=k.get)] -= 1
                k[s] = 1
    keep = {id(r) for s in SPLITS for r in by[s][:k[s]]}
    return [r for r in rows if id(r) in keep]


def load_maestro(root: str | os.PathLike | None = None, max_files: int | None = None, cache: bool = True,
                 ) -> Performances:
    """MAESTRO v3.0.0's MIDI files as performances, in its official split (validation -> valid); each
    performance's piece is ``canonical_composer + ": " + canonical_title``.

    ``root``: a folder holding ``maestro-v3.0.0.csv`` and either ``maestro-v3.0.0-midi.zip`` or the unzipped
    ``maestro-v3.0.0/`` folder; nothing is downloaded. Default: ``cache_root() / "maestro"``, where what is
    missing is downloaded (about 57 MB) and checked. A zip is checked and unzipped beside itself once.
    ``max_files``: read only the first of each split, that many in all (for quick runs). Files that cannot
    be read are skipped with a ``SkippedFile`` warning; every file read once is kept in the cache."""
    if max_files is not None and (isinstance(max_files, bool) or not isinstance(max_files, int) or max_files < 1):
        raise ValueError(f"max_files must be a positive integer or None, got {max_files!r}")
    folder = Path(root) if root is not None else cache_root() / "maestro"
    csv_path, zip_path = folder / f"{MAESTRO_DIR}.csv", folder / MAESTRO_ZIP_URL.rsplit("/", 1)[-1]
    unzipped = folder / MAESTRO_DIR
    if root is not None:
        if not csv_path.is_file() and (unzipped / csv_path.name).is_file():
            csv_path = unzipped / csv_path.name                 # the copy inside the zip's folder
        if not csv_path.is_file() or not (zip_path.is_file() or unzipped.is_dir()):
            raise FileNotFoundError(f"{folder} holds no {MAESTRO} ({csv_path.name} and {zip_path.name} or "
                                    f"{MAESTRO_DIR}/); download them from {MAESTRO_CSV_URL.rsplit('/', 1)[0]}/")
    fresh = None
    if root is None and not csv_path.is_file():
        print(f"downloading {MAESTRO_CSV_URL}")
        download(MAESTRO_CSV_URL, csv_path, MAESTRO_CSV_SHA256, maestro_rows)
    rows = maestro_rows(csv_path)
    if not unzipped.is_dir():
        if root is None and not zip_path.is_file():
            print(f"downloading {MAESTRO_ZIP_URL} (about 57 MB)")
            fresh = download(MAESTRO_ZIP_URL, zip_path, MAESTRO_ZIP_SHA256, lambda p: check_maestro_zip(p, rows))
        try:
            passed = fresh or check_maestro_zip(zip_path, rows)
        except ValueError as e:
            raise ValueError(f"{e}; delete it and download it again") from e
        _record(folder, {MAESTRO_ZIP_URL: zip_path, MAESTRO_CSV_URL: csv_path},
                ["CSV columns", "splits train/validation/test",
                 f"{len(rows):,} performances ({'/'.join(str(MAESTRO_COUNTS[s]) for s in SPLITS)})"] + passed)
        extract_maestro(zip_path, folder)
    absent = [r["midi_filename"] for r in rows if not (unzipped / r["midi_filename"]).is_file()]
    if absent:
        again = "; delete the folder to unzip the zip again" if zip_path.is_file() else ""
        raise ValueError(f"{unzipped} lacks {len(absent)} of the {len(rows):,} MIDI files the CSV names "
                         f"(first: {absent[0]}){again}")
    if max_files is not None:
        rows = _first(rows, max_files)
    perfs: dict[str, list[Performance]] = {}
    skipped: list[tuple[str, str]] = []
    for s in SPLITS:
        paths = [(unzipped / r["midi_filename"], f"{r['canonical_composer']}: {r['canonical_title']}")
                 for r in rows if r["split"] == s]
        perfs[s], bad = read_all(paths, cache=cache)
        skipped += bad
        for p in perfs[s]:
            p.name = f"{Path(p.source).parent.name}/{p.name}"
    n = sum(len(v) for v in perfs.values())
    if n == 0:
        raise ValueError(f"none of the {len(rows):,} MAESTRO files could be read "
                         f"(first: {skipped[0][0]}: {skipped[0][1]})")
    return Performances(**perfs, source=f"{MAESTRO} ({n:,} performances, official split)", skipped=skipped)
