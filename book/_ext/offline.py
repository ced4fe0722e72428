"""Sphinx extension: the built book works with no network (the classroom edition).

Serves every page of the book (chapters 0-13, the intro and setup pages), and
``scripts/build_slides.py``, which imports :func:`npm_tarball`, :func:`extract`
and :func:`install_mathjax` from here so that the book and the slide decks use one
MathJax and one download helper.

What a built page fetched from the network, and what happens to it now:

- MathJax, on every page with math (Sphinx's default ``mathjax_path`` is a CDN
  URL): bundled. ``_config.yml`` sets ``mathjax_path: mathjax/tex-chtml-full.js``,
  a path relative to ``_static`` (Sphinx's rule), and this extension copies
  ``tex-chtml-full.js`` and the CHTML fonts it loads (``output/chtml/fonts/woff-v2``)
  into ``_static/mathjax`` once the pages are written. The ``full`` build holds every
  TeX extension, so MathJax never fetches one of its components on demand; only the
  accessibility explorer of MathJax's right-click menu, off unless a reader switches
  it on, would load more.
- The ipywidgets manager (require.js and @jupyter-widgets/html-manager from CDNs,
  added only to pages whose notebook saved widget state): not bundled.
  ``nb_ipywidgets_js: {}`` in ``_config.yml`` adds no script, and a widget output
  shows its static fallback.
- thebe (unpkg): sphinx-thebe fetches it only when a reader presses a live-code
  button, and the book has none (``launch_buttons`` has no ``thebe``).
- Fonts and icons: the theme ships them in ``_static``.
- Links to GitHub, Colab and the issue tracker stay: they are links, not requests.

It also drops repeated ``<script>`` entries (sphinx-thebe's config was declared twice
on every page, a JavaScript error that the browser test would report).

After the build, every HTML page is scanned for resources that a browser would
fetch from another host (:func:`remote_resources`): each one is a warning, so
``make book`` (``-W``) fails on it, for every chapter, not only the one that
``tests/book/test_offline.py`` opens in a browser.

Where MathJax comes from: the npm registry's release tarball, ``mathjax-3.2.2.tgz``.
It is downloaded once with urllib, its sha256 is checked against the value pinned
here, and it is kept in ``$MUSICTX_CACHE/npm`` (default ``~/.cache/musictx_lite/npm``,
the cache the package uses for data). The npm registry is reachable wherever PyPI
is, the tarball is MathJax's own release, and the same helper fetches reveal.js for
the slides (reveal.js is on npm only). Of the PyPI packages that carry MathJax,
jupyter-server-mathjax ships MathJax 2, and sphinx-mathjax-offline (0.0.2, 2022) and
django-static-mathjax are third-party repackagings: an exact upstream release is the
smaller thing to trust. About 6 MB are downloaded once; 1.7 MB land in the book.
"""
from __future__ import annotations

import html.parser
import os
import re
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Sequence

REGISTRY = "https://registry.npmjs.org"


@dataclass(frozen=True)
class NpmPackage:
    """One release on the npm registry and the files of it that we use."""

    name: str
    version: str
    sha256: str                  # of the .tgz, pinned
    files: tuple[str, ...]       # paths inside the package; a trailing "/" takes a whole folder

    @property
    def url(self) -> str:
        return f"{REGISTRY}/{self.name}/-/{self.name.split('/')[-1]}-{self.version}.tgz"


MATHJAX = NpmPackage(
    "mathjax", "3.2.2", "1b9c0a1c44df864e915690558e72adb9cc5203360daefd385084ced3b6c64c09",
    ("es5/tex-chtml-full.js", "es5/output/chtml/fonts/woff-v2/"),
)
MATHJAX_DIR = "mathjax"                          # under _static
MATHJAX_PATH = f"{MATHJAX_DIR}/tex-chtml-full.js"   # Sphinx's mathjax_path: relative to _static


def cache_dir() -> Path:
    """``$MUSICTX_CACHE/npm``, else ``~/.cache/musictx_lite/npm``."""
    from musictx_lite.io.data import cache_root

    return cache_root() / "npm"


