"""The built book works with no network (book/_ext/offline.py): a small book, the intro and chapter 0
executed in the smoke profile with the real _config.yml, opened in headless Chromium with every
request to another host refused. Screenshots land in _build/screenshots/: each page, and the first
score and widget (static version) of each chapter. MUSICTX_BOOK_HTML=_build/html runs the browser
test on every page of a full build instead (after `make book`).

Chromium is Debian's (`apt-get install chromium`; .ci/run installs it), driven by Playwright, whose own
browser download is never used. Without Chromium the browser test skips, except in CI, where it fails.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.error
from pathlib import Path

import pytest

from scripts import book_extension

ROOT = Path(__file__).resolve().parents[2]
offline = book_extension("offline")     # book/_ext/offline.py, as the book build imports it

CHAPTER = "notebooks/00_music_as_tokens"
PAGES = ["book/intro", CHAPTER]
SCREENSHOTS = ROOT / "_build" / "screenshots"
# Debian's chromium; or Google Chrome (GitHub's Ubuntu runners have it); MUSICTX_CHROMIUM names another
CHROMIUM = (os.environ.get("MUSICTX_CHROMIUM") or shutil.which("chromium") or shutil.which("google-chrome")
            or "/usr/bin/chromium")
TOC = f"format: jb-book\nroot: book/intro\nchapters:\n  - file: {CHAPTER}\n"


def chromium_or_skip() -> str:
    """Debian's Chromium; skip without it (fail in CI, whose .ci/run installs it)."""
    if Path(CHROMIUM).exists():
        return CHROMIUM
    msg = f"no Chromium at {CHROMIUM}: apt-get install -y chromium (the browser checks need it)"
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser checks, but {msg}")
    pytest.skip(msg)


def script_page(folder: Path, html: str, ready: str):
    """A Chromium page (Playwright) on ``html`` written to ``folder``, once ``ready`` (JavaScript) holds; it fails
    at the end on any JavaScript error the page raised. A generator for a module fixture."""
    exe = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    (folder / "page.html").write_text(html)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        try:
            pg = browser.new_page()
            pg.errors = []
            pg.on("pageerror", lambda e: pg.errors.append(str(e)))
            pg.goto((folder / "page.html").as_uri())
            pg.wait_for_function(ready, timeout=10_000)
            yield pg
            assert not pg.errors, f"JavaScript errors: {pg.errors}"
        finally:
            browser.close()


