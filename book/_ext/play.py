"""Sphinx extension: the model on the page (chapters 11 and 12, and book/play.md).

A page asks for the widget with ``<div class="musictx-play" data-mode="..."></div>``
(raw HTML in a markdown cell). This extension

- adds, to those pages only, the widget's stylesheet and scripts: ONNX Runtime
  Web's ``ort.wasm.min.js``, then ``melody.js`` (tinyNotation, as
  ``musictx_lite.io.melody``), ``rules.js`` (the rules of four-part writing, as
  ``musictx_lite.engine.rules``), ``sound.js`` (the piano roll and the organ), ``files.js`` (MIDI
  and MusicXML to save) and
  ``musictx-play.js`` (sampling, as ``musictx_lite.engine.sample``), all from
  ``book/play/``; every other page loads none of it;
- copies into ``_static/play/`` the files of ``book/play/`` (the graphs that
  ``python -m scripts.export_web`` exported, the prompts, the record, the
  scripts) and, into ``_static/play/ort/``, ONNX Runtime Web's WebAssembly
  build (the single-threaded use of ``ort-wasm-simd-threaded``: static hosts
  do not give the cross-origin isolation that threads need) from the npm
  release tarball, downloaded once and sha256-checked by ``offline.npm_tarball``,
  as MathJax is;
- writes ``_static/play/LICENSES.txt`` (what is bundled, its version and
  licence) and logs the weight the widget adds to the built book.

ONNX Runtime Web 1.30.0 is MIT-licensed (Microsoft); its minified script keeps its
licence banner. Nothing is fetched from another host at any time: the page loads
the graphs and the WebAssembly from the book itself.
"""
from __future__ import annotations

import gzip
import shutil
from pathlib import Path

from offline import NpmPackage, extract, npm_tarball

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "book" / "play"
ORT = NpmPackage(
    "onnxruntime-web", "1.30.0", "d2228df7e4616bc3348bf504ee888f3bec43789a273f0a63f3e68d203ce3bf71",
    ("dist/ort.wasm.min.js", "dist/ort-wasm-simd-threaded.mjs", "dist/ort-wasm-simd-threaded.wasm"),
)
PLAY_DIR = "play"                                   # under _static
SCRIPTS = ("ort/ort.wasm.min.js", "melody.js", "rules.js", "sound.js", "files.js", "musictx-play.js")
SHIPPED = ("*.js", "*.css", "*.onnx", "*.json")
MARK = 'class="musictx-play'
LICENSES = f"""What the model-on-the-page widget bundles (book/_ext/play.py)

ort/ort.wasm.min.js, ort/ort-wasm-simd-threaded.mjs, ort/ort-wasm-simd-threaded.wasm:
  ONNX Runtime Web {ORT.version} (npm package onnxruntime-web), Copyright (c) Microsoft Corporation,
  MIT License: https://github.com/microsoft/onnxruntime/blob/main/LICENSE
  from {ORT.url} (sha256 {ORT.sha256})

*.onnx: the musictx-lite book's shipped models (MIT, as the book's code), exported by
  python -m scripts.export_web; chorales.json: the opening bars of J.S. Bach's chorales
  (public domain) from the official JSB split's test set.
melody.js, rules.js, sound.js, files.js, musictx-play.js, play.css: musictx-lite (MIT).
"""


def install(dest: Path) -> dict[str, int]:
    """Copy the widget's files into ``dest`` (``_static/play``); return the bytes of each part."""
    dest.mkdir(parents=True, exist_ok=True)
    sizes = {"ONNX Runtime Web": 0, "models": 0, "scripts and prompts": 0}
    for f in extract(npm_tarball(ORT), dest / "ort", ORT.files, strip="dist/"):
        sizes["ONNX Runtime Web"] += f.stat().st_size
    for pattern in SHIPPED:
        for f in sorted(SOURCE.glob(pattern)):
            shutil.copy(f, dest / f.name)
            sizes["models" if f.suffix == ".onnx" else "scripts and prompts"] += f.stat().st_size
    (dest / "LICENSES.txt").write_text(LICENSES)
    return sizes


def gzipped(folder: Path) -> int:
    """What the folder weighs compressed (as a web server that gzips would send it)."""
    return sum(len(gzip.compress(f.read_bytes(), 6)) for f in folder.rglob("*") if f.is_file())


def _on_page(app, pagename, templatename, context, doctree) -> None:
    body = context.get("body") or ""
    if MARK not in body:
        return
    to = context["pathto"]
    tags = [f'<link rel="stylesheet" href="{to(f"_static/{PLAY_DIR}/play.css", 1)}">']
    tags += [f'<script src="{to(f"_static/{PLAY_DIR}/{s}", 1)}"></script>' for s in SCRIPTS]
    context["body"] = body + "\n" + "\n".join(tags) + "\n"


def _on_builder(app) -> None:
    if app.builder.format == "html":
        npm_tarball(ORT)            # fail at the start of a long build, not at its end


def _on_finished(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    from sphinx.util import logging

    dest = Path(app.outdir) / "_static" / PLAY_DIR
    sizes = install(dest)
    parts = ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in sizes.items())
    logging.getLogger(__name__).info(
        f"play: the model on the page adds {sum(sizes.values()) / 1e6:.1f} MB to the built book ({parts}; "
        f"{gzipped(dest) / 1e6:.1f} MB gzipped)")


def setup(app):
    app.connect("builder-inited", _on_builder)
    app.connect("html-page-context", _on_page)
    app.connect("build-finished", _on_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
