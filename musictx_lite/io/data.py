"""Bach chorales: the embedded default data set and the official JSB split.

Notebook: notebooks/00_music_as_tokens.ipynb

``load_chorales()`` reads the four-part chorales of music21's corpus, converted
once by ``scripts/build_chorales.py`` into ``musictx_lite/io/chorales.npz``
(no network, no music21). ``load_jsb()`` reads the official split of
Boulanger-Lewandowski et al. (2012), ``Jsb16thSeparated.json``, from a path or
from a URL with a sha256 check and a local cache (or from the local copy that
``MUSICTX_JSB_PATH`` names, for machines without internet). ``load_data()``
picks one by the ``MUSICTX_DATA`` environment variable.
"""
from __future__ import annotations

import json
import os
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import files, settings
from ..files import atomic_write

EMBEDDED = Path(__file__).parent / "chorales.npz"
JSB_URL = "https://raw.githubusercontent.com/czhuang/JSB-Chorales-dataset/master/Jsb16thSeparated.json"
JSB_SHA256 = "79294cc374f9252e95ef4b703161524c1c53dc1f712c236f00f1c1f5d54af5a7"
SPLITS = ("train", "valid", "test")


@dataclass
class Piece:
    """One chorale: ``pitches`` (steps, 4) MIDI numbers S A T B, -1 for rest."""

    name: str
    pitches: np.ndarray
    onsets: np.ndarray | None = None   # (steps, 4) bool: a note starts here; None if unknown

    def __len__(self) -> int:
        return len(self.pitches)


@dataclass
class Splits:
    """The train, valid and test pieces of one data set."""

    train: list[Piece]
    valid: list[Piece]
    test: list[Piece]
    source: str = ""

    def __getitem__(self, split: str) -> list[Piece]:
        return getattr(self, split)

    def summary(self) -> str:
        rows = [f"{s:5s}: {len(self[s]):3d} chorales, {sum(len(p) for p in self[s]):6d} steps" for s in SPLITS]
        return f"{self.source}\n" + "\n".join(rows)


def load_chorales(path: str | os.PathLike = EMBEDDED) -> Splits:
    """The embedded music21 chorales with their fixed split (see scripts/build_chorales.py)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"chorale file {path} is missing; rebuild it with python -m scripts.build_chorales")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in ("names", "split", "offsets", "pitches", "onsets")}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as e:
        raise ValueError(f"chorale file {path} is corrupt or not an .npz archive: {e}") from e
    off = arrays["offsets"]
    if off[-1] != len(arrays["pitches"]) or len(off) != len(arrays["names"]) + 1:
        raise ValueError(f"chorale file {path} is inconsistent: offsets do not match the pitch array")
    out: dict[str, list[Piece]] = {s: [] for s in SPLITS}
    for i, (name, split) in enumerate(zip(arrays["names"], arrays["split"])):
        sl = slice(off[i], off[i + 1])
        out[str(split)].append(Piece(str(name), arrays["pitches"][sl].astype(np.int64), arrays["onsets"][sl]))
    return Splits(**out, source="music21 Bach chorales (embedded)")


def cache_root() -> Path:
    """Where the package keeps downloads and records: ``$MUSICTX_CACHE``, else ``~/.cache/musictx_lite``."""
    return settings.cache_dir()


def fetch(url: str, sha256: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """Download ``url`` into the cache once and return its path; verify its sha256.

    A download whose checksum does not match is deleted and raises ValueError;
    the cache never holds a partial or wrong file.
    """
    cache = Path(cache_dir or cache_root())
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / url.rsplit("/", 1)[-1]
    if target.exists() and files.sha256(target) == sha256:
        return target

    def download(tmp: str) -> None:
        urllib.request.urlretrieve(url, tmp)
        got = files.sha256(Path(tmp))
        if got != sha256:
            raise ValueError(f"checksum mismatch for {url}: expected sha256 {sha256}, got {got}; file discarded")

    return atomic_write(target, download)


def load_jsb(source: str | os.PathLike | None = None, sha256: str | None = JSB_SHA256,
             cache_dir: str | os.PathLike | None = None) -> Splits:
    """The official JSB split (Jsb16thSeparated.json) from a local path or a URL.

    ``source`` defaults to ``MUSICTX_JSB_PATH`` (a local copy) when that is set, else ``JSB_URL``.
    """
    src = str(source or settings.jsb_path() or JSB_URL)
    if "://" in src:
        path = fetch(src, sha256 or "", cache_dir)
    else:
        path = Path(src)
        if not path.exists():
            raise FileNotFoundError(f"JSB file {path} not found; pass its path or the URL {JSB_URL}")
        if sha256 is not None and files.sha256(path) != sha256:
            raise ValueError(f"JSB file {path} has sha256 {files.sha256(path)}, expected {sha256}")
    try:
        raw = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"JSB file {path} is not valid JSON: {e}") from e
    out: dict[str, list[Piece]] = {}
    for split in SPLITS:
        if split not in raw:
            raise ValueError(f"JSB file {path} has no '{split}' key (keys: {sorted(raw)})")
        pieces = []
        for i, chorale in enumerate(raw[split]):
            grid = np.asarray(chorale, dtype=np.int64)
            if grid.ndim != 2 or grid.shape[1] != 4 or (grid < -1).any() or (grid > 127).any():
                raise ValueError(f"JSB file {path}: {split}[{i}] is not a (steps, 4) grid of MIDI pitches")
            pieces.append(Piece(f"jsb-{split}-{i:03d}", grid))
        out[split] = pieces
    return Splits(**out, source=f"official JSB split ({path.name})")


def load_data(name: str | None = None) -> Splits:
    """The book's data: ``MUSICTX_DATA`` = ``chorales`` (default), ``jsb`` (download), or a path."""
    name = name or settings.data()
    if name == "chorales":
        return load_chorales()
    if name == "jsb":
        return load_jsb()
    if name.endswith(".json"):
        return load_jsb(name, sha256=None)
    return load_chorales(name)