def _sha256(path: Path) -> str:
    from musictx_lite.files import sha256

    return sha256(path)


def npm_tarball(pkg: NpmPackage, cache: Path | None = None, timeout: float = 60) -> Path:
    """Return the cached ``.tgz`` of ``pkg``, downloading it once; its sha256 must match.

    The download goes to a temporary file beside the target and is renamed into place
    only after the check, so an interrupted or corrupt download never looks cached.
    """
    cache = Path(cache) if cache is not None else cache_dir()
    target = cache / f"{pkg.name.replace('/', '-')}-{pkg.version}.tgz"
    if target.exists() and _sha256(target) == pkg.sha256:
        return target
    cache.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache, prefix=target.name, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(pkg.url, timeout=timeout) as r:
                    shutil.copyfileobj(r, out)
            except (urllib.error.URLError, OSError) as e:
                raise RuntimeError(
                    f"could not download {pkg.name} {pkg.version} from {pkg.url} ({e}). The offline book "
                    f"and slides bundle it: download it once with network access, or put the file at {target}"
                ) from e
        got = _sha256(Path(tmp))
        if got != pkg.sha256:
            raise ValueError(f"checksum mismatch for {pkg.url}: expected sha256 {pkg.sha256}, got {got}; "
                             "file discarded")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return target


def extract(tarball: Path, dest: Path, files: Sequence[str], strip: str = "") -> list[Path]:
    """Copy ``files`` (paths inside the npm package; "dir/" for a folder) from ``tarball`` into ``dest``.

    ``strip`` is a leading folder removed from every path (``"es5/"`` puts ``es5/x.js``
    at ``dest/x.js``). Returns the written files. Raises ValueError when one of
    ``files`` is not in the tarball.
    """
    dest = Path(dest)
    written: list[Path] = []
    found = {f: False for f in files}
    with tarfile.open(tarball, "r:gz") as tar:
        for m in tar.getmembers():
            if not m.isfile():
                continue
            parts = PurePosixPath(m.name).parts
            rel = "/".join(parts[1:])           # npm tarballs hold package/... (a few another top folder)
            want = next((f for f in files if rel == f or (f.endswith("/") and rel.startswith(f))), None)
            if want is None:
                continue
            found[want] = True
            out = PurePosixPath(rel[len(strip):] if strip and rel.startswith(strip) else rel)
            if out.is_absolute() or ".." in out.parts:
                raise ValueError(f"unsafe path {m.name!r} in {tarball}")
            path = dest / out
            path.parent.mkdir(parents=True, exist_ok=True)
            with tar.extractfile(m) as src, open(path, "wb") as f:
                shutil.copyfileobj(src, f)
            written.append(path)
    missing = [f for f, ok in found.items() if not ok]
    if missing:
        raise ValueError(f"{tarball.name} has no {missing}")
    return written


def install_mathjax(dest: Path, cache: Path | None = None) -> Path:
    """Put the bundled MathJax into ``dest`` (``dest/tex-chtml-full.js``, ``dest/output/...``); return the script."""
    extract(npm_tarball(MATHJAX, cache), Path(dest), MATHJAX.files, strip="es5/")
    return Path(dest) / "tex-chtml-full.js"


# -- finding what a page would fetch from another host ------------------------------------------

# <link rel=...> values that make a browser fetch the href
_FETCHING_RELS = {"stylesheet", "preload", "modulepreload", "prefetch", "icon", "apple-touch-icon",
                  "manifest", "preconnect", "dns-prefetch"}