def build_small_book(dest: Path) -> tuple[Path, str]:
    """Build the intro and chapter 0 (smoke profile) into ``dest``; return (html dir, build log)."""
    book = dest / "book-src"
    (book / "notebooks").mkdir(parents=True)
    for f in ("_config.yml", "references.bib", "book/intro.md", f"{CHAPTER}.ipynb"):
        (book / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / f, book / f)
    (book / "book" / "_ext").symlink_to(ROOT / "book" / "_ext")     # the extensions under test
    (book / "_toc.yml").write_text(TOC)
    env = {k: v for k, v in os.environ.items() if k not in ("IPYTHONDIR", "MUSICTX_DEVICE")}  # as `make book`
    env["MUSICTX_PROFILE"] = "smoke"
    cmd = [sys.executable, "-c", "import sys; from jupyter_book.cli.main import main; sys.exit(main())",
           "build", str(book)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    log = r.stdout + r.stderr
    assert r.returncode == 0, f"jupyter-book build failed:\n{log[-4000:]}"
    return book / "_build" / "html", log


@pytest.fixture(scope="session")
def small_book(tmp_path_factory, worker_id) -> tuple[Path, str]:
    """One build per test run, shared by the xdist workers (and tests/book/test_slides.py): the first
    worker builds under a lock, the others wait and reuse it."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    base = base if worker_id == "master" else base.parent
    out = base / "offline-book"
    with FileLock(str(out) + ".lock"):
        done = out / "build.json"
        if not done.exists():
            if out.exists():
                shutil.rmtree(out)                      # a build that failed half way
            t = time.perf_counter()
            html, log = build_small_book(out)
            done.write_text(json.dumps({"html": str(html), "log": log, "seconds": time.perf_counter() - t}))
        info = json.loads(done.read_text())
    print(f"small book built in {info['seconds']:.1f} s")
    return Path(info["html"]), info["log"]


# -- the built HTML ------------------------------------------------------------------------------

def test_built_pages_reference_nothing_remote_and_bundle_mathjax(small_book):
    html, log = small_book
    assert "offline:" not in log, [line for line in log.splitlines() if "offline:" in line]
    assert offline.scan_html(html) == {}
    mathjax = html / "_static" / offline.MATHJAX_PATH
    assert mathjax.stat().st_size > 1_000_000
    assert (mathjax.parent / "output/chtml/fonts/woff-v2/MathJax_Main-Regular.woff").exists()
    for page in PAGES:
        text = (html / f"{page}.html").read_text()
        assert f'src="../_static/{offline.MATHJAX_PATH}"' in text
        assert text.count("THEBE_JS_URL =") == 1          # the duplicate script is gone


# -- in a browser, with the network off ----------------------------------------------------------

# visible text outside code: MathJax replaces every $...$, $$...$$, \(...\) with its own elements
VISIBLE_PROSE = """() => {
  const main = document.querySelector('main').cloneNode(true);
  main.querySelectorAll('pre, code, mjx-container, script, style').forEach(e => e.remove());
  return main.innerText;
}"""
AUDIO = """async () => Promise.all([...document.querySelectorAll('audio')].map(a => {
  const src = a.currentSrc || a.src || (a.querySelector('source') || {}).src || '';
  const ready = a.readyState >= 1 ? Promise.resolve() : new Promise(ok => {
    a.addEventListener('loadedmetadata', ok); a.addEventListener('error', ok); a.load(); });
  return ready.then(() => ({src: src.slice(0, 40), duration: a.duration}));
}))"""
RAW_TEX = re.compile(r"\$\$|\\\(|\\\[|\$[^$\n]{0,200}\\[A-Za-z]+[^$\n]{0,200}\$")


def open_offline(browser, url: str):
    """Open ``url`` with every non-local request refused; return (page, requests, refused, failed, errors)."""
    requests, refused, failed, errors = [], [], [], []
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})

    def route(r):
        if r.request.url.startswith(("file:", "data:", "blob:")):
            r.continue_()
        else:
            refused.append(r.request.url)
            r.abort("internetdisconnected")

    ctx.route("**/*", route)
    page = ctx.new_page()
    page.set_default_timeout(120_000)    # loads and waits; 2 CPU cores busy with the other test worker are slow
    page.on("request", lambda r: requests.append(r.url))
    page.on("requestfailed", lambda r: failed.append(f"{r.url[:120]} ({r.failure})"))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url, wait_until="load")
    if page.locator("script[src*='mathjax']").count():           # Sphinx loads MathJax on pages with math
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                               timeout=30_000)
        page.evaluate("() => MathJax.startup.promise.then(() => document.fonts.ready).then(() => true)")
    page.wait_for_load_state("networkidle")
    return page, requests, refused, failed, errors


def built_pages(request) -> tuple[Path, list[str]]:
    """The small book's pages; or, with MUSICTX_BOOK_HTML=_build/html, every page of a full build."""
    full = os.environ.get("MUSICTX_BOOK_HTML")
    if not full:
        return request.getfixturevalue("small_book")[0], PAGES       # built only when needed
    html = Path(full).resolve()
    pages = sorted(str(p.relative_to(html).with_suffix("")) for d in ("book", "notebooks")
                   for p in (html / d).glob("*.html"))
    assert pages, f"no pages under {html}"
    return html, pages


# a fixed picture of each kind of thing a chapter shows, for the build's artifacts
ELEMENTS = {"score": ".musictx-score", "widget": ".musictx-static"}


def test_pages_render_offline_in_chromium(request):
    exe = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    html, pages = built_pages(request)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        try:
            for name in pages:
                page, requests, refused, failed, errors = open_offline(browser, (html / f"{name}.html").as_uri())
                stem = Path(name).name
                page.screenshot(path=str(SCREENSHOTS / f"{stem}.png"))
                assert not refused and not failed, f"{name}: refused {refused}, failed {failed}"
                assert not errors, f"{name}: JavaScript errors {errors}"
                chapter = name.startswith("notebooks/")
                assert page.locator("mjx-container").count() >= (20 if chapter else 0)
                assert page.locator("mjx-merror").count() == 0, f"{name}: MathJax could not typeset"
                fonts = [u for u in requests if "/_static/mathjax/output/chtml/fonts/woff-v2/" in u]
                assert all(u.startswith("file:") for u in fonts), fonts               # MathJax's own fonts
                assert fonts or not page.locator("mjx-container").count(), f"{name}: math without its fonts"
                prose = page.evaluate(VISIBLE_PROSE)
                raw = RAW_TEX.findall(prose)
                assert not raw, f"{name}: math left as text: {raw[:5]}"
                if chapter:
                    assert page.locator(".musictx-score svg").count() >= 1, f"{name}: no score"
                    for kind, selector in ELEMENTS.items():
                        if page.locator(selector).count():
                            element = page.locator(selector).first
                            height = int((element.bounding_box() or {"height": 0})["height"])
                            page.set_viewport_size({"width": 1280, "height": max(900, height + 200)})  # one piece
                            element.screenshot(path=str(SCREENSHOTS / f"{stem}-{kind}.png"))
                            page.set_viewport_size({"width": 1280, "height": 900})
                    audio = page.evaluate(AUDIO)
                    assert len(audio) >= (2 if name == CHAPTER else 1), audio
                    for a in audio:
                        assert a["src"].startswith(("data:audio/", "file:")), a
                        assert a["duration"] > 1, a           # Chromium decoded the clip
                    page.locator("audio").first.scroll_into_view_if_needed()
                    page.screenshot(path=str(SCREENSHOTS / f"{stem}-audio.png"))
                page.context.close()
        finally:
            browser.close()
    assert (SCREENSHOTS / "00_music_as_tokens.png").stat().st_size > 10_000
    assert (SCREENSHOTS / "00_music_as_tokens-score.png").stat().st_size > 5_000


# -- what counts as remote -----------------------------------------------------------------------

def test_remote_resources_finds_what_a_browser_would_fetch():
    page = """<html><head>
    <script src="https://cdn.example/mathjax.js"></script>
    <script src="../_static/local.js"></script>
    <link rel="stylesheet" href="//fonts.example/css">
    <link rel="canonical" href="https://book.example/page.html">
    <style>body { background: url("https://img.example/bg.png") }</style>
    <script type="module">import mermaid from 'https://cdn.example/mermaid.mjs';</script>
    </head><body>
    <a href="https://github.com/musictx/musictx-lite">repo</a>
    <img src="data:image/png;base64,AAAA"><img src="http://img.example/x.png">
    <audio controls><source src="data:audio/wav;base64,UklG"></audio>
    <iframe src="https://www.youtube.com/embed/x"></iframe>
    </body></html>"""
    assert offline.remote_resources(page) == [
        "<script> https://cdn.example/mathjax.js",
        "<link> //fonts.example/css",
        "<style> https://img.example/bg.png",
        "<script> import https://cdn.example/mermaid.mjs",
        "<img> http://img.example/x.png",
        "<iframe> https://www.youtube.com/embed/x",
    ]
    assert offline.remote_resources('<a href="https://x.org">x</a><img src="fig.png">') == []


# -- the npm download helper (shared with scripts/build_slides.py), without the network -------------

def fake_tarball(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class FakeResponse(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def test_npm_tarball_downloads_once_checks_sha256_and_extracts(tmp_path, monkeypatch):
    data = fake_tarball({"es5/tex.js": b"mathjax", "es5/fonts/a.woff": b"A", "README.md": b"r"})
    pkg = offline.NpmPackage("fake", "1.0.0", hashlib.sha256(data).hexdigest(), ("es5/tex.js", "es5/fonts/"))
    calls = []

    def urlopen(url, timeout):
        calls.append(url)
        return FakeResponse(data)

    monkeypatch.setattr(offline.urllib.request, "urlopen", urlopen)
    tgz = offline.npm_tarball(pkg, tmp_path / "cache")
    assert tgz.read_bytes() == data and calls == ["https://registry.npmjs.org/fake/-/fake-1.0.0.tgz"]
    assert offline.npm_tarball(pkg, tmp_path / "cache") == tgz and len(calls) == 1     # cached
    out = offline.extract(tgz, tmp_path / "out", pkg.files, strip="es5/")
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in out) == ["fonts/a.woff", "tex.js"]
    assert (tmp_path / "out" / "tex.js").read_bytes() == b"mathjax"
    with pytest.raises(ValueError, match="has no"):
        offline.extract(tgz, tmp_path / "out2", ["es5/missing.js"])

    bad = offline.NpmPackage("fake", "2.0.0", "0" * 64, ())
    with pytest.raises(ValueError, match="checksum mismatch"):
        offline.npm_tarball(bad, tmp_path / "cache")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["fake-1.0.0.tgz"]    # nothing left

    def unreachable(url, timeout):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(offline.urllib.request, "urlopen", unreachable)
    with pytest.raises(RuntimeError, match="could not download fake 2.0.0.*put the file at"):
        offline.npm_tarball(bad, tmp_path / "cache")
    assert offline.npm_tarball(pkg, tmp_path / "cache") == tgz                             # no network needed
