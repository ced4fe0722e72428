"""Sphinx extension: never serve cached chapter outputs made by another package.

Jupyter Book's execution cache (jupyter-cache) keys a notebook by its code cells
only. The chapters' outputs also depend on ``musictx_lite``, on the profile and
data chosen by environment variables, and on the torch version. This extension
hashes all of those before anything is read; when the hash differs from the one
stored beside the cache, it deletes the cache and marks every notebook outdated,
so that Sphinx re-reads and re-executes every chapter.

It also sets ``MUSICTX_PROGRESS=0`` for the kernels that execute the chapters,
so that rendered pages carry no progress-bar lines, and ``MUSICTX_WIDGETS=static``,
so that they show each widget's static version.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

ENV_VARS = ("MUSICTX_PROFILE", "MUSICTX_DATA", "MUSICTX_DEVICE")
STAMP = "musictx_package.sha256"


def package_fingerprint() -> str:
    """sha256 over the package's files, the relevant environment and the torch version."""
    import musictx_lite
    import torch

    root = Path(musictx_lite.__file__).parent
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    for k in ENV_VARS:
        h.update(f"{k}={os.environ.get(k, '')}".encode())
    h.update(torch.__version__.encode())
    return h.hexdigest()


def invalidate(cache: Path, fingerprint: str) -> bool:
    """Delete ``cache`` unless its stamp matches ``fingerprint``; return True if the stamp differed."""
    stamp = cache.parent / STAMP
    if stamp.exists() and stamp.read_text() == fingerprint:
        return False
    if cache.exists():
        shutil.rmtree(cache)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(fingerprint)
    return True


def _on_config(app, config) -> None:
    cache = Path(config.nb_execution_cache_path or Path(app.outdir).parent / ".jupyter_cache")
    app.musictx_changed = invalidate(cache, package_fingerprint())
    if app.musictx_changed:
        print(f"[package_cache] new musictx_lite, profile or data: cleared {cache}; every chapter re-executes")


def _outdated(app, env, added, changed, removed) -> list[str]:
    """Sphinx would skip unchanged notebook sources: mark them all for re-reading."""
    if not getattr(app, "musictx_changed", False):
        return []
    return [d for d in env.found_docs if str(env.doc2path(d)).endswith(".ipynb") and d not in added]


def setup(app):
    # chapters run in kernels that inherit this environment: no progress bars in the rendered pages
    # (a live notebook, in Jupyter or Colab, still shows them)
    os.environ["MUSICTX_PROGRESS"] = "0"
    # and the widgets' static versions (images, scores, players): a page has no kernel to drive a
    # widget (musictx_lite/widgets.py says why the choice is made when the cell runs)
    os.environ["MUSICTX_WIDGETS"] = "static"
    app.connect("config-inited", _on_config, priority=100)
    app.connect("env-get-outdated", _outdated)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