_SRC_TAGS = {"script", "img", "audio", "video", "source", "track", "iframe", "embed", "input"}
_CSS_URL = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])\s*((?:https?:)?//[^'")\s]+)""", re.I)
_JS_IMPORT = re.compile(r"""\bimport\b[^'"]*['"]((?:https?:)?//[^'"]+)['"]""")


def is_remote(url: str) -> bool:
    """True for a URL on another host (http, https or protocol-relative); data:, file: and paths are local."""
    return bool(re.match(r"\s*(https?:)?//", url, re.I))


class _Scanner(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        urls = []
        if tag in _SRC_TAGS:
            urls.append(a.get("src", ""))
            urls += [s.strip().split(" ")[0] for s in a.get("srcset", "").split(",")]
        if tag == "img" or tag == "video":
            urls.append(a.get("poster", ""))
        if tag == "object":
            urls.append(a.get("data", ""))
        if tag == "link" and set(a.get("rel", "").lower().split()) & _FETCHING_RELS:
            urls.append(a.get("href", ""))
        urls += _CSS_URL.findall(a.get("style", ""))
        self.found += [f"<{tag}> {u.strip()}" for u in urls if u and is_remote(u)]
        self._in = tag if tag in ("style", "script") and "src" not in a else None

    def handle_data(self, data: str) -> None:
        if self._in == "style":
            self.found += [f"<style> {u}" for u in _CSS_URL.findall(data)]
        elif self._in == "script":
            self.found += [f"<script> import {u}" for u in _JS_IMPORT.findall(data)]

    def handle_endtag(self, tag: str) -> None:
        self._in = None


def remote_resources(page: str) -> list[str]:
    """What a browser would fetch from another host when it opens this HTML (links are not counted).

    >>> remote_resources('<script src="https://cdn.example/x.js"></script><a href="https://x.org">x</a>')
    ['<script> https://cdn.example/x.js']
    """
    s = _Scanner()
    s.feed(page)
    s.close()
    return s.found


def scan_html(root: Path) -> dict[str, list[str]]:
    """Every HTML page under ``root`` that would fetch something remote, with what it fetches."""
    out = {}
    for p in sorted(Path(root).rglob("*.html")):
        found = remote_resources(p.read_text(encoding="utf-8", errors="replace"))
        if found:
            out[str(p.relative_to(root))] = found
    return out


# -- Sphinx ------------------------------------------------------------------------------------

def _on_config(app, config) -> None:
    from sphinx.errors import ConfigError

    if config.mathjax_path != MATHJAX_PATH:
        raise ConfigError(f"offline: mathjax_path is {config.mathjax_path!r}; the offline book needs "
                          f"{MATHJAX_PATH!r} (the bundled copy, relative to _static). Set it in _config.yml.")
    remote = [u for u in (getattr(config, "nb_ipywidgets_js", None) or {}) if is_remote(u)]
    if remote:
        raise ConfigError(f"offline: nb_ipywidgets_js loads {remote} from the network; set it to {{}} in "
                          "_config.yml (widget outputs then show their static fallback)")


def _on_builder(app) -> None:
    if app.builder.format == "html":
        npm_tarball(MATHJAX)          # fail at the start of a long build, not at its end


def _on_finished(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    from sphinx.util import logging

    install_mathjax(Path(app.outdir) / "_static" / MATHJAX_DIR)
    log = logging.getLogger(__name__)
    for page, found in scan_html(Path(app.outdir)).items():
        for what in found:
            log.warning(f"offline: {page} fetches {what}", type="offline", subtype="remote")


def _dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    """Drop repeated scripts: Jupyter Book pages declared sphinx-thebe's ``const THEBE_JS_URL`` twice,
    a SyntaxError in every page's console. Keeps the first of each (file, attributes)."""
    scripts = context.get("script_files")
    if not isinstance(scripts, list):
        return
    seen, keep = set(), []
    for js in scripts:
        key = (str(getattr(js, "filename", js) or ""), tuple(sorted(getattr(js, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            keep.append(js)
    scripts[:] = keep


def setup(app):
    app.connect("config-inited", _on_config)
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    app.connect("builder-inited", _on_builder)
    app.connect("build-finished", _on_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


__all__ = ["NpmPackage", "MATHJAX", "MATHJAX_PATH", "npm_tarball", "extract",
                          "install_mathjax", "remote_resources", "scan_html", "is_remote", "cache_dir"]
